"""``recallatron mcp``: the MCP server (mcp_server/) over stdio, or over streamable HTTP with ``--http``."""

from __future__ import annotations

import argparse
import ipaddress
import math
from urllib.parse import urlsplit

from cli import command
from servicekit.settings import Settings, host_port

# The session bounds of --http unless given.
SESSIONS_PER_MEMBER = 16
SESSION_IDLE_TIMEOUT_S = 1800.0


def http_address(text: str) -> tuple[str, int]:
    """The ``--http`` type: ``HOST:PORT`` (``[::1]:PORT`` for IPv6) -> (host, port); a usage error otherwise."""
    try:
        return host_port(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _netloc(text: str, scheme: str) -> str | None:
    """``text`` lower-cased when ``scheme://text`` is a URL of a host and an optional port (``*``: any
    port) and nothing else; None otherwise."""
    base, any_port = (text[:-2], True) if text.endswith(":*") else (text, False)
    try:
        url = urlsplit(f"{scheme}://{base}")
        port = url.port
    except ValueError:
        return None
    whole = url.hostname and not (url.path or url.query or url.fragment or url.username or url.password)
    odd = not base.isascii() or "*" in base or any(c.isspace() for c in base)
    if not whole or odd or (any_port and port is not None):
        return None
    return text.lower()


def allowed_host(text: str) -> str:
    """The ``--allowed-host`` type: ``HOST``, ``HOST:PORT`` or ``HOST:*`` (any port), as a Host header
    names it (``[::1]:8765`` for IPv6)."""
    value = _netloc(text, "http")
    if value is None:
        raise argparse.ArgumentTypeError(f"expected HOST, HOST:PORT or HOST:*, got {text!r}")
    return value


def allowed_origin(text: str) -> str:
    """The ``--allowed-origin`` type: ``http(s)://HOST[:PORT]`` or ``http(s)://HOST:*``, as an Origin
    header names it (no path, no trailing slash)."""
    scheme, sep, rest = text.partition("://")
    value = _netloc(rest, scheme.lower()) if sep and scheme.lower() in ("http", "https") else None
    if value is None:
        raise argparse.ArgumentTypeError(f"expected http(s)://HOST[:PORT] or http(s)://HOST:*, got {text!r}")
    return f"{scheme.lower()}://{value}"


def public_url(text: str) -> str:
    """The ``--public-url`` type: ``https://HOST[:PORT]`` (``http://`` only for a loopback host), the
    scheme and host lower-cased, no path."""
    scheme, sep, rest = text.partition("://")
    scheme = scheme.lower()
    value = _netloc(rest, scheme) if sep and scheme in ("http", "https") and not rest.endswith(":*") else None
    host = urlsplit(f"{scheme}://{value}").hostname if value else None
    if value is None or (scheme == "http" and not _loopback(host)):
        raise argparse.ArgumentTypeError(f"expected https://HOST[:PORT] (http:// for a loopback host), got {text!r}")
    return f"{scheme}://{value}"


def _loopback(host: str | None) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


def default_public_url(host: str, port: int) -> str | None:
    """The URL OAuth names when --public-url is not given: the bound address itself when it is a
    loopback one (only this machine can reach it); None otherwise (OAuth off: no URL to name)."""
    if not _loopback(host):
        return None
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def positive_int(text: str) -> int:
    """A whole number 1..1,000,000; a usage error otherwise."""
    if not text.strip().isdigit() or not 1 <= int(text) <= 1_000_000:
        raise argparse.ArgumentTypeError(f"expected a whole number 1..1000000, got {text!r}")
    return int(text)


def positive_seconds(text: str) -> float:
    """Seconds, more than 0 and at most 30 days (fractions allowed); a usage error otherwise."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= 30 * 86400:
        raise argparse.ArgumentTypeError(f"expected seconds, more than 0 and at most 2592000, got {text!r}")
    return value


def mcp_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron mcp``."""
    mp = sub.add_parser(
        "mcp",
        help="serve the memory tools to MCP clients (stdio, or streamable HTTP with --http)",
        description="Stdio serves the member whose token is --token or RECALLATRON_TOKEN. With --http, each "
        "request carries its member token as 'Authorization: Bearer <token>' and the server keeps none: "
        "the gateway checks the token of every request before MCP sees it (401 when it is missing or "
        "refused), a session serves only the member that opened it, and Host and Origin headers must "
        "name this server (DNS rebinding protection, on for every bind address: the loopback names and "
        "the bound address are always allowed).",
    )
    mp.add_argument("--http", type=http_address, metavar="HOST:PORT", help="serve streamable HTTP at /mcp instead")
    mp.add_argument("--gateway", default=None, help="gateway address (default RECALLATRON_GATEWAY_ADDR)")
    mp.add_argument("--token", help="member token for stdio (default RECALLATRON_TOKEN)")
    http = mp.add_argument_group("streamable HTTP (with --http)")
    http.add_argument(
        "--allowed-host",
        type=allowed_host,
        action="append",
        metavar="HOST[:PORT]",
        help="also accept this Host header (repeatable; HOST alone matches a Host without a port, HOST:* any "
        "port), e.g. the public name of a bind to 0.0.0.0",
    )
    http.add_argument(
        "--allowed-origin",
        type=allowed_origin,
        action="append",
        metavar="ORIGIN",
        help="also accept this Origin header (repeatable; http(s)://HOST[:PORT] or http(s)://HOST:*); "
        "a request without Origin is accepted",
    )
    http.add_argument(
        "--public-url",
        type=public_url,
        metavar="URL",
        help="the URL clients reach this server at (https://HOST[:PORT], e.g. behind a TLS proxy): turns on "
        "OAuth sign-in (docs/agents.md, 'Remote MCP sign-in (OAuth)') with this URL as issuer and URL/mcp as "
        "the resource, and accepts its Host and Origin. Default: the bound address on a loopback bind; "
        "on any other bind, no OAuth (bearer member tokens only)",
    )
    http.add_argument(
        "--sessions-per-member",
        type=positive_int,
        metavar="N",
        help=f"open sessions one member may hold (default {SESSIONS_PER_MEMBER}); one more is refused with "
        "HTTP 429 until one ends or is closed for being idle",
    )
    http.add_argument(
        "--session-idle-timeout",
        type=positive_seconds,
        metavar="SECONDS",
        help=f"close a session after this long without a request (default {SESSION_IDLE_TIMEOUT_S:g}, 30 min); "
        "its id then answers 404",
    )
    mp.set_defaults(handler=mcp)


def mcp(args: argparse.Namespace, settings: Settings) -> int:
    """Runs the MCP server until its client goes away (stdio) or it is stopped (HTTP); exit status 0."""
    from mcp_server import server  # the MCP SDK loads only for this command

    gateway_addr = args.gateway or settings.gateway_addr
    http_options = (
        args.allowed_host,
        args.allowed_origin,
        args.sessions_per_member,
        args.session_idle_timeout,
        args.public_url,
    )
    if args.http:
        if args.token:
            raise SystemExit("--token is for stdio: over HTTP each request sends its own bearer token")
        host, port = args.http
        public = args.public_url or default_public_url(host, port)
        own = [urlsplit(args.public_url).netloc] if args.public_url else []
        options = server.HttpOptions(
            host,
            port,
            allowed_hosts=tuple((args.allowed_host or []) + own),
            allowed_origins=tuple((args.allowed_origin or []) + ([args.public_url] if args.public_url else [])),
            sessions_per_member=args.sessions_per_member or SESSIONS_PER_MEMBER,
            idle_timeout=args.session_idle_timeout or SESSION_IDLE_TIMEOUT_S,
            public_url=public,
        )
        server.run_http(gateway_addr, options)
    elif any(option is not None for option in http_options):
        raise SystemExit("--allowed-host, --allowed-origin, --public-url and the session bounds are for --http")
    else:
        server.run_stdio(gateway_addr, command.member_token(args))
    return 0
