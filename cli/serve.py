"""``recallatron serve NAME``: run one service in the foreground until SIGTERM or Ctrl-C.

On SIGTERM or SIGINT the service turns NOT_SERVING on its health service, refuses new calls, lets
the calls in flight finish for up to ``RECALLATRON_SHUTDOWN_GRACE_SECONDS`` (10 s; after that they
are cancelled), closes its channels and database pools, and the process exits 0.
"""

from __future__ import annotations

import argparse
import errno
import logging

from servicekit import logs
from servicekit.metrics import serve_metrics
from servicekit.settings import Settings
from servicekit.signals import stop_on_signals

log = logging.getLogger("recallatron.serve")
SERVICES = ("store", "embed", "rank", "gateway")


def start(name: str, settings: Settings):
    """Starts service ``name`` and returns an object with ``stop(grace)``. SystemExit on bad configuration."""
    if name == "store":
        from store_service.database import StartupError
        from store_service.server import StoreService

        if not settings.database_url:
            raise SystemExit(
                "the store needs DATABASE_URL (the control-plane database); "
                "`recallatron up` sets it to the embedded server"
            )
        try:
            servers = settings.all_database_servers()
        except ValueError as exc:
            raise SystemExit(f"store cannot start: {exc}") from None
        try:
            return StoreService(
                settings.database_url,
                settings.store_addr,
                settings.embed_addr,
                batch_size=settings.embed_batch_size,
                pool_max=settings.db_pool_max,
                servers=servers,
                control_server=settings.control_server,
            )
        except StartupError as exc:
            raise SystemExit(f"store cannot start: {exc}") from None
    if name == "embed":
        from embed_service.server import EmbedService

        return EmbedService(settings.embed_addr, settings.reranker_model, block=False)
    if name == "rank":
        from rank_service.server import start as start_rank

        return start_rank(settings.rank_addr)
    if name == "gateway":
        from gateway.recall import RecallConfig
        from gateway.server import GatewayService

        config = RecallConfig(
            candidate_limit=settings.candidate_limit,
            embed_deadline=settings.embed_deadline_seconds,
            rerank_deadline=settings.rerank_deadline_seconds,
            rerank_top_n=settings.rerank_top_n,
        )
        return GatewayService(
            settings.gateway_addr,
            settings.store_addr,
            settings.embed_addr,
            settings.rank_addr,
            settings.operator_token_path,
            config,
            internal_deadline=settings.internal_deadline_seconds,
        )
    raise SystemExit(f"unknown service {name!r}; choose one of {', '.join(SERVICES)}")


def metrics_variable(name: str) -> str:
    """The environment variable of service ``name``'s metrics port."""
    return f"RECALLATRON_{name.upper()}_METRICS_PORT"


def start_metrics(name: str, settings: Settings) -> int:
    """Serves service ``name``'s /metrics; returns the port bound. SystemExit with one line naming the
    service, the address and the variable to change when it cannot bind (a port in use: another
    stack, say), never a traceback."""
    addr, port = settings.metrics_addr, settings.metrics_port(name)
    try:
        return serve_metrics(addr, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise SystemExit(
                f"{name}: metrics port {port} on {addr} is already in use; set {metrics_variable(name)} to "
                "another port (0: any free one)"
            ) from None
        raise SystemExit(
            f"{name}: cannot serve metrics on {addr}:{port} ({exc.strerror}); RECALLATRON_METRICS_ADDR and "
            f"{metrics_variable(name)} set them"
        ) from None


def run(name: str, settings: Settings) -> int:
    """Serves until a signal arrives; returns the exit status. Logs are JSON lines on stderr."""
    logs.configure(settings.log_level)
    stop = stop_on_signals()  # servicekit.signals: the handler takes no lock
    # Metrics first: a port in use then stops the process before the service holds its port, its
    # database pools or a model, so there is nothing to stop and the message is the last line.
    port = start_metrics(name, settings)
    service = start(name, settings)
    chosen = f" (the system's choice: {metrics_variable(name)} is 0)" if settings.metrics_port(name) == 0 else ""
    log.info("%s serving; metrics on http://%s:%d/metrics%s", name, settings.metrics_addr, port, chosen)
    # Wait in 1 s steps, not forever: the kernel may deliver SIGTERM to another thread (gRPC's),
    # and CPython runs the Python handler only when the main thread next runs bytecode; a main
    # thread blocked in one endless wait never does, and the service never stops.
    while not stop.wait(1.0):
        pass
    log.info("%s stopping: NOT_SERVING, up to %.1f s for calls in flight", name, settings.shutdown_grace_seconds)
    service.stop(settings.shutdown_grace_seconds)
    log.info("%s stopped", name)
    return 0


def serve_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron serve NAME``."""
    serve = sub.add_parser("serve", help="run one service in the foreground")
    serve.add_argument("service", choices=SERVICES)
    serve.set_defaults(handler=lambda args, settings: run(args.service, settings))
