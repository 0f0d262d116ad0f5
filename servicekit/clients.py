"""gRPC channels to the internal services, one per address, with keepalive and retries off."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

_OPTIONS = [("grpc.max_receive_message_length", 64 * 1024 * 1024),
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
            ("grpc.enable_retries", 0),
            # Reconnect quickly after a peer restarts, so a returning service is used within seconds.
            ("grpc.initial_reconnect_backoff_ms", 250),
            ("grpc.min_reconnect_backoff_ms", 250),
            ("grpc.max_reconnect_backoff_ms", 2000)]


def channel(addr: str) -> grpc.Channel:
    """An insecure channel to an internal service (internal services listen on loopback)."""
    return grpc.insecure_channel(addr, options=_OPTIONS)


def is_serving(ch: grpc.Channel, service: str = "", timeout: float = 1.0) -> bool:
    """True when the peer's health check for ``service`` answers SERVING within ``timeout`` seconds."""
    try:
        resp = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=service),
                                                     timeout=timeout)
    except grpc.RpcError:
        return False
    return resp.status == health_pb2.HealthCheckResponse.SERVING
