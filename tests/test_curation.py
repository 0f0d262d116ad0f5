"""Curation through the real gateway and store, with the real MiniLM (issue 9; docs/review.md):
duplicate proposals (window, threshold, order, pages, kept pairs, readability, degraded vectors),
the three decisions with Supersede's rules, conflict flags written by every path that supersedes,
their listing and resolution, bad input to every new RPC, and the CLI commands as a user runs them.

Where a test needs exact cosines it writes the stored vectors itself (same stamp and revision as
the embedding job wrote), after the job has drained: the store compares whatever is stored."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import grpc
import numpy as np
import pytest
from cli_runner import at_gateway
from conftest import code_of
from db_waits import wait_for_a_lock_wait
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s
from recallatron.store.v1 import store_pb2_grpc

from servicekit import clients
from store_service.curation import review
from store_service.records import conflict_flags

ROOT = Path(__file__).resolve().parent.parent
INVALID, NOT_FOUND = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND
DENIED, ABORTED, PRECONDITION = (
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.FAILED_PRECONDITION,
)
KEEP, SUPERSEDE, FORGET = (
    m.DUPLICATE_DECISION_KEEP_BOTH,
    m.DUPLICATE_DECISION_SUPERSEDE,
    m.DUPLICATE_DECISION_FORGET,
)


def proposals(member, purpose=m.PURPOSE_CONVERSATION, **kw) -> g.ListDuplicateProposalsResponse:
    return member.stack.memory.ListDuplicateProposals(
        g.ListDuplicateProposalsRequest(purpose=purpose, **kw), metadata=member.md()
    )


def pair_ids(resp) -> list[tuple[str, str]]:
    return [(p.memory_a.id, p.memory_b.id) for p in resp.proposals]


def decide(member, a, b, decision, **kw) -> g.DecideDuplicateProposalResponse:
    return member.stack.memory.DecideDuplicateProposal(
        g.DecideDuplicateProposalRequest(memory_a_id=a, memory_b_id=b, decision=decision, **kw), metadata=member.md()
    )


def flags(member, **kw) -> g.ListConflictFlagsResponse:
    return member.stack.memory.ListConflictFlags(g.ListConflictFlagsRequest(**kw), metadata=member.md())


def resolve(member, flag_id, resolution, **kw) -> g.ResolveConflictFlagResponse:
    return member.stack.memory.ResolveConflictFlag(
        g.ResolveConflictFlagRequest(flag_id=flag_id, resolution=resolution, **kw), metadata=member.md()
    )


def error_of(call, *args, **kw) -> tuple[grpc.StatusCode, str]:
    try:
        call(*args, **kw)
    except grpc.RpcError as exc:
        return exc.code(), exc.details()
    return grpc.StatusCode.OK, ""


def unit(*weights: float) -> np.ndarray:
    """A 384-d vector with ``weights`` on the first axes, then normalised."""
    v = np.zeros(384, dtype=np.float32)
    v[: len(weights)] = weights
    return v / np.linalg.norm(v)


def set_vectors(stack, ws: str, vectors: dict[str, np.ndarray]) -> None:
    """Overwrites the stored vectors of memories already embedded (stamp and revision kept)."""
    with stack.db(ws) as conn:
        for mid, vec in vectors.items():
            done = conn.execute("UPDATE memory_embedding SET embedding = %s WHERE memory_id = %s", (vec, mid))
            assert done.rowcount == 1, mid


def scatter(stack, ws: str, ids: list[str], seed: int = 7) -> None:
    """Gives ``ids`` random vectors, far from each other and from ``unit(...)`` vectors (random
    384-d directions meet at cosine about 0 +- 0.05), so they form no pair."""
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(len(ids), 384)).astype(np.float32)
    vecs[:, :10] = 0  # orthogonal to the unit(...) axes these tests use
    set_vectors(stack, ws, dict(zip(ids, vecs / np.linalg.norm(vecs, axis=1, keepdims=True), strict=True)))


def test_constants_are_the_documented_ones():
    assert review.DUPLICATE_COSINE == 0.80 and review.DUPLICATE_WINDOW == 500
    assert conflict_flags.CONFLICT_CONFIDENCE == 0.8


def test_real_minilm_paraphrases_are_proposed_and_unrelated_text_is_not(stack):
    ws = stack.workspace("dup minilm")
    alice = stack.member(ws)
    first = alice.remember("Maria's parrot is called Captain.")
    second = alice.remember("Maria has a parrot named Captain.")
    alice.remember("The March invoice from the printer is due on Friday.")
    stack.wait_backlog_empty()
    resp = proposals(alice)
    assert resp.dense_available and resp.memories_considered == 3 and resp.memories_without_vectors == 0
    assert pair_ids(resp) == [(second.id, first.id)] and resp.total_size == 1  # the newer first
    with stack.db(ws) as conn:
        a, b = (
            conn.execute("SELECT embedding FROM memory_embedding WHERE memory_id = %s", (x.id,)).fetchone()[0]
            for x in (second, first)
        )
    expected = float(np.dot(a.to_numpy(), b.to_numpy()) / np.linalg.norm(a.to_numpy()) / np.linalg.norm(b.to_numpy()))
    assert resp.proposals[0].cosine == pytest.approx(expected, abs=1e-6) and 0.8 <= resp.proposals[0].cosine <= 1
    assert resp.proposals[0].memory_a.body == second.body and resp.proposals[0].memory_b.body == first.body


def test_threshold_order_ties_pages_and_tokens(stack):
    ws = stack.workspace("dup order")
    alice, bob = stack.member(ws), stack.member(ws)
    mem = [alice.remember(f"order memory {i}") for i in range(10)]
    stack.wait_backlog_empty()
    ids = [x.id for x in mem]
    scatter(stack, ws, ids)

    def at(cosine: float, axis: int) -> np.ndarray:
        weights = [0.0] * (axis + 2)
        weights[axis], weights[axis + 1] = cosine, np.sqrt(1 - cosine * cosine)
        return unit(*weights)

    # 0-1 at cosine 1; 2-3 and 4-5 tie at 0.9; 6-7 at exactly 0.8 (in); 8-9 at 0.79 (out).
    set_vectors(
        stack,
        ws,
        {
            ids[0]: unit(1),
            ids[1]: unit(1),
            ids[2]: unit(0, 1),
            ids[3]: at(0.9, 1),
            ids[4]: unit(0, 0, 0, 1),
            ids[5]: at(0.9, 3),
            ids[6]: unit(0, 0, 0, 0, 0, 1),
            ids[7]: at(0.8, 5),
            ids[8]: unit(*[0.0] * 7, 1),
            ids[9]: at(0.79, 7),
        },
    )
    resp = proposals(alice, page_size=200)
    expected_ties = sorted([(ids[3], ids[2]), (ids[5], ids[4])])
    assert pair_ids(resp) == [(ids[1], ids[0]), *expected_ties, (ids[7], ids[6])] and resp.total_size == 4
    assert [p.cosine for p in resp.proposals] == [1.0, 0.9, 0.9, 0.8]
    # One a page walks the same list; every page counts every proposal.
    walked, token, totals = [], "", []
    while True:
        page = proposals(alice, page_size=1, page_token=token)
        walked += pair_ids(page)
        totals.append(page.total_size)
        token = page.next_page_token
        if not token:
            break
    assert walked == pair_ids(resp) and totals == [4, 4, 4, 4]
    first = proposals(alice, page_size=1)
    # Another member's, another purpose's, another list's or a broken token: INVALID_ARGUMENT.
    listing_token = stack.memory.ListMemories(g.ListMemoriesRequest(page_size=1), metadata=alice.md()).next_page_token
    for member, kw in [
        (bob, {"page_token": first.next_page_token}),
        (alice, {"page_token": first.next_page_token, "purpose": m.PURPOSE_TASKS}),
        (alice, {"page_token": listing_token}),
        (alice, {"page_token": "garbage"}),
        (alice, {"page_token": first.next_page_token[:-2]}),
    ]:
        code, text = error_of(proposals, member, **kw)
        assert code == INVALID and "page_token" in text, kw
    assert error_of(proposals, alice, page_size=-1)[0] == INVALID
    assert error_of(proposals, alice, purpose=m.PURPOSE_UNSPECIFIED)[0] == INVALID
    assert error_of(proposals, alice, purpose=99)[0] == INVALID
    narrow = stack.member(ws, purposes=[m.PURPOSE_TASKS])
    assert error_of(proposals, narrow)[0] == DENIED
    empty = proposals(narrow, purpose=m.PURPOSE_TASKS)
    assert not empty.proposals and empty.memories_considered == 0 and empty.dense_available
    assert code_of(stack.memory.ListDuplicateProposals, g.ListDuplicateProposalsRequest()) == (
        grpc.StatusCode.UNAUTHENTICATED
    )


def test_the_window_is_the_500_newest_readable_memories(stack):
    ws = stack.workspace("dup window")
    alice, bob = stack.member(ws), stack.member(ws)
    old_a, old_b = alice.remember("window old a"), alice.remember("window old b")
    filler = stack.memory.RememberBatch(
        g.RememberBatchRequest(
            requests=[
                # One text: the embedding job embeds it once and copies the vector (then replaced).
                g.RememberRequest(purpose=m.PURPOSE_CONVERSATION, body="window filler", audience=m.AUDIENCE_WORKSPACE)
                for i in range(499)
            ]
        ),
        metadata=alice.md(),
    )
    fill = [r.memory.id for r in filler.results]
    # Bob's member-only memories are newer than everything, but alice cannot read them: they take
    # no place in her window.
    hidden = [bob.remember(f"bob private {i}", audience=m.AUDIENCE_MEMBER).id for i in range(3)]
    stack.wait_backlog_empty()
    scatter(stack, ws, fill + hidden)
    set_vectors(stack, ws, {old_a.id: unit(1), old_b.id: unit(1), hidden[0]: unit(0, 1), hidden[1]: unit(0, 1)})
    resp = proposals(alice)
    # alice: 499 fillers + old_b are the 500 newest she can read; old_a is out, so the pair is too.
    assert resp.memories_considered == 500 and not resp.proposals and resp.total_size == 0
    mine = proposals(bob)
    assert mine.memories_considered == 500 and pair_ids(mine) == [(hidden[1], hidden[0])]
    # Forgetting a filler brings old_a back into alice's window.
    stack.memory.Forget(g.ForgetRequest(id=fill[0], reason="test"), metadata=alice.md())
    assert pair_ids(proposals(alice)) == [(old_b.id, old_a.id)]


def test_readability_chain_purpose_superseded_and_kept_pairs(stack):
    ws = stack.workspace("dup readability")
    alice, bob = stack.member(ws), stack.member(ws)
    admin = stack.member(ws, role=m.ROLE_ADMIN)
    shared = alice.remember("shared fact")
    bobs = bob.remember("bob's private copy", audience=m.AUDIENCE_MEMBER)
    orphan = alice.remember("linked to bob's private memory")
    task_a = alice.remember("task a", purpose=m.PURPOSE_TASKS)
    task_b = alice.remember("task b", purpose=m.PURPOSE_TASKS)
    stack.wait_backlog_empty()
    with stack.db(ws) as conn:  # a chain alice cannot read (its source is bob's alone)
        conn.execute(
            "INSERT INTO memory_link (memory_id, link_type, target_memory_id) VALUES (%s, 'derived_from', %s)",
            (orphan.id, bobs.id),
        )
    same = unit(1)
    set_vectors(stack, ws, {x.id: same for x in (shared, bobs, orphan, task_a, task_b)})
    assert pair_ids(proposals(alice)) == [] and proposals(alice).memories_considered == 1
    assert proposals(admin).memories_considered == 1  # admins read no one else's member-only memories
    bob_view = proposals(bob)
    assert set(pair_ids(bob_view)) == {(orphan.id, bobs.id), (orphan.id, shared.id), (bobs.id, shared.id)}
    assert pair_ids(proposals(alice, purpose=m.PURPOSE_TASKS)) == [(task_b.id, task_a.id)]
    # Kept as both by bob: never proposed again, to anyone; alice's view never had it.
    assert decide(bob, shared.id, orphan.id, KEEP).decision == KEEP
    assert decide(bob, orphan.id, shared.id, KEEP).decision == KEEP  # again, either order: no change
    assert set(pair_ids(proposals(bob))) == {(orphan.id, bobs.id), (bobs.id, shared.id)}
    assert decide(alice, task_a.id, task_b.id, KEEP).decision == KEEP
    assert pair_ids(proposals(admin, purpose=m.PURPOSE_TASKS)) == []
    # A superseded memory leaves the window.
    stack.memory.Supersede(
        g.SupersedeRequest(id=bobs.id, expected_revision=1, body="bob's newer text"), metadata=bob.md()
    )
    assert pair_ids(proposals(bob)) == []


def test_without_vectors_the_list_says_so_and_does_not_fail(stack):
    ws = stack.workspace("dup degraded")
    alice = stack.member(ws)
    mem = [alice.remember(f"degraded memory {i}") for i in range(3)]
    stack.wait_backlog_empty()
    set_vectors(stack, ws, {x.id: unit(1) for x in mem})
    with stack.db(ws) as conn:  # one vector missing (the job has drained, so nothing re-queues it)
        conn.execute("DELETE FROM memory_embedding WHERE memory_id = %s", (mem[0].id,))
    partial = proposals(alice)
    assert partial.dense_available and partial.memories_considered == 3 and partial.memories_without_vectors == 1
    assert pair_ids(partial) == [(mem[2].id, mem[1].id)]
    with stack.embed_down():
        down = proposals(alice)
        assert not down.dense_available and not down.proposals and down.total_size == 0
        assert down.memories_considered == 3 and down.memories_without_vectors == 3
        # A bad token is still refused while the embed service is down.
        assert error_of(proposals, alice, page_token="junk")[0] == INVALID
    # Back once the embed service answers again (the gateway's channel reconnects on its own).
    deadline = time.monotonic() + 30
    while not proposals(alice).dense_available and time.monotonic() < deadline:
        time.sleep(0.5)
    assert pair_ids(proposals(alice)) == [(mem[2].id, mem[1].id)]
    # A vector of another revision (what a correction leaves until the job re-embeds) is not compared.
    with stack.db(ws) as conn:
        conn.execute("UPDATE memory_embedding SET memory_revision = 9 WHERE memory_id = %s", (mem[1].id,))
    stale = proposals(alice)
    assert stale.memories_without_vectors == 2 and not stale.proposals and stale.dense_available
    # Nor is a vector of another input version: asked of the store with a stamp the vectors lack.
    store = store_pb2_grpc.StoreServiceStub(clients.channel(f"127.0.0.1:{stack.store.port}"))
    caller = store.Authenticate(s.AuthenticateRequest(token=alice.token)).caller
    other = store.ListDuplicateProposals(
        s.ListDuplicateProposalsRequest(caller=caller, purpose=m.PURPOSE_CONVERSATION, input_version="other-model")
    )
    assert not other.dense_available and other.memories_without_vectors == 3 and not other.proposals
    with stack.db(ws) as conn:
        conn.execute("DELETE FROM memory_embedding")
    none = proposals(alice)
    assert not none.dense_available and none.memories_without_vectors == 3


def test_decisions_supersede_and_forget_with_supersedes_rules(stack):
    ws = stack.workspace("dup decide")
    alice, bob = stack.member(ws), stack.member(ws)
    admin = stack.member(ws, role=m.ROLE_ADMIN)
    a = alice.remember("the door code is 4512", confidence=0.9)
    b = alice.remember("door code: 4512", confidence=0.95)
    # Stale revision: ABORTED naming the current one.
    stack.memory.Correct(
        g.CorrectRequest(id=a.id, expected_revision=1, body="the door code is 4512."), metadata=alice.md()
    )
    code, text = error_of(decide, alice, a.id, b.id, SUPERSEDE, keep_id=b.id, expected_revision=1)
    assert code == ABORTED and "current 2" in text
    # Bob may read alice's workspace memory but not change it.
    assert error_of(decide, bob, a.id, b.id, SUPERSEDE, keep_id=b.id, expected_revision=2)[0] == DENIED
    assert error_of(decide, bob, a.id, b.id, FORGET, forget_id=a.id)[0] == DENIED
    done = decide(alice, a.id, b.id, SUPERSEDE, keep_id=b.id, expected_revision=2)
    assert done.superseded.id == a.id and done.superseded.superseded_by_id == b.id and done.kept.id == b.id
    assert done.kept.revision == 1 and not done.kept.superseded_by_id  # the kept memory is unchanged
    assert done.conflict_flag_id == ""  # one author's two memories: an edit, not a conflict
    assert alice.read(a.id).superseded_by_id == b.id
    listed = stack.memory.ListMemories(g.ListMemoriesRequest(), metadata=alice.md()).memories
    assert a.id not in {x.id for x in listed}
    # Either of the pair superseded already: FAILED_PRECONDITION.
    assert error_of(decide, alice, a.id, b.id, SUPERSEDE, keep_id=b.id, expected_revision=2)[0] == PRECONDITION
    assert error_of(decide, alice, a.id, b.id, SUPERSEDE, keep_id=a.id, expected_revision=1)[0] == PRECONDITION
    # Either of the pair invalidated: FAILED_PRECONDITION (an ended claim replaces nothing, and is not replaced).
    gone = alice.remember("the door code was 4411")
    stack.memory.Invalidate(g.InvalidateRequest(id=gone.id, expected_revision=1, reason="changed"), metadata=alice.md())
    assert error_of(decide, alice, b.id, gone.id, SUPERSEDE, keep_id=gone.id, expected_revision=1)[0] == PRECONDITION
    assert error_of(decide, alice, gone.id, b.id, SUPERSEDE, keep_id=b.id, expected_revision=1)[0] == PRECONDITION
    assert not alice.read(b.id).superseded_by_id  # nothing changed
    # Purposes differ: FAILED_PRECONDITION.
    task = alice.remember("door code 4512 (task)", purpose=m.PURPOSE_TASKS)
    assert error_of(decide, alice, task.id, b.id, SUPERSEDE, keep_id=b.id, expected_revision=1)[0] == PRECONDITION
    # An admin may supersede a workspace memory by another; low confidence writes no flag.
    c = bob.remember("lunch is at noon", confidence=0.5)
    d = bob.remember("lunch at 12:00")
    by_admin = decide(admin, c.id, d.id, SUPERSEDE, keep_id=d.id, expected_revision=1)
    assert by_admin.superseded.superseded_by_id == d.id and by_admin.conflict_flag_id == ""
    # Two authors' confident memories: a disagreement, flagged.
    x, y = alice.remember("the wifi is guest-5", confidence=0.9), bob.remember("wifi: guest-5", confidence=0.9)
    across = decide(admin, x.id, y.id, SUPERSEDE, keep_id=y.id, expected_revision=1)
    assert across.superseded.superseded_by_id == y.id and across.conflict_flag_id
    # Forget one of the pair, derivations included.
    e = alice.remember("printer is on floor 2")
    f = alice.remember("the printer: floor 2")
    derived = stack.memory.Derive(g.DeriveRequest(source_ids=[e.id], body="printer floor"), metadata=alice.md()).memory
    gone = decide(alice, e.id, f.id, FORGET, forget_id=e.id, reason="duplicate")
    assert list(gone.forgotten_ids) == [e.id, derived.id]
    assert code_of(alice.read, e.id) == NOT_FOUND and alice.read(f.id).body == f.body
    # The forgotten one is unreadable now, so the pair is NOT_FOUND.
    assert error_of(decide, alice, e.id, f.id, KEEP) == error_of(decide, alice, str(uuid.uuid4()), f.id, KEEP)


def test_decide_bad_input_and_hidden_ids(stack):
    ws = stack.workspace("dup decide input")
    alice, bob = stack.member(ws), stack.member(ws)
    a, b = alice.remember("input a"), alice.remember("input b")
    private = bob.remember("bob only", audience=m.AUDIENCE_MEMBER)
    missing = str(uuid.uuid4())
    for kw, field in [
        ({"a": "not-a-uuid", "b": b.id, "decision": KEEP}, "memory_a_id"),
        ({"a": a.id, "b": "", "decision": KEEP}, "memory_b_id"),
        ({"a": a.id, "b": a.id, "decision": KEEP}, "memory_b_id"),
        ({"a": a.id, "b": b.id, "decision": m.DUPLICATE_DECISION_UNSPECIFIED}, "decision"),
        ({"a": a.id, "b": b.id, "decision": 99}, "decision"),
        ({"a": a.id, "b": b.id, "decision": SUPERSEDE, "expected_revision": 1}, "keep_id"),
        ({"a": a.id, "b": b.id, "decision": SUPERSEDE, "keep_id": missing, "expected_revision": 1}, "keep_id"),
        ({"a": a.id, "b": b.id, "decision": SUPERSEDE, "keep_id": a.id}, "expected_revision"),
        ({"a": a.id, "b": b.id, "decision": SUPERSEDE, "keep_id": a.id, "expected_revision": -1}, "expected_revision"),
        ({"a": a.id, "b": b.id, "decision": FORGET}, "forget_id"),
        ({"a": a.id, "b": b.id, "decision": FORGET, "forget_id": "x"}, "forget_id"),
        ({"a": a.id, "b": b.id, "decision": FORGET, "forget_id": a.id, "reason": "x" * 1001}, "reason"),
        ({"a": a.id, "b": b.id, "decision": KEEP, "keep_id": a.id}, "keep_id"),
        ({"a": a.id, "b": b.id, "decision": KEEP, "reason": "why"}, "reason"),
        ({"a": a.id, "b": b.id, "decision": FORGET, "forget_id": a.id, "expected_revision": 1}, "expected_revision"),
    ]:
        args = (kw.pop("a"), kw.pop("b"), kw.pop("decision"))
        code, text = error_of(decide, alice, *args, **kw)
        assert code == INVALID and field in text, (args, kw, text)
    # A hidden id answers exactly as a missing one, whatever the decision.
    for decision, kw in [
        (KEEP, {}),
        (SUPERSEDE, {"keep_id": a.id, "expected_revision": 1}),
        (FORGET, {"forget_id": a.id}),
    ]:
        hidden = error_of(decide, alice, a.id, private.id, decision, **kw)
        absent = error_of(decide, alice, a.id, missing, decision, **kw)
        assert hidden == absent == (NOT_FOUND, "memory not found")
    assert alice.read(a.id).revision == 1 and not alice.read(a.id).superseded_by_id


def test_conflict_flags_from_every_path_that_supersedes(stack):
    ws = stack.workspace("flags paths")
    alice, bob = stack.member(ws), stack.member(ws)
    boss = stack.member(ws, role=m.ROLE_ADMIN)  # replaces alice's claims: another author

    def supersede(old, confidence, by=boss):
        return stack.memory.Supersede(
            g.SupersedeRequest(
                id=old.id, expected_revision=old.revision, body=f"new {old.body}", confidence=confidence
            ),
            metadata=by.md(),
        ).memory

    own = alice.remember("flag: own edit", confidence=0.9)
    supersede(own, 0.9, by=alice)  # her own claim replaced by her: an edit, not flagged

    hi = alice.remember("flag: high", confidence=0.9)
    hi_new = supersede(hi, 0.8)  # both 0.8 or more: flagged
    edge = alice.remember("flag: edge", confidence=0.8)
    edge_new = supersede(edge, 1.0)  # exactly 0.8 counts
    low_old = alice.remember("flag: low old", confidence=0.79)
    supersede(low_old, 1.0)  # the older below 0.8: not flagged
    low_new = alice.remember("flag: low new", confidence=1.0)
    supersede(low_new, 0.5)  # the newer below 0.8: not flagged
    imported = stack.admin.ImportMemories(
        g.ImportMemoriesRequest(
            workspace_id=ws,
            memories=[
                m.ImportedMemory(
                    import_key="flags:1",
                    author_member_id=bob.id,
                    body="imported old",
                    purpose=m.PURPOSE_CONVERSATION,
                    audience=m.AUDIENCE_WORKSPACE,
                ),
                m.ImportedMemory(
                    import_key="flags:2",
                    author_member_id=alice.id,
                    body="imported new",
                    purpose=m.PURPOSE_CONVERSATION,
                    audience=m.AUDIENCE_WORKSPACE,
                    supersedes_key="flags:1",
                ),
                m.ImportedMemory(
                    import_key="flags:3",
                    author_member_id=alice.id,
                    body="imported weak",
                    purpose=m.PURPOSE_CONVERSATION,
                    audience=m.AUDIENCE_WORKSPACE,
                    supersedes_key="flags:2",
                    confidence=0.3,
                ),
            ],
        ),
        metadata=stack.op(),
    ).memories
    assert all(r.status == m.IMPORT_STATUS_CREATED for r in imported)
    # Bob's member-only chain: his own edit, not flagged.
    b_old = bob.remember("bob private old", audience=m.AUDIENCE_MEMBER)
    stack.memory.Supersede(
        g.SupersedeRequest(id=b_old.id, expected_revision=1, body="bob private new"), metadata=bob.md()
    )
    listed = flags(alice)
    pairs = [(f.older.id, f.newer.id) for f in listed.flags]
    assert pairs == [(imported[0].id, imported[1].id), (edge.id, edge_new.id), (hi.id, hi_new.id)]  # newest first
    assert listed.total_size == 3
    assert all(f.state == m.CONFLICT_FLAG_STATE_OPEN and f.older.superseded_by_id == f.newer.id for f in listed.flags)
    assert not listed.flags[0].HasField("resolved_at") and listed.flags[0].resolved_by == ""
    mine = flags(bob)
    assert [(f.older.id, f.newer.id) for f in mine.flags] == pairs and mine.total_size == 3
    # Pages of one walk the same list; tokens are bound to member and include_resolved.
    walked, token = [], ""
    while True:
        page = flags(alice, page_size=1, page_token=token)
        assert page.total_size == 3
        walked += [f.id for f in page.flags]
        token = page.next_page_token
        if not token:
            break
    assert walked == [f.id for f in listed.flags]
    first = flags(alice, page_size=1)
    listing_token = stack.memory.ListMemories(g.ListMemoriesRequest(page_size=1), metadata=alice.md()).next_page_token
    assert listing_token
    for member, kw in [
        (bob, {"page_token": first.next_page_token}),
        (alice, {"page_token": first.next_page_token, "include_resolved": True}),
        (alice, {"page_token": "garbage"}),
        (alice, {"page_token": listing_token}),
    ]:
        code, text = error_of(flags, member, **kw)
        assert code == INVALID and "page_token" in text, kw
    assert error_of(flags, alice, page_size=-1)[0] == INVALID
    # Forgetting the older hides the flag from everyone, counts included.
    stack.memory.Forget(g.ForgetRequest(id=hi.id, reason="test"), metadata=alice.md())
    assert flags(alice).total_size == 2 and hi.id not in {f.older.id for f in flags(alice).flags}


def test_resolve_acknowledge_and_undo(stack):
    ws = stack.workspace("flags resolve")
    alice, bob = stack.member(ws), stack.member(ws)
    boss, admin = stack.member(ws, role=m.ROLE_ADMIN), stack.member(ws, role=m.ROLE_ADMIN)

    def flagged(body):  # alice's claim, replaced by the boss's: a disagreement
        old = alice.remember(body, title="old title", confidence=0.9)
        old = stack.memory.Correct(
            g.CorrectRequest(id=old.id, expected_revision=1, body=f"{body} (corrected)"), metadata=alice.md()
        ).memory
        new = stack.memory.Supersede(
            g.SupersedeRequest(id=old.id, expected_revision=2, body=f"not {body}", kind=m.KIND_FACT),
            metadata=boss.md(),
        ).memory
        flag = next(f for f in flags(alice).flags if f.older.id == old.id)
        return old, new, flag

    old, new, flag = flagged("the meeting is on Monday")
    # Bob and alice read both but may not change the newer (the boss's): PERMISSION_DENIED, both ways.
    for member in (bob, alice):
        code, text = error_of(resolve, member, flag.id, m.CONFLICT_RESOLUTION_ACKNOWLEDGE)
        assert code == DENIED and text.startswith("you may not resolve this flag: ")
        assert error_of(resolve, member, flag.id, m.CONFLICT_RESOLUTION_UNDO, expected_revision=1)[0] == DENIED
    code, text = error_of(resolve, boss, flag.id, m.CONFLICT_RESOLUTION_UNDO, expected_revision=3)
    assert code == ABORTED and "current 1" in text
    undone = resolve(boss, flag.id, m.CONFLICT_RESOLUTION_UNDO, expected_revision=1)
    restored = undone.restored
    assert (restored.body, restored.title, restored.kind, restored.confidence) == (
        old.body,
        old.title,
        m.KIND_NOTE,
        0.9,
    )
    assert undone.flag.state == m.CONFLICT_FLAG_STATE_UNDONE and undone.flag.restored_memory_id == restored.id
    assert undone.flag.resolved_by == boss.id and undone.flag.HasField("resolved_at")
    assert undone.flag.newer.superseded_by_id == restored.id
    # Nothing lost: the older and the newer stay (superseded), the older's history too.
    assert alice.read(old.id, include_history=True).history[0].body == "the meeting is on Monday"
    assert alice.read(new.id).body == new.body
    # The undo wrote no new flag; open flags no longer list it, include_resolved does.
    assert flag.id not in {f.id for f in flags(alice).flags} and flags(alice).total_size == 0
    assert [f.id for f in flags(alice, include_resolved=True).flags] == [flag.id]
    assert error_of(resolve, boss, flag.id, m.CONFLICT_RESOLUTION_ACKNOWLEDGE)[0] == PRECONDITION
    # Acknowledge, by another admin (who may change the workspace memory).
    _, _, second = flagged("the car is blue")
    done = resolve(admin, second.id, m.CONFLICT_RESOLUTION_ACKNOWLEDGE)
    assert done.flag.state == m.CONFLICT_FLAG_STATE_ACKNOWLEDGED and not done.HasField("restored")
    assert done.flag.resolved_by == admin.id
    assert error_of(resolve, boss, second.id, m.CONFLICT_RESOLUTION_UNDO, expected_revision=1)[0] == PRECONDITION
    # Undo of a flag whose newer was superseded meanwhile: FAILED_PRECONDITION (Supersede's rule).
    _, third_new, third = flagged("the cat is grey")
    stack.memory.Supersede(
        g.SupersedeRequest(id=third_new.id, expected_revision=1, body="later", confidence=0.2), metadata=boss.md()
    )
    assert error_of(resolve, boss, third.id, m.CONFLICT_RESOLUTION_UNDO, expected_revision=1)[0] == PRECONDITION


def test_resolve_bad_input_and_hidden_flags(stack):
    ws = stack.workspace("flags input")
    alice, bob = stack.member(ws), stack.member(ws)
    old = bob.remember("bob's private claim", audience=m.AUDIENCE_MEMBER)
    public = alice.remember("alice's claim")
    # Bob lets alice's claim replace his private one: two authors, flagged; alice cannot read his.
    decide(bob, old.id, public.id, SUPERSEDE, keep_id=public.id, expected_revision=1)
    hidden = flags(bob).flags[0].id
    assert flags(alice).total_size == 0
    for resolution in (m.CONFLICT_RESOLUTION_ACKNOWLEDGE, m.CONFLICT_RESOLUTION_UNDO):
        kw = {"expected_revision": 1} if resolution == m.CONFLICT_RESOLUTION_UNDO else {}
        assert (
            error_of(resolve, alice, hidden, resolution, **kw)
            == error_of(resolve, alice, str(uuid.uuid4()), resolution, **kw)
            == (NOT_FOUND, "conflict flag not found")
        )
    for flag_id, resolution, kw, field in [
        ("not-a-uuid", m.CONFLICT_RESOLUTION_ACKNOWLEDGE, {}, "flag_id"),
        (hidden, m.CONFLICT_RESOLUTION_UNSPECIFIED, {}, "resolution"),
        (hidden, 7, {}, "resolution"),
        (hidden, m.CONFLICT_RESOLUTION_UNDO, {}, "expected_revision"),
        (hidden, m.CONFLICT_RESOLUTION_ACKNOWLEDGE, {"expected_revision": 2}, "expected_revision"),
    ]:
        code, text = error_of(resolve, alice, flag_id, resolution, **kw)
        assert code == INVALID and field in text, (flag_id, resolution, text)
    assert flags(bob).flags[0].state == m.CONFLICT_FLAG_STATE_OPEN


def cli(stack, token, *args, check=True) -> subprocess.CompletedProcess:
    return at_gateway(f"127.0.0.1:{stack.gateway.port}", *args, token=token, check=check)


def test_cli_duplicates_and_flags(stack):
    ws = stack.workspace("curation cli")
    alice, bob = stack.member(ws), stack.member(ws)
    mem = [(bob if i == 3 else alice).remember(f"cli memory {i}", confidence=0.9) for i in range(6)]
    stack.wait_backlog_empty()
    ids = [x.id for x in mem]
    set_vectors(stack, ws, {ids[0]: unit(1), ids[1]: unit(1), ids[2]: unit(0, 1), ids[3]: unit(0, 1)})
    scatter(stack, ws, ids[4:])
    text = cli(stack, alice.token, "duplicates", "--page-size", "1")
    first_line = text.stdout.splitlines()[0]
    best = min((ids[1], ids[0]), (ids[3], ids[2]))  # both at cosine 1: the newer id breaks the tie
    assert first_line == f"cosine 1.0000  {best[0]}  {best[1]}"
    assert "1 shown of 2" in text.stdout and "compared the 6 newest memories" in text.stdout
    token = text.stdout.split("--page-token ")[1].split()[0]
    rest = json.loads(cli(stack, alice.token, "duplicates", "--page-token", token, "--json").stdout)
    assert rest["total_size"] == 2 and rest["dense_available"] is True and len(rest["proposals"]) == 1
    assert rest["next_page_token"] == "" and set(rest["proposals"][0]) == {"memory_a", "memory_b", "cosine"}
    bad = cli(stack, alice.token, "duplicates", "--page-token", "junk", check=False)
    assert bad.returncode == 1 and bad.stderr.startswith("INVALID_ARGUMENT: page_token")
    # decide: keep both; supersede (revision read when not given); forget.
    kept = cli(stack, alice.token, "duplicates", "decide", ids[0], ids[1], "--keep-both")
    assert "kept both" in kept.stdout
    sup = json.loads(
        cli(stack, alice.token, "duplicates", "decide", ids[2], ids[3], "--supersede-with", ids[3], "--json").stdout
    )
    assert sup["superseded"]["superseded_by_id"] == ids[3] and sup["conflict_flag_id"]
    stale = cli(
        stack,
        alice.token,
        "duplicates",
        "decide",
        ids[4],
        ids[5],
        "--supersede-with",
        ids[5],
        "--revision",
        "2",
        check=False,
    )
    assert stale.returncode == 1 and stale.stderr.startswith("ABORTED: revision conflict: expected 2, current 1")
    gone = cli(stack, alice.token, "duplicates", "decide", ids[4], ids[5], "--forget", ids[4], "--reason", "dup")
    assert gone.stdout.strip() == f"forgot {ids[4]}"
    for args, code in [
        (("duplicates", "decide", ids[0], ids[0], "--keep-both"), 1),
        (("duplicates", "decide", ids[0], "nope", "--keep-both"), 1),
        (("duplicates", "decide", ids[0], ids[1]), 2),
        (("duplicates", "decide", ids[0], ids[1], "--keep-both", "--forget", ids[0]), 2),
        (("duplicates", "decide", ids[0], ids[1], "--keep-both", "--revision", "1"), 2),
        (("duplicates", "decide", ids[0], ids[1], "--supersede-with", ids[1], "--revision", str(2**63)), 2),
        (("duplicates", "decide", ids[0], ids[1], "--supersede-with", ids[1], "--revision", "0"), 1),
        (("duplicates", "--page-size", str(2**31)), 2),
        (("flags", "resolve", str(uuid.uuid4()), "--undo", "--revision", str(2**63)), 2),
        (("flags", "resolve", str(uuid.uuid4()), "--acknowledge", "--revision", "1"), 2),
        (("flags", "--page-token", "junk"), 1),
        (("flags", "--page-size", "-1"), 1),
    ]:
        out = cli(stack, alice.token, *args, check=False)
        assert out.returncode == code and "Traceback" not in out.stderr, (args, out.stderr)
    hidden = cli(stack, bob.token, "duplicates", "decide", ids[0], str(uuid.uuid4()), "--keep-both", check=False)
    assert hidden.returncode == 1 and hidden.stderr.strip() == "NOT_FOUND: memory not found"
    # flags: the one the supersede wrote; resolve by undo (revision the flag shows) and acknowledge.
    listed = cli(stack, alice.token, "flags")
    assert listed.stdout.startswith(sup["conflict_flag_id"]) and "1 shown of 1" in listed.stdout
    as_json = json.loads(cli(stack, alice.token, "flags", "--json").stdout)
    assert as_json["flags"][0]["older"]["id"] == ids[2] and as_json["flags"][0]["newer"]["id"] == ids[3]
    # The newer is bob's: he resolves (alice may not change it).
    undo = json.loads(cli(stack, bob.token, "flags", "resolve", sup["conflict_flag_id"], "--undo", "--json").stdout)
    assert undo["flag"]["state"] == "CONFLICT_FLAG_STATE_UNDONE" and undo["restored"]["body"] == mem[2].body
    again = cli(stack, bob.token, "flags", "resolve", sup["conflict_flag_id"], "--acknowledge", check=False)
    assert again.returncode == 1 and again.stderr.startswith("FAILED_PRECONDITION: the conflict flag is already")
    missing = cli(stack, alice.token, "flags", "resolve", str(uuid.uuid4()), "--undo", check=False)
    assert missing.returncode == 1 and missing.stderr.strip() == "NOT_FOUND: conflict flag not found"
    assert cli(stack, alice.token, "flags", "resolve", "x", "--acknowledge", check=False).returncode == 1
    assert cli(stack, alice.token, "flags", "resolve", "x", check=False).returncode == 2
    assert "no conflict flags" in cli(stack, alice.token, "flags").stdout
    assert "1 shown of 1" in cli(stack, alice.token, "flags", "--all").stdout


def test_bench_building_blocks_on_a_tiny_workspace(stack, tmp_path):
    """bench/duplicates_bench.py's measurement over 40 bench-corpus rows (of the miniature eval set,
    so the public eval data is not needed) written by the bench's own writer (its 10,000-memory run
    is the lead's, on a quiet machine): the counts are the real answer's."""
    sys.path.insert(0, str(ROOT))
    from bench_data import tiny_eval

    import client
    from bench import corpus, duplicates_bench, workspace

    eval_dir = tiny_eval(tmp_path / "eval")

    ws = stack.workspace("dup bench")
    member = stack.member(ws)
    gw = client.Gateway(f"127.0.0.1:{stack.gateway.port}", stack.operator_token)
    writer = workspace.Writer(gw, member.token)
    try:
        ids = writer.write(0, corpus.rows(40, eval_dir))
    finally:
        writer.close()
    stack.wait_backlog_empty()
    # Two rows made near copies of others, so the list is not empty.
    set_vectors(stack, ws, {ids[0]: unit(1), ids[1]: unit(1), ids[2]: unit(0, 1), ids[3]: unit(0, 1)})
    try:
        result = duplicates_bench.measure(gw, member.token, calls=3, warmup=1)
    finally:
        gw.close()
    direct = proposals(member)
    assert result["calls"] == 3 and len(result["ms"]) == 3 and all(t > 0 for t in result["ms"])
    assert result["median_ms"] <= result["p95_ms"] == max(result["ms"])
    assert result["proposals"] == direct.total_size >= 2 and result["memories_considered"] == 40
    assert result["memories_without_vectors"] == 0 and result["first_page"] == min(50, direct.total_size)
    assert result["walk"] == {"pages": 1, "proposals": direct.total_size, "ms": result["walk"]["ms"]}
    assert duplicates_bench.p95([5.0, 1.0, 3.0]) == 5.0


def _reforged(token: str, position) -> str:
    """``token`` with its position replaced by ``position`` and its fingerprint kept: what a member
    can forge, since a token is not signed (store_service/page_tokens.py)."""
    data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    raw = json.dumps({**data, "k": position}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_forged_page_tokens_of_every_list_are_invalid_argument(stack):
    """A token's position is parsed to the shape its list issues or refused with INVALID_ARGUMENT:
    a number too large for a float, NaN, infinity, a boolean, a time without an offset or out of
    range, a malformed id. Found here as INTERNAL: a huge integer cosine (OverflowError), a boolean
    arrival order in a history search."""
    ws = stack.workspace("forged tokens")
    alice, boss = stack.member(ws), stack.member(ws, role=m.ROLE_ADMIN)
    mem = [alice.remember(f"forged token memory {i}", confidence=0.9) for i in range(5)]
    stack.wait_backlog_empty()
    set_vectors(stack, ws, {x.id: unit(1) for x in mem[2:]})  # three proposals
    for x in mem[:2]:  # two flags
        stack.memory.Supersede(
            g.SupersedeRequest(id=x.id, expected_revision=1, body=f"not {x.body}", confidence=0.9),
            metadata=boss.md(),  # another author: flagged
        )
    stack.memory.AppendHistory(
        g.AppendHistoryRequest(
            turns=[g.HistoryTurn(chat_id="c", role="user", text=f"forged history turn {i}") for i in range(2)]
        ),
        metadata=alice.md(),
    )
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    later = (
        lambda tok, **kw: stack.memory.ListMemories(
            g.ListMemoriesRequest(page_size=1, superseded=m.SUPERSEDED_FILTER_ALL, page_token=tok, **kw),
            metadata=alice.md(),
        ),
        lambda tok: proposals(alice, page_size=1, page_token=tok),
        lambda tok: flags(alice, page_size=1, page_token=tok),
        lambda tok: stack.memory.SearchHistory(
            g.SearchHistoryRequest(query="forged history", page_size=1, page_token=tok), metadata=alice.md()
        ),
        lambda tok: stack.memory.SearchHistory(
            g.SearchHistoryRequest(page_size=1, page_token=tok), metadata=alice.md()
        ),
    )
    times = ["2026-03-02T08:00:00", "10000-01-01T00:00:00+00:00", 10**400, True, None, ["x"]]
    numbers = [10**400, float("nan"), float("inf"), -float("inf"), True, "0.9", None]
    ids = [True, 5, "not-a-uuid", None, ["x"]]
    bad = {
        0: [[t, a] for t in times] + [["2026-03-02T08:00:00+00:00", i] for i in ids],
        1: [[c, a, b] for c in numbers] + [[0.9, i, b] for i in ids] + [[0.9, a, i] for i in ids] + [[0.9, a]],
        2: [[t, a] for t in times] + [["2026-03-02T08:00:00+00:00", i] for i in ids],
        3: [[c, a] for c in numbers] + [[0.5, i] for i in ids],
        4: [[t, 1] for t in times] + [["2026-03-02T08:00:00+00:00", n] for n in (True, 10**400, 1.5, "1", None)],
    }
    for n, call in enumerate(later):
        token = call("").next_page_token
        assert token, n
        assert call(_reforged(token, json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))["k"]))
        for position in bad[n]:
            code, text = error_of(call, _reforged(token, position))
            assert code == INVALID and "page_token" in text, (n, position, code, text)


def test_an_undo_copies_the_older_title_even_an_empty_one(stack):
    """A Supersede without a title keeps the target's; an undo is not that: it restores the older
    memory's text whole, so an older without a title gives a restored memory without one."""
    ws = stack.workspace("undo empty title")
    alice, boss = stack.member(ws), stack.member(ws, role=m.ROLE_ADMIN)
    old = alice.remember("the pond is drained in autumn", confidence=0.9)
    new = stack.memory.Supersede(
        g.SupersedeRequest(id=old.id, expected_revision=1, title="Pond", body="the pond is drained in spring"),
        metadata=boss.md(),
    ).memory
    flag = next(f for f in flags(alice).flags if f.older.id == old.id)
    restored = resolve(boss, flag.id, m.CONFLICT_RESOLUTION_UNDO, expected_revision=1).restored
    assert (new.title, restored.title, restored.body) == ("Pond", "", old.body)


def test_an_undo_never_gives_the_older_text_more_readers_and_forget_reaches_it(stack):
    """The restored memory carries the older's text, so it is as private as the older and goes with
    it: member-only when the older is (the caller's own: nobody else reads a member-only memory),
    linked derived_from the older, so it is readable only with it and a Forget of the older, or of
    anything the older derives from, forgets it too. Found here: a member-only older restored as a
    workspace memory any member read, and a restored copy that outlived a forgotten source."""
    ws = stack.workspace("undo audience")
    # An admin, so she may change bob's memory that replaces hers (a flag needs two authors).
    alice, bob = stack.member(ws, role=m.ROLE_ADMIN), stack.member(ws)
    private = alice.remember("alice private: the safe code is 1234", audience=m.AUDIENCE_MEMBER, confidence=0.9)
    public = bob.remember("the safe code is 9999", confidence=0.9)
    flag_id = decide(alice, private.id, public.id, SUPERSEDE, keep_id=public.id, expected_revision=1).conflict_flag_id
    assert flag_id
    restored = resolve(alice, flag_id, m.CONFLICT_RESOLUTION_UNDO, expected_revision=1).restored
    assert restored.body == private.body and restored.audience == m.AUDIENCE_MEMBER
    assert [
        (x.type, x.target_memory_id) for x in alice.read(restored.id).links if x.type == m.LINK_TYPE_DERIVED_FROM
    ] == [(m.LINK_TYPE_DERIVED_FROM, private.id)]
    assert error_of(bob.read, restored.id) == (NOT_FOUND, "memory not found")
    listed = stack.memory.ListMemories(g.ListMemoriesRequest(), metadata=bob.md())
    assert restored.id not in {x.id for x in listed.memories} and listed.total_size == 0  # public is superseded
    assert all(h.memory.id != restored.id for h in bob.recall("safe code", mode=m.RECALL_MODE_LEXICAL).items)
    # Forgetting the older forgets its restored copy.
    gone = stack.memory.Forget(g.ForgetRequest(id=private.id, reason="private"), metadata=alice.md())
    assert restored.id in gone.forgotten_ids and error_of(alice.read, restored.id)[0] == NOT_FOUND
    # An older derived from a source, superseded by an unrelated memory, then undone: forgetting
    # the source reaches the restored copy through the older.
    source = alice.remember("the vault is in Porto", confidence=0.9)
    older = stack.memory.Derive(
        g.DeriveRequest(source_ids=[source.id], body="the vault is in Porto, says the source", confidence=0.9),
        metadata=alice.md(),
    ).memory
    newer = bob.remember("the vault is in Lisbon", confidence=0.9)
    flag_id = decide(alice, older.id, newer.id, SUPERSEDE, keep_id=newer.id, expected_revision=1).conflict_flag_id
    restored = resolve(alice, flag_id, m.CONFLICT_RESOLUTION_UNDO, expected_revision=1).restored
    assert restored.audience == m.AUDIENCE_WORKSPACE and alice.read(restored.id).body == older.body
    assert bob.read(restored.id).body == older.body  # the older was a workspace memory: as many readers
    gone = stack.memory.Forget(g.ForgetRequest(id=source.id, reason="wrong"), metadata=alice.md())
    assert {older.id, restored.id} <= set(gone.forgotten_ids)
    assert error_of(alice.read, restored.id)[0] == NOT_FOUND and alice.read(newer.id).body == newer.body


def test_an_undo_waits_for_a_forget_of_the_older_in_progress(stack):
    """An undo reads the older's text under a lock: while a Forget of the older holds it (as
    lifecycle.forget does, FOR NO KEY UPDATE), the undo waits, then finds the flag gone (its older
    forgotten) and restores nothing. Found here: the undo read the text without a lock and wrote a
    copy of a memory being forgotten."""
    ws = stack.workspace("undo race")
    alice, boss = stack.member(ws), stack.member(ws, role=m.ROLE_ADMIN)
    older = alice.remember("the race text", confidence=0.9)
    stack.memory.Supersede(
        g.SupersedeRequest(id=older.id, expected_revision=1, body="not the race text", confidence=0.9),
        metadata=boss.md(),
    )
    flag = flags(alice).flags[0]
    out = {}
    with stack.db(ws) as forgetting, stack.db(ws) as watch:
        forgetting.autocommit = False
        forgetting.execute("SELECT 1 FROM memory WHERE id = %s FOR NO KEY UPDATE", (older.id,))
        worker = threading.Thread(
            target=lambda: out.update(
                result=error_of(resolve, boss, flag.id, m.CONFLICT_RESOLUTION_UNDO, expected_revision=1)
            )
        )
        worker.start()
        wait_for_a_lock_wait(watch, worker.is_alive)
        assert worker.is_alive(), f"the undo did not wait for the older's lock: {out}"
        forgetting.execute(  # what Forget commits: the text erased, a tombstone
            "UPDATE memory SET title = '', body = '', forgotten_at = now(), invalidation_reason = 'test' WHERE id = %s",
            (older.id,),
        )
        forgetting.commit()
        worker.join(60)
    assert out["result"] == (NOT_FOUND, "conflict flag not found")
    with stack.db(ws) as conn:
        assert conn.execute("SELECT count(*) FROM memory WHERE body = 'the race text'").fetchone()[0] == 0
        assert conn.execute("SELECT state FROM conflict_flag WHERE id = %s", (flag.id,)).fetchone()[0] == "open"
