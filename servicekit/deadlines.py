"""Deadlines of internal calls, derived from the deadline of the call being served.

gRPC Python does not carry a server call's deadline into the calls its handler makes, so this
module does: ``DeadlineInterceptor`` (installed by ``servicekit.server.start_server``) notes the
absolute deadline of each incoming call for the duration of its handler (a ``ContextVar``, set and
reset in the handler's own thread), and ``servicekit.clients`` gives every outgoing unary call the
timeout ``for_call`` computes:

- a call that names a timeout of its own (a stage deadline, a probe's) gets it, cut to what is
  left of the caller's deadline when that is shorter;
- a call that names none gets what is left of the caller's deadline;
- when the caller set no deadline (or outside a handler: the embedding job, health watches,
  probes), it gets the channel's default: ``servicekit.limits.INTERNAL_DEADLINE_SECONDS``
  (``RECALLATRON_INTERNAL_DEADLINE_SECONDS``, 30 s; README.md, "Configuration"), or the deadline
  of the dependency's circuit breaker.

An optional stage (the query embedding, the re-ranker) asks for at most ``OPTIONAL_SHARE`` (half)
of what is left of the caller's deadline (``optional_stage``), so the degraded answer still has the
other half.
"""

from __future__ import annotations

import math
import time
from contextvars import ContextVar

from servicekit.errors import DeadlineExceeded
from servicekit.interceptor import UnaryInterceptor

# Share of the caller's remaining time an optional stage may use (see the module docstring).
OPTIONAL_SHARE = 0.5
# Shortest timeout handed to an internal call: a spent budget still makes a call that fails at once
# with DEADLINE_EXCEEDED (gRPC's own answer) rather than one with no deadline at all.
MIN_TIMEOUT_SECONDS = 0.001

# gRPC Python reports a call without a deadline as about 9.2e18 seconds remaining (its infinite
# future, measured: 9.223372035e18), not as None. Anything past a year is taken for that: handing
# such a figure on as a timeout overflows gRPC's 64-bit deadline now and then, failing the call at
# once with DEADLINE_EXCEEDED.
NO_DEADLINE_ABOVE_SECONDS = 365 * 24 * 3600.0

_deadline: ContextVar[float | None] = ContextVar("recallatron_deadline", default=None)


class DeadlineInterceptor(UnaryInterceptor):
    """Notes each unary call's absolute deadline (``time.monotonic()`` seconds, or None when the
    caller set none) while its handler runs."""

    def around(self, method, inner, request, context):
        left = context.time_remaining()
        # A call without a deadline reports gRPC's infinite future (about 9.2e18 s), not None: passed
        # on as a timeout, that fails every internal call at once with DEADLINE_EXCEEDED.
        no_deadline = left is None or not math.isfinite(left) or left > NO_DEADLINE_ABOVE_SECONDS
        token = _deadline.set(None if no_deadline else time.monotonic() + left)
        try:
            return inner(request, context)
        finally:
            _deadline.reset(token)


def remaining() -> float | None:
    """Seconds left of the deadline of the call being served (may be <= 0), or None when there is
    none: the caller set no deadline, or this thread is not serving a call."""
    at = _deadline.get()
    return None if at is None else at - time.monotonic()


def check_before_commit() -> None:
    """Raises ``DeadlineExceeded`` when the call being served has a deadline and it has passed: called
    as the last step inside a big write's transaction block, so the block rolls back instead of
    committing behind the caller's back. The gateway answers a caller whose store call ran out of
    time UNAVAILABLE ("retry later"); a hostile test saw a RememberBatch of 500 rows of 64 KiB commit
    60 s after that answer. A write that finishes in time still commits even if the deadline passes
    during the COMMIT itself (a narrow window: the answer is then lost, the rows are not)."""
    left = remaining()
    if left is not None and left <= 0:
        raise DeadlineExceeded("the call's deadline passed before its transaction committed; nothing was written")


def for_call(own: float | None, default: float) -> float:
    """The timeout of an internal call (seconds): its ``own`` timeout bounded by what is left of the
    caller's deadline; without one of its own, what is left; ``default`` when there is neither.
    Never below ``MIN_TIMEOUT_SECONDS``."""
    left = remaining()
    if own is None:
        timeout = default if left is None else left
    else:
        timeout = own if left is None else min(own, left)
    return max(timeout, MIN_TIMEOUT_SECONDS)


def optional_stage(allowance: float) -> float:
    """The timeout of an optional stage allowed ``allowance`` seconds: at most ``OPTIONAL_SHARE`` of
    what is left of the caller's deadline (all of ``allowance`` when the caller set none)."""
    left = remaining()
    if left is None:
        return allowance
    return max(min(allowance, OPTIONAL_SHARE * left), MIN_TIMEOUT_SECONDS)
