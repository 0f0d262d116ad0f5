"""The dense arm is told what the keyword arm carried (``held_memory_ids``) and which of its rows came
without a memory (``wanted_memory_ids``), so a memory both arms found deep in their answers reaches
the fused head without a GetMemories call after fusion (issue 28, item 1: fewer sequential hops,
fewer copies of carried memories)."""

from __future__ import annotations

import grpc
import pytest
from recall_calls import internal_calls, store_callers
from recallatron.embed.v1 import embed_pb2, embed_pb2_grpc
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

from servicekit import clients
from servicekit.limits import MAX_CANDIDATE_LIMIT

CONV = m.PURPOSE_CONVERSATION
QUERY = "winter ferry timetable"
# Found by both arms, below each arm's first row: the fused head (top 1) in hybrid mode. Cosines
# to the question (all-MiniLM-L6-v2): 0.73 here; the keyword row 0.58, so the meaning arm ranks it
# below the three rows with none of the question's words (0.87, 0.79, 0.70).
BOTH = "The winter ferry timetable is posted at the harbour office, beside the lost property box and the tide charts."
# The keyword arm's first row (every term, shorter than BOTH), far in meaning.
KEYWORDS = "Ferry, winter, timetable, cat, dog, bread, eggs, milk."
# The meaning arm's rows: none of the question's words (nor their stems).
MEANING = ("Wintertime ferryboat schedules", "Wintertime ferryboat timings", "Wintertime boat schedules")


@pytest.fixture(scope="module")
def world(stack):
    ws = stack.workspace("carry between arms")
    alice, bob = stack.member(ws), stack.member(ws)
    made = {
        "both": alice.remember(BOTH),
        "keywords": alice.remember(KEYWORDS),
        **{f"meaning{i}": alice.remember(text) for i, text in enumerate(MEANING)},
    }
    for i in range(40):  # so that no question term is in 15% of the rows
        alice.remember(f"Dock note {i}: the {('gull', 'crane', 'bell', 'tide', 'crate')[i % 5]} log was checked.")
    made["private"] = alice.remember("The winter ferry timetable draft is in my drawer.", audience=m.AUDIENCE_MEMBER)
    stack.wait_backlog_empty()
    channel, store, callers = store_callers(stack, alice=alice, bob=bob)
    embed = embed_pb2_grpc.EmbedServiceStub(clients.channel(stack.embed_bind))
    emb = embed.EmbedQueries(embed_pb2.EmbedQueriesRequest(queries=[QUERY]))
    yield {
        "alice": alice,
        "bob": bob,
        "store": store,
        "emb": emb,
        "callers": callers,
        **{k: v.id for k, v in made.items()},
    }
    channel.close()


def lexical(world, who="alice", **kw) -> list[s.Candidate]:
    req = s.LexicalCandidatesRequest(caller=world["callers"][who], purpose=CONV, query=QUERY, limit=100, **kw)
    return list(world["store"].LexicalCandidates(req).candidates)


def dense_rows(store, caller, emb, **kw) -> list[s.Candidate]:
    """DenseCandidates of the question ``emb`` embeds, for ``caller`` (floor 0.3, limit 100 unless
    ``kw`` says otherwise)."""
    req = s.DenseCandidatesRequest(
        caller=caller,
        purpose=CONV,
        vector=emb.vectors[0].values,
        input_version=emb.input_version,
        **{"floor": 0.3, "limit": 100, **kw},
    )
    return list(store.DenseCandidates(req).candidates)


def dense(world, who="alice", **kw) -> list[s.Candidate]:
    return dense_rows(world["store"], world["callers"][who], world["emb"], **kw)


def carried(rows) -> list[str]:
    return [c.memory_id for c in rows if c.HasField("memory")]


def test_the_world_needs_what_it_tests(world):
    """The head row is below the first row of each arm: carried by neither with memories_top=1."""
    lex, den = lexical(world, "bob", memories_top=1), dense(world, "bob", memories_top=1)
    assert carried(lex) == [world["keywords"]] and carried(den) == [world["meaning0"]]
    lex_ids, den_ids = [c.memory_id for c in lex], [c.memory_id for c in den]
    assert world["both"] in lex_ids[1:] and world["both"] in den_ids[1:]


def test_wanted_rows_carry_their_memory_past_memories_top(world):
    hostile = ["not-an-id", "", "\x00", "x" * 10_000, world["both"].upper()]
    rows = dense(world, memories_top=1, wanted_memory_ids=[world["both"], *hostile, world["keywords"]])
    assert carried(rows) == [world["meaning0"], world["both"], world["keywords"]]
    by_id = {c.memory_id: c for c in rows}
    assert by_id[world["both"]].memory.body == BOTH
    # An id wanted that is no row of this answer adds nothing: bob's rows never hold alice's own.
    rows = dense(world, "bob", memories_top=0, wanted_memory_ids=[world["private"], world["both"]])
    assert world["private"] not in {c.memory_id for c in rows}
    assert carried(rows) == [world["both"]]
    rows = lexical(world, "bob", memories_top=0, wanted_memory_ids=[world["private"]])
    assert world["private"] not in {c.memory_id for c in rows} and carried(rows) == []


def test_held_rows_carry_nothing_and_still_count(world):
    plain = dense(world, memories_top=2)
    first, second = carried(plain)
    rows = dense(world, memories_top=2, held_memory_ids=[first])
    assert carried(rows) == [second]
    # The row is still there, with its verdict and score; only its memory is left out.
    assert [(c.memory_id, c.score, c.chain_readable) for c in rows] == [
        (c.memory_id, c.score, c.chain_readable) for c in plain
    ]
    rows = lexical(
        world, "bob", memories_top=1, held_memory_ids=[world["keywords"]], wanted_memory_ids=[world["keywords"]]
    )
    assert carried(rows) == []


@pytest.mark.parametrize("field", ["held_memory_ids", "wanted_memory_ids"])
def test_too_many_ids_is_invalid_argument(world, field):
    ids = [f"{i:08d}-0000-4000-8000-000000000000" for i in range(MAX_CANDIDATE_LIMIT + 1)]
    for call in (lexical, dense):
        with pytest.raises(grpc.RpcError) as err:
            call(world, memories_top=1, **{field: ids})
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field in err.value.details()
    # As many ids as allowed, none a row here: the answer is the one without them.
    plain = dense(world, memories_top=1)
    assert carried(plain) == [world["meaning0"]]
    assert dense(world, memories_top=1, **{field: ids[:MAX_CANDIDATE_LIMIT]}) == plain


def test_a_hybrid_recall_of_a_row_deep_in_both_arms_makes_no_getmemories_call(world):
    resp = None
    # The token accepted once: its recalls then authenticate in their keyword call (test_recall_fold.py).
    world["bob"].recall("warm-up")

    def run():
        nonlocal resp
        resp = world["bob"].recall(QUERY, mode=m.RECALL_MODE_HYBRID, top_k=1, skip_rerank=True)

    calls = internal_calls(run)
    assert calls == {
        "LexicalCandidates": 1,
        "EmbedQueries": 1,
        "DenseCandidates": 1,
        "FuseAndWalk": 1,
    }
    (item,) = resp.items
    assert item.memory.id == world["both"] and item.memory == world["bob"].read(world["both"])


def test_a_recall_with_time_words_asks_each_arm_twice_and_answers_in_full(world):
    """Time words ask each arm twice (the words' window first); the dense calls are told about the
    keyword rows the recall uses, never more than its limit."""
    resp = None

    def run():
        nonlocal resp
        resp = world["bob"].recall(QUERY + " last month", mode=m.RECALL_MODE_HYBRID, top_k=3, skip_rerank=True)

    calls = internal_calls(run)
    assert calls["LexicalCandidates"] == 2 and calls["DenseCandidates"] == 2
    assert resp.time_window.applied and len(resp.items) == 3
    for item in resp.items:
        assert item.memory == world["bob"].read(item.memory.id)


def test_the_ids_sent_are_those_of_the_rows_the_recall_uses():
    """Two keyword answers of 1,000 rows each (a question with time words, the candidate limit at
    its most) make at most 1,000 ids: the store's bound."""
    from gateway.recall import _carried, _said_first

    def rows(prefix: str) -> list[s.Candidate]:
        return [
            s.Candidate(
                memory_id=f"{prefix}{i:04d}",
                chain_readable=i % 7 != 0,
                memory=m.Memory(id=f"{prefix}{i:04d}") if i < 10 else None,
            )
            for i in range(MAX_CANDIDATE_LIMIT)
        ]

    used = _said_first([rows("plain-"), rows("first-")], MAX_CANDIDATE_LIMIT)
    sent = _carried(used)
    assert len(sent["held_memory_ids"]) + len(sent["wanted_memory_ids"]) <= MAX_CANDIDATE_LIMIT
    assert sent["held_memory_ids"] == sorted(f"first-{i:04d}" for i in range(10))
    assert set(sent["wanted_memory_ids"]) == {c.memory_id for c in used if c.chain_readable} - set(
        sent["held_memory_ids"]
    )


def test_an_answer_carries_at_most_max_top_k_wanted_memories_past_its_head():
    """However many ids a request wants, an answer carries at most MAX_WANTED_CARRIED memories past
    memories_top, the first in its order (a review made a hybrid recall's dense answer pass the
    internal message limit with 1,000 wanted memories of 69 KB each)."""
    import uuid

    from store_service.search.answers import MAX_WANTED_CARRIED, _Carry, _to_carry

    shown = [uuid.UUID(int=i + 1) for i in range(600)]
    everything = frozenset(str(mid) for mid in shown)
    carried = _to_carry(shown, 10, _Carry(held=frozenset(), wanted=everything))
    assert MAX_WANTED_CARRIED == 200 and carried == shown[: 10 + MAX_WANTED_CARRIED]
    # Held rows carry nothing and still count, in the head and among the wanted; wanted ones are
    # taken in order.
    held = frozenset({str(shown[0]), str(shown[15])})
    wanted = frozenset(str(mid) for mid in shown[300:])
    carried = _to_carry(shown, 10, _Carry(held=held, wanted=wanted | held))
    assert carried == shown[1:10] + shown[300 : 300 + MAX_WANTED_CARRIED - 1]
    assert _to_carry(shown, 0, _Carry(held=frozenset(), wanted=frozenset())) == []


def test_a_recall_of_a_thousand_candidates_carries_a_bounded_number_of_memories(stack, tmp_path):
    """The review's input, smaller: a gateway asking for 1,000 candidates per arm, a question every
    memory matches, no dense floor. The dense answer is asked to carry every keyword row without a
    memory (290 here) and carries 200 past its head; the recall answers in every mode."""
    from recallatron.gateway.v1 import gateway_pb2 as g
    from recallatron.gateway.v1 import gateway_pb2_grpc

    from gateway.recall import RecallConfig

    ws = stack.workspace("carry bound")
    alice = stack.member(ws)
    stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, dense_floor=0.0), metadata=stack.op()
    )
    for k in range(0, 300, 100):
        batch = [
            g.RememberRequest(purpose=CONV, kind=m.KIND_NOTE, audience=m.AUDIENCE_WORKSPACE, body=f"Harbour log {i}.")
            for i in range(k, k + 100)
        ]
        stack.memory.RememberBatch(g.RememberBatchRequest(requests=batch), metadata=alice.md(), timeout=120)
    stack.wait_backlog_empty()
    channel, store, callers = store_callers(stack, alice=alice)
    embed = embed_pb2_grpc.EmbedServiceStub(clients.channel(stack.embed_bind))
    emb = embed.EmbedQueries(embed_pb2.EmbedQueriesRequest(queries=["harbour log"]))
    try:
        lex = store.LexicalCandidates(
            s.LexicalCandidatesRequest(
                caller=callers["alice"], purpose=CONV, query="harbour log", limit=1000, memories_top=10
            )
        ).candidates
        held = [c.memory_id for c in lex if c.HasField("memory")]
        wanted = [c.memory_id for c in lex if not c.HasField("memory")]
        assert len(lex) == 300 and len(held) == 10 and len(wanted) == 290
        rows = dense_rows(
            store,
            callers["alice"],
            emb,
            floor=0.0,
            limit=1000,
            memories_top=10,
            held_memory_ids=held,
            wanted_memory_ids=wanted,
        )
        readable = [c.memory_id for c in rows if c.chain_readable]
        expected = readable[:10] + [mid for mid in readable[10:] if mid in set(wanted)][:200]
        assert carried(rows) == [mid for mid in expected if mid not in set(held)]
    finally:
        channel.close()
    gw = stack.extra_gateway(int(stack.embed_bind.rsplit(":", 1)[1]), tmp_path, RecallConfig(candidate_limit=1000))
    ch = clients.channel(f"127.0.0.1:{gw.port}")
    try:
        stub = gateway_pb2_grpc.MemoryServiceStub(ch)
        for mode in (m.RECALL_MODE_LEXICAL, m.RECALL_MODE_DENSE, m.RECALL_MODE_HYBRID):
            resp = stub.Recall(
                g.RecallRequest(query="harbour log", purpose=CONV, mode=mode, top_k=10, skip_rerank=True),
                metadata=alice.md(),
            )
            assert len(resp.items) == 10 and all(item.memory.body.startswith("Harbour log") for item in resp.items)
    finally:
        ch.close()
        gw.stop()
