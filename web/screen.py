"""What every page of the screen shares: the templates, the signed-in person's calls, rendering,
and how a failed call reads (its gRPC status code name and message; an HTTP status to go with it)."""

from __future__ import annotations

import datetime
import urllib.parse
from pathlib import Path

import grpc
import jinja2
import markupsafe
from recallatron.memory.v1 import memory_pb2 as m
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from servicekit import csrf, vocabulary
from servicekit.csrf import TOKEN_COOKIE
from web import diff
from web.calls import Gateway, LoggedOut, describe

HERE = Path(__file__).resolve().parent

KINDS = vocabulary.values(m.Kind)
AUDIENCES = vocabulary.values(m.Audience)
PURPOSES = vocabulary.values(m.Purpose)
MODES = vocabulary.values(m.RecallMode)
SUPERSEDED = vocabulary.values(m.SupersededFilter)

# How a failed call's status reads as an HTTP status, for the page that shows it (the page itself
# always shows the gRPC code name and message).
HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}


def http_status(exc: grpc.RpcError) -> int:
    """The HTTP status of a page showing failed call ``exc`` (500 for codes a caller cannot cause)."""
    return HTTP_STATUS.get(exc.code(), 500)


def when(ts) -> str:
    """A set Timestamp as ``YYYY-MM-DD HH:MM:SS UTC``; empty for an unset one."""
    if ts is None or (ts.seconds == 0 and ts.nanos == 0):
        return ""
    return ts.ToDatetime(tzinfo=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def instant(ts) -> str:
    """A Timestamp known to be set (1970-01-01 included) as ``YYYY-MM-DD HH:MM:SS UTC``."""
    return ts.ToDatetime(tzinfo=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def person(member_id: str, name: str) -> markupsafe.Markup:
    """A member on a page: its display name and its id, or the id alone when it has no name; both
    escaped (a name is text an operator typed)."""
    if not name:
        return markupsafe.Markup("<code>{}</code>").format(member_id)
    return markupsafe.Markup('<span class="person">{}</span> (<code>{}</code>)').format(name, member_id)


def templates() -> Jinja2Templates:
    """The page templates (web/templates), autoescaped: memory text is shown as text, never as HTML."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True, undefined=jinja2.ChainableUndefined
    )
    env.filters["when"] = when
    env.filters["instant"] = instant
    env.filters["kind"] = lambda v: vocabulary.name_of(m.Kind, v)
    env.filters["purpose"] = lambda v: vocabulary.name_of(m.Purpose, v)
    env.filters["origin"] = lambda v: vocabulary.name_of(m.Origin, v)
    env.filters["mode"] = lambda v: vocabulary.name_of(m.RecallMode, v)
    env.filters["flag_state"] = lambda v: vocabulary.name_of(m.ConflictFlagState, v)
    env.globals["sides"] = diff.sides
    env.globals["person"] = person
    env.globals["WORDS_COMPARED"] = diff.WORDS_COMPARED
    env.globals["FLAG_OPEN"] = m.CONFLICT_FLAG_STATE_OPEN
    env.globals.update(kinds=KINDS, audiences=AUDIENCES, purposes=PURPOSES, modes=MODES, superseded_filters=SUPERSEDED)
    env.globals["DERIVED_FROM"] = m.LINK_TYPE_DERIVED_FROM
    env.globals["AUDIENCE_MEMBER"] = m.AUDIENCE_MEMBER
    env.globals["reasons"] = vocabulary.ENTITY_DUPLICATE_REASONS
    return Jinja2Templates(env=env)


class Screen:
    """The routes' shared parts: the gateway, the form tokens, the templates, and how a page is rendered."""

    def __init__(self, gateway: Gateway, sessions: csrf.Sessions) -> None:
        self.gateway = gateway
        self.sessions = sessions
        self.templates = templates()

    def token(self, request: Request) -> str | None:
        """The member token of the browser's cookie."""
        return request.cookies.get(TOKEN_COOKIE) or None

    async def call(self, request: Request, method: str, message):
        """``MemoryService.<method>`` as the signed-in person (``web.calls.Gateway.call``)."""
        return await self.gateway.call(self.token(request), method, message)

    async def render(self, request: Request, name: str, status: int = 200, **context) -> Response:
        """Template ``name`` with ``context``, the session's token for its forms, and whether the person
        is signed in (the navigation and Sign out show only then).

        Rendered in a worker thread: a page's work grows with what it shows (the duplicate review
        diffs every pair it lists), and none of it may hold up the event loop, and so every other page."""
        context.setdefault("error", "")
        context.setdefault("notice", "")
        context.setdefault("signed_in", self.token(request) is not None)
        context["csrf_token"] = self.sessions.form_token_of(request, context["signed_in"])
        return await run_in_threadpool(self.templates.TemplateResponse, request, name, context, status_code=status)

    async def login_page(self, request: Request, message: str = "", status: int = 200) -> Response:
        """The login page with ``message``; the token cookie is cleared when there was one."""
        response = await self.render(request, "login.html", status=status, error=message, signed_in=False)
        if self.token(request) is not None:
            csrf.delete_cookie(response, request, TOKEN_COOKIE)
        return response


def link(path: str, params: dict[str, str], **changes: str) -> str:
    """``path`` with query ``params`` and ``changes``, empty values left out."""
    merged = {k: v for k, v in {**params, **changes}.items() if v}
    return f"{path}?{urllib.parse.urlencode(merged)}" if merged else path


def require_token(request: Request) -> None:
    """LoggedOut before anything else when the browser has no token."""
    if request.app.state.screen.token(request) is None:
        raise LoggedOut()


async def decide(request: Request, method: str, req, notice_of) -> dict:
    """Makes decision call ``method(req)``; the outcome for the page: ``notice_of(response)``, or the
    error and its HTTP status."""
    screen: Screen = request.app.state.screen
    try:
        resp = await screen.call(request, method, req)
    except grpc.RpcError as exc:
        return {"error": describe(exc), "status": http_status(exc)}
    return {"notice": notice_of(resp)}
