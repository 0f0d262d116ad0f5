"""The degrade contract: with the embed service down, recall answers from the keyword arm and says
dense_available=false; memories written meanwhile get their vectors once it returns. A re-ranker
that is not configured is not down: recall does not call it, nothing counts as degraded, its breaker
stays closed, and status says "not configured"; one configured and then gone is down."""

import json
import os
import re
import subprocess
import time

import grpc
from cli_runner import recallatron
from conftest import code_of, free_port
from prometheus_client import REGISTRY
from recall_calls import internal_calls
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.gateway.v1 import gateway_pb2_grpc
from recallatron.memory.v1 import memory_pb2 as m

from embed_service.server import EmbedService
from gateway.recall import RecallConfig
from gateway.server import GatewayService
from servicekit import breaker as br
from servicekit import clients

NOT_CONFIGURED, UP, DOWN = g.DEPENDENCY_STATE_NOT_CONFIGURED, g.DEPENDENCY_STATE_UP, g.DEPENDENCY_STATE_DOWN


def test_embed_outage_degrades_and_backlog_drains_after_restart(stack):
    ws = stack.workspace("degrade")
    alice = stack.member(ws)
    before = alice.remember("The quarterly budget review moved to Friday afternoon.")
    stack.wait_backlog_empty()
    assert alice.recall("budget review", mode=m.RECALL_MODE_DENSE).items[0].memory.id == before.id

    with stack.embed_down():
        hybrid = alice.recall("budget review")
        assert not hybrid.dense_available
        assert [it.memory.id for it in hybrid.items] == [before.id]
        assert hybrid.items[0].lexical_rank == 1 and hybrid.items[0].dense_rank == 0
        dense = alice.recall("budget review", mode=m.RECALL_MODE_DENSE)
        assert not dense.dense_available and list(dense.items) == []

        during = alice.remember("The espresso machine on floor three is broken again.")
        time.sleep(1.0)
        # Nothing is lost: the job is still queued, and the backlog counts exactly the writes made.
        assert alice.recall("espresso machine", mode=m.RECALL_MODE_DENSE).items == []
        assert stack.backlog() == 1
        tide = alice.remember("The harbour tide tables for March were printed on blue paper.")
        choir = alice.remember("The choir rehearses in the old chapel on Tuesday evenings.")
        assert stack.backlog() == 3
        # A correction re-queues its memory's one job in place; a forget drops the job.
        stack.memory.Correct(
            g.CorrectRequest(
                id=tide.id, expected_revision=1, body="The harbour tide tables for April were printed on green paper."
            ),
            metadata=alice.md(),
        )
        assert stack.backlog() == 3
        stack.memory.Forget(g.ForgetRequest(id=choir.id, reason="wrong workspace"), metadata=alice.md())
        assert stack.backlog() == 2

    deadline = time.monotonic() + 30
    resp = None
    while time.monotonic() < deadline:
        resp = alice.recall("coffee maker out of order", mode=m.RECALL_MODE_DENSE)
        if resp.dense_available and resp.items:
            break
        time.sleep(0.5)
    assert resp.dense_available
    assert resp.items[0].memory.id == during.id
    stack.wait_backlog_empty(timeout=30)


def rerank_degraded() -> float:
    return REGISTRY.get_sample_value("recallatron_recall_degraded_total", {"stage": "rerank"}) or 0.0


def gauge(name: str, dependency: str) -> float | None:
    return REGISTRY.get_sample_value(name, {"dependency": dependency})


def dependencies(admin, op) -> dict[str, g.DependencyStatus]:
    return {d.name: d for d in admin.GetStatus(g.GetStatusRequest(), metadata=op).dependencies}


def test_an_unconfigured_reranker_is_not_down(stack):
    """The session's stack has no cross-encoder configured (conftest.py), as a default install."""
    alice = stack.member(stack.workspace("no re-ranker"))
    fog = alice.remember("The lighthouse keeper logs the fog signal every night.")
    stack.wait_backlog_empty()
    before = rerank_degraded()
    answers = []
    calls = internal_calls(lambda: answers.extend(alice.recall("fog signal lighthouse") for _ in range(5)))
    assert [(a.reranked, a.dense_available, a.items[0].memory.id) for a in answers] == [(False, True, fog.id)] * 5
    assert calls["Rerank"] == 0 and calls["EmbedQueries"] == 5  # not called: nothing to call
    assert rerank_degraded() == before  # nothing missing: not a degraded recall
    assert stack.gateway.breakers["reranker"].state == br.CLOSED
    deps = dependencies(stack.admin, stack.op())
    assert deps["reranker"] == g.DependencyStatus(name="reranker", serving=False, detail="", state=NOT_CONFIGURED)
    assert {name: (d.state, d.serving) for name, d in deps.items() if name != "reranker"} == {
        "store": (UP, True),
        "embed": (UP, True),
        "rank": (UP, True),
    }
    # What the alert rules read (deploy/alerts.yml): no open breaker, configured 0, not up.
    assert gauge("recallatron_breaker_open", "reranker") == 0
    assert gauge("recallatron_dependency_configured", "reranker") == 0
    assert gauge("recallatron_dependency_up", "reranker") == 0
    assert gauge("recallatron_dependency_configured", "embed") == 1
    # Bad input changes nothing: an empty question, a skip asked for, no operator credential.
    assert code_of(alice.recall, "") == grpc.StatusCode.INVALID_ARGUMENT
    assert not alice.recall("fog signal", skip_rerank=True).reranked
    assert code_of(stack.admin.GetStatus, g.GetStatusRequest()) == grpc.StatusCode.UNAUTHENTICATED
    assert code_of(stack.admin.GetStatus, g.GetStatusRequest(), metadata=alice.md()) == grpc.StatusCode.UNAUTHENTICATED
    assert rerank_degraded() == before and stack.gateway.breakers["reranker"].state == br.CLOSED


def status_cli(stack, *args) -> subprocess.CompletedProcess:
    return recallatron("status", "--gateway", f"127.0.0.1:{stack.gateway.port}", *args, env=dict(os.environ))


def test_status_command_says_not_configured(stack):
    text = status_cli(stack, "--operator-token", stack.operator_token)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[1:5] == ["  store: up", "  embed: up", "  rank: up", "  reranker: not configured"]
    assert len(lines) == 6 and re.fullmatch(
        r"  database server main: up, \d+ workspace\(s\) \(control plane\)", lines[5]
    )
    out = status_cli(stack, "--operator-token", stack.operator_token, "--json")
    assert out.returncode == 0, out.stderr
    deps = {d["name"]: d for d in json.loads(out.stdout)["dependencies"]}
    assert deps["reranker"] == {
        "name": "reranker",
        "serving": False,
        "detail": "",
        "state": "DEPENDENCY_STATE_NOT_CONFIGURED",
    }
    assert {d["state"] for name, d in deps.items() if name != "reranker"} == {"DEPENDENCY_STATE_UP"}
    wrong = status_cli(stack, "--operator-token", "rco_wrong")
    assert wrong.returncode == 1 and wrong.stdout == "" and wrong.stderr.startswith("UNAUTHENTICATED")


def test_a_configured_reranker_that_goes_away_is_down(stack, tiny_cross_encoder, tmp_path):
    """Not configured, then configured (the embed service restarted with a cross-encoder: the gateway
    notices without a call of ours), then killed, then configured with one that does not load, then
    not configured again, all on one gateway. The cross-encoder is conftest.py's tiny random-weight
    stand-in (no real weights here)."""
    bind = f"127.0.0.1:{free_port()}"
    embed = EmbedService(bind, "", encoder=stack.encoder)
    token = tmp_path / "operator-token"
    token.write_text("rco_reranker_test\n")
    gw = GatewayService(
        "127.0.0.1:0",
        f"127.0.0.1:{stack.store.port}",
        bind,
        f"127.0.0.1:{stack.rank.port}",
        token,
        RecallConfig(embed_deadline=5.0, rerank_top_n=5),
    )
    ch = clients.channel(f"127.0.0.1:{gw.port}")
    memory, admin = gateway_pb2_grpc.MemoryServiceStub(ch), gateway_pb2_grpc.AdminServiceStub(ch)
    op = (("authorization", "Bearer rco_reranker_test"),)
    alice = stack.member(stack.workspace("re-ranker comes and goes"))
    for i in range(3):
        alice.remember(f"Harbour note {i}: the ferry to the island leaves at dawn from pier {i}.")
    stack.wait_backlog_empty()
    req = g.RecallRequest(query="ferry island pier", purpose=m.PURPOSE_CONVERSATION)

    def recall() -> g.RecallResponse:
        return memory.Recall(req, metadata=alice.md())

    def restart(reranker_model: str) -> EmbedService:
        embed.stop()
        return EmbedService(bind, reranker_model, encoder=stack.encoder)

    def seen_again() -> dict[str, g.DependencyStatus]:
        """The status once the gateway reaches the restarted embed service (its channel reconnects
        after a back-off)."""
        deadline = time.monotonic() + 30
        while (deps := dependencies(admin, op))["embed"].state != UP:
            assert time.monotonic() < deadline, deps
            time.sleep(0.2)
        return deps

    try:
        before = rerank_degraded()
        assert not recall().reranked and rerank_degraded() == before
        assert dependencies(admin, op)["reranker"].state == NOT_CONFIGURED

        embed = restart(tiny_cross_encoder)
        deadline = time.monotonic() + 30  # the watch asks every 2 s
        while not (resp := recall()).reranked:
            assert time.monotonic() < deadline, "a re-ranker configured later was not noticed"
            time.sleep(0.2)
        # A recall sent while the new cross-encoder was still loading may have run out of time and
        # counted as degraded (configured, and no answer in time): that is right, and depends on
        # the machine's speed. From the first re-ranked recall on, none is degraded.
        before = rerank_degraded()
        resp = recall()
        assert resp.reranked and resp.dense_available and len(resp.items) == 3 and rerank_degraded() == before
        assert dependencies(admin, op)["reranker"] == g.DependencyStatus(name="reranker", serving=True, state=UP)

        embed.stop()  # killed: the embed service and its re-ranker are gone
        deps = dependencies(admin, op)
        assert deps["reranker"] == g.DependencyStatus(
            name="reranker", serving=False, detail="embed service down", state=DOWN
        )
        assert deps["embed"].state == DOWN
        resp = recall()
        assert not resp.reranked and not resp.dense_available and resp.items
        assert rerank_degraded() == before + 1  # configured and missing: a degraded recall

        embed = EmbedService(bind, "/nonexistent/cross-encoder", encoder=stack.encoder)
        reranker = seen_again()["reranker"]
        assert (reranker.state, reranker.serving) == (DOWN, False)
        assert reranker.detail.startswith("cannot load /nonexistent/cross-encoder: ")
        assert gw.breakers["reranker"].state == br.OPEN and gauge("recallatron_breaker_open", "reranker") == 1
        calls = internal_calls(lambda: recall())
        assert calls["Rerank"] == 0 and rerank_degraded() == before + 2

        embed = restart("")
        assert seen_again()["reranker"].state == NOT_CONFIGURED
        assert gw.breakers["reranker"].state == br.CLOSED and gauge("recallatron_breaker_open", "reranker") == 0
        assert not recall().reranked and rerank_degraded() == before + 2
    finally:
        ch.close()
        gw.stop()
        embed.stop()
