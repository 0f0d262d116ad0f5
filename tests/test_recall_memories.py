"""The candidate calls carry the memories of their first readable rows (``memories_top``), so a
recall answers from them and calls GetMemories only for a head row no arm carried (issue 7, item 5:
"readability verdicts and the memories fetched in one store call")."""

from __future__ import annotations

import grpc
import pytest
from recall_calls import internal_calls, store_callers
from recallatron.embed.v1 import embed_pb2, embed_pb2_grpc
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

from servicekit import clients
from servicekit.limits import MAX_TOP_K

CONV = m.PURPOSE_CONVERSATION
# A long memory holding the identifier, and a short one holding only its parts: BM25's length
# normalisation ranks the short one first; identifier precedence puts the long one first in fusion.
LONG = (
    "ABC-123 was filed while the harbour crew painted the long northern pier, repaired the cranes, "
    "restocked the chandlery, logged the tides, moved the lobster pots and swept the fish market"
)
SHORT = "Ticket ABC 123"


@pytest.fixture(scope="module")
def world(stack):
    ws = stack.workspace("carried memories")
    alice, bob = stack.member(ws), stack.member(ws)
    long_ = alice.remember(LONG)
    short = alice.remember(SHORT)
    # Filler, so that no term of the questions is in 15% of the rows (the keyword arm would drop it).
    for i in range(40):
        alice.remember(f"Dock note {i}: the {('gull', 'ferry', 'bell', 'tide', 'crate')[i % 5]} log was checked.")
    private = alice.remember("The harbour ticket office code is kept in my drawer.", audience=m.AUDIENCE_MEMBER)
    # A workspace memory derived from alice's own one: a state the write rules refuse (derive and
    # imports keep a derivation within its sources' audience), made here in SQL so that a row bob may
    # read has a chain he may not, as the walk must still catch (say, after a change of those rules).
    derived = alice.remember("The harbour ticket office has a code.")
    with stack.db(ws) as conn:
        conn.execute(
            "INSERT INTO memory_link (memory_id, link_type, target_memory_id) VALUES (%s, 'derived_from', %s)",
            (derived.id, private.id),
        )
    stack.wait_backlog_empty()
    channel, store, callers = store_callers(stack, alice=alice, bob=bob)
    yield {
        "alice": alice,
        "bob": bob,
        "long": long_,
        "short": short,
        "private": private,
        "derived": derived,
        "store": store,
        "callers": callers,
    }
    channel.close()


def lexical(world, who: str, query: str, top: int, limit: int = 100) -> list[s.Candidate]:
    req = s.LexicalCandidatesRequest(
        caller=world["callers"][who], purpose=CONV, query=query, limit=limit, memories_top=top
    )
    return list(world["store"].LexicalCandidates(req).candidates)


def test_the_first_readable_rows_carry_their_memory_and_no_other(world):
    rows = lexical(world, "alice", "ticket ABC-123", 1)
    assert [c.memory_id for c in rows[:2]] == [world["short"].id, world["long"].id]
    assert rows[0].memory.body == SHORT and rows[0].memory.revision == 1 and rows[0].memory.created_by
    assert [c.HasField("memory") for c in rows] == [True] + [False] * (len(rows) - 1)
    # Asked for none (the field's default): no row carries one.
    assert not any(c.HasField("memory") for c in lexical(world, "alice", "ticket ABC-123", 0))
    # More than there are rows: every row does, as GetMemories would give it.
    rows = lexical(world, "alice", "harbour", MAX_TOP_K)
    assert rows and all(c.HasField("memory") and c.memory.id == c.memory_id for c in rows)
    got = world["store"].GetMemories(
        s.GetMemoriesRequest(caller=world["callers"]["alice"], memory_ids=[c.memory_id for c in rows])
    )
    assert [c.memory for c in rows] == list(got.memories)


def test_a_row_whose_chain_is_not_readable_carries_nothing_and_does_not_count(world):
    """The derived memory is a row for bob (its own audience is the workspace) but its source is
    alice's own: not readable, no memory, and the memories go on to the next readable rows."""
    rows = lexical(world, "bob", "harbour ticket office", 2)
    by_id = {c.memory_id: c for c in rows}
    assert world["private"].id not in by_id
    derived = by_id[world["derived"].id]
    assert not derived.chain_readable and not derived.HasField("memory")
    carried = [c.memory_id for c in rows if c.HasField("memory")]
    assert carried == [c.memory_id for c in rows if c.chain_readable][:2] and len(carried) == 2
    # Alice may read the chain: her derived memory carries itself and its link to the source.
    rows = {c.memory_id: c for c in lexical(world, "alice", "harbour ticket office", MAX_TOP_K)}
    mem = rows[world["derived"].id].memory
    assert [link.target_memory_id for link in mem.links if link.type == m.LINK_TYPE_DERIVED_FROM] == [
        world["private"].id
    ]


def test_the_dense_arm_carries_them_too(stack, world):
    embed = embed_pb2_grpc.EmbedServiceStub(clients.channel(stack.embed_bind))
    emb = embed.EmbedQueries(embed_pb2.EmbedQueriesRequest(queries=["harbour ticket office code"]))
    resp = world["store"].DenseCandidates(
        s.DenseCandidatesRequest(
            caller=world["callers"]["bob"],
            purpose=CONV,
            vector=emb.vectors[0].values,
            input_version=emb.input_version,
            floor=0.0,
            limit=100,
            memories_top=3,
        )
    )
    rows = list(resp.candidates)
    assert world["derived"].id in {c.memory_id for c in rows}
    carried = [c.memory_id for c in rows if c.HasField("memory")]
    assert carried == [c.memory_id for c in rows if c.chain_readable][:3] and len(carried) == 3
    assert all(c.memory.id == c.memory_id for c in rows if c.HasField("memory"))


@pytest.mark.parametrize("bad", [-1, MAX_TOP_K + 1, 2**31 - 1])
def test_memories_top_out_of_range_is_invalid_argument(world, stack, bad):
    with pytest.raises(grpc.RpcError) as err:
        lexical(world, "alice", "harbour", bad)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "memories_top" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        world["store"].DenseCandidates(
            s.DenseCandidatesRequest(
                caller=world["callers"]["alice"],
                purpose=CONV,
                vector=[1.0] + [0.0] * 383,
                input_version="x",
                floor=0.3,
                limit=10,
                memories_top=bad,
            )
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "memories_top" in err.value.details()


def test_recall_answers_from_the_carried_memories(world):
    alice = world["alice"]
    # top 2: both rows the answer needs were carried by the keyword arm; no GetMemories.
    resp = None
    # The token accepted once: its recalls then authenticate in their keyword call (test_recall_fold.py).
    alice.recall("warm-up")

    def run():
        nonlocal resp
        resp = alice.recall("ticket ABC-123", mode=m.RECALL_MODE_LEXICAL, top_k=2, skip_rerank=True)

    calls = internal_calls(run)
    assert calls == {"LexicalCandidates": 1, "FuseAndWalk": 1}
    assert [it.memory.id for it in resp.items] == [world["long"].id, world["short"].id]
    assert [it.memory.body for it in resp.items] == [LONG, SHORT]


def test_a_head_row_no_arm_carried_is_fetched(world):
    """top 1: the keyword arm carries its first row (the short memory), but identifier precedence
    puts the long one first: it is fetched with GetMemories, and answered in full."""
    resp = None
    # The token accepted once: its recalls then authenticate in their keyword call (test_recall_fold.py).
    world["alice"].recall("warm-up")

    def run():
        nonlocal resp
        resp = world["alice"].recall("ticket ABC-123", mode=m.RECALL_MODE_LEXICAL, top_k=1, skip_rerank=True)

    calls = internal_calls(run)
    assert calls == {"LexicalCandidates": 1, "FuseAndWalk": 1, "GetMemories": 1}
    (item,) = resp.items
    assert item.memory.id == world["long"].id and item.memory.body == LONG and item.identifier_matches == 1
    assert item.memory == world["alice"].read(world["long"].id)
