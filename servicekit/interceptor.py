"""The one wrapping of a unary handler that the server's interceptors share.

A ``grpc.ServerInterceptor`` that acts on each call must replace the handler gRPC found with a new
one around it (grpc/grpc examples/python/interceptors); ``UnaryInterceptor`` does that once, and a
subclass writes only what happens around the call. Streaming handlers (the health watch, server
reflection) pass through untouched.
"""

from __future__ import annotations

import time

import grpc


class UnaryInterceptor(grpc.ServerInterceptor):
    """Runs ``around`` in place of every unary-unary handler."""

    def around(self, method: str, inner, request, context):
        """Handles one call: ``method`` is the full name (``/package.Service/Method``), ``inner`` the
        handler's behaviour, to be called as ``inner(request, context)``; returns the response."""
        raise NotImplementedError

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        method, inner = handler_call_details.method, handler.unary_unary

        def behavior(request, context):
            return self.around(method, inner, request, context)

        return grpc.unary_unary_rpc_method_handler(
            behavior,
            request_deserializer=self.wrap_deserializer(handler.request_deserializer),
            response_serializer=handler.response_serializer,
        )

    def wrap_deserializer(self, deserialize):
        """The request deserializer the wrapped handler uses (unchanged here; see ``ErrorInterceptor``)."""
        return deserialize


class OutcomeInterceptor(UnaryInterceptor):
    """A ``UnaryInterceptor`` told how each call ended: ``finished`` runs after the handler (and the
    error mapping inside it) with the status code the caller receives."""

    def finished(self, method: str, code: grpc.StatusCode, seconds: float) -> None:
        """Called once per call, on success and failure alike; ``seconds`` is the handler's wall time."""
        raise NotImplementedError

    def around(self, method, inner, request, context):
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
            self.finished(method, code, time.perf_counter() - start)
