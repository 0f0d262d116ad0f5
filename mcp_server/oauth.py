"""OAuth 2.1 sign-in for ``recallatron mcp --http``: the server is a protected resource (RFC 9728) and
its own authorization server (RFC 8414 metadata, RFC 7591 dynamic client registration, authorization
code with PKCE S256, refresh tokens rotated at each use, RFC 7009 revocation), built on the MCP SDK's
auth routes (``mcp.server.auth``); this module is the SDK's provider and the consent page.

A person signs in on the consent page with their member token and ticks which of the purposes the
client asked for the token may use. What the client gets acts as that member with those purposes and
nothing more: each request through ``/mcp`` calls the gateway with the member token and
``recallatron-purposes`` metadata, which the gateway narrows the caller to (gateway/auth.py), so a
revoked or removed member's OAuth tokens stop at the next request, as its member token does.

Where the state lives: in this process, on purpose. Registered clients, pending sign-ins, codes and
tokens are kept in memory, each OAuth token and code only as its SHA-256, and the member token it
stands for only sealed (AES-GCM) under a key derived from that OAuth token: neither this process's
memory nor an access token holds a usable member token, and only a request bearing the OAuth token
unseals it. The control plane stays the one owner of credentials (one hashed token per member); the
price is that a restart of this process signs every OAuth client out (they register and sign in
again), which docs/agents.md says.
"""

from __future__ import annotations

import hashlib
import html
import ipaddress
import logging
import os
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio
import grpc
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    RegistrationError,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.routes import cors_middleware, create_auth_routes, create_protected_resource_routes
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken, ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

import client
from servicekit import csrf, vocabulary

log = logging.getLogger("recallatron.mcp.oauth")

# What an OAuth token looks like: opaque random text with a prefix naming its kind (never a member
# token, nor anything derived from one).
ACCESS_PREFIX = "rcm_"
REFRESH_PREFIX = "rcr_"
CODE_PREFIX = "rcc_"
ACCESS_TTL_S = 3600  # short-lived: the client refreshes
REFRESH_TTL_S = 30 * 86400
CODE_TTL_S = 60
PENDING_TTL_S = 600  # how long a consent page stays answerable
# Bounds on what unauthenticated callers can make this process keep (registration and /authorize are
# open to anyone); the oldest entry goes first.
MAX_CLIENTS = 10_000
MAX_PENDING = 10_000
MAX_REDIRECT_URIS = 10
MAX_CLIENT_NAME_CHARS = 200
CONSENT_PATH = "/oauth/consent"
PURPOSES = list(vocabulary.values(m.Purpose))  # the purposes, as OAuth scopes: conversation, tasks, ...
PURPOSES_METADATA = "recallatron-purposes"  # gateway/auth.py narrows the caller to these
CHECK = g.FindEntitiesRequest(name="recallatron oauth check")
CHECK_TIMEOUT_S = 10.0


def _digest(token: str) -> str:
    return hashlib.sha256(b"recallatron oauth token\0" + token.encode("utf-8", "surrogatepass")).hexdigest()


def _seal(secret: str, member_token: str) -> bytes:
    """``member_token`` encrypted under a key only ``secret`` (an OAuth token or code) gives."""
    key = hashlib.sha256(b"recallatron oauth seal\0" + secret.encode()).digest()
    nonce = os.urandom(12)
    return nonce + AESGCM(key).encrypt(nonce, member_token.encode(), None)


def _unseal(secret: str, sealed: bytes) -> str | None:
    key = hashlib.sha256(b"recallatron oauth seal\0" + secret.encode()).digest()
    try:
        return AESGCM(key).decrypt(sealed[:12], sealed[12:], None).decode()
    except (InvalidTag, ValueError):
        return None


def member_metadata(member_token: str, purposes: list[str]) -> client.Metadata:
    """The gRPC metadata of a call as the member, narrowed to ``purposes``."""
    return (*client.bearer(member_token), (PURPOSES_METADATA, ",".join(purposes)))


class Code(AuthorizationCode):
    grant: str
    sealed: bytes


class Refresh(RefreshToken):
    grant: str
    sealed: bytes


class Access(AccessToken):
    grant: str
    sealed: bytes


@dataclass
class Pending:
    """A sign-in waiting on the consent page."""

    client: OAuthClientInformationFull
    params: AuthorizationParams
    expires_at: float


def allowed_redirect_uri(uri: str) -> bool:
    """Whether a client may register ``uri``: https, http on a loopback host (a native app's local
    listener, RFC 8252 7.3), or a private-use scheme with a dot (RFC 8252 7.1); never a fragment."""
    try:
        parts = urlsplit(uri)
        host = parts.hostname or ""
    except ValueError:
        return False
    if parts.fragment:
        return False
    if parts.scheme == "https":
        return bool(host)
    if parts.scheme == "http":
        try:
            return host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False
    return "." in parts.scheme and parts.scheme not in ("javascript", "data", "file")


class Provider:
    """The SDK's ``OAuthAuthorizationServerProvider`` over this process's memory (module docstring)."""

    def __init__(self, gateway: client.Gateway, issuer: str, resource: str) -> None:
        self.gateway = gateway
        self.issuer = issuer
        self.resource = resource
        # The issuer as the metadata spells it (a URL with its path: '/'), which a client compares the
        # redirect's ``iss`` with, as strings (RFC 9207 2.4).
        self.issuer_id = str(AnyHttpUrl(issuer))
        self.clients: OrderedDict[str, OAuthClientInformationFull] = OrderedDict()
        self.pending: OrderedDict[str, Pending] = OrderedDict()
        self.codes: dict[str, Code] = {}
        self.access: dict[str, Access] = {}
        self.refresh: dict[str, Refresh] = {}
        self.rotated: dict[str, tuple[str, float]] = {}  # spent refresh token digest -> (grant, expiry)

    # Clients.
    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        uris = [str(u) for u in client_info.redirect_uris or []]
        if not uris or len(uris) > MAX_REDIRECT_URIS:
            raise RegistrationError("invalid_redirect_uri", f"register 1 to {MAX_REDIRECT_URIS} redirect_uris")
        bad = [u for u in uris if not allowed_redirect_uri(u)]
        if bad:
            raise RegistrationError(
                "invalid_redirect_uri",
                f"redirect URI not allowed: {bad[0][:200]!r} (https, http on a loopback host, or an app's "
                "private-use scheme such as com.example.app:/callback; no fragment)",
            )
        if len(client_info.client_name or "") > MAX_CLIENT_NAME_CHARS:
            too_long = f"client_name is over {MAX_CLIENT_NAME_CHARS} characters"
            raise RegistrationError("invalid_client_metadata", too_long)
        self.clients[client_info.client_id] = client_info
        while len(self.clients) > MAX_CLIENTS:
            self.clients.popitem(last=False)

    # The authorization request: the person answers on the consent page.
    async def authorize(self, client_info: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        if params.resource is not None and params.resource.rstrip("/") != self.resource.rstrip("/"):
            raise AuthorizeError("invalid_target", f"this server issues tokens for {self.resource} only")
        unknown = [s for s in params.scopes or [] if s not in PURPOSES]
        if unknown:
            wanted = f"scopes are purposes ({' '.join(PURPOSES)}); got {unknown[0][:100]!r}"
            raise AuthorizeError("invalid_scope", wanted)
        self._prune()
        request_id = secrets.token_urlsafe(32)
        self.pending[request_id] = Pending(client_info, params, time.time() + PENDING_TTL_S)
        while len(self.pending) > MAX_PENDING:
            self.pending.popitem(last=False)
        return f"{self.issuer}{CONSENT_PATH}?request={request_id}"

    def pending_request(self, request_id: str) -> Pending | None:
        pending = self.pending.get(request_id)
        if pending is None or pending.expires_at < time.time():
            return None
        return pending

    def approve(self, request_id: str, member_token: str, purposes: list[str]) -> str | None:
        """The redirect carrying a new code for the pending request (consumed), or None when it is gone."""
        pending = self.pending.pop(request_id, None)
        if pending is None or pending.expires_at < time.time():
            return None
        code = CODE_PREFIX + secrets.token_urlsafe(32)
        self.codes[_digest(code)] = Code(
            code="",
            scopes=purposes,
            expires_at=time.time() + CODE_TTL_S,
            client_id=pending.client.client_id,
            code_challenge=pending.params.code_challenge,
            redirect_uri=pending.params.redirect_uri,
            redirect_uri_provided_explicitly=pending.params.redirect_uri_provided_explicitly,
            resource=self.resource,
            grant=secrets.token_urlsafe(16),
            sealed=_seal(code, member_token),
        )
        return construct_redirect_uri(
            str(pending.params.redirect_uri), code=code, state=pending.params.state, iss=self.issuer_id
        )

    def deny(self, request_id: str) -> str | None:
        """The redirect telling the client the person refused (the request consumed), or None."""
        pending = self.pending.pop(request_id, None)
        if pending is None:
            return None
        return construct_redirect_uri(
            str(pending.params.redirect_uri),
            error="access_denied",
            error_description="the person did not allow this client",
            state=pending.params.state,
            iss=self.issuer_id,
        )

    # Codes: the SDK checks the client, expiry, redirect URI and PKCE verifier before the exchange.
    async def load_authorization_code(
        self, client_info: OAuthClientInformationFull, authorization_code: str
    ) -> Code | None:
        self._prune()
        code = self.codes.get(_digest(authorization_code))
        if code is None or code.client_id != client_info.client_id:
            return None
        return code.model_copy(update={"code": authorization_code})

    async def exchange_authorization_code(
        self, client_info: OAuthClientInformationFull, authorization_code: Code
    ) -> OAuthToken:
        # Popped here, so a code is used once: of two exchanges racing, one finds it gone.
        code = self.codes.pop(_digest(authorization_code.code), None)
        member_token = code and _unseal(authorization_code.code, code.sealed)
        if code is None or member_token is None:
            raise TokenError("invalid_grant", "authorization code does not exist or was already used")
        return self._issue(code.grant, code.client_id, code.scopes, member_token)

    # Refresh tokens, rotated at each use; a spent one presented again revokes its whole grant.
    async def load_refresh_token(self, client_info: OAuthClientInformationFull, refresh_token: str) -> Refresh | None:
        self._prune()
        digest = _digest(refresh_token)
        if digest in self.rotated:
            self._revoke_grant(self.rotated[digest][0])
            log.warning("a spent refresh token was presented again: its grant is revoked")
            return None
        found = self.refresh.get(digest)
        if found is None or found.client_id != client_info.client_id:
            return None
        return found.model_copy(update={"token": refresh_token})

    async def exchange_refresh_token(
        self, client_info: OAuthClientInformationFull, refresh_token: Refresh, scopes: list[str]
    ) -> OAuthToken:
        digest = _digest(refresh_token.token)
        found = self.refresh.get(digest)
        member_token = found and _unseal(refresh_token.token, found.sealed)
        if found is None or member_token is None:
            raise TokenError("invalid_grant", "refresh token does not exist or was already used")
        code, details = await anyio.to_thread.run_sync(self.check, member_token, scopes)
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            self._revoke_grant(found.grant)
            raise TokenError("invalid_grant", f"the member's sign-in no longer holds: {code.name}: {details}")
        if code != grpc.StatusCode.OK:  # the gateway could not say: the refresh token stays usable
            log.warning("refresh: the gateway could not check a member token: %s: %s", code.name, details)
            raise TokenError("invalid_request", f"the gateway could not check the sign-in now, try again: {code.name}")
        # Spent now (of two refreshes racing with one token, the second finds it gone).
        if self.refresh.pop(digest, None) is None:
            raise TokenError("invalid_grant", "refresh token does not exist or was already used")
        self.rotated[digest] = (found.grant, time.time() + REFRESH_TTL_S)
        for digest_of, access in list(self.access.items()):
            if access.grant == found.grant:
                del self.access[digest_of]
        return self._issue(found.grant, found.client_id, scopes, member_token)

    # Access tokens.
    async def load_access_token(self, token: str) -> Access | None:
        found = self.access.get(_digest(token))
        if found is None:
            return None
        if found.expires_at is not None and found.expires_at < time.time():
            del self.access[_digest(token)]
            return None
        return found.model_copy(update={"token": token})

    def member_token(self, access: Access) -> str | None:
        """The member token an access token (as ``load_access_token`` gave it) stands for."""
        return _unseal(access.token, access.sealed)

    async def revoke_token(self, token: Access | Refresh) -> None:
        self._revoke_grant(token.grant)

    def check(self, member_token: str, purposes: list[str]) -> tuple[grpc.StatusCode, str]:
        """Whether the gateway takes ``member_token`` narrowed to ``purposes`` (OK), or why not."""
        try:
            self.gateway.memory.FindEntities(
                CHECK, metadata=member_metadata(member_token, purposes), timeout=CHECK_TIMEOUT_S
            )
        except grpc.RpcError as exc:
            return exc.code(), exc.details() or ""
        return grpc.StatusCode.OK, ""

    def _issue(self, grant: str, client_id: str, scopes: list[str], member_token: str) -> OAuthToken:
        access, refresh = ACCESS_PREFIX + secrets.token_urlsafe(32), REFRESH_PREFIX + secrets.token_urlsafe(32)
        now = int(time.time())
        self.access[_digest(access)] = Access(
            token="",
            client_id=client_id,
            scopes=scopes,
            expires_at=now + ACCESS_TTL_S,
            resource=self.resource,
            subject=grant,
            grant=grant,
            sealed=_seal(access, member_token),
        )
        self.refresh[_digest(refresh)] = Refresh(
            token="",
            client_id=client_id,
            scopes=scopes,
            expires_at=now + REFRESH_TTL_S,
            resource=self.resource,
            grant=grant,
            sealed=_seal(refresh, member_token),
        )
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=ACCESS_TTL_S,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    def _revoke_grant(self, grant: str) -> None:
        for table in (self.access, self.refresh, self.codes):
            for digest, entry in list(table.items()):
                if entry.grant == grant:
                    del table[digest]

    def _prune(self) -> None:
        """Drops what has expired (called on the open endpoints, so nothing grows without bound)."""
        now = time.time()
        for request_id in [k for k, p in self.pending.items() if p.expires_at < now]:
            del self.pending[request_id]
        for table in (self.codes, self.access, self.refresh):
            for digest in [k for k, e in table.items() if e.expires_at is not None and e.expires_at < now]:
                del table[digest]
        for digest in [k for k, (_, expiry) in self.rotated.items() if expiry < now]:
            del self.rotated[digest]


# The consent page. It is served by this process, which holds the pending sign-in it answers (the web
# screen is another process with no share in that state), with servicekit/csrf.py's protection of forms.
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in to Recallatron</title></head>
<body>
<h1>Allow {client} to use your Recallatron memory?</h1>
<p>The client calls itself <strong>{client}</strong> (client id <code>{client_id}</code>); after you answer,
your browser goes back to <code>{redirect}</code>.</p>
<p>It will act as you, with the purposes you tick, for as long as you stay a member: it reads and writes
memories you could read and write yourself. Your member token is checked now and is never given to it.</p>
{error}
<form method="post" action="{action}">
<input type="hidden" name="csrftoken" value="{csrf}">
<input type="hidden" name="request" value="{request}">
<p><label>Your member token: <input type="password" name="member_token" autocomplete="off" required></label></p>
<fieldset><legend>Purposes this client may use</legend>
{purposes}
</fieldset>
<p><button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button></p>
</form>
</body></html>
"""
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
}
MAX_FORM_FIELD_CHARS = 4096
GONE = "This sign-in request is unknown, already answered or expired: start the sign-in again from your app."


def _message_page(status: int, message: str) -> HTMLResponse:
    body = f"<!doctype html><title>Recallatron sign-in</title><p>{html.escape(message)}</p>"
    return HTMLResponse(body, status_code=status, headers=PAGE_HEADERS)


class Consent:
    """``GET`` and ``POST`` of the consent page for one provider."""

    def __init__(self, provider: Provider) -> None:
        self.provider = provider
        self.sessions = csrf.Sessions(secrets.token_urlsafe(32))  # per process, as the pending sign-ins

    def app(self):
        async def refused(request: Request, message: str) -> Response:
            return _message_page(403, message)

        async def endpoint(scope, receive, send):
            request = Request(scope, receive)
            handler = self.show if request.method == "GET" else self.answer
            allowed = request.method in ("GET", "POST")
            response = await handler(request) if allowed else _message_page(405, "GET or POST")
            await response(scope, receive, send)

        return csrf.CrossSiteProtection(endpoint, self.sessions, refused)

    def _page(self, request: Request, request_id: str, pending: Pending, error: str = "", status: int = 200):
        requested = pending.params.scopes or PURPOSES
        boxes = "\n".join(
            f'<label><input type="checkbox" name="purpose" value="{p}" checked> {p}</label><br>' for p in requested
        )
        page = PAGE.format(
            client=html.escape(pending.client.client_name or "an unnamed client"),
            client_id=html.escape(pending.client.client_id),
            redirect=html.escape(str(pending.params.redirect_uri)),
            error=f'<p role="alert"><strong>{html.escape(error)}</strong></p>' if error else "",
            action=CONSENT_PATH,
            csrf=self.sessions.form_token_of(request, signed_in=True),
            request=html.escape(request_id),
            purposes=boxes,
        )
        return HTMLResponse(page, status_code=status, headers=PAGE_HEADERS)

    async def show(self, request: Request) -> Response:
        request_id = request.query_params.get("request", "")
        pending = self.provider.pending_request(request_id)
        if pending is None:
            return _message_page(400, GONE)
        return self._page(request, request_id, pending)

    async def answer(self, request: Request) -> Response:
        form = await request.form(max_files=0, max_fields=16)
        fields = {k: v for k, v in form.multi_items() if isinstance(v, str)}
        request_id = fields.get("request", "")
        pending = self.provider.pending_request(request_id)
        if pending is None:
            return _message_page(400, GONE)
        if fields.get("decision") == "deny":
            return RedirectResponse(self.provider.deny(request_id), status_code=303, headers=PAGE_HEADERS)
        if fields.get("decision") != "allow":
            return self._page(request, request_id, pending, "Choose Allow or Deny.", 400)
        requested = pending.params.scopes or PURPOSES
        chosen = [p for p in PURPOSES if p in form.getlist("purpose")]
        extra = [p for p in form.getlist("purpose") if p not in requested]
        if extra:
            return self._page(request, request_id, pending, "Only the purposes the client asked for can be given.", 400)
        if not chosen:
            return self._page(request, request_id, pending, "Tick at least one purpose, or Deny.", 400)
        token = fields.get("member_token", "").strip()
        if not token or len(token) > MAX_FORM_FIELD_CHARS or not (token.isascii() and token.isprintable()):
            return self._page(request, request_id, pending, "Enter your member token (it starts with rct_).", 400)
        code, details = await anyio.to_thread.run_sync(self.provider.check, token, chosen)
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return self._page(request, request_id, pending, "That member token was refused.", 401)
        if code == grpc.StatusCode.PERMISSION_DENIED:
            return self._page(request, request_id, pending, f"Your token does not allow this: {details}", 403)
        if code != grpc.StatusCode.OK:
            log.warning("consent: the gateway could not check a member token: %s: %s", code.name, details)
            unavailable = "The memory service could not check your token now: try again."
            return self._page(request, request_id, pending, unavailable, 503)
        redirect = self.provider.approve(request_id, token, chosen)
        if redirect is None:
            return _message_page(400, GONE)
        return RedirectResponse(redirect, status_code=303, headers=PAGE_HEADERS)


def resource_metadata_url(resource: str) -> str:
    """Where the protected-resource metadata of ``resource`` is (RFC 9728 3.1: the path after the
    well-known name)."""
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path.rstrip('/')}"


def routes(provider: Provider) -> list:
    """The authorization server's routes (the SDK's), the protected-resource metadata (at the RFC 9728
    path of the resource and at the bare well-known path) and the consent page."""
    issuer, resource = AnyHttpUrl(provider.issuer), AnyHttpUrl(provider.resource)
    out = create_auth_routes(
        provider,
        issuer,
        client_registration_options=ClientRegistrationOptions(
            enabled=True, valid_scopes=PURPOSES, default_scopes=PURPOSES
        ),
        revocation_options=RevocationOptions(enabled=True),
    )
    out += create_protected_resource_routes(resource, [issuer], scopes_supported=PURPOSES, resource_name="Recallatron")
    bare = ProtectedResourceMetadata(resource=resource, authorization_servers=[issuer], scopes_supported=PURPOSES)
    out.append(
        Route(
            "/.well-known/oauth-protected-resource",
            endpoint=cors_middleware(ProtectedResourceMetadataHandler(bare).handle, ["GET", "OPTIONS"]),
            methods=["GET", "OPTIONS"],
        )
    )
    out.append(Route(CONSENT_PATH, endpoint=Consent(provider).app(), methods=["GET", "POST"]))
    return out
