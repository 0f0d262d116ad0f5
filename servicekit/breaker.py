"""A circuit breaker per dependency: a frozen or failing service is skipped instead of waited for.

States:

- closed: calls go through; ``FAILURES_TO_OPEN`` consecutive failures open it;
- open: calls are refused at once with UNAVAILABLE (the caller degrades or fails fast); a background
  thread probes the dependency every ``PROBE_SECONDS`` (the gRPC health check, or what the owner
  passes) and turns the breaker half-open when the probe succeeds, so recovery is noticed without
  any user traffic;
- half-open: one trial call goes through (the others are refused while it runs); success closes the
  breaker, failure opens it again.

A failure is a call that ran out of time or was not served: DEADLINE_EXCEEDED or UNAVAILABLE (no
server, a server shutting down, or one that says it cannot serve: the store without its database,
the embed service without its re-ranker). A deadline expiry counts only when the call had the
dependency's whole deadline or at least ``COUNTED_TIMEOUT_SECONDS``: a caller's nearly spent budget
says nothing about the dependency, and must not let one impatient client open the breaker for
everyone. Any other outcome is a success (the service answered), except CANCELLED, which says
nothing.

``recallatron_breaker_open{dependency}`` is 1 while a breaker is open, 0 closed or half-open
(deploy/alerts.yml, ``RecallatronBreakerOpen``). The label is the dependency's name only. A
dependency that is not configured is not called and its owner keeps its breaker closed (``reset``):
not configured is not down.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import grpc
from prometheus_client import Gauge

from servicekit.errors import WORKSPACE_REASONS

log = logging.getLogger(__name__)

BREAKER_OPEN = Gauge("recallatron_breaker_open", "1 while the circuit breaker to a dependency is open.", ["dependency"])

# Consecutive failures that open a closed breaker: one late call can be bad luck, three in a row
# (with nothing answering in between) is a dependency that is down or frozen. A choice, not a measurement.
FAILURES_TO_OPEN = 3
# Seconds between background probes of an open breaker; with the probe's own 1 s timeout a
# dependency that answers again is noticed within 1.5 s (the issue asks for 5 s).
PROBE_SECONDS = 0.5
# A deadline expiry counts as a failure when the call had at least this long (or its whole deadline).
COUNTED_TIMEOUT_SECONDS = 0.5

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half-open"


class CircuitBreaker:
    """The breaker of one dependency (thread-safe).

    ``dependency`` names it in the gauge and in the refusal's message; ``deadline`` is the timeout
    its calls get when the caller's budget allows (seconds, > 0), which decides whether a deadline
    expiry counts. ``start(probe)`` starts the background prober; ``stop()`` ends it.
    """

    def __init__(
        self,
        dependency: str,
        deadline: float,
        *,
        failures_to_open: int = FAILURES_TO_OPEN,
        probe_seconds: float = PROBE_SECONDS,
    ) -> None:
        if deadline <= 0 or failures_to_open < 1 or probe_seconds <= 0:
            raise ValueError("deadline and probe_seconds must be > 0, failures_to_open >= 1")
        self.dependency, self.deadline = dependency, deadline
        self.failures_to_open, self.probe_seconds = failures_to_open, probe_seconds
        self._lock = threading.Lock()
        self._state = CLOSED
        self._failures = 0
        self._generation = 0  # bumped on every change of state: outcomes of older calls are ignored
        self._trial = False  # half-open: the trial call is in flight
        self._opened = threading.Event()  # set while open: wakes the prober
        self._stopped = threading.Event()
        self._probe: Callable[[], bool] | None = None
        self._thread: threading.Thread | None = None
        BREAKER_OPEN.labels(dependency).set(0)

    @property
    def state(self) -> str:
        """``closed``, ``open`` or ``half-open``."""
        return self._state

    @property
    def is_open(self) -> bool:
        """Whether calls are refused now (a half-open breaker still lets its trial through)."""
        return self._state == OPEN

    def start(self, probe: Callable[[], bool]) -> None:
        """Starts the background prober: while open, ``probe()`` is called every ``probe_seconds``
        and a True answer turns the breaker half-open (an exception counts as False)."""
        self._probe = probe
        self._thread = threading.Thread(target=self._probe_loop, daemon=True, name=f"breaker-{self.dependency}")
        self._thread.start()

    def stop(self) -> None:
        """Ends the prober (the breaker keeps its state)."""
        self._stopped.set()
        self._opened.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def acquire(self) -> int | None:
        """Asks to make a call: a ticket to pass to ``record``, or None when the call must be refused."""
        with self._lock:
            if self._state == CLOSED:
                return self._generation
            if self._state == HALF_OPEN and not self._trial:
                self._trial = True
                return self._generation
            return None

    def record(self, ticket: int, failed: bool | None) -> None:
        """The outcome of a call made with ``ticket``: True a failure, False a success, None neither
        (cancelled, or a deadline too short to judge by). Outcomes of calls made before the last
        change of state are ignored."""
        with self._lock:
            if ticket != self._generation:
                return
            if self._state == HALF_OPEN:
                self._trial = False
                if failed is not None:
                    self._enter(OPEN if failed else CLOSED)
            elif self._state == CLOSED and failed is not None:
                self._failures = self._failures + 1 if failed else 0
                if self._failures >= self.failures_to_open:
                    self._enter(OPEN)

    def trip(self) -> None:
        """Opens the breaker now (the dependency reported itself unavailable)."""
        with self._lock:
            if self._state != OPEN:
                self._enter(OPEN)

    def reset(self) -> None:
        """Closes the breaker now: there is nothing to fail (the dependency is not configured, so
        nobody calls it), and an open breaker would report an outage that is not one."""
        with self._lock:
            if self._state != CLOSED:
                self._enter(CLOSED)

    def _enter(self, state: str) -> None:
        """Changes state; the caller holds the lock."""
        log.log(logging.WARNING if state == OPEN else logging.INFO, "breaker to %s: %s", self.dependency, state)
        self._state, self._failures, self._trial = state, 0, False
        self._generation += 1
        BREAKER_OPEN.labels(self.dependency).set(1 if state == OPEN else 0)
        if state == OPEN:
            self._opened.set()
        else:
            self._opened.clear()

    def _probe_loop(self) -> None:
        while not self._stopped.is_set():
            self._opened.wait()
            if self._stopped.wait(self.probe_seconds):
                return
            if self._state == OPEN and self._probe_ok():
                with self._lock:
                    if self._state == OPEN:
                        self._enter(HALF_OPEN)

    def _probe_ok(self) -> bool:
        try:
            return bool(self._probe())
        except Exception:  # noqa: BLE001 - a probe that cannot run has not seen the dependency answer
            return False


def failed(code: grpc.StatusCode | None, timeout: float, deadline: float, reason: str = "") -> bool | None:
    """The breaker's verdict on a finished call (see the module docstring): True a failure, False a
    success, None no verdict. ``timeout`` is what the call was given, ``deadline`` its breaker's,
    ``reason`` its ErrorInfo reason: an UNAVAILABLE that only one workspace's database causes
    (servicekit.errors.WORKSPACE_REASONS) came from a dependency that answered."""
    if code == grpc.StatusCode.CANCELLED or reason in WORKSPACE_REASONS:
        return None
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return True if timeout >= min(deadline, COUNTED_TIMEOUT_SECONDS) else None
    return code == grpc.StatusCode.UNAVAILABLE


class Refused(grpc.RpcError, grpc.Call, grpc.Future):
    """The failed call a refused call returns: UNAVAILABLE, done, raising itself as its result (the
    interface of a finished call, so blocking calls and ``.future()`` callers see the usual error)."""

    def __init__(self, dependency: str) -> None:
        super().__init__()
        self._details = f"{dependency} skipped: its circuit breaker is open"

    def __str__(self) -> str:
        return f"<Refused UNAVAILABLE: {self._details}>"

    def code(self):
        return grpc.StatusCode.UNAVAILABLE

    def details(self):
        return self._details

    def initial_metadata(self):
        return ()

    def trailing_metadata(self):
        return ()

    def is_active(self):
        return False

    def time_remaining(self):
        return None

    def cancel(self):
        return False

    def cancelled(self):
        return False

    def running(self):
        return False

    def done(self):
        return True

    def result(self, timeout=None):
        raise self

    def exception(self, timeout=None):
        return self

    def traceback(self, timeout=None):
        return None

    def add_callback(self, callback):
        return False

    def add_done_callback(self, fn):
        fn(self)
