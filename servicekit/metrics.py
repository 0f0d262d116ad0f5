"""Prometheus metrics: the standard gRPC server metrics (go-grpc-prometheus names), database pool
use, and the endpoint.

The gRPC metrics live in a ``prometheus_client`` registry: the process-wide default one, which the
``/metrics`` endpoint serves, unless a server is given its own (tests read exact values from one).
The other metrics are defined where they are measured (README.md, "Logs and metrics", lists them).
Labels never carry member, workspace or memory ids, names, nor any text from a request.
"""

from __future__ import annotations

import threading
import weakref

import grpc
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from servicekit.interceptor import OutcomeInterceptor

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


class MetricsInterceptor(OutcomeInterceptor):
    """Counts and times unary RPCs into ``registry``, recording the status code after the handler
    (and the error mapping inside it) has finished."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.metrics = server_metrics(registry)

    def around(self, method, inner, request, context):
        self.metrics.started.labels("unary", *_split(method)).inc()
        return super().around(method, inner, request, context)

    def finished(self, method: str, code: grpc.StatusCode, seconds: float) -> None:
        service, name = _split(method)
        self.metrics.handled.labels("unary", service, name, code.name).inc()
        self.metrics.handling.labels("unary", service, name).observe(seconds)


class PoolCollector(Collector):
    """Database pool use, read at scrape time from psycopg_pool's ``get_stats()`` and summed over every
    open pool of every watched source by kind (label ``pool``, e.g. ``control`` or ``workspace``,
    never a database name): connections in use and idle, the most the pools allow, callers waiting
    for a connection, and how many pools are open."""

    def __init__(self) -> None:
        self._sources = weakref.WeakSet()

    def watch(self, source) -> None:
        """Adds ``source``, an object whose ``pools()`` returns ``{kind: [ConnectionPool, ...]}``; it is
        dropped when garbage collected."""
        self._sources.add(source)

    def collect(self):
        conns = GaugeMetricFamily(
            "recallatron_db_pool_connections",
            "Open database connections by pool kind and state.",
            labels=["pool", "state"],
        )
        limit = GaugeMetricFamily(
            "recallatron_db_pool_max_connections", "Most connections the open pools may hold.", labels=["pool"]
        )
        waiting = GaugeMetricFamily(
            "recallatron_db_pool_requests_waiting", "Callers waiting for a database connection.", labels=["pool"]
        )
        opened = GaugeMetricFamily("recallatron_db_pools_open", "Open database pools.", labels=["pool"])
        stats: dict[str, list[dict[str, int]]] = {}
        for source in list(self._sources):
            for kind, pools in source.pools().items():
                stats.setdefault(kind, []).extend(p.get_stats() for p in pools if not p.closed)
        for kind, each in sorted(stats.items()):
            size, idle = sum(s["pool_size"] for s in each), sum(s["pool_available"] for s in each)
            conns.add_metric([kind, "in_use"], size - idle)
            conns.add_metric([kind, "idle"], idle)
            limit.add_metric([kind], sum(s["pool_max"] for s in each))
            waiting.add_metric([kind], sum(s.get("requests_waiting", 0) for s in each))
            opened.add_metric([kind], len(each))
        return [conns, limit, waiting, opened]


POOLS = PoolCollector()
REGISTRY.register(POOLS)


def serve_metrics(addr: str, port: int) -> int:
    """Starts the ``/metrics`` HTTP endpoint; returns the bound port (``port`` 0 picks a free one)."""
    server, _thread = start_http_server(port, addr=addr)
    return server.server_port
