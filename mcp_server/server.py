"""The MCP server over stdio (one member, its token from the environment) or streamable HTTP
(each request's member token from its ``Authorization: Bearer`` header).

Over HTTP the server holds no credential of its own: it forwards each request's bearer token to the
gateway, which authenticates it like any other call, so one server serves many members and a member's
tools see only what that member may read. A request without a bearer header is refused with 401
before it reaches MCP; a bad or revoked token reaches the gateway and comes back as an
UNAUTHENTICATED tool error.
"""

from __future__ import annotations

import logging

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from cli import client
from mcp_server import bundle, guidance, tools

log = logging.getLogger("recallatron.mcp")
NAME = "recallatron"
HTTP_PATH = "/mcp"


class _Server(MCPServer):
    """MCPServer whose argument-validation errors read like the gateway's (INVALID_ARGUMENT: field: why)."""

    async def call_tool(self, name, arguments, context=None):
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                return tools.invalid_arguments(exc.__cause__)
            raise


def build(gateway: client.Gateway, metadata_of) -> MCPServer:
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


def header_metadata(ctx: Context) -> client.Metadata:
    """The gRPC metadata of an HTTP request's own bearer token (ToolError UNAUTHENTICATED without one)."""
    token = bearer_of((ctx.headers or {}).get("authorization"))
    if token is None:
        raise ToolError("UNAUTHENTICATED: send the member token as 'Authorization: Bearer <token>'")
    return client.bearer(token)


class RequireBearer:
    """ASGI middleware: 401 for an HTTP request without a bearer token, before MCP sees it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if bearer_of(headers.get(b"authorization", b"").decode("latin-1")) is None:
                response = JSONResponse(
                    {"error": "UNAUTHENTICATED", "message": "send the member token as 'Authorization: Bearer <token>'"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def run_stdio(gateway_addr: str, token: str) -> None:
    """Serves one member over stdin/stdout until stdin closes."""
    gateway = client.Gateway(gateway_addr, token)
    try:
        build(gateway, lambda ctx: gateway.metadata).run("stdio")
    finally:
        gateway.close()


def run_http(gateway_addr: str, host: str, port: int) -> None:
    """Serves streamable HTTP at ``http://host:port/mcp`` until SIGINT or SIGTERM."""
    gateway = client.Gateway(gateway_addr, None)
    try:
        app = build(gateway, header_metadata).streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
        config = uvicorn.Config(RequireBearer(app), host=host, port=port, log_level="warning", lifespan="on")
        log.info("MCP server at http://%s:%d%s, gateway %s", host, port, HTTP_PATH, gateway_addr)
        anyio.run(uvicorn.Server(config).serve)
    finally:
        gateway.close()
