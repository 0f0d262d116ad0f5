"""Cross-site request protection for plain HTML forms: starlette-csrf's signed double-submit cookie.

starlette-csrf (``CSRFMiddleware``) refuses an unsafe request (POST) unless the token it submits
matches the ``csrftoken`` cookie, both signed with the screen's secret. It reads the submitted token
from the ``x-csrftoken`` header only, which a form without JavaScript cannot send; this subclass
also accepts it from the form field ``csrftoken`` (every form of the screen carries it), buffering
the body and replaying it to the app. A cross-site page can make a browser POST here, but it cannot
read the cookie, so it cannot submit the matching token: the request is refused with 403 before any
handler (and so any gateway call) runs.

On a safe request (GET) without a valid cookie (none yet, or one signed by an earlier run's secret)
a fresh token is made, put into the request as if the browser had sent it, so the page rendered now
already carries it, and set as the cookie on the response. A POST is never given a fresh token: one
without a valid cookie is refused.
"""

from __future__ import annotations

import http.cookies
import urllib.parse

from itsdangerous import BadSignature
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette_csrf import CSRFMiddleware

FIELD = "csrftoken"
# A form of the screen is a few kilobytes (a memory's body is at most 64 KiB of UTF-8, and no form
# sends one); a bigger body is refused rather than buffered.
MAX_FORM_BYTES = 256 * 1024


class FormCSRFMiddleware(CSRFMiddleware):
    """starlette-csrf's check (module docstring) with the token also taken from the form field.

    ``refused(request)`` makes the response of a refused request (default: the library's 403 text)."""

    def __init__(self, app: ASGIApp, secret: str, refused=None, **kwargs) -> None:
        super().__init__(app, secret, cookie_name=FIELD, **kwargs)
        self.refused = refused

    def _get_error_response(self, request: Request):
        return self.refused(request) if self.refused else super()._get_error_response(request)

    def valid(self, token: str | None) -> bool:
        """Whether ``token`` is one this secret signed."""
        if not token:
            return False
        try:
            self.serializer.loads(token)
        except BadSignature:
            return False
        return True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        cookie = request.cookies.get(self.cookie_name)
        if request.method not in self.safe_methods:
            body = await _read_body(receive, MAX_FORM_BYTES)
            submitted = request.headers.get(self.header_name) or (body is not None and _form_field(body, FIELD))
            if body is None or not cookie or not submitted or not self._csrf_tokens_match(cookie, submitted):
                await self._get_error_response(request)(scope, receive, send)
                return
            receive = _replay(body)
            scope.setdefault("state", {})["csrf_token"] = cookie
            await self.app(scope, receive, send)
            return
        fresh = None
        if not self.valid(cookie):
            fresh = self._generate_csrf_token()
            _set_request_cookie(scope, self.cookie_name, fresh)
        scope.setdefault("state", {})["csrf_token"] = fresh or cookie

        async def send_with_cookie(message: Message) -> None:
            if fresh and message["type"] == "http.response.start":
                morsel: http.cookies.BaseCookie = http.cookies.SimpleCookie()
                morsel[self.cookie_name] = fresh
                morsel[self.cookie_name]["path"] = self.cookie_path
                morsel[self.cookie_name]["samesite"] = self.cookie_samesite
                if self.cookie_secure:
                    morsel[self.cookie_name]["secure"] = True
                if self.cookie_httponly:
                    morsel[self.cookie_name]["httponly"] = True
                MutableHeaders(scope=message).append("set-cookie", morsel.output(header="").strip())
            await send(message)

        await self.app(scope, receive, send_with_cookie)


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


def _set_request_cookie(scope: Scope, name: str, value: str) -> None:
    """Adds ``name=value`` to the request's Cookie header, as if the browser had sent it."""
    headers = [(k, v) for k, v in scope["headers"] if k != b"cookie"]
    old = [v.decode("latin-1") for k, v in scope["headers"] if k == b"cookie"]
    kept = "; ".join(part for part in "; ".join(old).split("; ") if part and not part.strip().startswith(f"{name}="))
    cookie = f"{kept}; {name}={value}" if kept else f"{name}={value}"
    scope["headers"] = [*headers, (b"cookie", cookie.encode("latin-1"))]
