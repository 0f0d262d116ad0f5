"""AdminService.ImportMemories and ImportHistory end to end through the gateway, against real
PostgreSQL and the real MiniLM: items answered one by one, import keys idempotent, kept times,
revisions, supersede links, derivations reached by forget, recall of imported memories, and bad
input to each call."""

import datetime
import uuid

import grpc
import pytest
from conftest import code_of
from google.protobuf import timestamp_pb2
from google.rpc import code_pb2
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

CREATED, ALREADY, FAILED = m.IMPORT_STATUS_CREATED, m.IMPORT_STATUS_ALREADY_IMPORTED, m.IMPORT_STATUS_FAILED
T0 = datetime.datetime(2025, 6, 1, 9, 30, tzinfo=datetime.UTC)


def ts(when: datetime.datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(when)
    return out


def item(key: str, author: str, body: str, **kw) -> m.ImportedMemory:
    kw.setdefault("purpose", m.PURPOSE_CONVERSATION)
    kw.setdefault("audience", m.AUDIENCE_MEMBER)
    return m.ImportedMemory(import_key=key, author_member_id=author, body=body, **kw)


def run(stack, ws, memories=(), entities=()) -> g.ImportMemoriesResponse:
    req = g.ImportMemoriesRequest(workspace_id=ws, memories=memories, entities=entities)
    return stack.admin.ImportMemories(req, metadata=stack.op())


def code(result: m.ImportResult) -> grpc.StatusCode:
    return grpc.StatusCode[code_pb2.Code.Name(result.error.code)]


@pytest.fixture(scope="module")
def team(stack):
    ws = stack.workspace("import tests")
    return ws, stack.member(ws), stack.member(ws)


@pytest.mark.slow
def test_an_imported_memory_is_a_real_memory_kept_as_given(stack, team):
    ws, alice, bob = team
    ent = run(stack, ws, entities=[m.ImportedEntity(import_key="t1:ent:quarry", name="Quarry Labs")]).entities[0]
    assert ent.status == CREATED
    resp = run(
        stack,
        ws,
        [
            item(
                "t1:item:1",
                alice.id,
                "The heliotrope invoice is due on the ninth",
                title="heliotrope invoice",
                kind=m.KIND_FACT,
                confidence=0.7,
                reason="Stated twice",
                created_at=ts(T0),
                entity_keys=["t1:ent:quarry"],
                entities=[m.EntityMention(name="Arlo Vance")],
                revisions=[m.ImportedRevision(title="old", body="The invoice is due on the eighth")],
            )
        ],
    )
    (res,) = resp.memories
    assert (res.import_key, res.status) == ("t1:item:1", CREATED) and res.id
    got = alice.read(res.id, include_history=True)
    assert (got.kind, got.title, got.confidence, got.reason, got.origin) == (
        m.KIND_FACT,
        "heliotrope invoice",
        0.7,
        "Stated twice",
        m.ORIGIN_MIGRATED,
    )
    assert got.created_by == alice.id and got.audience_member_id == alice.id
    assert got.created_at.ToDatetime(tzinfo=datetime.UTC) == T0 == got.updated_at.ToDatetime(tzinfo=datetime.UTC)
    assert got.revision == 2 and [(h.revision, h.body) for h in got.history] == [
        (1, "The invoice is due on the eighth")
    ]
    about = {x.target_entity_name: x.target_entity_id for x in got.links if x.type == m.LINK_TYPE_ABOUT}
    assert sorted(about) == ["Arlo Vance", "Quarry Labs"] and about["Quarry Labs"] == ent.id
    assert code_of(bob.read, res.id) == grpc.StatusCode.NOT_FOUND  # member-only: its author alone
    stack.wait_backlog_empty()
    hits = [i.memory.id for i in alice.recall("when is the heliotrope invoice due").items]
    assert res.id in hits
    assert res.id not in [i.memory.id for i in bob.recall("when is the heliotrope invoice due").items]
    # Correctable as any memory, at its imported revision.
    fixed = stack.memory.Correct(
        g.CorrectRequest(id=res.id, expected_revision=2, body="The heliotrope invoice is due on the tenth"),
        metadata=alice.md(),
    ).memory
    assert fixed.revision == 3


def test_a_key_seen_before_answers_already_imported_whatever_the_rest_says(stack, team):
    ws, alice, bob = team
    first = run(stack, ws, [item("t2:a", alice.id, "first body")]).memories[0]
    again = run(stack, ws, [item("t2:a", bob.id, "another body", audience=m.AUDIENCE_WORKSPACE)]).memories[0]
    assert (again.status, again.id) == (ALREADY, first.id)
    twice = run(stack, ws, [item("t2:b", alice.id, "x"), item("t2:b", alice.id, "y")]).memories
    assert [r.status for r in twice] == [CREATED, ALREADY] and twice[0].id == twice[1].id
    with stack.db(ws) as conn:
        rows = conn.execute("SELECT body FROM memory WHERE import_key IN ('t2:a', 't2:b') ORDER BY import_key")
        assert [r[0] for r in rows] == ["first body", "x"]
    ent = [m.ImportedEntity(import_key="t2:e", name="Mira")]
    assert run(stack, ws, entities=ent).entities[0].status == CREATED
    assert run(stack, ws, entities=ent).entities[0].status == ALREADY


def test_supersede_links_chain_in_order_and_the_older_leaves_recall(stack, team):
    ws, alice, _ = team
    resp = run(
        stack,
        ws,
        [
            item("t3:1", alice.id, "The marmalade plan is to start in May"),
            item("t3:2", alice.id, "The marmalade plan is to start in June", supersedes_key="t3:1"),
        ],
    ).memories
    later = run(
        stack, ws, [item("t3:3", alice.id, "The marmalade plan is to start in July", supersedes_key="t3:2")]
    ).memories
    ids = [r.id for r in resp] + [later[0].id]
    chain, at = [], ids[0]
    while at:
        chain.append(at)
        at = alice.read(at).superseded_by_id
    assert chain == ids
    stack.wait_backlog_empty()
    hits = [i.memory.id for i in alice.recall("marmalade plan start").items]
    assert ids[2] in hits and ids[0] not in hits and ids[1] not in hits
    # A target already superseded, or missing, fails the item alone.
    bad = run(
        stack,
        ws,
        [
            item("t3:4", alice.id, "fork", supersedes_key="t3:1"),
            item("t3:5", alice.id, "missing", supersedes_key="t3:nope"),
            item("t3:6", alice.id, "fine"),
        ],
    ).memories
    assert [r.status for r in bad] == [FAILED, FAILED, CREATED]
    assert code(bad[0]) == code(bad[1]) == grpc.StatusCode.FAILED_PRECONDITION
    assert "'t3:1' is already superseded" in bad[0].error.message and "'t3:nope'" in bad[1].error.message


def test_forget_of_an_imported_source_reaches_its_derivations(stack, team):
    ws, alice, _ = team
    src, derived, told = run(
        stack,
        ws,
        [
            item("t4:src", alice.id, "The trellis budget is 400 euros"),
            item(
                "t4:der", alice.id, "Trellis spending is capped", derived_from_keys=["t4:src"], origin=m.ORIGIN_DERIVED
            ),
            item("t4:other", alice.id, "Unrelated note"),
        ],
    ).memories
    later = stack.memory.Derive(
        g.DeriveRequest(source_ids=[derived.id], kind=m.KIND_NOTE, body="derived by hand"), metadata=alice.md()
    ).memory
    gone = stack.memory.Forget(g.ForgetRequest(id=src.id), metadata=alice.md()).forgotten_ids
    assert set(gone) == {src.id, derived.id, later.id}
    assert code_of(alice.read, told.id) == grpc.StatusCode.OK
    # The key stays taken: a re-run does not bring the forgotten memory back.
    assert run(stack, ws, [item("t4:src", alice.id, "The trellis budget is 400 euros")]).memories[0].status == ALREADY
    missing = run(stack, ws, [item("t4:x", alice.id, "x", derived_from_keys=["t4:src"])]).memories[0]
    assert code(missing) == grpc.StatusCode.FAILED_PRECONDITION and "'t4:src' was forgotten" in missing.error.message


def test_bad_items_fail_alone_with_the_problem_named(stack, team):
    ws, alice, _ = team
    stranger = str(uuid.uuid4())
    cases = [
        (item("", alice.id, "b"), grpc.StatusCode.INVALID_ARGUMENT, "import_key"),
        (item("t5:1", stranger, "b"), grpc.StatusCode.NOT_FOUND, stranger),
        (item("t5:2", "not-a-uuid", "b"), grpc.StatusCode.INVALID_ARGUMENT, "author_member_id"),
        (item("t5:3", alice.id, "  "), grpc.StatusCode.INVALID_ARGUMENT, "body"),
        (item("t5:4", alice.id, "b", purpose=m.PURPOSE_UNSPECIFIED), grpc.StatusCode.INVALID_ARGUMENT, "purpose"),
        (item("t5:5", alice.id, "b", entity_keys=["t5:nokey"]), grpc.StatusCode.FAILED_PRECONDITION, "t5:nokey"),
        (item("t5:6", alice.id, "b", reason="r" * 1001), grpc.StatusCode.INVALID_ARGUMENT, "reason"),
        (
            item("t5:7", alice.id, "b", entities=[m.EntityMention(entity_id=str(uuid.uuid4()))]),
            grpc.StatusCode.NOT_FOUND,
            "entity",
        ),
    ]
    resp = run(stack, ws, [c[0] for c in cases] + [item("t5:ok", alice.id, "fine")])
    for (_, want, named), got in zip(cases, resp.memories[:-1], strict=True):
        assert (got.status, code(got)) == (FAILED, want) and named in got.error.message, got
    assert resp.memories[-1].status == CREATED
    with stack.db(ws) as conn:
        assert conn.execute("SELECT count(*) FROM memory WHERE import_key LIKE 't5:%'").fetchone()[0] == 1


def test_a_bad_entity_key_fails_that_entity_alone(stack, team):
    """An entity key with NUL (PostgreSQL text holds none) is refused alone, not the whole call."""
    ws, alice, _ = team
    entities = [m.ImportedEntity(import_key="t9:e\x00vil", name="Nul"), m.ImportedEntity(import_key="t9:e", name="Ok")]
    resp = run(stack, ws, [item("t9:1", alice.id, "fine", entity_keys=["t9:e"])], entities)
    bad, good = resp.entities
    assert (bad.status, code(bad)) == (FAILED, grpc.StatusCode.INVALID_ARGUMENT) and "import_key" in bad.error.message
    assert good.status == CREATED and resp.memories[0].status == CREATED
    with stack.db(ws) as conn:
        assert conn.execute("SELECT name FROM entity WHERE import_key LIKE 't9:%'").fetchall() == [("Ok",)]


def test_the_whole_call_fails_only_for_credential_workspace_or_size(stack, team):
    ws, alice, _ = team
    one = [item("t6:1", alice.id, "b")]
    assert (
        code_of(stack.admin.ImportMemories, g.ImportMemoriesRequest(workspace_id=ws, memories=one), metadata=alice.md())
        == grpc.StatusCode.UNAUTHENTICATED
    )
    assert code_of(run, stack, str(uuid.uuid4()), one) == grpc.StatusCode.NOT_FOUND
    assert code_of(run, stack, "nope", one) == grpc.StatusCode.NOT_FOUND
    assert code_of(run, stack, ws, []) == grpc.StatusCode.INVALID_ARGUMENT
    many = [item(f"t6:{i}", alice.id, "b") for i in range(501)]
    assert code_of(run, stack, ws, many) == grpc.StatusCode.INVALID_ARGUMENT
    with stack.db(ws) as conn:
        assert conn.execute("SELECT count(*) FROM memory WHERE import_key LIKE 't6:%'").fetchone()[0] == 0


def test_import_history_writes_the_members_own_history_only(stack, team):
    ws, alice, bob = team
    turn = g.HistoryTurn(
        request_id="t7:turn:1", chat_id="tg:7", role="rheo", text="quinoa delivery friday", occurred_at=ts(T0)
    )
    req = g.ImportHistoryRequest(workspace_id=ws, member_id=alice.id, turns=[turn])
    first = stack.admin.ImportHistory(req, metadata=stack.op()).results[0]
    again = stack.admin.ImportHistory(req, metadata=stack.op()).results[0]
    assert first.turn_id == again.turn_id and (first.replayed, again.replayed) == (False, True)
    found = stack.memory.SearchHistory(g.SearchHistoryRequest(query="quinoa"), metadata=alice.md()).entries
    assert [(e.turn_id, e.turn.role) for e in found] == [(first.turn_id, "assistant")]
    assert not stack.memory.SearchHistory(g.SearchHistoryRequest(query="quinoa"), metadata=bob.md()).entries
    for member_id in (str(uuid.uuid4()), "garbage"):
        bad = g.ImportHistoryRequest(workspace_id=ws, member_id=member_id, turns=[turn])
        assert code_of(stack.admin.ImportHistory, bad, metadata=stack.op()) == grpc.StatusCode.NOT_FOUND
    other_ws = stack.workspace("import other")
    cross = g.ImportHistoryRequest(workspace_id=other_ws, member_id=alice.id, turns=[turn])
    assert code_of(stack.admin.ImportHistory, cross, metadata=stack.op()) == grpc.StatusCode.NOT_FOUND
    assert code_of(stack.admin.ImportHistory, req, metadata=alice.md()) == grpc.StatusCode.UNAUTHENTICATED


def test_validate_only_answers_as_the_call_would_and_writes_nothing(stack, team):
    ws, alice, _ = team
    stranger = str(uuid.uuid4())
    req = g.ImportMemoriesRequest(
        workspace_id=ws,
        entities=[m.ImportedEntity(import_key="t8:e", name="Lena")],
        memories=[item("t8:1", alice.id, "b", entity_keys=["t8:e"]), item("t8:2", stranger, "b")],
        validate_only=True,
    )
    resp = stack.admin.ImportMemories(req, metadata=stack.op())
    assert [r.status for r in resp.entities] == [CREATED]
    assert [r.status for r in resp.memories] == [CREATED, FAILED] and stranger in resp.memories[1].error.message
    with stack.db(ws) as conn:
        assert conn.execute("SELECT count(*) FROM memory WHERE import_key LIKE 't8:%'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM entity WHERE import_key = 't8:e'").fetchone()[0] == 0
        assert (
            conn.execute(
                "SELECT count(*) FROM embedding_job j JOIN memory m ON m.id = j.memory_id "
                "WHERE m.import_key LIKE 't8:%'"
            ).fetchone()[0]
            == 0
        )


def test_a_derivation_keeps_derives_rule(stack, team):
    # Found by the trust property test: a workspace memory derived from a member-only import was
    # written, and another member then found its entity although its chain was unreadable to them.
    ws, alice, bob = team
    run(stack, ws, [item("t9:private", alice.id, "Alice's own note on the kiln")])
    wider, other_purpose, others, ok = run(
        stack,
        ws,
        [
            item("t9:wide", alice.id, "kiln summary", audience=m.AUDIENCE_WORKSPACE, derived_from_keys=["t9:private"]),
            item("t9:purpose", alice.id, "kiln task", purpose=m.PURPOSE_TASKS, derived_from_keys=["t9:private"]),
            item("t9:bob", bob.id, "kiln, for bob", derived_from_keys=["t9:private"]),
            item("t9:same", alice.id, "kiln summary for alice", derived_from_keys=["t9:private"]),
        ],
    ).memories
    for got, words in ((wider, "member-only"), (other_purpose, "another purpose"), (others, "member-only")):
        assert (got.status, code(got)) == (FAILED, grpc.StatusCode.FAILED_PRECONDITION), got
        assert words in got.error.message and "t9:private" in got.error.message
    assert ok.status == CREATED


def test_times_ahead_of_the_clock_fail_their_item_naming_the_field(stack, team):
    """An imported time is a past one: more than vocabulary.MAX_FUTURE_SKEW (a day) after the store's
    clock fails the item alone, INVALID_ARGUMENT naming the field; a time just within is kept."""
    ws, alice, _ = team
    now = datetime.datetime.now(datetime.UTC)
    far = now + datetime.timedelta(days=365_250)  # a thousand years on
    past_skew = now + datetime.timedelta(days=1, hours=1)  # an hour past the skew: no slow run brings it within
    within = now + datetime.timedelta(hours=23)
    old = m.ImportedRevision(title="t", body="earlier")
    cases = [
        (item("t10:created", alice.id, "b", created_at=ts(far)), "created_at"),
        (item("t10:updated", alice.id, "b", created_at=ts(T0), updated_at=ts(past_skew)), "updated_at"),
        (item("t10:occurred", alice.id, "b", occurred_at=ts(past_skew)), "occurred_at"),
        (
            item("t10:replaced", alice.id, "b", revisions=[old, m.ImportedRevision(body="x", replaced_at=ts(far))]),
            "revisions[1].replaced_at",
        ),
        (
            item("t10:rev-valid", alice.id, "b", revisions=[m.ImportedRevision(body="x", valid_from=ts(past_skew))]),
            "revisions[0].valid_from",
        ),
    ]
    ok = item(
        "t10:ok",
        alice.id,
        "b",
        created_at=ts(within),
        updated_at=ts(within),
        occurred_at=ts(within),
        revisions=[m.ImportedRevision(body="before", replaced_at=ts(within))],
    )
    resp = run(stack, ws, [c[0] for c in cases] + [ok])
    for (sent, field), got in zip(cases, resp.memories[:-1], strict=True):
        assert (got.import_key, got.status, code(got)) == (sent.import_key, FAILED, grpc.StatusCode.INVALID_ARGUMENT)
        assert got.error.message.startswith(f"{field} ") and "is in the future" in got.error.message, got
    assert resp.memories[-1].status == CREATED
    with stack.db(ws) as conn:
        rows = conn.execute(
            "SELECT import_key, created_at, updated_at, occurred_at FROM memory WHERE import_key LIKE 't10:%'"
        ).fetchall()
        replaced = conn.execute(
            """SELECT r.replaced_at FROM memory_revision r JOIN memory m ON m.id = r.memory_id
                WHERE m.import_key = 't10:ok'"""
        ).fetchall()
    assert rows == [("t10:ok", within, within, within)] and replaced == [(within,)]

    turns = [
        g.HistoryTurn(request_id="t10:turn:far", chat_id="c", role="user", text="from afar", occurred_at=ts(far)),
        g.HistoryTurn(request_id="t10:turn:past", chat_id="c", role="user", text="too soon", occurred_at=ts(past_skew)),
        g.HistoryTurn(request_id="t10:turn:ok", chat_id="c", role="user", text="in time", occurred_at=ts(within)),
    ]
    req = g.ImportHistoryRequest(workspace_id=ws, member_id=alice.id, turns=turns)
    far_turn, past_turn, ok_turn = stack.admin.ImportHistory(req, metadata=stack.op()).results
    for got in (far_turn, past_turn):
        assert code_pb2.Code.Name(got.error.code) == "INVALID_ARGUMENT" and not got.turn_id
        assert got.error.message.startswith("occurred_at ") and "is in the future" in got.error.message
    assert ok_turn.turn_id and not ok_turn.HasField("error")
    # The member's own AppendHistory checks a turn the same way (one check of a turn's time).
    mine = stack.memory.AppendHistory(g.AppendHistoryRequest(turns=[turns[0]]), metadata=alice.md()).results[0]
    assert code_pb2.Code.Name(mine.error.code) == "INVALID_ARGUMENT"
    with stack.db(ws) as conn:
        stored = conn.execute("SELECT request_id, occurred_at FROM history_turn WHERE request_id LIKE 't10:%'")
        assert stored.fetchall() == [("t10:turn:ok", within)]
