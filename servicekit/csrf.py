"""Cross-site request protection for plain HTML forms, and the flags of their cookies: the web
screen's pages (web/) and the MCP server's OAuth consent page (mcp_server/oauth.py) both use it.

It lives in servicekit because it is HTTP-serving plumbing (a Starlette middleware, an HMAC over two
cookies) and knows nothing of the gateway: the member token it binds a form to is opaque text to it,
and neither of its users calls the gateway through it. client/ is what a program takes to call the
gateway, which this does not do.

Every request that can change something (any method but GET, HEAD, OPTIONS and TRACE) passes two
checks before any handler, and so any gateway call, runs; a refusal is a 403 page saying why.

1. Where it comes from. Cookies are not kept apart by port, and SameSite counts every port of a host
   as the same site, so a form that a page on another port of this host posts here arrives with the
   person's cookies. The browser says where a request comes from: ``Sec-Fetch-Site`` must be
   ``same-origin``; a browser that does not send it sends ``Origin`` with a POST, which must then be
   exactly this screen's own origin (the request's scheme, ``Host`` header: scheme, host and port). A
   request with neither was not sent by a browser (browsers have sent ``Origin`` with every
   cross-origin POST for years), so no page can have made a person's browser send it: it is not
   refused for its origin, and its token is checked as for any other (Go's net/http
   CrossOriginProtection decides the same way).

2. The form's token, bound to the session. ``SESSION_COOKIE`` holds a random session id, made on the
   first request without one and anew at every sign-in and sign-out; the token each form carries (field
   ``csrftoken``) is an HMAC-SHA256, under the screen's secret, of that id and the member token cookie.
   No page elsewhere can read either cookie, and a server on another port that sets the session cookie
   to an id whose token it knows still does not know the person's member token, so its token is refused.
   No library we know binds a form token to a session for Starlette (starlette-csrf, asgi-csrf: a
   double-submit cookie, which a server on another port can overwrite with a pair of its own).

Every cookie the screen sets goes through ``set_cookie``: HttpOnly (the pages load no script, so none
reads a cookie), SameSite=Strict, Path=/, and Secure when the request came over https (behind a
TLS-terminating proxy, uvicorn takes the scheme from ``X-Forwarded-Proto`` when the proxy's address is
in its ``FORWARDED_ALLOW_IPS``, by default 127.0.0.1 and ::1).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import urllib.parse
from collections.abc import Awaitable, Callable

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

FIELD = "csrftoken"
SESSION_COOKIE = "recallatron_session"
TOKEN_COOKIE = "recallatron_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
# A form of the screen is at most a memory's title and body (a memory page's correct and supersede
# forms): 1,000 characters and 64 KiB of UTF-8, each byte at most 3 once form-encoded (%XX), so under
# 210 KiB. A bigger body is refused rather than buffered (the web screen's Starlette app refuses it
# first, 413, when its Content-Length says so).
MAX_FORM_BYTES = 256 * 1024
# How much of a refused request's Origin or Sec-Fetch-Site the refusal page repeats.
SHOWN_HEADER_CHARS = 200

TOKEN_REFUSED = (
    "Refused: this form did not carry the cross-site request token of your session (it was made for "
    "another session, or before you signed in or out). Nothing was changed: reload the page and submit it again."
)


def cookie_flags(request: Request) -> dict:
    """The flags of every cookie the screen sets (module docstring)."""
    return {"path": "/", "httponly": True, "samesite": "strict", "secure": request.url.scheme == "https"}


def set_cookie(response: Response, request: Request, name: str, value: str) -> None:
    """Sets cookie ``name`` on ``response`` with ``cookie_flags``."""
    response.set_cookie(name, value, **cookie_flags(request))


def delete_cookie(response: Response, request: Request, name: str) -> None:
    """Clears cookie ``name`` (the same flags, or a browser may keep it)."""
    response.delete_cookie(name, **cookie_flags(request))


def new_session(response: Response, request: Request) -> None:
    """Gives the browser a new session id: every form token it held stops working."""
    set_cookie(response, request, SESSION_COOKIE, secrets.token_urlsafe(32))


class Sessions:
    """The form tokens of sessions, under one secret."""

    def __init__(self, secret: str) -> None:
        self._key = hashlib.sha256(b"recallatron web form token\0" + secret.encode()).digest()

    def form_token(self, session_id: str, member_token: str) -> str:
        """The token of the forms of the session ``session_id`` signed in with ``member_token``
        (empty when signed out)."""
        message = f"{len(session_id)}:{session_id}{member_token}".encode("utf-8", "surrogatepass")
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def form_token_of(self, request: Request, signed_in: bool) -> str:
        """The token of the forms of a page answering ``request``; ``signed_in`` is whether the browser
        keeps its member token cookie after that page (a login page clears it)."""
        member = request.cookies.get(TOKEN_COOKIE, "") if signed_in else ""
        session = request.scope.get("state", {}).get(SESSION_COOKIE) or request.cookies.get(SESSION_COOKIE, "")
        return self.form_token(session, member)

    def accepts(self, request: Request, submitted: str | None) -> bool:
        """Whether ``submitted`` is the token of the session the request's cookies name."""
        session = request.cookies.get(SESSION_COOKIE)
        if not session or not submitted:
            return False
        expected = self.form_token(session, request.cookies.get(TOKEN_COOKIE, ""))
        return hmac.compare_digest(expected.encode(), submitted.encode("utf-8", "surrogatepass"))


def own_origin(request: Request) -> str:
    """This screen's origin as the request reached it: scheme and Host header."""
    return f"{request.url.scheme}://{request.headers.get('host', '')}"


def foreign(request: Request) -> str | None:
    """Why a state-changing request is refused for where it came from, or None (module docstring, 1)."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return None if site == "same-origin" else f"Sec-Fetch-Site: {site[:SHOWN_HEADER_CHARS]}"
    origin = request.headers.get("origin")
    if origin is None or origin == own_origin(request):
        return None
    return f"Origin: {origin[:SHOWN_HEADER_CHARS]}"


def foreign_refused(request: Request, why: str) -> str:
    """The refusal of a request from elsewhere, for people."""
    return (
        f"Refused: this form was sent from another site ({why}); the screen takes forms only from its own "
        f"pages at {own_origin(request)}. Nothing was changed."
    )


class CrossSiteProtection:
    """ASGI middleware: the two checks of the module docstring on every state-changing request, and a
    session id for every browser. ``refused(request, message)`` makes the 403 page of a refusal."""

    def __init__(
        self, app: ASGIApp, sessions: Sessions, refused: Callable[[Request, str], Awaitable[Response]]
    ) -> None:
        self.app = app
        self.sessions = sessions
        self.refused = refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        fresh = None if request.cookies.get(SESSION_COOKIE) else secrets.token_urlsafe(32)
        scope.setdefault("state", {})[SESSION_COOKIE] = fresh or request.cookies[SESSION_COOKIE]

        async def send_with_session(message: Message) -> None:
            if fresh and message["type"] == "http.response.start":
                cookie = Response()
                set_cookie(cookie, request, SESSION_COOKIE, fresh)
                set_header = next(v for k, v in cookie.raw_headers if k == b"set-cookie")
                MutableHeaders(scope=message).append("set-cookie", set_header.decode("latin-1"))
            await send(message)

        if request.method not in SAFE_METHODS:
            why = foreign(request)
            message = foreign_refused(request, why) if why else None
            if message is None:
                body = await _read_body(receive, MAX_FORM_BYTES)
                if body is None or not self.sessions.accepts(request, _form_field(body, FIELD)):
                    message = TOKEN_REFUSED
                receive = _replay(body or b"")
            if message is not None:
                response = await self.refused(request, message)
                await response(scope, receive, send_with_session)
                return
        await self.app(scope, receive, send_with_session)


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None when it is longer than ``limit`` bytes."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes) -> Receive:
    """A ``receive`` that gives the app the buffered body once, then waits for the disconnect."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive


def _form_field(body: bytes, name: str) -> str | None:
    """The first value of field ``name`` in an application/x-www-form-urlencoded body (every form of
    the screen is one), or None."""
    try:
        values = urllib.parse.parse_qs(body.decode("ascii"), keep_blank_values=True).get(name)
    except UnicodeDecodeError:
        return None
    return values[0] if values else None
