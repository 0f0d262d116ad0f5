"""The degrade contract: with the embed service down, recall answers from the keyword arm and says
dense_available=false; memories written meanwhile get their vectors once it returns."""

import time

from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m


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
