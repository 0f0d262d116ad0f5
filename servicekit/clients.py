"""gRPC channels to the internal services, one per address, with keepalive and retries off, each
spreading its calls over every address its name resolves to (round_robin; docs/scaling.md).

Each service opens one channel per peer at start-up and keeps it for its lifetime (gRPC reuses one
HTTP/2 connection for every call on it). Keepalive pings an idle connection every 30 seconds, so a
dead peer or a connection dropped by the network in between is found before a call needs it;
servicekit.server accepts those pings (KEEPALIVE_SERVER_OPTIONS).

Every unary call on such a channel gets a deadline (``InternalCalls``): its own timeout bounded by
what is left of the deadline of the call being served, or else what is left, or else the channel's
default (servicekit.deadlines). Methods mapped to a circuit breaker (servicekit.breaker) are refused at once
while it is open, and their outcomes feed it.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping, Sequence

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from servicekit import deadlines
from servicekit.breaker import CircuitBreaker, Refused, failed
from servicekit.errors import error_info
from servicekit.limits import INTERNAL_DEADLINE_SECONDS, INTERNAL_MESSAGE_BYTES
from servicekit.logs import RequestIdClientInterceptor

_OPTIONS = [
    ("grpc.max_receive_message_length", INTERNAL_MESSAGE_BYTES),
    ("grpc.max_send_message_length", INTERNAL_MESSAGE_BYTES),
    ("grpc.enable_retries", 0),
    # Reconnect quickly after a peer restarts, so a returning service is used within seconds.
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.min_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 2000),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    # Calls spread over every address the name resolves to (a Kubernetes headless Service gives one
    # per pod), not all to the first one connected; a peer closing its connection (its maximum
    # connection age, servicekit.server) makes the channel resolve the name again, at most this often.
    ("grpc.lb_policy_name", "round_robin"),
    ("grpc.dns_min_time_between_resolutions_ms", 5_000),
]
# What a server must allow for those pings (the defaults answer a ping more often than every five
# minutes on an idle connection with GOAWAY "too_many_pings").
KEEPALIVE_SERVER_OPTIONS = [
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
]


class _Details(
    namedtuple("_Details", ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression")),
    grpc.ClientCallDetails,
):
    """A call's details with its timeout replaced (gRPC's own class is private)."""


class InternalCalls(grpc.UnaryUnaryClientInterceptor):
    """Gives every unary call its deadline and, for methods mapped to a breaker, applies the breaker.

    ``breakers`` maps a full method name (``/package.Service/Method``) or a service prefix
    (``/package.Service/``) to its breaker; a method maps to the exact entry first. A call's timeout
    is its own, bounded by what is left of the caller's deadline (servicekit.deadlines.for_call);
    without one of its own, what is left; when the caller set none either, its breaker's deadline,
    or ``default_deadline`` seconds when unmapped.
    """

    def __init__(self, breakers: Mapping[str, CircuitBreaker], default_deadline: float) -> None:
        self.breakers, self.default_deadline = dict(breakers), default_deadline

    def breaker_for(self, method: str) -> CircuitBreaker | None:
        """The breaker of ``method``, or None."""
        return self.breakers.get(method) or self.breakers.get(method[: method.rfind("/") + 1])

    def intercept_unary_unary(self, continuation, client_call_details, request):
        method = client_call_details.method
        method = method.decode() if isinstance(method, bytes) else method
        breaker = self.breaker_for(method)
        timeout = deadlines.for_call(
            client_call_details.timeout, breaker.deadline if breaker else self.default_deadline
        )
        details = _Details(
            client_call_details.method,
            timeout,
            client_call_details.metadata,
            client_call_details.credentials,
            client_call_details.wait_for_ready,
            client_call_details.compression,
        )
        if breaker is None:
            return continuation(details, request)
        ticket = breaker.acquire()
        if ticket is None:
            return Refused(breaker.dependency)
        try:
            call = continuation(details, request)
        except BaseException:  # e.g. a closed channel: no outcome, but the ticket (a trial's slot) is given back
            breaker.record(ticket, None)
            raise
        call.add_done_callback(
            lambda done: breaker.record(ticket, failed(done.code(), timeout, breaker.deadline, _reason(done)))
        )
        return call


def _reason(call: grpc.Call) -> str:
    """The ErrorInfo reason of a call that ended UNAVAILABLE ("" otherwise, or without one)."""
    if call.code() != grpc.StatusCode.UNAVAILABLE:
        return ""
    info = error_info(call)
    return info.reason if info is not None else ""


def channel(
    addr: str,
    breakers: Mapping[str, CircuitBreaker] | None = None,
    *,
    default_deadline: float = INTERNAL_DEADLINE_SECONDS,
    interceptors: Sequence[grpc.UnaryUnaryClientInterceptor] = (),
) -> grpc.Channel:
    """An insecure channel to an internal service (internal services listen on loopback).

    Unary calls get deadlines and the ``breakers`` (see ``InternalCalls``); ``interceptors`` run
    inside them, so they see only the calls that are really sent (tracing, or a test counting calls).
    Each call made while a call is handled carries that call's request id (servicekit.logs).
    """
    raw = grpc.insecure_channel(addr, options=_OPTIONS)
    return grpc.intercept_channel(
        raw, RequestIdClientInterceptor(), InternalCalls(breakers or {}, default_deadline), *interceptors
    )


def guarded_channel(addr: str, service: str, breaker: CircuitBreaker, **kwargs) -> grpc.Channel:
    """A ``channel`` whose calls to ``service`` (its full name) all go through ``breaker``, which is
    started with the health check of ``service`` as its probe. ``kwargs`` as for ``channel``."""
    ch = channel(addr, {f"/{service}/": breaker}, **kwargs)
    breaker.start(lambda: is_serving(ch, service))
    return ch


def is_serving(ch: grpc.Channel, service: str = "", timeout: float = 1.0) -> bool:
    """True when the peer's health check for ``service`` answers SERVING within ``timeout`` seconds."""
    try:
        resp = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    except grpc.RpcError:
        return False
    return resp.status == health_pb2.HealthCheckResponse.SERVING
