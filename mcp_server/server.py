"""The MCP server over stdio (one member, its token from the environment) or streamable HTTP
(each request's member token, or an OAuth access token, from its ``Authorization: Bearer`` header).

Over HTTP the server holds no credential of its own: it forwards each request's bearer token to the
gateway, which authenticates it like any other call, so one server serves many members and a member's
tools see only what that member may read. Before MCP sees a request, ``MemberGate`` refuses a foreign
Host or Origin, and asks the gateway whether the bearer is a live member token (401 otherwise, so no
session is ever opened for a bad token). The SDK's session manager binds each session to the token
that opened it and closes idle ones; ``MemberSessions`` adds a bound on the sessions one member holds.
With a public URL (a loopback bind, or ``--public-url``) the server is also an OAuth protected resource
and its own authorization server (mcp_server/oauth.py): an access token stands for a member token
narrowed to the purposes the person chose, and is checked with the gateway the same way.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
from dataclasses import dataclass

import anyio
import grpc
import uvicorn
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from pydantic import ValidationError
from recallatron.gateway.v1 import gateway_pb2 as g
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

import client
from mcp_server import bundle, guidance, oauth, tools

log = logging.getLogger("recallatron.mcp")
NAME = "recallatron"
HTTP_PATH = "/mcp"

# Host and Origin values a loopback client sends (the SDK's own defaults for a loopback bind); every
# bind accepts them, since a page that rebinds its name to this machine still sends its own name.
LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
LOOPBACK_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")

# How a new request's token is checked: FindEntities is the cheapest member call of the gateway (it
# authenticates the token, then probes one index for a name; what it finds is ignored).
TOKEN_CHECK = g.FindEntitiesRequest(name="recallatron mcp token check")
TOKEN_CHECK_TIMEOUT_S = 10.0
# A bearer gRPC metadata carries whole: printable ASCII (as every issued token is) and well under the
# gateway's 8 KiB metadata limit (issued tokens have 47 characters). Any other is refused without a call.
MAX_BEARER_CHARS = 4096


class _Server(MCPServer):
    """MCPServer whose argument-validation errors read like the gateway's (INVALID_ARGUMENT: field: why)."""

    async def call_tool(self, name, arguments, context=None):
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                return tools.invalid_arguments(exc.__cause__)
            raise

    def member_sessions(self, options: HttpOptions) -> MemberSessions:
        """The session manager of this server's streamable HTTP endpoint."""
        return MemberSessions(
            self._lowlevel_server,
            per_member=options.sessions_per_member,
            session_idle_timeout=options.idle_timeout,
            security_settings=transport_security(options),
        )


def build(gateway: client.Gateway, metadata_of) -> _Server:
    """An MCPServer named ``recallatron`` with the eight tools, the context prompt and resource; its
    instructions are the guidance."""
    server = _Server(NAME, instructions=guidance.TEXT, log_level="WARNING")
    tools.register(server, gateway, metadata_of)
    bundle.register(server, gateway, metadata_of)
    return server


def bearer_of(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value, or None when there is none."""
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


# Where MemberGate leaves, in a request's ASGI scope, the gRPC metadata its tools call the gateway with.
METADATA_SCOPE_KEY = "recallatron.metadata"


def header_metadata(ctx: Context) -> client.Metadata:
    """The gRPC metadata of the HTTP request's member, as MemberGate checked it (ToolError
    UNAUTHENTICATED when the request did not pass it)."""
    scope = getattr(ctx.request_context.request, "scope", None) or {}
    metadata = scope.get(METADATA_SCOPE_KEY)
    if metadata is None:
        raise ToolError("UNAUTHENTICATED: send the member token as 'Authorization: Bearer <token>'")
    return metadata


@dataclass(frozen=True)
class HttpOptions:
    """How ``recallatron mcp --http`` listens and bounds its sessions."""

    host: str
    port: int
    allowed_hosts: tuple[str, ...]
    allowed_origins: tuple[str, ...]
    sessions_per_member: int
    idle_timeout: float
    # The URL clients reach this server at (scheme, host, port; no path): the OAuth issuer, and the
    # resource is it plus /mcp. None: no OAuth, bearer member tokens only.
    public_url: str | None = None


def transport_security(options: HttpOptions) -> TransportSecuritySettings:
    """DNS rebinding protection, on for every bind: the loopback names, the bound address itself when
    it is one address (not 0.0.0.0 or ::), and the hosts and origins the options name."""
    hosts = list(LOOPBACK_HOSTS)
    try:
        address = ipaddress.ip_address(options.host)
    except ValueError:
        address = None  # a name: only clients that use an allowed name get in
    if address is not None and not address.is_unspecified:
        hosts.append(f"[{address}]:{options.port}" if address.version == 6 else f"{address}:{options.port}")
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts + list(options.allowed_hosts),
        allowed_origins=list(LOOPBACK_ORIGINS) + list(options.allowed_origins),
    )


class MemberAtBound(Exception):
    """The member already holds its bound of open sessions."""


class MemberSessions(StreamableHTTPSessionManager):
    """The SDK's session manager, which binds each session to the credential of the request that opened
    it (a request with another credential gets 404, as for a session that does not exist) and closes a
    session after ``session_idle_timeout`` seconds without a request in flight; this one also refuses
    a member a session beyond ``per_member`` open ones (MemberAtBound, raised before anything is sent)."""

    def __init__(self, app, *, per_member: int, **kwargs) -> None:
        super().__init__(app, **kwargs)
        self.per_member = per_member

    def _admit_session(self, requestor):
        # The SDK calls this under its session-creation lock, so the count and the registration are one
        # step: members opening sessions at the same time cannot overshoot the bound.
        held = sum(1 for owner in self._session_owners.values() if owner == requestor)
        if held >= self.per_member:
            raise MemberAtBound
        return super()._admit_session(requestor)


def member_key(token: str) -> str:
    """The identity a session is bound to: the SHA-256 of the member's token (a member has exactly one
    token, issued by AddMember, so this names the member; the token itself is not kept)."""
    return "member-token:" + hashlib.sha256(token.encode()).hexdigest()


def _refusal(status: int, code: str, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status_code=status, headers=headers)


class MemberGate:
    """ASGI endpoint of ``/mcp``: every request passes the Host and Origin checks, then its bearer token
    is checked with the gateway (401 with ``WWW-Authenticate: Bearer`` when missing or refused, 503 when
    the gateway cannot answer); only then does the session manager see it, bound to that member, and a
    new session over the member's bound is 429.

    Nothing is cached: each request's token is checked again, so a revoked token stops at its next
    request, and the tools forward the same token to the gateway, which authenticates every call."""

    def __init__(
        self, gateway: client.Gateway, sessions: MemberSessions, provider: oauth.Provider | None = None
    ) -> None:
        self.gateway = gateway
        self.sessions = sessions
        self.provider = provider
        # The challenge of a 401: with OAuth, where a client finds how to sign in (RFC 9728 5.1).
        self.challenge = "Bearer"
        if provider is not None:
            self.challenge += f' resource_metadata="{oauth.resource_metadata_url(provider.resource)}"'
        self.origin_checks = TransportSecurityMiddleware(sessions.security_settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = await self.origin_checks.validate_request(Request(scope))
        if refused is None:
            refused = await self._authenticate(scope)
        if refused is not None:
            await refused(scope, receive, send)
            return
        try:
            await self.sessions.handle_request(scope, receive, send)
        except MemberAtBound:
            await _refusal(
                429,
                "RESOURCE_EXHAUSTED",
                f"this member already has {self.sessions.per_member} open MCP sessions, the server's bound: "
                "end one (DELETE with its Mcp-Session-Id) or wait until one is closed for being idle "
                f"({self.sessions.session_idle_timeout:g} s)",
            )(scope, receive, send)

    async def _authenticate(self, scope: Scope) -> JSONResponse | None:
        """None once the request's token is a live member token (``scope["user"]`` then names the member);
        the refusal otherwise."""
        token = bearer_of(Request(scope).headers.get("authorization"))
        if token is None:
            return _refusal(
                401,
                "UNAUTHENTICATED",
                "send the member token as 'Authorization: Bearer <token>'",
                **{"WWW-Authenticate": self.challenge},
            )
        code, details = grpc.StatusCode.UNAUTHENTICATED, "missing or invalid token"
        user = metadata = None
        if token.isascii() and token.isprintable() and len(token) <= MAX_BEARER_CHARS:
            user, metadata = await self._member_of(token)
        if metadata is not None:
            code, details = await anyio.to_thread.run_sync(self._check, metadata)
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            challenge = self.challenge.replace("Bearer", 'Bearer error="invalid_token",', 1).rstrip(",")
            return _refusal(401, "UNAUTHENTICATED", details, **{"WWW-Authenticate": challenge})
        if code != grpc.StatusCode.OK:
            log.warning("MCP request refused: the gateway could not check its token: %s: %s", code.name, details)
            return _refusal(503, "UNAVAILABLE", f"the gateway could not check the token: {code.name}: {details}")
        scope["user"] = user
        scope["auth"] = AuthCredentials(user.scopes)
        scope[METADATA_SCOPE_KEY] = metadata
        return None

    async def _member_of(self, token: str) -> tuple[AuthenticatedUser | None, client.Metadata | None]:
        """Who a bearer acts as and the gateway metadata that says so: a member token as itself (its
        session key the token's hash); an OAuth access token as the member token it stands for,
        narrowed to its purposes (its session key its grant, which refreshing keeps). (None, None) for
        an access token this server does not hold."""
        if self.provider is None or not token.startswith(oauth.ACCESS_PREFIX):
            member = AccessToken(token=token, client_id=member_key(token), scopes=[])
            return AuthenticatedUser(member), client.bearer(token)
        access = await self.provider.load_access_token(token)
        member_token = access and self.provider.member_token(access)
        if member_token is None:
            return None, None
        key = AccessToken(token=token, client_id="oauth-grant:" + access.grant, scopes=access.scopes)
        return AuthenticatedUser(key), oauth.member_metadata(member_token, access.scopes)

    def _check(self, metadata: client.Metadata) -> tuple[grpc.StatusCode, str]:
        try:
            self.gateway.memory.FindEntities(TOKEN_CHECK, metadata=metadata, timeout=TOKEN_CHECK_TIMEOUT_S)
        except grpc.RpcError as exc:
            return exc.code(), exc.details() or ""
        return grpc.StatusCode.OK, ""


def http_app(gateway: client.Gateway, options: HttpOptions) -> Starlette:
    """The streamable HTTP app: ``/mcp`` behind MemberGate, and with a public URL the OAuth routes
    (mcp_server/oauth.py); the session manager runs for its lifespan."""
    sessions = build(gateway, header_metadata).member_sessions(options)
    provider = None
    if options.public_url is not None:
        provider = oauth.Provider(gateway, options.public_url, options.public_url + HTTP_PATH)
    routes = [Route(HTTP_PATH, endpoint=MemberGate(gateway, sessions, provider))]
    routes += oauth.routes(provider) if provider is not None else []
    return Starlette(routes=routes, lifespan=lambda _: sessions.run())


def run_stdio(gateway_addr: str, token: str) -> None:
    """Serves one member over stdin/stdout until stdin closes."""
    gateway = client.Gateway(gateway_addr, token)
    try:
        build(gateway, lambda ctx: gateway.metadata).run("stdio")
    finally:
        gateway.close()


def run_http(gateway_addr: str, options: HttpOptions) -> None:
    """Serves streamable HTTP at ``http://host:port/mcp`` until SIGINT or SIGTERM."""
    gateway = client.Gateway(gateway_addr, None)
    try:
        app = http_app(gateway, options)
        config = uvicorn.Config(app, host=options.host, port=options.port, log_level="warning", lifespan="on")
        log.info("MCP server at http://%s:%d%s, gateway %s", options.host, options.port, HTTP_PATH, gateway_addr)
        anyio.run(uvicorn.Server(config).serve)
    finally:
        gateway.close()
