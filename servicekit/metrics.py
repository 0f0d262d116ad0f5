"""Prometheus metrics: the standard gRPC server metrics (go-grpc-prometheus names) and the endpoint.

Labels never carry member, workspace or memory ids, nor query text.
"""

from __future__ import annotations

import time

import grpc
from prometheus_client import Counter, Histogram, start_http_server

STARTED = Counter("grpc_server_started", "RPCs started on the server.",
                  ["grpc_type", "grpc_service", "grpc_method"])
HANDLED = Counter("grpc_server_handled", "RPCs completed on the server, regardless of success or failure.",
                  ["grpc_type", "grpc_service", "grpc_method", "grpc_code"])
HANDLING = Histogram("grpc_server_handling_seconds", "Response latency of RPCs handled by the server.",
                     ["grpc_type", "grpc_service", "grpc_method"])


def _split(method: str) -> tuple[str, str]:
    service, _, name = method.rpartition("/")
    return service.lstrip("/"), name


class MetricsInterceptor(grpc.ServerInterceptor):
    """Counts and times unary RPCs, recording the status code after the handler has finished."""

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        service, method = _split(handler_call_details.method)
        inner = handler.unary_unary

        def behavior(request, context):
            STARTED.labels("unary", service, method).inc()
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
                HANDLED.labels("unary", service, method, code.name).inc()
                HANDLING.labels("unary", service, method).observe(time.perf_counter() - start)

        return grpc.unary_unary_rpc_method_handler(
            behavior, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)


def serve_metrics(addr: str, port: int) -> int:
    """Starts the ``/metrics`` HTTP endpoint; returns the bound port (``port`` 0 picks a free one)."""
    server, _thread = start_http_server(port, addr=addr)
    return server.server_port
