"""Hostile review of the open-block pointer (lexical_df.open_block) and the sorted-slice appends."""

from __future__ import annotations

import math
import random
import uuid

import numpy as np
import pytest
from conftest import scratch_workspace_db
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from test_lexical_topk import WORDS, _readable, _reference, _text

from store_service.search import analysis, candidates, lexical_index

CONV = "conversation"
B = lexical_index.BLOCK_POSTINGS


def _caller(ws, member):
    return m.Caller(workspace_id=ws, member_id=member.id, granted_purposes=[m.PURPOSE_CONVERSATION])


def _batch(stack, member, bodies, audience=m.AUDIENCE_WORKSPACE):
    ids = []
    for i in range(0, len(bodies), 500):
        resp = stack.memory.RememberBatch(
            g.RememberBatchRequest(
                requests=[
                    g.RememberRequest(purpose=m.PURPOSE_CONVERSATION, body=b, kind=m.KIND_NOTE, audience=audience)
                    for b in bodies[i : i + 500]
                ]
            ),
            metadata=member.md(),
        )
        ids += [r.memory.id for r in resp.results]
    assert all(ids) and len(ids) == len(bodies)
    return ids


def _check(conn, ws, member, queries, history=False):
    assert lexical_index.block_problems(conn) == []
    assert lexical_index.maintained(conn) == lexical_index.recount(conn)
    if history:
        rows = conn.execute(
            """SELECT id, title, body FROM memory WHERE forgotten_at IS NULL AND purpose = 'conversation'
                  AND (audience_member_id IS NULL OR audience_member_id = %s)""",
            (uuid.UUID(member.id),),
        ).fetchall()
    else:
        rows = _readable(conn, member.id)
    for q in queries:
        for limit in (1, 9, 1000):
            got = candidates.lexical(conn, _caller(ws, member), CONV, q, limit, history)
            want = _reference(rows, analysis.query_terms(q), limit)
            assert [r[0] for r in got] == [w[0] for w in want], (q, limit, history)
            assert all(abs(a[1] - b[1]) < 1e-9 for a, b in zip(got, want, strict=True))


def _blocks(conn, lexeme, superseded=False):
    return [
        (bid, n)
        for bid, n in conn.execute(
            """SELECT b.id, b.n FROM lexical_block b JOIN lexical_partition p ON p.id = b.partition_id
                WHERE b.lexeme = %s AND p.superseded = %s ORDER BY b.id""",
            (lexeme, superseded),
        )
    ]


def _open(conn, lexeme, superseded=False):
    return conn.execute(
        """SELECT d.open_block FROM lexical_df d JOIN lexical_partition p ON p.id = d.partition_id
            WHERE d.lexeme = %s AND p.superseded = %s AND p.audience = %s""",
        (lexeme, superseded, lexical_index.WORKSPACE),
    ).fetchone()[0]


# --- finding: blocks with room other than the open one are never refilled ----------------------------


@pytest.mark.slow
def test_blocks_left_with_holes_are_refilled_before_new_blocks_are_made(stack):
    # docs/retrieval.md ("Packed posting blocks", Writes): "a new posting goes into a block of its
    # (lexeme, partition) with room ... then into new blocks". Since 03743eb an append only ever goes
    # to the open block (lexical_df.open_block, lexical_index.py:139/213): a block that stopped being
    # open and then lost postings to forget / supersede / correct keeps its holes forever, and when
    # the open block itself empties (deleted) a fresh block is made although others have room. There
    # is no merge either. A common churn (a batch of notes, all but one later forgotten or
    # superseded) leaves one row per batch holding a single posting: here 8 cycles leave 8 live
    # postings of 'parrot' in 8 block rows where one would do; the rows read per posting grow
    # without bound with more churn (up to 112x, the cost the blocks were built to cut).
    ws = stack.workspace("holes")
    alice = stack.member(ws)
    api, md = stack.memory, alice.md()
    for cycle in range(8):
        ids = _batch(stack, alice, [f"parrot c{cycle} w{i % 40}" for i in range(B)])
        for mid in ids[:-1]:
            api.Forget(g.ForgetRequest(id=mid, reason="churn"), metadata=md)
    with stack.db(ws) as conn:
        _check(conn, ws, alice, ["parrot", "parrot c3", "w39"])
        blocks = _blocks(conn, "parrot")
        live = sum(n for _, n in blocks)
        assert live == 8
        assert len(blocks) <= math.ceil(live / B) + 1, blocks


# --- the new pieces under odd inputs (passing; not covered elsewhere) --------------------------------


def test_open_block_full_deleted_and_many_new_blocks_in_one_call(stack):
    ws = stack.workspace("open-edges")
    alice = stack.member(ws)
    api, md = stack.memory, alice.md()
    queries = ["heron", "heron w1", "w3 w7 heron", "egret"]
    # Exactly one full block: the open block is full (n = 112).
    first = _batch(stack, alice, [f"heron w{i % 40}" for i in range(B)])
    with stack.db(ws) as conn:
        assert [n for _, n in _blocks(conn, "heron")] == [B]
        full = _open(conn, "heron")
        assert full == _blocks(conn, "heron")[0][0]
        _check(conn, ws, alice, queries)
    # One more posting: a new block, which becomes the open one.
    one = alice.remember("heron egret").id
    with stack.db(ws) as conn:
        assert [n for _, n in _blocks(conn, "heron")] == [B, 1]
        assert _open(conn, "heron") == _blocks(conn, "heron")[1][0]
        _check(conn, ws, alice, queries)
    # The open block deleted (its only posting forgotten), then appended again.
    api.Forget(g.ForgetRequest(id=one, reason="t"), metadata=md)
    with stack.db(ws) as conn:
        assert [n for _, n in _blocks(conn, "heron")] == [B]
        _check(conn, ws, alice, queries)
    # More than 2 x 112 postings of one key in one call, duplicate texts included, plus termless rows.
    bodies = ["heron egret"] * 150 + [f"heron w{i % 40}" for i in range(200)] + ["!!!", "the of"] * 3
    _batch(stack, alice, bodies)
    with stack.db(ws) as conn:
        ns = [n for _, n in _blocks(conn, "heron")]
        assert sum(ns) == B + 350
        assert all(n == B for n in ns[:-1])
        _check(conn, ws, alice, queries)
    # Forget everything in the first (full, not open) block but one.
    for mid in first[1:]:
        api.Forget(g.ForgetRequest(id=mid, reason="t"), metadata=md)
    with stack.db(ws) as conn:
        _check(conn, ws, alice, queries)


def test_supersede_into_twin_with_open_blocks_and_partial_corrections(stack):
    rng = random.Random(77)
    ws = stack.workspace("twin")
    alice = stack.member(ws)
    api, md = stack.memory, alice.md()
    ids = _batch(stack, alice, [f"kite {_text(rng)}" for _ in range(260)])
    revs = dict.fromkeys(ids, 1)
    # Supersede enough that the twin partition gets an open block, exactly full, then more.
    live = list(ids)
    for mid in ids[: B + 3]:
        new = api.Supersede(g.SupersedeRequest(id=mid, expected_revision=1, body=f"kite {_text(rng)}"), metadata=md)
        live.remove(mid)
        live.append(new.memory.id)
        revs[new.memory.id] = 1
        if mid == ids[B - 1]:
            with stack.db(ws) as conn:
                assert [n for _, n in _blocks(conn, "kite", True)] == [B]
                _check(conn, ws, alice, ["kite"], history=True)
    # Corrections that keep some lexemes (df delta 0) and drop others, on live rows (a superseded
    # row cannot be corrected).
    for mid in rng.sample(live, 40):
        body = "kite " + " ".join(rng.sample(WORDS[:5], 2))
        rev = revs[mid]
        api.Correct(g.CorrectRequest(id=mid, expected_revision=rev, body=body), metadata=md)
        revs[mid] = rev + 1
    with stack.db(ws) as conn:
        _check(conn, ws, alice, ["kite", "kite w1", "w0 w2", "w30 kite"], history=True)
        _check(conn, ws, alice, ["kite", "kite w1", "w0 w2", "w30 kite"], history=False)


def test_import_supersedes_hundreds_sharing_a_lexeme_in_one_call(stack):
    # mark_superseded(olds) with 240 olds sharing 'crane': 240 moved postings of one twin key in one
    # write (open block of the twin partially filled, then several new blocks), alongside 240 new
    # postings of the live key.
    rng = random.Random(8)
    ws = stack.workspace("import-twin")
    alice = stack.member(ws)

    def imported(key, body, **kw):
        return m.ImportedMemory(
            import_key=key,
            author_member_id=alice.id,
            body=body,
            purpose=m.PURPOSE_CONVERSATION,
            audience=m.AUDIENCE_WORKSPACE,
            **kw,
        )

    def imp(items):
        out = stack.admin.ImportMemories(g.ImportMemoriesRequest(workspace_id=ws, memories=items), metadata=stack.op())
        assert all(r.status == m.IMPORT_STATUS_CREATED for r in out.memories), out

    # A few superseded already, so the twin key has a partly filled open block.
    imp([imported(f"a{i}", f"crane {_text(rng)}") for i in range(250)])
    imp([imported(f"b{i}", f"crane again {_text(rng)}", supersedes_key=f"a{i}") for i in range(10)])
    with stack.db(ws) as conn:
        assert [n for _, n in _blocks(conn, "crane", True)] == [10]
    imp([imported(f"b{i}", f"crane later {_text(rng)}", supersedes_key=f"a{i}") for i in range(10, 250)])
    # And in one batch: 200 new rows and 200 rows superseding them.
    imp(
        [imported(f"c{i}", f"crane {_text(rng)}") for i in range(200)]
        + [imported(f"d{i}", f"crane {_text(rng)}", supersedes_key=f"c{i}") for i in range(200)]
    )
    with stack.db(ws) as conn:
        assert sum(n for _, n in _blocks(conn, "crane", True)) == 450
        _check(conn, ws, alice, ["crane", "crane w1", "later w2", "again"], history=True)
        _check(conn, ws, alice, ["crane", "crane w1", "later w2", "again"], history=False)


def test_full_block_of_a_long_lexeme_stays_in_its_heap_page(stack):
    # lexical_index.py:47-50: "112 x 16 bytes stay under PostgreSQL's 2 kB TOAST threshold with the
    # row's other columns, so a block is read from its heap page without a TOAST fetch". A lexeme may
    # be 200 characters (analysis.MAX_LEXEME_CHARS; up to 800 bytes: a CJK phrase without spaces is
    # one lexeme), and 24 + 8 + 204 + 4 + 4 + 1796 bytes is over the 2,032-byte threshold: the full
    # block's postings (STORAGE EXTERNAL) go to the TOAST table, read by a second index lookup.
    ws = stack.workspace("toast")
    alice = stack.member(ws)
    rng = random.Random(1)  # incompressible: pglz would shrink "qqq..." below the threshold
    token = "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(analysis.MAX_LEXEME_CHARS))
    assert list(analysis.document_terms("", token)) == [token]
    _batch(stack, alice, [f"{token} w{i % 40}" for i in range(B)])
    with stack.db(ws) as conn:
        _check(conn, ws, alice, [token, f"{token} w3"])
        # Found by a hostile review; now a long lexeme's blocks hold fewer postings (block_capacity).
        cap = lexical_index.block_capacity(token)
        assert cap == 111
        assert sorted(n for _, n in _blocks(conn, token)) == sorted([cap, B - cap])
        assert lexical_index.block_problems(conn) == []
        toast = conn.execute("SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = 'lexical_block'")
        toast_rows = conn.execute(f"SELECT count(*) FROM {toast.fetchone()[0]}").fetchone()[0]
        assert toast_rows == 0


def test_migration_batches_fill_open_blocks_across_the_2000_row_boundary(pg):
    # 2,240 rows sharing 'parrot' in one partition: the first reindex_all batch (2,000) leaves an
    # open block of 96, the second fills it to 112 and adds two full blocks; writes after the
    # migration go on from the pointer it left.
    import psycopg

    from store_service.database import migrate

    with scratch_workspace_db(pg, "0011_expiry") as url:
        alice, rng = uuid.uuid4(), random.Random(12)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                """INSERT INTO memory (id, kind, title, body, purpose, origin, created_by)
                   SELECT gen_random_uuid(), 'note', '', b, 'conversation', 'told', %s FROM unnest(%s::text[]) b""",
                (alice, ["parrot " + _text(rng) for _ in range(2240)]),
            )
        migrate(url, "workspace")
        with psycopg.connect(url) as conn:
            assert [n for _, n in _blocks(conn, "parrot")] == [B] * 20
            assert _open(conn, "parrot") == _blocks(conn, "parrot")[-1][0]
            new = [uuid.uuid4() for _ in range(3)]
            for mid in new:
                conn.execute(
                    """INSERT INTO memory (id, kind, title, body, purpose, origin, created_by)
                       VALUES (%s, 'note', '', 'parrot w1', 'conversation', 'told', %s)""",
                    (mid, alice),
                )
            lexical_index.add_memories(conn, [(mid, None, CONV, "", "parrot w1") for mid in new])
            conn.commit()
            assert [n for _, n in _blocks(conn, "parrot")] == [B] * 20 + [3]
            gone = [r[0] for r in conn.execute("SELECT id FROM memory ORDER BY id LIMIT 300")]
            conn.execute("UPDATE memory SET forgotten_at = now(), title = '', body = '' WHERE id = ANY(%s)", (gone,))
            lexical_index.remove_memories(conn, gone)
            conn.commit()
            assert lexical_index.block_problems(conn) == []
            assert lexical_index.maintained(conn) == lexical_index.recount(conn)
            caller = m.Caller(member_id=str(alice), granted_purposes=[m.PURPOSE_CONVERSATION])
            rows = conn.execute(
                "SELECT id, title, body FROM memory WHERE forgotten_at IS NULL AND retired_at IS NULL"
            ).fetchall()
            for q in ("parrot", "w3 w7", "parrot w1 w39"):
                conn.commit()
                got = candidates.lexical(conn, caller, CONV, q, 100, False)
                want = _reference(rows, analysis.query_terms(q), 100)
                assert [r[0] for r in got] == [w[0] for w in want], q


@pytest.mark.slow
def test_random_programs_straight_on_the_index_keep_blocks_and_sums_exact(pg):
    # lexical_index called directly (no service), three lexemes and two partitions so blocks fill,
    # empty and lose their open block often: batches up to 400, removals, supersedes (twin open
    # blocks), corrections keeping some lexemes; after every program: block_problems, and the sums
    # against a model.
    import psycopg

    rng = random.Random(2024)
    member = uuid.uuid4()
    vocab = ["kestrel", "heron", "crane"]

    def text():
        r = rng.random()
        if r < 0.05:
            return "!!!"
        return " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 4)))

    docs: dict[uuid.UUID, tuple] = {}  # id -> (audience or None, superseded, terms)
    with scratch_workspace_db(pg) as url, psycopg.connect(url) as conn:
        for step in range(250):
            op = rng.random()
            live = [d for d, (_, sup, _) in docs.items() if not sup]
            if op < 0.35 or len(docs) < 50:
                rows = [
                    (uuid.uuid4(), member if rng.random() < 0.3 else None, CONV, "", text())
                    for _ in range(rng.choice((1, 2, 111, 112, 113, 225, 400)))
                ]
                conn.execute(
                    """INSERT INTO memory (id, kind, title, body, audience_member_id, purpose, origin, created_by)
                       SELECT i, 'note', '', b, a, 'conversation', 'told', %s
                         FROM unnest(%s::uuid[], %s::text[], %s::uuid[]) AS r(i, b, a)""",
                    (member, [r[0] for r in rows], [r[4] for r in rows], [r[1] for r in rows]),
                )
                lexical_index.add_memories(conn, rows)
                for mid, aud, _, t, b in rows:
                    docs[mid] = (aud, False, analysis.document_terms(t, b))
            elif op < 0.6:
                gone = rng.sample(list(docs), min(len(docs), rng.choice((1, 5, 112, 150))))
                lexical_index.remove_memories(conn, gone)
                for mid in gone:
                    del docs[mid]
            elif op < 0.8 and live:
                moved = rng.sample(live, min(len(live), rng.choice((1, 3, 113, 230))))
                lexical_index.mark_superseded(conn, moved)
                for mid in moved:
                    aud, _, terms = docs[mid]
                    docs[mid] = (aud, True, terms)
            elif docs:
                mid = rng.choice(list(docs))
                body = text()
                lexical_index.reindex_text(conn, mid, "", body)
                aud, sup, _ = docs[mid]
                docs[mid] = (aud, sup, analysis.document_terms("", body))
            conn.commit()
            problems = lexical_index.block_problems(conn)
            assert problems == [], (step, problems[:5])
            want_df: dict[tuple, int] = {}
            want_parts: dict[tuple, list[int]] = {}
            for aud, sup, terms in docs.values():
                part = (lexical_index.audience_key(aud), CONV, sup)
                cell = want_parts.setdefault(part, [0, 0])
                cell[0] += 1
                cell[1] += len(terms)
                for lx in terms:
                    want_df[(lx, *part)] = want_df.get((lx, *part), 0) + 1
            got_df, got_parts = lexical_index.maintained(conn)
            assert got_df == want_df, step
            assert got_parts == {k: tuple(v) for k, v in want_parts.items() if v != [0, 0]}, step
            conn.commit()


def test_a_forget_waiting_for_the_lock_finds_postings_another_writer_moved(stack, monkeypatch):
    # Found by the chaos check (8 writers): a forget read its memory's block ids, another writer's
    # forget then repacked the term's blocks and moved that posting, and the first forget removed
    # it from the block it no longer was in; the posting stayed in the blocks for good. Here the
    # first forget is held between reading its index rows and taking the statistics lock.
    import threading

    ws = stack.workspace("moved-under-me")
    alice = stack.member(ws)
    ids = _batch(stack, alice, [f"parrot w{i % 40}" for i in range(B + 1)])
    # The embedding job takes the rows' locks as it writes their vectors: one still running would wait
    # for the held forget below, and the second forget for it (the test's own pause, not a deadlock).
    stack.wait_backlog_empty()
    first, moved = ids[0], ids[B]  # ``moved`` alone in the second block of "parrot"
    with stack.db(ws) as conn:
        assert sorted(n for _, n in _blocks(conn, "parrot")) == [1, B]
    reached, go = threading.Event(), threading.Event()
    real_delete = lexical_index._delete

    def held_delete(conn, found):
        if not reached.is_set():
            reached.set()
            assert go.wait(30)
        return real_delete(conn, found)

    monkeypatch.setattr(lexical_index, "_delete", held_delete)
    md = alice.md()
    waiting = threading.Thread(target=lambda: stack.memory.Forget(g.ForgetRequest(id=moved, reason="x"), metadata=md))
    waiting.start()
    assert reached.wait(30)
    # Forgetting a memory of the full block repacks both blocks into one: ``moved`` goes there.
    stack.memory.Forget(g.ForgetRequest(id=first, reason="x"), metadata=md)
    go.set()
    waiting.join(60)
    with stack.db(ws) as conn:
        assert lexical_index.block_problems(conn) == []
        assert sum(n for _, n in _blocks(conn, "parrot")) == B - 1
        _check(conn, ws, alice, ["parrot", "parrot w3"])


def test_a_block_over_a_lowered_capacity_still_loses_what_is_forgotten(stack, monkeypatch):
    # Capacity is a code constant and databases outlive it: a block filled under a higher capacity
    # and left over the current one after a forget was not rewritten, so the forgotten posting
    # stayed in it (found in review).
    ws = stack.workspace("over-capacity")
    alice = stack.member(ws)
    ids = _batch(stack, alice, [f"parrot w{i % 40}" for i in range(B)])
    with stack.db(ws) as conn:
        assert [n for _, n in _blocks(conn, "parrot")] == [B]
    monkeypatch.setattr(lexical_index, "block_capacity", lambda lexeme: 100)
    stack.memory.Forget(g.ForgetRequest(id=ids[0], reason="x"), metadata=alice.md())
    with stack.db(ws) as conn:
        assert [n for _, n in _blocks(conn, "parrot")] == [B - 1]
        (forgotten,) = conn.execute("SELECT count(*) FROM lexical_document").fetchone()
        assert forgotten == B - 1
        held = {
            doc
            for (blob,) in conn.execute("SELECT postings FROM lexical_block WHERE lexeme = 'parrot'")
            for doc in np.frombuffer(blob, dtype=lexical_index.POSTING)["doc"].tolist()
        }
        assert held == {n for (n,) in conn.execute("SELECT doc_no FROM lexical_document")}
        assert lexical_index.maintained(conn) == lexical_index.recount(conn)
        for q in ("parrot", "parrot w3"):
            got = candidates.lexical(conn, _caller(ws, alice), CONV, q, 1000, False)
            want = _reference(_readable(conn, alice.id), analysis.query_terms(q), 1000)
            assert [r[0] for r in got] == [w[0] for w in want], q
