"""gRPC channels to the internal services, one per address, with keepalive and retries off.

Each service opens one channel per peer at start-up and keeps it for its lifetime (gRPC reuses one
HTTP/2 connection for every call on it). Keepalive pings an idle connection every 30 seconds, so a
dead peer or a connection dropped by the network in between is found before a call needs it;
servicekit.server accepts those pings (KEEPALIVE_SERVER_OPTIONS).
"""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from servicekit.limits import MAX_MESSAGE_BYTES
from servicekit.logs import RequestIdClientInterceptor

_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.enable_retries", 0),
    # Reconnect quickly after a peer restarts, so a returning service is used within seconds.
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.min_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 2000),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]
# What a server must allow for those pings (the defaults answer a ping more often than every five
# minutes on an idle connection with GOAWAY "too_many_pings").
KEEPALIVE_SERVER_OPTIONS = [
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
]


def channel(addr: str) -> grpc.Channel:
    """An insecure channel to an internal service (internal services listen on loopback); each call
    made on it while a call is handled carries that call's request id (servicekit.logs)."""
    return grpc.intercept_channel(grpc.insecure_channel(addr, options=_OPTIONS), RequestIdClientInterceptor())


def is_serving(ch: grpc.Channel, service: str = "", timeout: float = 1.0) -> bool:
    """True when the peer's health check for ``service`` answers SERVING within ``timeout`` seconds."""
    try:
        resp = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    except grpc.RpcError:
        return False
    return resp.status == health_pb2.HealthCheckResponse.SERVING
