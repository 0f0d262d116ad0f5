"""The keyword arm's top k over the maintained index equals full BM25 scoring, on real PostgreSQL.

Memories are written through the gateway (so the maintained index is what the product wrote);
the reference here scores every readable row from the stored text with its own BM25 code, and the
store's ``candidates.lexical`` must return the same ids in the same order, with the same scores.
"""

from __future__ import annotations

import math
import random
import uuid

import pytest
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from store_service.search import analysis, bm25, candidates, lexical_index

WORDS = [f"w{i}" for i in range(40)]


def _text(rng: random.Random) -> str:
    # Zipf-like: low-numbered words are common, high-numbered ones rare; some words repeat.
    return " ".join(rng.choice(WORDS[: rng.choice((3, 10, 40))]) for _ in range(rng.randint(1, 12)))


def _reference(rows, terms, limit):
    """Full BM25 (k1 1.2, b 0.75, Lucene idf, distinct-lexeme length), 15% rule with the rarest kept."""
    docs = {mid: analysis.document_terms(title, body) for mid, title, body in rows}
    n = len(docs)
    if not n or not terms:
        return []
    df = {t: sum(1 for d in docs.values() if t in d) for t in terms}
    kept = bm25.kept_terms(terms, df, n)
    avg = max(sum(len(d) for d in docs.values()) / n, 1.0)
    scores = {}
    for mid, d in docs.items():
        s = 0.0
        for t in kept:
            if t in d:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * d[t] * 2.2 / (d[t] + 1.2 * (0.25 + 0.75 * len(d) / avg))
        if any(t in d for t in kept):
            scores[mid] = s
    return sorted(scores.items(), key=lambda r: (-bm25.tie_key(r[1]), r[0]))[:limit]


@pytest.mark.slow
def test_top_k_equals_full_scoring(stack):
    rng = random.Random(7)
    ws = stack.workspace("topk")
    alice, bob = stack.member(ws), stack.member(ws)
    mine = []
    for i in range(240):
        who = alice if i % 3 else bob
        audience = m.AUDIENCE_MEMBER if i % 5 == 0 else m.AUDIENCE_WORKSPACE
        mem = who.remember(_text(rng), title=_text(rng) if i % 4 == 0 else "", audience=audience)
        if who is alice:
            mine.append(mem)
    # Corrections, supersedes and forgets move rows between partitions and change the statistics.
    api, md = stack.memory, alice.md()
    for mem in mine[:8]:
        api.Correct(g.CorrectRequest(id=mem.id, expected_revision=1, body=_text(rng)), metadata=md)
    for mem in mine[8:16]:
        api.Supersede(g.SupersedeRequest(id=mem.id, expected_revision=1, body=_text(rng)), metadata=md)
    for mem in mine[16:24]:
        api.Forget(g.ForgetRequest(id=mem.id, reason="test"), metadata=md)
    caller = m.Caller(
        workspace_id=ws, member_id=alice.id, role=m.ROLE_MEMBER, granted_purposes=[m.PURPOSE_CONVERSATION]
    )
    compared = 0
    with stack.db(ws) as conn:
        readable = conn.execute(
            """SELECT id, title, body FROM memory WHERE forgotten_at IS NULL AND retired_at IS NULL
                  AND purpose = 'conversation' AND (audience_member_id IS NULL OR audience_member_id = %s)""",
            (uuid.UUID(alice.id),),
        ).fetchall()
        assert len(readable) > 150
        for _ in range(60):
            query = " ".join(rng.sample(WORDS, rng.randint(1, 5)))
            for limit in (1, 5, 30):
                got = candidates.lexical(conn, caller, "conversation", query, limit, False)
                want = _reference(readable, analysis.query_terms(query), limit)
                assert [g[0] for g in got] == [w[0] for w in want], (query, limit)
                assert all(abs(g[1] - w[1]) < 1e-9 for g, w in zip(got, want, strict=True))
                compared += bool(want)
    assert compared > 100  # most queries match something: the comparison is not vacuous


def test_many_ties_at_the_cut_off_go_by_id(stack):
    # Found in review (of an earlier, round-based reading): hundreds of memories with the same score
    # at the cut-off. Every limit must give the exact answer, ties by id.
    ws = stack.workspace("ties")
    alice = stack.member(ws)
    stack.memory.RememberBatch(
        g.RememberBatchRequest(
            requests=[
                g.RememberRequest(purpose=m.PURPOSE_CONVERSATION, body="the parrot", audience=m.AUDIENCE_WORKSPACE)
                for _ in range(300)
            ]
        ),
        metadata=alice.md(),
    )
    caller = m.Caller(workspace_id=ws, member_id=alice.id, granted_purposes=[m.PURPOSE_CONVERSATION])
    with stack.db(ws) as conn:
        rows = conn.execute("SELECT id, title, body FROM memory").fetchall()
        for limit in (1, 5, 100):
            got = candidates.lexical(conn, caller, "conversation", "parrot", limit, False)
            assert [r[0] for r in got] == [r[0] for r in _reference(rows, ["parrot"], limit)]
            assert got == sorted(got, key=lambda r: r[0])  # all tie: by id
            assert len(got) == limit


def test_entity_filtered_scoring_counts_only_what_the_caller_reads(stack):
    # The entity-filter path counts its statistics over the filtered readable rows: it must equal
    # full BM25 over exactly those rows, and another member's member-only rows about the same
    # entity must change nothing.
    rng = random.Random(11)
    ws = stack.workspace("topk-entity")
    alice, bob = stack.member(ws), stack.member(ws)
    about = [m.EntityMention(name="Jordan")]
    first = alice.remember(_text(rng), entities=about)
    entity = next(link.target_entity_id for link in alice.read(first.id).links if link.type == m.LINK_TYPE_ABOUT)
    mention = [m.EntityMention(entity_id=entity)]
    for i in range(40):
        alice.remember(_text(rng), entities=mention if i % 2 else [])
    caller = m.Caller(workspace_id=ws, member_id=alice.id, granted_purposes=[m.PURPOSE_CONVERSATION])
    with stack.db(ws) as conn:

        def scope():
            return conn.execute(
                """SELECT m.id, m.title, m.body FROM memory m JOIN memory_link l ON l.memory_id = m.id
                    WHERE l.link_type = 'about' AND l.target_entity_id = %s AND m.forgotten_at IS NULL
                      AND (m.audience_member_id IS NULL OR m.audience_member_id = %s)""",
                (uuid.UUID(entity), uuid.UUID(alice.id)),
            ).fetchall()

        queries = [" ".join(rng.sample(WORDS, rng.randint(1, 4))) for _ in range(30)]
        before = {
            q: candidates.lexical(conn, caller, "conversation", q, 10, False, [uuid.UUID(entity)]) for q in queries
        }
        rows = scope()
        assert len(rows) == 21
        for q in queries:
            want = _reference(rows, analysis.query_terms(q), 10)
            assert [r[0] for r in before[q]] == [w[0] for w in want], q
            assert all(abs(g_[1] - w[1]) < 1e-9 for g_, w in zip(before[q], want, strict=True))
        for _ in range(20):  # bob's member-only rows about Jordan: invisible to alice's scoring
            bob.remember(_text(rng), audience=m.AUDIENCE_MEMBER, entities=mention)
        assert scope() == rows
        for q in queries:
            assert candidates.lexical(conn, caller, "conversation", q, 10, False, [uuid.UUID(entity)]) == before[q]


def _readable(conn, member_id: str):
    return conn.execute(
        """SELECT id, title, body FROM memory WHERE forgotten_at IS NULL AND retired_at IS NULL
              AND purpose = 'conversation' AND (audience_member_id IS NULL OR audience_member_id = %s)""",
        (uuid.UUID(member_id),),
    ).fetchall()


def _assert_equals_reference(conn, caller, member_id: str, queries: list[str]) -> int:
    """Every query at limits 1, 7 and 100 equals full scoring; returns how many answered anything."""
    rows, answered = _readable(conn, member_id), 0
    for query in queries:
        for limit in (1, 7, 100):
            got = candidates.lexical(conn, caller, "conversation", query, limit, False)
            want = _reference(rows, analysis.query_terms(query), limit)
            assert [r[0] for r in got] == [w[0] for w in want], (query, limit)
            assert all(abs(a[1] - b[1]) < 1e-9 for a, b in zip(got, want, strict=True))
            answered += bool(want)
    return answered


def test_blocks_split_refill_and_empty_as_postings_come_and_go(stack):
    # One lexeme in 300 memories fills blocks of BLOCK_POSTINGS; forgetting most of them shrinks
    # and deletes blocks; new memories go into the blocks with room before new blocks are made.
    ws = stack.workspace("blocks")
    alice = stack.member(ws)
    api, md = stack.memory, alice.md()
    made = api.RememberBatch(
        g.RememberBatchRequest(
            requests=[
                g.RememberRequest(
                    purpose=m.PURPOSE_CONVERSATION,
                    body=f"the parrot w{i % 40}",
                    kind=m.KIND_NOTE,
                    audience=m.AUDIENCE_WORKSPACE,
                )
                for i in range(300)
            ]
        ),
        metadata=md,
    )
    ids = [r.memory.id for r in made.results if r.HasField("memory")]
    assert len(ids) == 300
    caller = m.Caller(workspace_id=ws, member_id=alice.id, granted_purposes=[m.PURPOSE_CONVERSATION])

    def parrot_blocks(conn):
        return sorted(n for (n,) in conn.execute("SELECT n FROM lexical_block WHERE lexeme = 'parrot'"))

    queries = ["parrot", "parrot w3", "w7 w8 parrot", "w39"]
    with stack.db(ws) as conn:
        assert parrot_blocks(conn) == [300 - 2 * lexical_index.BLOCK_POSTINGS] + [lexical_index.BLOCK_POSTINGS] * 2
        assert lexical_index.block_problems(conn) == []
        assert _assert_equals_reference(conn, caller, alice.id, queries) == 12
    for mid in ids[:250]:
        api.Forget(g.ForgetRequest(id=mid, reason="test"), metadata=md)
    with stack.db(ws) as conn:
        assert sum(parrot_blocks(conn)) == 50
        assert lexical_index.block_problems(conn) == []
        assert _assert_equals_reference(conn, caller, alice.id, queries) == 12
        blocks_before = len(parrot_blocks(conn))
    for i in range(20):
        alice.remember(f"a parrot again w{i}")
    with stack.db(ws) as conn:
        assert sum(parrot_blocks(conn)) == 70
        assert len(parrot_blocks(conn)) == blocks_before  # appended to blocks with room
        assert lexical_index.block_problems(conn) == []
        assert _assert_equals_reference(conn, caller, alice.id, queries) == 12
    for mid in ids[250:]:
        api.Forget(g.ForgetRequest(id=mid, reason="test"), metadata=md)
    with stack.db(ws) as conn:
        assert sum(parrot_blocks(conn)) == 20
        assert lexical_index.block_problems(conn) == []


def test_scores_are_exact_when_document_numbers_spread_far(stack):
    # Document numbers come from a sequence that years of churn can spread far apart; the sums then
    # go by rank instead of by offset (candidates._BlockScores). Both must give full BM25, and the
    # identifier counts must stay with their memories.
    rng = random.Random(5)
    ws = stack.workspace("spread")
    alice = stack.member(ws)
    for i in range(40):
        alice.remember(_text(rng) + (" ABC-123" if i % 6 == 0 else ""))
    with stack.db(ws) as conn:
        conn.execute("ALTER SEQUENCE lexical_doc_no RESTART WITH 4000000000000")
    for i in range(40):
        alice.remember(_text(rng) + (" ABC-123" if i % 5 == 0 else ""))
    caller = m.Caller(workspace_id=ws, member_id=alice.id, granted_purposes=[m.PURPOSE_CONVERSATION])
    with stack.db(ws) as conn:
        numbers = [n for (n,) in conn.execute("SELECT doc_no FROM lexical_document ORDER BY doc_no")]
        assert numbers[0] < 1000 and numbers[-1] >= 4_000_000_000_000
        assert lexical_index.block_problems(conn) == []
        queries = [" ".join(rng.sample(WORDS, rng.randint(1, 4))) for _ in range(25)] + ["abc-123 w1"]
        assert _assert_equals_reference(conn, caller, alice.id, queries) > 50
        holders = {
            mid for mid, title, body in _readable(conn, alice.id) if "abc-123" in analysis.document_terms(title, body)
        }
        rows = candidates.lexical_with_matches(conn, caller, "conversation", "abc-123 w1", 100, False, [])
        assert len(holders) == 15
        assert {mid for mid, _, identifiers, _ in rows if identifiers == 1} == holders
        assert all(identifiers in (0, 1) for _, _, identifiers, _ in rows)


def test_concurrent_writers_keep_blocks_exact(stack):
    # Four members write, correct, supersede and forget at once, all over the same few lexemes: no
    # call fails (no deadlock between block rows and the statistics lock) and the blocks, the
    # statistics and the ranking equal a recount afterwards.
    from concurrent.futures import ThreadPoolExecutor

    ws = stack.workspace("blocks-race")
    members = [stack.member(ws) for _ in range(4)]
    api = stack.memory

    def work(k: int) -> int:
        rng, me = random.Random(k), members[k]
        md, mine, done = me.md(), [], 0
        for _ in range(40):
            op = rng.random()
            if op < 0.5 or not mine:
                audience = m.AUDIENCE_MEMBER if rng.random() < 0.3 else m.AUDIENCE_WORKSPACE
                mine.append((me.remember(_text(rng), audience=audience).id, 1))
            elif op < 0.7:
                mid, rev = mine.pop(rng.randrange(len(mine)))
                api.Correct(g.CorrectRequest(id=mid, expected_revision=rev, body=_text(rng)), metadata=md)
                mine.append((mid, rev + 1))
            elif op < 0.85:
                mid, rev = mine.pop(rng.randrange(len(mine)))
                new = api.Supersede(g.SupersedeRequest(id=mid, expected_revision=rev, body=_text(rng)), metadata=md)
                mine.append((new.memory.id, 1))
            else:
                mid, _ = mine.pop(rng.randrange(len(mine)))
                api.Forget(g.ForgetRequest(id=mid, reason="test"), metadata=md)
            done += 1
        return done

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(work, range(4))) == [40] * 4
    rng = random.Random(9)
    with stack.db(ws) as conn:
        assert lexical_index.block_problems(conn) == []
        assert lexical_index.maintained(conn) == lexical_index.recount(conn)
        for member in members[:2]:
            caller = m.Caller(workspace_id=ws, member_id=member.id, granted_purposes=[m.PURPOSE_CONVERSATION])
            queries = [" ".join(rng.sample(WORDS, rng.randint(1, 4))) for _ in range(15)]
            assert _assert_equals_reference(conn, caller, member.id, queries) > 20
