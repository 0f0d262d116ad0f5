"""The keyword arm's early-stopping top k equals full BM25 scoring, on real PostgreSQL.

Memories are written through the gateway (so the maintained index is what the product wrote);
the reference here scores every readable row from the stored text with its own BM25 code, and the
store's ``candidates.lexical`` must return the same ids in the same order, with the same scores.
Both paths are checked: the threshold reading (with a tiny first chunk, so that it stops early
after several rounds) and the single statement that scores every posting.
"""

from __future__ import annotations

import math
import random
import uuid

import pytest
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from store_service import analysis, candidates

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
    kept = candidates.kept_terms(terms, df, n)
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
    return sorted(scores.items(), key=lambda r: (-round(r[1], candidates.TIE_DIGITS), r[0]))[:limit]


@pytest.fixture(params=["threshold", "score-all"])
def early_stops(request, monkeypatch):
    """Either path of the store: the threshold reading (forced, with a tiny first chunk) or one
    statement scoring every posting; and a count of the searches that stopped early."""
    monkeypatch.setattr(candidates, "FIRST_CHUNK", 2)
    monkeypatch.setattr(candidates, "EXHAUSTIVE_MAX_POSTINGS", 0 if request.param == "threshold" else 10**9)
    stops = []
    complete = candidates._complete
    monkeypatch.setattr(candidates, "_complete", lambda *a: (stops.append(1), complete(*a)))
    return stops


def test_early_stopping_equals_full_scoring(stack, early_stops):
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
    caller = m.Caller(workspace_id=ws, member_id=alice.id, role=m.ROLE_MEMBER,
                      granted_purposes=[m.PURPOSE_CONVERSATION])
    compared = 0
    with stack.db(ws) as conn:
        readable = conn.execute(
            """SELECT id, title, body FROM memory WHERE forgotten_at IS NULL AND superseded_by_id IS NULL
                  AND purpose = 'conversation' AND (audience_member_id IS NULL OR audience_member_id = %s)""",
            (uuid.UUID(alice.id),)).fetchall()
        assert len(readable) > 150
        for q in range(60):
            query = " ".join(rng.sample(WORDS, rng.randint(1, 5)))
            for limit in (1, 5, 30):
                got = candidates.lexical(conn, caller, "conversation", query, limit, False)
                want = _reference(readable, analysis.query_terms(query), limit)
                assert [g[0] for g in got] == [w[0] for w in want], (query, limit)
                assert all(abs(g[1] - w[1]) < 1e-9 for g, w in zip(got, want))
                compared += bool(want)
    assert compared > 100  # most queries match something: the comparison is not vacuous
    if candidates.EXHAUSTIVE_MAX_POSTINGS == 0:
        assert len(early_stops) > 20  # and many of them stopped early
