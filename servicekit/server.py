"""Server factory: a gRPC server with health, reflection, metrics, the error mapping and deadlines.

Pattern from grpc/grpc examples/python: the factory returns the server and the port it bound;
tests bind port 0. Health and reflection come from grpcio-health-checking and grpcio-reflection.
Each handler runs with its call's deadline noted (servicekit.deadlines), so the internal calls it
makes are bounded by it.

Shutdown (``Running.stop``, what ``recallatron serve`` does on SIGTERM): the health service turns
NOT_SERVING for every service name at once (and stays so), new calls are refused, calls in flight
get ``grace`` seconds to finish and are cancelled after that; the service then closes its own
pools and channels.
"""

from __future__ import annotations

import logging
from concurrent import futures
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from prometheus_client import REGISTRY, CollectorRegistry

from servicekit import clients, settings
from servicekit.deadlines import DeadlineInterceptor
from servicekit.errors import InvalidArgument, status_for
from servicekit.interceptor import UnaryInterceptor
from servicekit.limits import INTERNAL_MESSAGE_BYTES, MAX_CONNECTION_AGE_GRACE_SECONDS, SHUTDOWN_GRACE_SECONDS
from servicekit.logs import RequestContextInterceptor
from servicekit.metrics import MetricsInterceptor

log = logging.getLogger(__name__)
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class ErrorInterceptor(UnaryInterceptor):
    """Maps every exception a unary handler raises to a status, in one place (servicekit.errors)."""

    def around(self, method, inner, request, context):
        try:
            if isinstance(request, Undecodable):
                raise InvalidArgument(f"the request is not a valid protobuf message: {request.reason}", field="request")
            return inner(request, context)
        except Exception as exc:  # noqa: BLE001 - this is the one place errors are mapped
            if context.code() not in (None, grpc.StatusCode.OK):
                raise  # the handler already aborted with its own status
            context.abort_with_status(status_for(exc))

    def wrap_deserializer(self, deserialize):
        """Bytes that do not parse (a string field holding invalid UTF-8, say) become an ``Undecodable``
        that ``around`` answers INVALID_ARGUMENT; gRPC's own answer to a deserializer that raises is
        INTERNAL "Exception deserializing request!", which a caller cannot tell from a server bug."""
        if deserialize is None:
            return None

        def safe(data: bytes):
            try:
                return deserialize(data)
            except Exception as exc:  # noqa: BLE001 - any parse failure is the caller's bytes
                return Undecodable(str(exc) or type(exc).__name__)

        return safe


@dataclass(frozen=True)
class Undecodable:
    """A request whose bytes did not parse, with the parser's reason."""

    reason: str


@dataclass
class Running:
    """A started server: the grpc server, the port it bound and its health servicer."""

    server: grpc.Server
    port: int
    health: health.HealthServicer
    service_names: tuple[str, ...]

    def set_serving(self, serving: bool) -> None:
        """Sets every service name (and the overall "") SERVING or NOT_SERVING."""
        status = SERVING if serving else NOT_SERVING
        for name in ("",) + self.service_names:
            self.health.set(name, status)

    def stop(self, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
        """Marks everything NOT_SERVING for good, refuses new calls, and returns once the calls in
        flight have finished or ``grace`` seconds have passed (those still running are cancelled)."""
        self.health.enter_graceful_shutdown()
        self.server.stop(grace).wait()


def start_server(
    bind: str,
    registrations,
    *,
    max_workers: int = 16,
    serving: bool = True,
    registry: CollectorRegistry = REGISTRY,
    max_receive: int = INTERNAL_MESSAGE_BYTES,
    max_connection_age: float | None = None,
) -> Running:
    """Starts a server.

    ``bind`` is ``host:port`` (port 0 picks a free one). ``registrations`` is a list of
    ``(add_servicer_to_server, servicer, full_service_name)``. The gRPC server metrics go to
    ``registry`` (the process-wide one, which ``/metrics`` serves, unless given). Raises RuntimeError
    when the address cannot be bound. ``max_connection_age`` (seconds) defaults to
    ``RECALLATRON_GRPC_MAX_CONNECTION_AGE_SECONDS``.
    """
    if max_connection_age is None:
        max_connection_age = settings.load().grpc_max_connection_age_seconds
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers),
        interceptors=[
            RequestContextInterceptor(),
            MetricsInterceptor(registry),
            ErrorInterceptor(),
            DeadlineInterceptor(),
        ],
        options=[
            ("grpc.max_receive_message_length", max_receive),
            *clients.KEEPALIVE_SERVER_OPTIONS,
            # Each client connection is closed (GOAWAY) after this age, so clients resolve the name
            # again and spread over replicas added since; calls in flight finish first.
            ("grpc.max_connection_age_ms", int(max_connection_age * 1000)),
            ("grpc.max_connection_age_grace_ms", int(MAX_CONNECTION_AGE_GRACE_SECONDS * 1000)),
        ],
    )
    names = []
    for add, servicer, name in registrations:
        add(servicer, server)
        names.append(name)
    health_servicer = health.HealthServicer(experimental_non_blocking=True)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME), server
    )
    port = server.add_insecure_port(bind)
    if port == 0:
        raise RuntimeError(f"cannot bind {bind}")
    server.start()
    running = Running(server, port, health_servicer, tuple(names))
    running.set_serving(serving)
    log.info("listening on %s (port %d): %s", bind, port, ", ".join(names))
    return running


def host_port(bind: str, port: int) -> str:
    """The dialable address of a server bound at ``bind`` that got ``port``."""
    host = bind.rsplit(":", 1)[0]
    if host in ("", "0.0.0.0", "[::]"):
        host = "127.0.0.1"
    return f"{host}:{port}"
