"""Deadlines and circuit breakers: a frozen embed service is skipped, recall keeps answering from the
keyword arm, and the dense arm comes back soon after the service answers again. The embed service
runs in its own process (frozen with SIGSTOP: its socket stays open, calls are accepted and never
answered); the gateway runs here with a client interceptor that counts the calls really sent."""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from prometheus_client import REGISTRY
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.gateway.v1 import gateway_pb2_grpc
from recallatron.memory.v1 import memory_pb2 as m

from gateway.recall import RecallConfig
from gateway.server import GatewayService
from servicekit import breaker as br
from servicekit import clients
from servicekit.breaker import CircuitBreaker
from servicekit.limits import INTERNAL_DEADLINE_SECONDS

EMBED_DEADLINE = 5.0  # the test gateway's; the bound each degraded recall must stay under
QUERIES = ["budget review", "espresso machine", "harbour tide tables", "choir rehearsal", "quarterly report"]


class CallLog(grpc.UnaryUnaryClientInterceptor):
    """Counts the calls a gateway really sends (it runs inside the breakers) and notes their timeouts."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.timeouts: dict[str, list[float]] = {}

    def intercept_unary_unary(self, continuation, client_call_details, request):
        name = client_call_details.method.rsplit("/", 1)[-1]
        with self.lock:
            self.calls[name] += 1
            self.timeouts.setdefault(name, []).append(client_call_details.timeout)
        return continuation(client_call_details, request)

    def count(self, method: str) -> int:
        with self.lock:
            return self.calls[method]


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20, method="inclusive")[-1]


def gauge(dependency: str) -> float | None:
    return REGISTRY.get_sample_value("recallatron_breaker_open", {"dependency": dependency})


@pytest.fixture(scope="module")
def world(stack, embed_process, tmp_path_factory):
    """A member with a few embedded memories, and a gateway whose embed service is ``embed_process``."""
    ws = stack.workspace("breakers")
    alice = stack.member(ws)
    for text in (
        "The quarterly budget review moved to Friday afternoon.",
        "The espresso machine on floor three is broken again.",
        "The harbour tide tables for March were printed on blue paper.",
        "The choir rehearses in the old chapel on Tuesday evenings.",
        "The quarterly report is due to the board next Monday.",
    ):
        alice.remember(text)
    stack.wait_backlog_empty()
    calls = CallLog()
    gw = GatewayService(
        "127.0.0.1:0",
        f"127.0.0.1:{stack.store.port}",
        embed_process.addr,
        f"127.0.0.1:{stack.rank.port}",
        tmp_path_factory.mktemp("op") / "no-operator-token",
        RecallConfig(embed_deadline=EMBED_DEADLINE),
        interceptors=[calls],
    )
    ch = clients.channel(f"127.0.0.1:{gw.port}")
    stub = gateway_pb2_grpc.MemoryServiceStub(ch)

    def recall(i: int = 0, timeout: float | None = 60, dense_only: bool = False) -> tuple[g.RecallResponse, float]:
        """One hybrid recall (dense with ``dense_only``; with a caller deadline of ``timeout`` seconds)
        and its latency in seconds."""
        start = time.perf_counter()
        mode = m.RECALL_MODE_DENSE if dense_only else 0
        req = g.RecallRequest(query=QUERIES[i % len(QUERIES)], purpose=m.PURPOSE_CONVERSATION, mode=mode)
        resp = stub.Recall(req, metadata=alice.md(), timeout=timeout)
        return resp, time.perf_counter() - start

    yield {"gw": gw, "calls": calls, "recall": recall, "embed": embed_process}
    ch.close()
    gw.stop()


@pytest.mark.system
def test_internal_calls_carry_deadlines_derived_from_the_callers(world):
    calls, recall = world["calls"], world["recall"]
    calls.timeouts.clear()
    resp, _ = recall(dense_only=True)  # a dense-mode recall authenticates first (test_recall_fold.py)
    assert resp.dense_available and resp.items
    resp, _ = recall()
    assert resp.dense_available and resp.items
    # The caller gave 60 s: store and rank calls get what is left of it (far above the 30 s default
    # they get without one; at most 60 s plus gRPC's rounding up of the timeout it sends, measured at
    # 0.1 s); the query embedding its own 5 s (less than half of what is left).
    for method in ("Authenticate", "LexicalCandidates"):
        (timeout,) = calls.timeouts[method]
        assert INTERNAL_DEADLINE_SECONDS < timeout < 60.5, (method, timeout)
    for method in ("DenseCandidates", "FuseAndWalk"):
        assert len(calls.timeouts[method]) == 2
        assert all(INTERNAL_DEADLINE_SECONDS < t < 60.5 for t in calls.timeouts[method]), method
    assert calls.timeouts["EmbedQueries"] == [EMBED_DEADLINE] * 2
    # No caller deadline (gRPC reports ~9.2e18 s remaining): the 30 s default, the embed deadline.
    calls.timeouts.clear()
    recall(timeout=None, dense_only=True)
    for _ in range(20):
        resp, _ = recall(timeout=None)
        assert resp.dense_available and resp.items
    # (this channel gives a call without a timeout the 30 s default on the client side, which gRPC
    # may round up by about 0.1 s when it sends it; a raw channel is tested below)
    for method, times in (("Authenticate", 1), ("LexicalCandidates", 20), ("DenseCandidates", 21), ("FuseAndWalk", 21)):
        got = calls.timeouts[method]
        assert len(got) == times and all(abs(t - INTERNAL_DEADLINE_SECONDS) < 0.5 for t in got), (method, got)
    assert calls.timeouts["EmbedQueries"] == [EMBED_DEADLINE] * 21
    # No cross-encoder is configured: the re-ranker is not called, and not down (its breaker closed).
    assert "Rerank" not in calls.timeouts and not resp.reranked
    assert world["gw"].breakers["reranker"].state == br.CLOSED and gauge("reranker") == 0


@pytest.mark.system
def test_a_caller_without_a_deadline_gets_the_default_internal_deadline(world, stack):
    # Found in review: gRPC reports about 9.2e18 s left for a call without a deadline (grpcurl sends
    # none), and that, passed on as the internal calls' timeout, failed every call at once with
    # UNAVAILABLE. A raw channel, so no client-side default deadline is added.
    calls = world["calls"]
    calls.timeouts.clear()
    alice = stack.member(stack.workspace("no-deadline"))
    alice.remember("The lighthouse keeper logs the fog signal every night.")
    with grpc.insecure_channel(f"127.0.0.1:{world['gw'].port}") as ch:
        stub = gateway_pb2_grpc.MemoryServiceStub(ch)
        req = g.RecallRequest(query="lighthouse fog signal", purpose=m.PURPOSE_CONVERSATION, mode=m.RECALL_MODE_LEXICAL)
        resp = stub.Recall(req, metadata=alice.md())
    assert [it.memory.body for it in resp.items] == ["The lighthouse keeper logs the fog signal every night."]
    # The internal calls got the 30 s default (gRPC may round a forwarded timeout up by about 0.1 s),
    # not gRPC's "no deadline" figure.
    for method in ("Authenticate", "LexicalCandidates", "FuseAndWalk"):
        got = calls.timeouts[method]
        assert got and all(abs(t - INTERNAL_DEADLINE_SECONDS) < 0.5 for t in got), (method, got)


@pytest.mark.system
def test_a_frozen_embed_service_is_skipped_and_found_again(world):
    gw, calls, recall, embed = world["gw"], world["calls"], world["recall"], world["embed"]
    breaker = gw.breakers["embed"]
    normal = [recall(i) for i in range(20)]
    assert all(r.dense_available and r.items for r, _ in normal)
    assert breaker.state == br.CLOSED and gauge("embed") == 0
    embed.freeze()
    try:
        # The first failures: each of these waits out the embed deadline, then answers from the
        # keyword arm; three in a row open the breaker.
        sent = calls.count("EmbedQueries")
        with ThreadPoolExecutor(3) as pool:
            first = list(pool.map(recall, range(3)))
        assert all(not r.dense_available and r.items for r, _ in first)
        assert calls.count("EmbedQueries") == sent + 3
        assert breaker.state == br.OPEN and gauge("embed") == 1

        sent = calls.count("EmbedQueries")
        started = time.perf_counter()
        with ThreadPoolExecutor(40) as pool:
            parallel = list(pool.map(recall, range(40)))
        wall = time.perf_counter() - started
        frozen = [recall(i) for i in range(20)]
        for resp, seconds in parallel + frozen:
            assert not resp.dense_available and resp.items and resp.items[0].lexical_rank == 1
            assert seconds < EMBED_DEADLINE  # none waited for the frozen service
        assert calls.count("EmbedQueries") == sent  # not called while the breaker is open
        assert breaker.state == br.OPEN and gauge("embed") == 1
        print(
            f"\nnormal p95 {p95([s for _, s in normal]) * 1000:.0f} ms, frozen p95 "
            f"{p95([s for _, s in frozen]) * 1000:.0f} ms, 40 parallel {wall:.2f} s "
            f"(first failures {max(s for _, s in first):.2f} s)"
        )
    finally:
        embed.resume()
    # Back: from the first SERVING answer of the service, the dense arm returns within 5 s.
    ch = clients.channel(embed.addr)
    try:
        while not clients.is_serving(ch):
            pass
        answering = time.monotonic()
    finally:
        ch.close()
    while not recall()[0].dense_available:
        assert time.monotonic() - answering < 5.0, "dense_available did not come back within 5 s"
        time.sleep(0.1)
    assert breaker.state == br.CLOSED and gauge("embed") == 0


# ---- the breaker itself -------------------------------------------------------------------------


class Probe:
    """A probe whose answer the test sets; counts how often it was asked."""

    def __init__(self) -> None:
        self.answer, self.asked = False, threading.Event()

    def __call__(self) -> bool:
        self.asked.set()
        return self.answer


def wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_breaker_opens_probes_and_closes_after_a_good_trial():
    b = CircuitBreaker("test-dep", 2.0, failures_to_open=3, probe_seconds=0.05)
    probe = Probe()
    b.start(probe)
    try:
        t = b.acquire()
        b.record(t, True)
        b.record(b.acquire(), True)
        b.record(b.acquire(), False)  # a success in between starts the count again
        for _ in range(2):
            b.record(b.acquire(), True)
        assert b.state == br.CLOSED
        b.record(b.acquire(), True)
        assert b.state == br.OPEN and b.is_open and gauge("test-dep") == 1
        assert b.acquire() is None  # refused while open
        b.record(t, False)  # an outcome from before the change of state is ignored
        assert b.state == br.OPEN
        probe.asked.clear()
        assert probe.asked.wait(5)
        assert b.state == br.OPEN  # the probe said no
        probe.answer = True
        wait_for(lambda: b.state == br.HALF_OPEN)
        assert gauge("test-dep") == 0 and not b.is_open
        trial = b.acquire()
        assert trial is not None and b.acquire() is None  # one trial at a time
        b.record(trial, None)  # a trial that says nothing frees the slot
        trial = b.acquire()
        b.record(trial, True)  # a failed trial opens it again
        assert b.state == br.OPEN
        wait_for(lambda: b.state == br.HALF_OPEN)
        b.record(b.acquire(), False)
        assert b.state == br.CLOSED and gauge("test-dep") == 0
        b.trip()
        assert b.state == br.OPEN and gauge("test-dep") == 1
    finally:
        b.stop()


def test_reset_closes_an_open_breaker():
    """What the gateway does to the re-ranker's breaker when it is not configured (gateway.dependencies)."""
    b = CircuitBreaker("test-reset", 2.0, failures_to_open=1, probe_seconds=60)
    b.start(Probe())  # never answers yes: only reset closes it here
    try:
        b.reset()  # closed: stays closed
        assert b.state == br.CLOSED and gauge("test-reset") == 0
        stale = b.acquire()
        b.trip()
        assert b.state == br.OPEN and gauge("test-reset") == 1 and b.acquire() is None
        b.reset()
        assert b.state == br.CLOSED and gauge("test-reset") == 0
        b.record(stale, True)  # an outcome from before the reset is ignored
        assert b.state == br.CLOSED
        ticket = b.acquire()
        assert ticket is not None
        b.record(ticket, True)  # it still opens on failures after a reset
        assert b.state == br.OPEN and gauge("test-reset") == 1
    finally:
        b.stop()


def test_breaker_verdicts_and_bad_settings():
    code = grpc.StatusCode
    assert br.failed(code.UNAVAILABLE, 2.0, 2.0) is True
    assert br.failed(code.DEADLINE_EXCEEDED, 2.0, 2.0) is True
    assert br.failed(code.DEADLINE_EXCEEDED, 0.6, 2.0) is True  # half a second or more counts
    assert br.failed(code.DEADLINE_EXCEEDED, 0.2, 2.0) is None  # the caller's budget ran out, not the dependency
    assert br.failed(code.DEADLINE_EXCEEDED, 0.1, 0.1) is True  # its whole deadline
    assert br.failed(code.CANCELLED, 2.0, 2.0) is None
    for answered in (code.OK, code.INVALID_ARGUMENT, code.NOT_FOUND, code.INTERNAL):
        assert br.failed(answered, 2.0, 2.0) is False
    for bad in ({"deadline": 0}, {"deadline": 1, "failures_to_open": 0}, {"deadline": 1, "probe_seconds": 0}):
        with pytest.raises(ValueError):
            CircuitBreaker("bad", **bad)
