"""``recallatron web``: the curation web screen (web/) in the foreground, over the gateway."""

from __future__ import annotations

import argparse

from cli.mcp_command import http_address
from servicekit import logs
from servicekit.settings import Settings, host_port


def web_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron web``."""
    wp = sub.add_parser(
        "web",
        help="serve the curation web screen (search, browse, review) on 127.0.0.1:8080",
        description="Each person signs in with their own member token; the screen shows what the gateway "
        "lets that member read and sends every decision to it. `recallatron up` starts it too.",
    )
    wp.add_argument(
        "--addr", type=http_address, metavar="HOST:PORT", help="listen address (default RECALLATRON_WEB_ADDR)"
    )
    wp.add_argument("--gateway", default=None, help="gateway address (default RECALLATRON_GATEWAY_ADDR)")
    wp.set_defaults(handler=web)


def web(args: argparse.Namespace, settings: Settings) -> int:
    """Serves the screen until SIGTERM or Ctrl-C; exit status 0."""
    from web import server  # Starlette and Jinja2 load only for this command

    logs.configure(settings.log_level)
    host, port = args.addr or host_port(settings.web_addr)  # validated when the settings were read
    gateway = args.gateway or settings.gateway_addr
    print(f"recallatron web: http://{host}:{port}/ (gateway {gateway})", flush=True)
    server.run(host, port, gateway)
    return 0
