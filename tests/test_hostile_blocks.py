"""Hostile review of the packed posting blocks (lexical_block, candidates._BlockScores)."""

from __future__ import annotations

import random
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from conftest import scratch_workspace_db
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from test_lexical_topk import WORDS, _readable, _reference, _text

from store_service.search import analysis, candidates, lexical_index

CONV = "conversation"


def _caller(ws, member):
    return m.Caller(workspace_id=ws, member_id=member.id, granted_purposes=[m.PURPOSE_CONVERSATION])


def _check_index(conn):
    assert lexical_index.block_problems(conn) == []
    assert lexical_index.maintained(conn) == lexical_index.recount(conn)


# --- 1. a write between the blocks read and the doc_no -> id lookup -------------------------------


def _race_setup(stack, name):
    ws = stack.workspace(name)
    alice = stack.member(ws)
    top = alice.remember("kestrel kestrel kestrel kestrel")
    second = alice.remember("kestrel hovers")
    third = alice.remember("kestrel hovers over fields")
    fourth = alice.remember("kestrel hovers over wide open fields today")
    return ws, alice, top, second, third, fourth


def _write_between_read_and_lookup(monkeypatch, action):
    """Runs ``action`` (committed on another connection) once, right after the blocks were read."""
    original = candidates._BlockScores.__init__
    fired = []

    def patched(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if not fired:
            fired.append(True)
            action()

    monkeypatch.setattr(candidates._BlockScores, "__init__", patched)
    return fired


def test_forget_between_block_read_and_lookup_still_fills_the_limit(stack, monkeypatch):
    # Found by a hostile review: the blocks read and the doc_no lookup were two snapshots, so a
    # memory forgotten in between was dropped from the chosen rows and nothing took its place (a
    # limit of 2 with 3 other matches answered 1 row). Now the keyword arm reads one snapshot
    # (candidates._one_snapshot): the answer is the full top 2 as of that snapshot, taken before
    # the forget (the walk after it drops the forgotten memory, as it drops any forgotten since).
    ws, alice, top, second, third, _ = _race_setup(stack, "race-forget")
    fired = _write_between_read_and_lookup(
        monkeypatch, lambda: stack.memory.Forget(g.ForgetRequest(id=top.id, reason="x"), metadata=alice.md())
    )
    with stack.db(ws) as conn:
        got = candidates.lexical(conn, _caller(ws, alice), CONV, "kestrel", 2, False)
        after = candidates.lexical(conn, _caller(ws, alice), CONV, "kestrel", 2, False)
    assert fired
    assert [str(r[0]) for r in got] == [top.id, second.id]
    assert [str(r[0]) for r in after] == [second.id, third.id]


def test_correct_between_block_read_and_lookup_keeps_the_memory(stack, monkeypatch):
    # A Correct that keeps the text gives the memory a new doc_no (reindex_text): the number read
    # from the blocks no longer maps to an id, so a live memory that matches best disappears from
    # the answer (and the answer is short of the limit).
    ws, alice, top, second, _, _ = _race_setup(stack, "race-correct")
    fired = _write_between_read_and_lookup(
        monkeypatch,
        lambda: stack.memory.Correct(
            g.CorrectRequest(id=top.id, expected_revision=1, body="kestrel kestrel kestrel kestrel"),
            metadata=alice.md(),
        ),
    )
    with stack.db(ws) as conn:
        got = candidates.lexical(conn, _caller(ws, alice), CONV, "kestrel", 2, False)
    assert fired
    assert [str(r[0]) for r in got] == [top.id, second.id]


# --- 2. import holding the statistics lock, waiting on a row a correct holds -----------------------


def test_import_supersede_and_correct_of_the_target_do_not_deadlock(stack, monkeypatch):
    # Import takes the statistics lock in insert_many -> add_memories, and only then updates the
    # superseded target's row (imports.py:399), which it never locked before. A Correct of that
    # target holds the row and then wants the statistics lock (lifecycle.py:181 -> reindex_text ->
    # _remove_from_blocks): a lock cycle, and PostgreSQL aborts one of the two calls.
    ws = stack.workspace("import-deadlock")
    alice = stack.member(ws)

    def imp(key, body, **kw):
        req = g.ImportMemoriesRequest(
            workspace_id=ws,
            memories=[
                m.ImportedMemory(
                    import_key=key,
                    author_member_id=alice.id,
                    body=body,
                    purpose=m.PURPOSE_CONVERSATION,
                    audience=m.AUDIENCE_WORKSPACE,
                    **kw,
                )
            ],
        )
        return stack.admin.ImportMemories(req, metadata=stack.op())

    first = imp("dl:1", "the heron waits by the weir").memories[0]
    assert first.status == m.IMPORT_STATUS_CREATED
    locked, go = threading.Event(), threading.Event()
    original = lexical_index.reindex_text

    def paused(conn, *args):
        locked.set()
        go.wait(20)
        return original(conn, *args)

    monkeypatch.setattr(lexical_index, "reindex_text", paused)
    results = {}

    def correct():
        try:
            stack.memory.Correct(
                g.CorrectRequest(id=first.id, expected_revision=1, body="the heron waits by the mill"),
                metadata=alice.md(),
            )
            results["correct"] = "ok"
        except grpc.RpcError as exc:
            results["correct"] = f"{exc.code()}: {exc.details()}"

    def supersede():
        try:
            resp = imp("dl:2", "the heron left the weir", supersedes_key="dl:1")
            item = resp.memories[0]
            results["import"] = "ok" if item.status == m.IMPORT_STATUS_CREATED else item.error.message
        except grpc.RpcError as exc:
            results["import"] = exc.code()

    a = threading.Thread(target=correct)
    a.start()
    assert locked.wait(20)
    b = threading.Thread(target=supersede)
    b.start()
    time.sleep(2.0)  # the import now holds the statistics lock and waits on the target's row
    go.set()
    a.join(60)
    b.join(60)
    assert results == {"correct": "ok", "import": "ok"}
    with stack.db(ws) as conn:
        _check_index(conn)


# --- 3. every writer at once, import, derive, batches and member removal included -----------------


def test_every_writer_at_once_keeps_blocks_exact(stack):
    ws = stack.workspace("blocks-chaos")
    members = [stack.member(ws) for _ in range(4)]
    doomed = stack.member(ws)
    api = stack.memory
    for i in range(30):  # member-only memories of a member removed mid-run, same lexemes as the rest
        doomed.remember(f"parrot w{i % 5} " + _text(random.Random(i)), audience=m.AUDIENCE_MEMBER)
    errors: list = []

    def work(k: int) -> None:
        rng, me = random.Random(100 + k), members[k]
        md, mine = me.md(), []
        try:
            for step in range(30):
                op = rng.random()
                if op < 0.2 or not mine:
                    resp = api.RememberBatch(
                        g.RememberBatchRequest(
                            requests=[
                                g.RememberRequest(
                                    purpose=m.PURPOSE_CONVERSATION,
                                    body="parrot " + _text(rng),
                                    kind=m.KIND_NOTE,
                                    audience=m.AUDIENCE_WORKSPACE if rng.random() < 0.7 else m.AUDIENCE_MEMBER,
                                )
                                for _ in range(rng.randint(1, 60))
                            ]
                        ),
                        metadata=md,
                    )
                    mine += [(r.memory.id, 1) for r in resp.results if r.HasField("memory")]
                elif op < 0.35:
                    src = rng.sample(mine, min(len(mine), rng.randint(1, 2)))
                    try:
                        d = api.Derive(
                            g.DeriveRequest(source_ids=[s for s, _ in src], body="parrot " + _text(rng)), metadata=md
                        )
                        mine.append((d.memory.id, 1))
                    except grpc.RpcError as exc:  # mixed audiences, or a source forgotten with its own
                        if exc.code() not in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND):
                            raise
                elif op < 0.55:
                    mid, rev = mine.pop(rng.randrange(len(mine)))
                    try:
                        api.Correct(g.CorrectRequest(id=mid, expected_revision=rev, body=_text(rng)), metadata=md)
                        mine.append((mid, rev + 1))
                    except grpc.RpcError as exc:
                        if exc.code() != grpc.StatusCode.NOT_FOUND:  # forgotten with a source
                            raise
                elif op < 0.7:
                    mid, rev = mine.pop(rng.randrange(len(mine)))
                    try:
                        new = api.Supersede(
                            g.SupersedeRequest(id=mid, expected_revision=rev, body="parrot " + _text(rng)), metadata=md
                        )
                        mine.append((new.memory.id, 1))
                    except grpc.RpcError as exc:
                        if exc.code() != grpc.StatusCode.NOT_FOUND:
                            raise
                elif op < 0.85:
                    mid, _ = mine.pop(rng.randrange(len(mine)))
                    api.Forget(g.ForgetRequest(id=mid, reason="test"), metadata=md)
                else:
                    key = f"chaos:{k}:{step}"
                    req = g.ImportMemoriesRequest(
                        workspace_id=ws,
                        memories=[
                            m.ImportedMemory(
                                import_key=key,
                                author_member_id=me.id,
                                body="parrot " + _text(rng),
                                purpose=m.PURPOSE_CONVERSATION,
                                audience=m.AUDIENCE_WORKSPACE,
                            ),
                            m.ImportedMemory(
                                import_key=key + ":b",
                                author_member_id=me.id,
                                body="parrot again " + _text(rng),
                                purpose=m.PURPOSE_CONVERSATION,
                                audience=m.AUDIENCE_WORKSPACE,
                                supersedes_key=key,
                            ),
                            m.ImportedMemory(
                                import_key=key + ":c",
                                author_member_id=me.id,
                                body="parrot derived " + _text(rng),
                                purpose=m.PURPOSE_CONVERSATION,
                                audience=m.AUDIENCE_WORKSPACE,
                                derived_from_keys=[key + ":b"],
                            ),
                        ],
                    )
                    out = stack.admin.ImportMemories(req, metadata=stack.op())
                    assert [r.status for r in out.memories] == [m.IMPORT_STATUS_CREATED] * 3, out
        except Exception as exc:  # noqa: BLE001
            errors.append((k, repr(exc)))

    def remove_doomed() -> None:
        time.sleep(1.0)
        try:
            stack.admin.RemoveMember(g.RemoveMemberRequest(workspace_id=ws, member_id=doomed.id), metadata=stack.op())
        except Exception as exc:  # noqa: BLE001
            errors.append(("remove", repr(exc)))

    with ThreadPoolExecutor(5) as pool:
        list(pool.map(work, range(4)))
        pool.submit(remove_doomed).result()
    assert errors == []
    with stack.db(ws) as conn:
        _check_index(conn)
        assert not conn.execute(
            "SELECT 1 FROM lexical_document d JOIN memory x ON x.id = d.memory_id WHERE x.forgotten_at IS NOT NULL"
        ).fetchone()
        rng = random.Random(3)
        for member in members[:2]:
            rows = _readable(conn, member.id)
            for _ in range(10):
                query = " ".join(["parrot"] + rng.sample(WORDS, rng.randint(0, 3)))
                for limit in (1, 9, 200):
                    got = candidates.lexical(conn, _caller(ws, member), CONV, query, limit, False)
                    want = _reference(rows, analysis.query_terms(query), limit)
                    assert [r[0] for r in got] == [w[0] for w in want], (query, limit)


# --- 4. weird inputs --------------------------------------------------------------------------------


def test_huge_tf_long_bodies_unicode_and_termless_memories(stack):
    ws = stack.workspace("blocks-weird")
    alice = stack.member(ws)
    api, md = stack.memory, alice.md()
    bodies = [
        "zz " * 21_000,  # tf 21,000, a 63 kB body (MAX_BODY_BYTES is 64 kB, so tf > 65535 cannot be written)
        "zz yy",
        " ".join(f"t{i}" for i in range(6000)) + " zz",  # more distinct terms than MAX_DOCUMENT_TERMS
        "Ünïcödé café naïve 東京 タワー zz 🦜 parrot",
        "!!! ??? ...",  # no lexeme at all
        "the of and",  # stop words only
        "x" * 5000 + " zz",  # a lexeme longer than MAX_LEXEME_CHARS
    ]
    made = []
    for b in bodies:
        try:
            made.append(alice.remember(b))
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, (b[:20], exc)
    assert len(made) >= 5
    with stack.db(ws) as conn:
        _check_index(conn)
        tf = conn.execute("SELECT max(tf) FROM lexical_posting WHERE lexeme = 'zz'").fetchone()[0]
        assert tf == 21_000
    # Termless memories through every write path.
    termless = [x for x in made if not analysis.document_terms(x.title, x.body)]
    assert termless
    for x in termless:
        api.Correct(g.CorrectRequest(id=x.id, expected_revision=1, body="!!! zz"), metadata=md)
        api.Correct(g.CorrectRequest(id=x.id, expected_revision=2, body="???"), metadata=md)
        api.Supersede(g.SupersedeRequest(id=x.id, expected_revision=3, body="..."), metadata=md)
    with stack.db(ws) as conn:
        _check_index(conn)
        caller = _caller(ws, alice)
        rows = _readable(conn, alice.id)
        for q in ("zz", "zz yy", "東京", "café", "🦜 parrot zz", "x" * 5000, "t5999 zz", "t1 t2 t3 zz"):
            for limit in (1, 3, 100):
                got = candidates.lexical(conn, caller, CONV, q, limit, False)
                want = _reference(rows, analysis.query_terms(q), limit)
                assert [r[0] for r in got] == [w[0] for w in want], (q, limit)
                assert all(abs(a[1] - b[1]) < 1e-9 for a, b in zip(got, want, strict=True))
    for x in made:
        api.Forget(g.ForgetRequest(id=x.id, reason="t"), metadata=md)
    with stack.db(ws) as conn:
        _check_index(conn)
        assert conn.execute("SELECT count(*) FROM lexical_block").fetchone()[0] == 0


# --- 5. history recall against the reference, after supersede chains -----------------------------


@pytest.mark.slow
def test_history_recall_equals_full_scoring_over_live_and_superseded(stack):
    rng = random.Random(21)
    ws = stack.workspace("blocks-history")
    alice, bob = stack.member(ws), stack.member(ws)
    api = stack.memory
    chains = []
    for i in range(150):
        who = alice if i % 2 else bob
        mem = who.remember(_text(rng), audience=m.AUDIENCE_MEMBER if i % 7 == 0 else m.AUDIENCE_WORKSPACE)
        chains.append((who, mem.id, 1))
    for _ in range(3):  # supersede chains three deep, corrections of superseded rows in between
        nxt = []
        for who, mid, rev in chains[:60]:
            new = api.Supersede(g.SupersedeRequest(id=mid, expected_revision=rev, body=_text(rng)), metadata=who.md())
            nxt.append((who, new.memory.id, 1))
        chains = nxt + chains[60:]
    for who, mid, _ in chains[100:110]:
        api.Forget(g.ForgetRequest(id=mid, reason="t"), metadata=who.md())
    with stack.db(ws) as conn:
        _check_index(conn)
        rows = conn.execute(
            """SELECT id, title, body FROM memory WHERE forgotten_at IS NULL AND purpose = 'conversation'
                  AND (audience_member_id IS NULL OR audience_member_id = %s)""",
            (uuid.UUID(alice.id),),
        ).fetchall()
        assert len(rows) > 250
        for _ in range(30):
            q = " ".join(rng.sample(WORDS, rng.randint(1, 4)))
            for limit in (1, 10, 500):
                got = candidates.lexical(conn, _caller(ws, alice), CONV, q, limit, True)
                want = _reference(rows, analysis.query_terms(q), limit)
                assert [r[0] for r in got] == [w[0] for w in want], (q, limit)


# --- 6. the expiry gate's deeper reads over history, against the reference ---------------------------


@pytest.mark.slow
def test_expiry_gate_deepening_over_history_equals_full_scoring_of_shown_rows(stack):
    rng = random.Random(33)
    ws = stack.workspace("blocks-gate")
    alice = stack.member(ws)
    api, md = stack.memory, alice.md()
    made = [alice.remember(_text(rng)) for _ in range(200)]
    for mem in made[:40]:
        api.Supersede(g.SupersedeRequest(id=mem.id, expected_revision=1, body=_text(rng)), metadata=md)
    with stack.db(ws) as conn:
        # Hide about 85% of the rows: the gate must read deeper several times. Every 5th live memory
        # stays shown (chosen by order, not by the uuid's last digit: that gave 64 shown rows once).
        conn.execute("UPDATE memory SET updated_at = now() - interval '40 days'")
        conn.execute(
            "UPDATE memory SET updated_at = now() WHERE id = ANY(%s)", ([uuid.UUID(mem.id) for mem in made[40::5]],)
        )
        rows = conn.execute(
            """SELECT id, title, body, updated_at > now() - interval '30 days' AS shown FROM memory
                WHERE forgotten_at IS NULL AND purpose = 'conversation'"""
        ).fetchall()
        shown = {r[0] for r in rows if r[3]}
        assert 10 < len(shown) < 60
        for history in (False, True):
            scope = [r[:3] for r in rows if history or r[0] in {x[0] for x in _readable(conn, alice.id)}]
            for _ in range(20):
                q = " ".join(rng.sample(WORDS, rng.randint(1, 4)))
                for limit in (1, 5, 50):
                    got = candidates.lexical(conn, _caller(ws, alice), CONV, q, limit, history, expiry_days=30)
                    full = _reference(scope, analysis.query_terms(q), 10_000)
                    want = [w for w in full if w[0] in shown][:limit]
                    assert [r[0] for r in got] == [w[0] for w in want], (q, limit, history)


# --- 7. a workspace left at 0011 (no blocks), with every kind of row, migrated -----------------------


def test_migration_from_0011_builds_blocks_for_every_live_row(pg):
    import psycopg

    from store_service.database import migrate

    with scratch_workspace_db(pg, "0011_expiry") as url:
        alice = uuid.uuid4()
        rng = random.Random(4)
        with psycopg.connect(url, autocommit=True) as conn:
            ids = []
            for i in range(2300):  # more than one reindex_all batch of 2,000
                mid = uuid.uuid4()
                ids.append(mid)
                conn.execute(
                    """INSERT INTO memory (id, kind, title, body, audience_member_id, purpose, origin, created_by)
                                VALUES (%s, 'note', '', %s, %s, 'conversation', 'told', %s)""",
                    (mid, "parrot " + _text(rng) if i % 3 else "!!!", alice if i % 4 == 0 else None, alice),
                )
            conn.execute("UPDATE memory SET superseded_by_id = %s WHERE id = ANY(%s)", (ids[0], ids[1:50]))
            conn.execute("UPDATE memory SET forgotten_at = now(), body = '' WHERE id = ANY(%s)", (ids[50:80],))
        migrate(url, "workspace")
        with psycopg.connect(url, autocommit=True) as conn:
            _check_index(conn)
            assert conn.execute("SELECT count(*) FROM lexical_document").fetchone()[0] == 2300 - 30
            caller = m.Caller(member_id=str(alice), granted_purposes=[m.PURPOSE_CONVERSATION])
            rows = conn.execute(
                "SELECT id, title, body FROM memory WHERE forgotten_at IS NULL AND retired_at IS NULL"
            ).fetchall()
            for q in ("parrot", "w3 w7", "parrot w1 w39"):
                got = candidates.lexical(conn, caller, CONV, q, 100, False)
                want = _reference(rows, analysis.query_terms(q), 100)
                assert [r[0] for r in got] == [w[0] for w in want], q
