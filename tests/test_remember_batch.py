"""RememberBatch end to end through the gateway, against real PostgreSQL: each entry answers exactly
as a Remember of it would, a bad entry fails only itself, and the good ones are stored, readable
and recallable."""

import datetime
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from conftest import code_of
from google.protobuf import timestamp_pb2
from google.rpc import code_pb2, error_details_pb2
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.errors import error_info
from store_service.records import memories

OK, INVALID = grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND, DENIED = grpc.StatusCode.NOT_FOUND, grpc.StatusCode.PERMISSION_DENIED
CONV, TASKS = m.PURPOSE_CONVERSATION, m.PURPOSE_TASKS
WHEN = datetime.datetime(2023, 5, 8, 13, 56, tzinfo=datetime.UTC)


def entry(body, *, purpose=CONV, kind=m.KIND_NOTE, audience=m.AUDIENCE_WORKSPACE, **kw) -> g.RememberRequest:
    return g.RememberRequest(purpose=purpose, kind=kind, body=body, audience=audience, **kw)


def batch(member, requests) -> list[g.RememberBatchResult]:
    return list(
        member.stack.memory.RememberBatch(g.RememberBatchRequest(requests=requests), metadata=member.md()).results
    )


def code(result: g.RememberBatchResult) -> grpc.StatusCode:
    if result.HasField("memory"):
        return OK
    return grpc.StatusCode[code_pb2.Code.Name(result.error.code)]


def reason(result: g.RememberBatchResult) -> error_details_pb2.ErrorInfo:
    info = error_details_pb2.ErrorInfo()
    assert result.error.details[0].Unpack(info)
    return info


def stored_count(stack, ws, member_id) -> int:
    with stack.db(ws) as conn:
        return conn.execute("SELECT count(*) FROM memory WHERE created_by = %s", (uuid.UUID(member_id),)).fetchone()[0]


@pytest.fixture(scope="module")
def team(stack):
    """A workspace; ``bot`` may use only the conversation purpose; one entity it can see."""
    ws = stack.workspace("batch tests")
    alice, bob = stack.member(ws), stack.member(ws)
    bot = stack.member(ws, purposes=[CONV])
    alice.remember("Maria keeps a parrot called Captain.", entities=[m.EntityMention(name="Maria")])
    maria = stack.memory.FindEntities(g.FindEntitiesRequest(name="Maria"), metadata=bot.md()).entities[0].id
    return {"ws": ws, "alice": alice, "bob": bob, "bot": bot, "maria": maria}


def mixed(maria: str) -> list[tuple[g.RememberRequest, grpc.StatusCode]]:
    """Good entries and one of each kind of bad entry, with the code each must get."""
    occurred = timestamp_pb2.Timestamp()
    occurred.FromDatetime(WHEN)
    return [
        (
            entry("The lighthouse keeper polishes the brass lens every morning.", title="Lighthouse", request_id="b-0"),
            OK,
        ),
        (entry("a bad kind", kind=99), INVALID),
        (entry(""), INVALID),
        (entry("   "), INVALID),
        (entry("nul \x00 inside"), INVALID),
        (entry("too sure", confidence=1.5), INVALID),
        (entry("a task for later", purpose=TASKS), DENIED),  # not granted to the bot
        (entry("no purpose", purpose=m.PURPOSE_UNSPECIFIED), INVALID),
        (entry("nobody's audience", audience=m.AUDIENCE_UNSPECIFIED), INVALID),
        (entry("about a ghost", entities=[m.EntityMention(entity_id=str(uuid.uuid4()))]), NOT_FOUND),
        (entry("long request id", request_id="r" * 201), INVALID),
        (
            entry(
                "The spare key is under the blue flowerpot by the shed.",
                audience=m.AUDIENCE_MEMBER,
                request_id="b-private",
            ),
            OK,
        ),
        (
            entry(
                "Maria taught the parrot to whistle the harbour tune.",
                request_id="b-maria",
                entities=[m.EntityMention(entity_id=maria), m.EntityMention(name="Harbour")],
            ),
            OK,
        ),
        (
            entry(
                "The ferry timetable changed: departures now at quarter past.",
                kind=m.KIND_FACT,
                confidence=0.5,
                occurred_at=occurred,
                request_id="b-ferry",
            ),
            OK,
        ),
        (
            entry("The lighthouse keeper polishes the brass lens every morning.", title="Lighthouse", request_id="b-0"),
            OK,
        ),  # repeats the first entry's request id: its result
    ]


def test_each_entry_gets_its_own_result_with_the_code_remember_gives(stack, team):
    bot, bob = team["bot"], team["bob"]
    cases = mixed(team["maria"])
    before = stored_count(stack, team["ws"], bot.id)
    results = batch(bot, [req for req, _ in cases])
    assert [code(r) for r in results] == [want for _, want in cases]

    # Each failed entry carries exactly the status a Remember of it gives: code, message, ErrorInfo.
    for (req, want), result in zip(cases, results, strict=True):
        if want == OK:
            continue
        with pytest.raises(grpc.RpcError) as err:
            stack.memory.Remember(req, metadata=bot.md())
        assert (err.value.code(), err.value.details()) == (want, result.error.message)
        assert error_info(err.value) == reason(result)
    assert reason(results[1]).metadata["field"] == "kind"
    assert results[9].error.message == "entity not found"

    good = [r.memory for (_, want), r in zip(cases, results, strict=True) if want == OK]
    lighthouse, private, parrot, ferry, repeat = good
    assert repeat.id == lighthouse.id  # the repeat of a request id answers with the first result
    assert stored_count(stack, team["ws"], bot.id) == before + 4

    # Stored as asked, and readable.
    read = bot.read(lighthouse.id)
    assert (read.title, read.body, read.kind, read.origin, read.revision, read.created_by) == (
        "Lighthouse",
        "The lighthouse keeper polishes the brass lens every morning.",
        m.KIND_NOTE,
        m.ORIGIN_TOLD,
        1,
        bot.id,
    )
    assert read.audience == m.AUDIENCE_WORKSPACE and read.purpose == CONV and read.confidence == 1.0
    read = bot.read(ferry.id)
    assert read.kind == m.KIND_FACT and read.confidence == 0.5
    assert read.occurred_at.ToDatetime(tzinfo=datetime.UTC) == WHEN
    read = bot.read(parrot.id)
    assert sorted((ln.type, ln.target_entity_name) for ln in read.links) == [
        (m.LINK_TYPE_ABOUT, "Harbour"),
        (m.LINK_TYPE_ABOUT, "Maria"),
    ]
    assert team["maria"] in [ln.target_entity_id for ln in read.links]
    assert private.audience == m.AUDIENCE_MEMBER and private.audience_member_id == bot.id

    # Recallable by keyword, each by its own words.
    for mem, words in (
        (lighthouse, "lighthouse brass lens"),
        (parrot, "parrot whistle harbour tune"),
        (ferry, "ferry timetable departures"),
        (private, "spare key flowerpot"),
    ):
        assert bot.recall(words, mode=m.RECALL_MODE_LEXICAL).items[0].memory.id == mem.id

    # The member-only entry is the bot's alone.
    for mode in (m.RECALL_MODE_LEXICAL, m.RECALL_MODE_HYBRID):
        assert private.id not in [it.memory.id for it in bob.recall("spare key flowerpot", mode=mode).items]
    assert code_of(bob.read, private.id) == NOT_FOUND
    assert bob.read(lighthouse.id).id == lighthouse.id

    # Every memory written was queued for embedding in the same transaction.
    stack.wait_backlog_empty()
    with stack.db(team["ws"]) as conn:
        vectors = conn.execute(
            "SELECT count(*) FROM memory_embedding WHERE memory_id = ANY(%s)", ([uuid.UUID(x.id) for x in good[:4]],)
        ).fetchone()[0]
    assert vectors == 4
    assert (
        bot.recall("Who looks after the lighthouse lamp?", mode=m.RECALL_MODE_DENSE).items[0].memory.id == lighthouse.id
    )


def test_resending_a_batch_returns_the_same_ids_and_writes_nothing(stack, team):
    alice = team["alice"]
    requests = [
        entry(f"Import row {i}: the quartermaster counted {i} barrels of tar.", request_id=f"imp-{i}")
        for i in range(40)
    ] + [entry("", request_id="imp-bad")]
    first = batch(alice, requests)
    assert [code(r) for r in first] == [OK] * 40 + [INVALID]
    count = stored_count(stack, team["ws"], alice.id)
    with stack.db(team["ws"]) as conn:
        links = conn.execute("SELECT count(*) FROM memory_link").fetchone()[0]
    again = batch(alice, requests)
    assert [r.memory.id for r in again[:40]] == [r.memory.id for r in first[:40]]
    assert again[40].error.message == first[40].error.message
    assert stored_count(stack, team["ws"], alice.id) == count
    with stack.db(team["ws"]) as conn:
        assert conn.execute("SELECT count(*) FROM memory_link").fetchone()[0] == links
    # A single Remember of the same request with one of those ids answers with the same memory, and
    # vice versa; another text under the id is refused (tests/test_idempotency.py has the rest).
    assert alice.remember("Import row 7: the quartermaster counted 7 barrels of tar.", request_id="imp-7").id == (
        first[7].memory.id
    )
    assert code_of(alice.remember, "whatever text", request_id="imp-7") == grpc.StatusCode.ALREADY_EXISTS
    single = alice.remember("The bosun sharpened the cutlasses before dawn.", request_id="imp-single")
    mixed_again = batch(
        alice,
        [entry("The bosun sharpened the cutlasses before dawn.", request_id="imp-single"), entry("a fresh row of tar")],
    )
    assert mixed_again[0].memory.id == single.id and mixed_again[1].memory.id not in (single.id, "")
    assert stored_count(stack, team["ws"], alice.id) == count + 2


def test_batch_size_limits(stack, team):
    alice = team["alice"]
    call = stack.memory.RememberBatch
    with pytest.raises(grpc.RpcError) as err:
        call(g.RememberBatchRequest(requests=[entry(f"row {i}") for i in range(501)]), metadata=alice.md())
    assert err.value.code() == INVALID and "1..500" in err.value.details()
    assert code_of(call, g.RememberBatchRequest(), metadata=alice.md()) == INVALID
    assert code_of(call, g.RememberBatchRequest(requests=[entry("no token")])) == grpc.StatusCode.UNAUTHENTICATED
    before = stored_count(stack, team["ws"], alice.id)
    full = batch(alice, [entry(f"Crate {i} of the cargo holds {i % 7} lanterns.") for i in range(500)])
    assert len(full) == 500 and all(code(r) == OK for r in full) and len({r.memory.id for r in full}) == 500
    assert stored_count(stack, team["ws"], alice.id) == before + 500
    assert alice.read(full[499].memory.id).body == "Crate 499 of the cargo holds 2 lanterns."


def test_a_row_the_database_refuses_fails_alone(stack, team, monkeypatch):
    """A value validation missed (here: confidence, with its check switched off) fails in the
    database; the batch is redone row by row and only that row fails, as a Remember of it would."""
    alice = team["alice"]
    monkeypatch.setattr(memories, "check_confidence", lambda value: value)
    bad = entry("An impossible confidence.", confidence=3.0)
    with pytest.raises(grpc.RpcError) as err:
        stack.memory.Remember(bad, metadata=alice.md())
    before = stored_count(stack, team["ws"], alice.id)
    results = batch(
        alice,
        [
            entry("The cook rations the biscuits.", request_id="sp-1"),
            bad,
            entry("The cook rations the biscuits.", request_id="sp-1"),
            entry("The lookout spotted whales at dawn."),
        ],
    )
    assert [code(r) for r in results] == [OK, err.value.code(), OK, OK]
    assert results[1].error.message == err.value.details()
    assert results[2].memory.id == results[0].memory.id
    assert stored_count(stack, team["ws"], alice.id) == before + 2
    assert alice.recall("whales lookout", mode=m.RECALL_MODE_LEXICAL).items[0].memory.id == results[3].memory.id


def test_insert_many_returns_the_winner_of_a_request_id_race(stack, team):
    """Two writers with the same request id: the one that inserts second writes nothing and answers
    with the first's memory when its request is the same, ALREADY_EXISTS when it is not (ON CONFLICT,
    no savepoint, the other rows unaffected)."""
    alice = team["alice"]
    first = alice.remember("The navigator plotted a course by the stars.", request_id="race-1")
    caller = m.Caller(
        workspace_id=team["ws"],
        member_id=alice.id,
        role=m.ROLE_MEMBER,
        granted_purposes=[CONV, TASKS, m.PURPOSE_REPORTING, m.PURPOSE_ADMINISTRATION],
    )
    same = memories.prepare_remember(caller, entry("The navigator plotted a course by the stars.", request_id="race-1"))
    other = memories.prepare_remember(caller, entry("a racing duplicate", request_id="race-1"))
    fresh = memories.prepare_remember(caller, entry("The carpenter mended the mast.", request_id="race-2"))
    with stack.db(team["ws"]) as conn:
        conn.autocommit = False
        with conn.transaction():
            lost, won = memories.insert_many(
                conn, caller, [memories.Insert(same.new, same.key, []), memories.Insert(fresh.new, fresh.key, [])]
            )
            (refused,) = memories.insert_many(conn, caller, [memories.Insert(other.new, other.key, [])])
    assert lost.id == first.id and lost.body == first.body
    # The loser of a race with another request under the same id is refused, not given the winner's memory.
    assert refused.code == grpc.StatusCode.ALREADY_EXISTS and refused.metadata == {
        "request_id": "race-1",
        "operation": "remember",
    }
    assert won.id not in ("", first.id) and alice.read(won.id).body == "The carpenter mended the mast."


def test_racing_identical_batches_store_each_row_once(stack, team):
    """The same batch sent four times at once: every call answers with the same ids, each row stored once."""
    alice = team["alice"]
    requests = [
        entry(f"Racing row {i}: the signal flag number {i} was hoisted.", request_id=f"rb-{i}") for i in range(120)
    ]
    before = stored_count(stack, team["ws"], alice.id)
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: batch(alice, requests), range(4)))
    ids = [[r.memory.id for r in results] for results in answers]
    assert all(code(r) == OK for results in answers for r in results)
    assert ids[1] == ids[0] and ids[2] == ids[0] and ids[3] == ids[0] and len(set(ids[0])) == 120
    assert stored_count(stack, team["ws"], alice.id) == before + 120


@pytest.mark.slow
def test_a_batch_whose_deadline_passes_writes_nothing(stack, team):
    """Found by a hostile test: a RememberBatch of 500 rows of 64 KiB outlived the caller's deadline,
    the caller was told UNAVAILABLE "retry later", and the rows committed a minute after. The store
    now rolls the batch back when the call's deadline passed before the commit."""
    alice = team["alice"]
    words = " ".join(f"w{i}" for i in range(60))

    def rows(tag: str, n: int):
        return [entry(f"{tag} row {i} {words} " * 150) for i in range(n)]

    started = time.monotonic()
    batch(alice, rows("deadline-probe", 200))  # how long such a batch takes here, with time to spare
    took = time.monotonic() - started
    with pytest.raises(grpc.RpcError) as late:
        alice.stack.memory.RememberBatch(
            g.RememberBatchRequest(requests=rows("deadline-late", 200)), metadata=alice.md(), timeout=took / 20
        )
    assert late.value.code() in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE)
    time.sleep(2 * took + 3)  # the store has finished with the late batch by now (it took `took` alone)
    with stack.db(team["ws"]) as conn:
        landed = conn.execute("SELECT count(*) FROM memory WHERE body LIKE 'deadline-late%'").fetchone()[0]
        probe = conn.execute("SELECT count(*) FROM memory WHERE body LIKE 'deadline-probe%'").fetchone()[0]
    assert probe == 200
    assert landed == 0
