"""Prometheus metrics: the standard gRPC server metrics (go-grpc-prometheus names) and the endpoint.

The metrics live in a ``prometheus_client`` registry: the process-wide default one, which the
``/metrics`` endpoint serves, unless a server is given its own (tests read exact values from one).
Labels never carry member, workspace or memory ids, nor query text.
"""

from __future__ import annotations

import threading
import time
import weakref

import grpc
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, start_http_server

from servicekit.interceptor import UnaryInterceptor

_LABELS = ["grpc_type", "grpc_service", "grpc_method"]


class ServerMetrics:
    """The gRPC server metrics of one registry (each name can be registered once per registry)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.started = Counter("grpc_server_started", "RPCs started on the server.", _LABELS, registry=registry)
        self.handled = Counter(
            "grpc_server_handled",
            "RPCs completed on the server, regardless of success or failure.",
            [*_LABELS, "grpc_code"],
            registry=registry,
        )
        self.handling = Histogram(
            "grpc_server_handling_seconds",
            "Response latency of RPCs handled by the server.",
            _LABELS,
            registry=registry,
        )


_BY_REGISTRY: weakref.WeakKeyDictionary[CollectorRegistry, ServerMetrics] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def server_metrics(registry: CollectorRegistry = REGISTRY) -> ServerMetrics:
    """The metrics in ``registry``, registered on first use: every server of a process that uses the
    same registry counts into the same metrics."""
    with _LOCK:
        metrics = _BY_REGISTRY.get(registry)
        if metrics is None:
            metrics = _BY_REGISTRY[registry] = ServerMetrics(registry)
        return metrics


server_metrics(REGISTRY)  # registered at import, as the /metrics endpoint has always shown them


def _split(method: str) -> tuple[str, str]:
    service, _, name = method.rpartition("/")
    return service.lstrip("/"), name


class MetricsInterceptor(UnaryInterceptor):
    """Counts and times unary RPCs into ``registry``, recording the status code after the handler
    (and the error mapping inside it) has finished."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.metrics = server_metrics(registry)

    def around(self, method, inner, request, context):
        service, name = _split(method)
        self.metrics.started.labels("unary", service, name).inc()
        start = time.perf_counter()
        code = grpc.StatusCode.OK
        try:
            response = inner(request, context)
            code = context.code() or grpc.StatusCode.OK
            return response
        except BaseException:
            code = context.code() or grpc.StatusCode.UNKNOWN
            raise
        finally:
            self.metrics.handled.labels("unary", service, name, code.name).inc()
            self.metrics.handling.labels("unary", service, name).observe(time.perf_counter() - start)


def serve_metrics(addr: str, port: int) -> int:
    """Starts the ``/metrics`` HTTP endpoint; returns the bound port (``port`` 0 picks a free one)."""
    server, _thread = start_http_server(port, addr=addr)
    return server.server_port
