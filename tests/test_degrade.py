"""The degrade contract: with the embed service down, recall answers from the keyword arm and says
dense_available=false; memories written meanwhile get their vectors once it returns."""

import time

from recallatron.memory.v1 import memory_pb2 as m

from embed_service.server import EmbedService


def test_embed_outage_degrades_and_backlog_drains_after_restart(stack):
    ws = stack.workspace("degrade")
    alice = stack.member(ws)
    before = alice.remember("The quarterly budget review moved to Friday afternoon.")
    stack.wait_backlog_empty()
    assert alice.recall("budget review", mode=m.RECALL_MODE_DENSE).items[0].memory.id == before.id

    stack.embed.stop()
    try:
        hybrid = alice.recall("budget review")
        assert not hybrid.dense_available
        assert [it.memory.id for it in hybrid.items] == [before.id]
        assert hybrid.items[0].lexical_rank == 1 and hybrid.items[0].dense_rank == 0
        dense = alice.recall("budget review", mode=m.RECALL_MODE_DENSE)
        assert not dense.dense_available and list(dense.items) == []

        during = alice.remember("The espresso machine on floor three is broken again.")
        time.sleep(1.0)
        # Nothing is lost: the job is still queued.
        assert alice.recall("espresso machine", mode=m.RECALL_MODE_DENSE).items == []
    finally:
        stack.embed = EmbedService(stack.embed_bind, "", encoder=stack.encoder)

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
