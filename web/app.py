"""The curation web screen: a small server-rendered Starlette app over the gateway's public API.

A person signs in once with their own member token; it is kept in an HttpOnly, SameSite=Strict
cookie (``TOKEN_COOKIE``) and sent with every gRPC call the pages make (``web.calls``). The screen
holds no business rule and no data: what a page shows is what the gateway answered for that token,
so it never shows a memory the person cannot read, and every refusal is the gateway's, shown as its
status code name and message (a stale revision names the current one, as the gateway's message
does). A missing, bad or revoked token shows the login page with the gateway's message. A POST from
another site, or without its session's form token, is refused with 403 (``servicekit.csrf``).

Pages (docs/web.md): login, search (Recall), browse (ListMemories), a memory and its changes in
``web.memory_page``, the review pages in ``web.review``, and the entity pages in ``web.entities``.
"""

from __future__ import annotations

import contextlib
import logging
import secrets

import grpc
from recallatron.gateway.v1 import gateway_pb2 as g
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from servicekit import csrf
from web import entities, memory_page, review
from web.calls import Gateway, LoggedOut, describe
from web.inputs import FormError, choice, timestamp, whole
from web.screen import AUDIENCES, HERE, KINDS, MODES, PURPOSES, SUPERSEDED, TOKEN_COOKIE, Screen, http_status, link

log = logging.getLogger("recallatron.web")
# Pages hold private text: never cached, never framed, no referrer carrying a memory id elsewhere,
# and nothing but the screen's own stylesheet loaded.
SECURITY_HEADERS = {
    "cache-control": "no-store",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
}


async def login_form(request: Request) -> Response:
    """GET /login."""
    return await request.app.state.screen.login_page(request)


async def login(request: Request) -> Response:
    """POST /login: checks the token with one call as its member, then keeps it in the cookie."""
    screen: Screen = request.app.state.screen
    token = str((await request.form()).get("token", "")).strip()
    if not token:
        return await screen.login_page(request, "Enter your member token (rct_…).", status=400)
    try:
        await screen.gateway.call(token, "ListMemories", g.ListMemoriesRequest(page_size=1))
    except LoggedOut as exc:
        return await screen.login_page(request, exc.message, status=401)
    except grpc.RpcError as exc:
        return await screen.login_page(request, describe(exc), status=http_status(exc))
    response = RedirectResponse("/search", status_code=303)
    csrf.set_cookie(response, request, TOKEN_COOKIE, token)
    csrf.new_session(response, request)
    return response


async def logout(request: Request) -> Response:
    """POST /logout: forgets the token cookie and starts a new session."""
    response = RedirectResponse("/login", status_code=303)
    csrf.delete_cookie(response, request, TOKEN_COOKIE)
    csrf.new_session(response, request)
    return response


async def home(request: Request) -> Response:
    """GET /: the search page."""
    return RedirectResponse("/search", status_code=303)


async def search(request: Request) -> Response:
    """GET /search: Recall with the query, mode, purpose, top k, history switch and time window of the form."""
    screen: Screen = request.app.state.screen
    q = request.query_params
    form = {
        "query": q.get("query", ""),
        "mode": q.get("mode", ""),
        "purpose": q.get("purpose", "conversation"),
        "top_k": q.get("top_k", ""),
        "include_superseded": q.get("include_superseded", ""),
        "occurred_after": q.get("occurred_after", ""),
        "occurred_before": q.get("occurred_before", ""),
        "skip_time_words": q.get("skip_time_words", ""),
    }
    context = {"form": form, "result": None}
    if screen.token(request) is None:
        raise LoggedOut()
    if not form["query"].strip():
        return await screen.render(request, "search.html", **context)
    try:
        req = g.RecallRequest(
            query=form["query"],
            mode=choice(MODES, "mode", form["mode"]),
            purpose=choice(PURPOSES, "purpose", form["purpose"]),
            top_k=whole("top_k", form["top_k"]),
            include_superseded=bool(form["include_superseded"]),
            skip_time_words=bool(form["skip_time_words"]),
        )
        _set_times(req, form, WINDOW_FIELDS)
    except FormError as exc:
        return await screen.render(request, "search.html", status=400, error=str(exc), **context)
    try:
        context["result"] = await screen.call(request, "Recall", req)
    except grpc.RpcError as exc:
        return await screen.render(request, "search.html", status=http_status(exc), error=describe(exc), **context)
    return await screen.render(request, "search.html", **context)


BROWSE_FIELDS = (
    "kind",
    "audience",
    "purpose",
    "entity",
    "derived_from",
    "created_after",
    "created_before",
    "updated_after",
    "updated_before",
    "occurred_after",
    "occurred_before",
    "superseded",
    "page_size",
)


def list_request(form: dict[str, str]) -> g.ListMemoriesRequest:
    """The ListMemories request of the browse form (FormError for a value of the wrong shape)."""
    req = g.ListMemoriesRequest(
        kind=choice(KINDS, "kind", form["kind"]),
        audience=choice(AUDIENCES, "audience", form["audience"]),
        purpose=choice(PURPOSES, "purpose", form["purpose"]),
        entity_id=form["entity"].strip(),
        derived_from_id=form["derived_from"].strip(),
        superseded=choice(SUPERSEDED, "superseded", form["superseded"]),
        page_size=whole("page_size", form["page_size"]),
        page_token=form["page_token"],
    )
    _set_times(req, form, ("created_after", "created_before", "updated_after", "updated_before", *WINDOW_FIELDS))
    return req


# The time window's fields, in the forms as in the requests.
WINDOW_FIELDS = ("occurred_after", "occurred_before")


def _set_times(req, form: dict[str, str], names) -> None:
    """Sets the request's Timestamp fields ``names`` from the form's dates (unset when empty)."""
    for name in names:
        ts = timestamp(name, form[name])
        if ts is not None:
            getattr(req, name).CopyFrom(ts)


async def browse(request: Request) -> Response:
    """GET /memories: ListMemories with the form's filters, a page at a time (next_page_token)."""
    screen: Screen = request.app.state.screen
    form = {name: request.query_params.get(name, "") for name in (*BROWSE_FIELDS, "page_token")}
    filters = {k: v for k, v in form.items() if k != "page_token"}
    context = {"form": form, "result": None, "next_link": "", "first_link": ""}
    if screen.token(request) is None:
        raise LoggedOut()
    try:
        req = list_request(form)
    except FormError as exc:
        return await screen.render(request, "browse.html", status=400, error=str(exc), **context)
    try:
        resp = await screen.call(request, "ListMemories", req)
    except grpc.RpcError as exc:
        return await screen.render(request, "browse.html", status=http_status(exc), error=describe(exc), **context)
    context["result"] = resp
    if resp.next_page_token:
        context["next_link"] = link("/memories", filters, page_token=resp.next_page_token)
    if form["page_token"]:
        context["first_link"] = link("/memories", filters)
    return await screen.render(request, "browse.html", **context)


async def healthz(request: Request) -> Response:
    """GET /healthz: the screen answers (it calls nothing; `recallatron up` waits for it)."""
    return PlainTextResponse("ok")


async def logged_out(request: Request, exc: LoggedOut) -> Response:
    """No token, or the gateway refused it: the login page (401 after a refusal), cookie cleared."""
    screen: Screen = request.app.state.screen
    if not exc.message and request.method == "GET":
        return RedirectResponse("/login", status_code=303)
    return await screen.login_page(request, exc.message or "Sign in with your member token.", status=401)


async def failed(request: Request, exc: Exception) -> Response:
    """A defect of the screen: a readable page, the trace only in the log."""
    log.exception("web page failed: %s %s", request.method, request.url.path)
    screen: Screen = request.app.state.screen
    return await screen.render(
        request, "error.html", status=500, error="INTERNAL: this page failed; the web screen's log has the details."
    )


async def csrf_refused(request: Request, message: str) -> Response:
    """A state-changing request from another site, or without its session's form token
    (``servicekit.csrf``): 403 with a page saying which."""
    screen: Screen = request.app.state.screen
    return await screen.render(request, "error.html", status=403, heading="Refused", error=message)


class SecurityHeaders:
    """ASGI middleware adding ``SECURITY_HEADERS`` to every response."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                for key, value in SECURITY_HEADERS.items():
                    message["headers"].append((key.encode(), value.encode()))
            await send(message)

        await self.app(scope, receive, with_headers)


def build(gateway_addr: str, secret: str | None = None) -> Starlette:
    """The screen's ASGI app, calling the gateway at ``gateway_addr``.

    ``secret`` keys the form tokens; by default a fresh one per process, so a restart only makes
    open forms ask for a reload (the token cookie stays valid)."""
    sessions = csrf.Sessions(secret or secrets.token_urlsafe(32))
    screen = Screen(Gateway(gateway_addr), sessions)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        screen.gateway.close()

    routes = [
        Route("/", home),
        Route("/healthz", healthz),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/search", search),
        Route("/memories", browse),
        *memory_page.ROUTES,
        *review.ROUTES,
        *entities.ROUTES,
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(SecurityHeaders),
            Middleware(csrf.CrossSiteProtection, sessions=sessions, refused=csrf_refused),
        ],
        exception_handlers={LoggedOut: logged_out, Exception: failed},
        lifespan=lifespan,
        max_body_size=csrf.MAX_FORM_BYTES,
    )
    app.state.screen = screen
    return app
