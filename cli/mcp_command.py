"""``recallatron mcp``: the MCP server (mcp_server/) over stdio, or over streamable HTTP with ``--http``."""

from __future__ import annotations

import argparse

from cli import client
from servicekit.settings import Settings, host_port


def http_address(text: str) -> tuple[str, int]:
    """The ``--http`` type: ``HOST:PORT`` (``[::1]:PORT`` for IPv6) -> (host, port); a usage error otherwise."""
    try:
        return host_port(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def mcp_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron mcp``."""
    mp = sub.add_parser(
        "mcp",
        help="serve the memory tools to MCP clients (stdio, or streamable HTTP with --http)",
        description="Stdio serves the member whose token is --token or RECALLATRON_TOKEN. With --http, each "
        "request carries its member token as 'Authorization: Bearer <token>' and the server keeps none.",
    )
    mp.add_argument("--http", type=http_address, metavar="HOST:PORT", help="serve streamable HTTP at /mcp instead")
    mp.add_argument("--gateway", default=None, help="gateway address (default RECALLATRON_GATEWAY_ADDR)")
    mp.add_argument("--token", help="member token for stdio (default RECALLATRON_TOKEN)")
    mp.set_defaults(handler=mcp)


def mcp(args: argparse.Namespace, settings: Settings) -> int:
    """Runs the MCP server until its client goes away (stdio) or it is stopped (HTTP); exit status 0."""
    from mcp_server import server  # the MCP SDK loads only for this command

    gateway_addr = args.gateway or settings.gateway_addr
    if args.http:
        if args.token:
            raise SystemExit("--token is for stdio: over HTTP each request sends its own bearer token")
        server.run_http(gateway_addr, *args.http)
    else:
        server.run_stdio(gateway_addr, client.member_token(args))
    return 0
