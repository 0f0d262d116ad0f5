"""Request ids bound to the member, the operation and a fingerprint of the request, through the
gateway against real PostgreSQL (store_service/records/idempotency.py): a retry of the same request gets the
first result and writes nothing; the same id with any other request, another operation, or as a
batch row that differs is refused with ALREADY_EXISTS naming the id, and writes nothing; another
member's identical id is another id; a forget erases the fingerprint and leaves the id used; ids
written before fingerprints (migration 0006) are kept and refused."""

from __future__ import annotations

import datetime
import hashlib
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc
import psycopg
import pytest
from conftest import code_of, migrate_until
from google.protobuf import timestamp_pb2
from google.rpc import code_pb2, error_details_pb2
from psycopg import sql
from psycopg.conninfo import make_conninfo
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.errors import error_info
from store_service.database import migrate
from store_service.records import idempotency, memories

OK, EXISTS, NOT_FOUND = grpc.StatusCode.OK, grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.NOT_FOUND
CONV, TASKS = m.PURPOSE_CONVERSATION, m.PURPOSE_TASKS


def rid() -> str:
    return "rq-" + uuid.uuid4().hex


def when(year: int) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(datetime.datetime(year, 5, 8, 13, 56, tzinfo=datetime.UTC))
    return ts


def remember_req(body: str, request_id: str, **kw) -> g.RememberRequest:
    fields = {"purpose": CONV, "kind": m.KIND_FACT, "title": "Ship", "audience": m.AUDIENCE_WORKSPACE, **kw}
    return g.RememberRequest(body=body, request_id=request_id, **fields)


def refused(call, *args, **kwargs) -> error_details_pb2.ErrorInfo:
    """Calls, asserts ALREADY_EXISTS, and returns the ErrorInfo detail."""
    with pytest.raises(grpc.RpcError) as err:
        call(*args, **kwargs)
    assert err.value.code() == EXISTS, err.value.details()
    info = error_info(err.value)
    assert info is not None and info.reason == "REQUEST_ID_REUSED" and info.domain == "recallatron"
    return info


def rows(stack, ws) -> list[tuple]:
    """Every memory of the workspace as (id, revision, title, body, superseded_by_id), to show nothing changed."""
    with stack.db(ws) as conn:
        return conn.execute("SELECT id, revision, title, body, superseded_by_id FROM memory ORDER BY id").fetchall()


def batch(member, requests) -> list[g.RememberBatchResult]:
    resp = member.stack.memory.RememberBatch(g.RememberBatchRequest(requests=requests), metadata=member.md())
    return list(resp.results)


def batch_code(result: g.RememberBatchResult) -> grpc.StatusCode:
    return OK if result.HasField("memory") else grpc.StatusCode[code_pb2.Code.Name(result.error.code)]


def batch_info(result: g.RememberBatchResult) -> error_details_pb2.ErrorInfo:
    info = error_details_pb2.ErrorInfo()
    assert result.error.details[0].Unpack(info)
    return info


@pytest.fixture(scope="module")
def team(stack):
    ws = stack.workspace("idempotency")
    return {"ws": ws, "alice": stack.member(ws), "bob": stack.member(ws), "stack": stack}


def test_a_retry_of_the_same_remember_gets_the_first_result_and_writes_nothing(stack, team):
    alice = team["alice"]
    r = rid()
    req = remember_req("The harbour master logs every ship at noon.", r, confidence=0.8, occurred_at=when(2023))
    first = stack.memory.Remember(req, metadata=alice.md()).memory
    before = rows(stack, team["ws"])
    again = stack.memory.Remember(req, metadata=alice.md()).memory
    assert again == first
    assert rows(stack, team["ws"]) == before


# Each variant changes one field that defines the write; each is refused and writes nothing.
CHANGES = {
    "body": {"body": "The harbour master logs every ship at dawn."},
    "title": {"title": "Harbour"},
    "kind": {"kind": m.KIND_DECISION},
    "purpose": {"purpose": TASKS},
    "audience": {"audience": m.AUDIENCE_MEMBER},
    "confidence": {"confidence": 0.5},
    "occurred_at": {"occurred_at": when(2024)},
    "entities": {"entities": [m.EntityMention(name="Harbour master")]},
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_the_same_id_with_a_different_remember_is_already_exists(stack, team, change):
    alice = team["alice"]
    r = rid()
    base = {"confidence": 0.8, "occurred_at": when(2023)}
    md = alice.md()
    first = stack.memory.Remember(remember_req("The harbour master logs every ship at noon.", r, **base), metadata=md)
    before = rows(stack, team["ws"])
    fields = {"body": "The harbour master logs every ship at noon.", **base, **CHANGES[change]}
    info = refused(stack.memory.Remember, remember_req(request_id=r, **fields), metadata=md)
    assert dict(info.metadata) == {"request_id": r, "operation": "remember"}
    assert rows(stack, team["ws"]) == before
    assert alice.read(first.memory.id).body == "The harbour master logs every ship at noon."
    # The first request still gets its result afterwards.
    again = stack.memory.Remember(remember_req("The harbour master logs every ship at noon.", r, **base), metadata=md)
    assert again.memory.id == first.memory.id


def test_the_message_names_the_id(stack, team):
    alice = team["alice"]
    r = rid()
    alice.remember("The pilot boat leaves at six.", request_id=r)
    with pytest.raises(grpc.RpcError) as err:
        alice.remember("The pilot boat leaves at seven.", request_id=r)
    assert r in err.value.details() and "new request_id" in err.value.details()


def test_equivalent_forms_of_one_request_are_the_same_request(stack, team):
    """Defaults and order that do not change the write do not change the fingerprint: kind unset is
    a note, confidence unset is 1, entity mentions in another order are the same mentions."""
    alice = team["alice"]
    r = rid()
    mentions = [m.EntityMention(name="Quay"), m.EntityMention(name="Crane")]
    first = alice.remember("The crane on the quay lifts forty tonnes.", request_id=r, entities=mentions)
    again = stack.memory.Remember(
        g.RememberRequest(
            purpose=CONV,
            kind=m.KIND_NOTE,
            body="The crane on the quay lifts forty tonnes.",
            audience=m.AUDIENCE_WORKSPACE,
            confidence=1.0,
            entities=list(reversed(mentions)),
            request_id=r,
        ),
        metadata=alice.md(),
    ).memory
    assert again.id == first.id
    # Mentioning a name twice is a different request: mentions are fingerprinted as given.
    twice = [m.EntityMention(name="Quay"), m.EntityMention(name="Quay"), m.EntityMention(name="Crane")]
    refused(alice.remember, "The crane on the quay lifts forty tonnes.", request_id=r, entities=twice)


def test_the_stored_fingerprint_is_the_sha256_of_the_documented_encoding(stack, team):
    alice = team["alice"]
    r = rid()
    mem = alice.remember(
        "Tide tables hang by the door.",
        title="Tides",
        request_id=r,
        entities=[m.EntityMention(name=" Tide "), m.EntityMention(name="Door")],
    )
    encoding = (
        '{"audience":"workspace","body":"Tide tables hang by the door.","confidence":1.0,'
        '"entity_ids":[],"entity_names":["Door","Tide"],"kind":"note","occurred_at":null,'
        '"operation":"remember","purpose":"conversation","title":"Tides"}'
    )
    with team["stack"].db(team["ws"]) as conn:
        row = conn.execute(
            "SELECT request_id, request_operation, request_fingerprint FROM memory WHERE id = %s", (uuid.UUID(mem.id),)
        ).fetchone()
    assert row == (r, "remember", hashlib.sha256(encoding.encode("utf-8")).digest())


def test_another_operation_with_the_id_is_already_exists(stack, team):
    alice = team["alice"]
    src = alice.remember("The lock gates open at high water.")
    target = alice.remember("The ferry runs hourly.")
    told, derived, replaced = rid(), rid(), rid()
    alice.remember("The dredger works at night.", request_id=told)
    stack.memory.Derive(
        g.DeriveRequest(source_ids=[src.id], body="Gates and tides.", request_id=derived), metadata=alice.md()
    )
    stack.memory.Supersede(
        g.SupersedeRequest(
            id=target.id, expected_revision=1, body="The ferry runs every 30 minutes.", request_id=replaced
        ),
        metadata=alice.md(),
    )
    info = refused(
        stack.memory.Derive, g.DeriveRequest(source_ids=[src.id], body="x", request_id=told), metadata=alice.md()
    )
    assert dict(info.metadata) == {"request_id": told, "operation": "remember"}
    info = refused(alice.remember, "Gates and tides.", request_id=derived)
    assert dict(info.metadata) == {"request_id": derived, "operation": "derive"}
    other = alice.remember("The buoy is red.")
    before = rows(stack, team["ws"])
    info = refused(
        stack.memory.Supersede,
        g.SupersedeRequest(id=other.id, expected_revision=1, body="The buoy is green.", request_id=told),
        metadata=alice.md(),
    )
    assert dict(info.metadata) == {"request_id": told, "operation": "remember"}
    refused(
        stack.memory.Derive,
        g.DeriveRequest(source_ids=[other.id], body="Buoys.", request_id=replaced),
        metadata=alice.md(),
    )
    assert rows(stack, team["ws"]) == before
    assert alice.read(other.id).superseded_by_id == ""


def test_derive_and_supersede_retries_and_changes(stack, team):
    alice = team["alice"]
    a, b = alice.remember("The north pier is closed."), alice.remember("The south pier is open.")
    r = rid()

    def derive(sources, body="Pier status."):
        req = g.DeriveRequest(source_ids=sources, kind=m.KIND_SUMMARY, body=body, request_id=r)
        return stack.memory.Derive(req, metadata=alice.md()).memory

    first = derive([a.id, b.id])
    assert derive([b.id, a.id, b.id]).id == first.id  # the same sources, as a set
    before = rows(stack, team["ws"])
    refused(derive, [a.id])
    refused(derive, [a.id, b.id], "Pier status today.")
    assert rows(stack, team["ws"]) == before

    old, other = alice.remember("The light is white."), alice.remember("The horn sounds twice.")
    s = rid()

    def supersede(target, body="The light is green.", revision=1):
        req = g.SupersedeRequest(id=target, expected_revision=revision, body=body, request_id=s)
        return stack.memory.Supersede(req, metadata=alice.md()).memory

    successor = supersede(old.id)
    # A retry gets the successor although the target is now superseded.
    assert supersede(old.id).id == successor.id
    before = rows(stack, team["ws"])
    refused(supersede, old.id, "The light is red.")
    refused(supersede, other.id)  # the same id for another target
    refused(supersede, old.id, revision=2)
    assert rows(stack, team["ws"]) == before
    assert alice.read(other.id).superseded_by_id == ""


def test_another_member_with_the_same_id_writes_its_own_memory(stack, team):
    alice, bob = team["alice"], team["bob"]
    r, p = rid(), rid()
    # Alice's workspace memory, readable by Bob: Bob's identical request under her id is still his
    # own first write, never answered with her memory.
    hers = alice.remember("The tug Hercules is moored at berth 3.", request_id=r)
    his = bob.remember("The tug Hercules is moored at berth 3.", request_id=r)
    assert his.id != hers.id and his.created_by == bob.id and hers.created_by == alice.id
    refused(bob.remember, "The tug Hercules is moored at berth 4.", request_id=r)  # bound to his first write now
    assert alice.remember("The tug Hercules is moored at berth 3.", request_id=r).id == hers.id
    # A member-only memory: Bob's different request under Alice's id is written and his alone.
    mine = alice.remember("Alice's locker is number 12.", audience=m.AUDIENCE_MEMBER, request_id=p)
    theirs = bob.remember("Bob's locker is number 40.", audience=m.AUDIENCE_MEMBER, request_id=p)
    assert theirs.id != mine.id and bob.read(theirs.id).body == "Bob's locker is number 40."
    assert code_of(bob.read, mine.id) == NOT_FOUND
    assert alice.read(mine.id).body == "Alice's locker is number 12."


def test_batch_rows_are_each_judged_against_the_first_use(stack, team):
    alice = team["alice"]
    used, fresh, twice = rid(), rid(), rid()
    single = alice.remember("The slipway was repainted.", request_id=used)
    before = len(rows(stack, team["ws"]))
    results = batch(
        alice,
        [
            remember_req("The slipway was repainted.", used, kind=m.KIND_NOTE, title=""),  # a retry of `single`
            remember_req("The slipway was rebuilt.", used),  # another request under a used id
            remember_req("The chandlery sells rope.", fresh),
            remember_req("The chandlery sells tar.", fresh),  # differs from the row before it
            remember_req("The chandlery sells rope.", fresh),  # repeats the row before that
            remember_req("The net loft is upstairs.", twice),
            remember_req("The net loft is upstairs.", twice, audience=m.AUDIENCE_MEMBER),
            remember_req("", rid()),  # invalid: fails alone
        ],
    )
    codes = [batch_code(r) for r in results]
    assert codes == [OK, EXISTS, OK, EXISTS, OK, OK, EXISTS, grpc.StatusCode.INVALID_ARGUMENT]
    assert results[0].memory.id == single.id
    assert results[4].memory.id == results[2].memory.id
    assert dict(batch_info(results[1]).metadata) == {"request_id": used, "operation": "remember"}
    assert dict(batch_info(results[3]).metadata) == {"request_id": fresh, "operation": "remember"}
    assert batch_info(results[6]).reason == "REQUEST_ID_REUSED" and twice in results[6].error.message
    assert len(rows(stack, team["ws"])) == before + 2
    assert alice.read(results[2].memory.id).body == "The chandlery sells rope."
    # The whole batch again: the same answer row by row, nothing written.
    again = batch(
        alice, [remember_req("The chandlery sells tar.", fresh), remember_req("The net loft is upstairs.", twice)]
    )
    assert [batch_code(r) for r in again] == [EXISTS, OK] and again[1].memory.id == results[5].memory.id
    assert len(rows(stack, team["ws"])) == before + 2


def test_batch_rows_redone_one_by_one_keep_the_rule(stack, team, monkeypatch):
    """A row the database refuses sends the batch down the row-by-row path; the rule holds there too."""
    alice = team["alice"]
    monkeypatch.setattr(memories, "check_confidence", lambda value: value)
    r = rid()
    before = len(rows(stack, team["ws"]))
    results = batch(
        alice,
        [
            remember_req("The ropewalk is 300 metres long.", r),
            remember_req("An impossible confidence.", rid(), confidence=3.0),
            remember_req("The ropewalk is 400 metres long.", r),
            remember_req("The ropewalk is 300 metres long.", r),
        ],
    )
    codes = [batch_code(x) for x in results]
    assert codes[0] == OK and codes[1] not in (OK, EXISTS) and codes[2:] == [EXISTS, OK]
    assert results[3].memory.id == results[0].memory.id
    assert len(rows(stack, team["ws"])) == before + 1


def test_racing_different_requests_under_one_id_write_one(stack, team):
    alice = team["alice"]
    r = rid()
    barrier = threading.Barrier(6)

    def attempt(i: int) -> tuple[grpc.StatusCode, str]:
        barrier.wait()
        try:
            return OK, alice.remember(f"Racing claim number {i}.", request_id=r).body
        except grpc.RpcError as exc:
            return exc.code(), ""

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(attempt, range(6)))
    assert sorted(c.name for c, _ in answers) == ["ALREADY_EXISTS"] * 5 + ["OK"]
    with stack.db(team["ws"]) as conn:
        stored = conn.execute(
            "SELECT body FROM memory WHERE created_by = %s AND request_id = %s", (uuid.UUID(alice.id), r)
        ).fetchall()
    assert stored == [(next(body for c, body in answers if c == OK),)]


def test_forget_erases_the_fingerprint_and_keeps_the_id_used(stack, team):
    alice = team["alice"]
    r = rid()
    mem = alice.remember("The old lighthouse code was 4711.", request_id=r)
    stack.memory.Forget(g.ForgetRequest(id=mem.id, reason="secret"), metadata=alice.md())
    with stack.db(team["ws"]) as conn:
        stored = conn.execute(
            "SELECT request_id, request_operation, request_fingerprint FROM memory WHERE id = %s", (uuid.UUID(mem.id),)
        ).fetchone()
    assert stored == (r, "remember", None)
    before = rows(stack, team["ws"])
    assert code_of(alice.remember, "The old lighthouse code was 4711.", request_id=r) == NOT_FOUND
    assert code_of(alice.remember, "Something else entirely.", request_id=r) == NOT_FOUND
    assert rows(stack, team["ws"]) == before


def test_canonical_encoding_is_stable():
    """The encoding the README documents: sorted keys, no spaces, UTF-8 as is, floats as repr."""
    fields = {"title": "Café", "confidence": 0.1, "sources": ["b", "a"], "occurred_at": None}
    assert idempotency.canonical("derive", fields) == (
        '{"confidence":0.1,"occurred_at":null,"operation":"derive","sources":["b","a"],"title":"Café"}'.encode()
    )
    assert idempotency.key("", "derive", fields).fingerprint == b""


def test_migration_keeps_legacy_ids_bound_and_refuses_their_reuse(pg):
    """A database at 0005 holding the old '<operation>:<id>' keys comes out with the ids as sent,
    their operation and no fingerprint; a member's id used by two operations stays with the oldest
    memory; any reuse of a legacy id is ALREADY_EXISTS (never the first result)."""
    db_name = f"idem_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db_name)))
    url = make_conninfo(pg, dbname=db_name)
    try:
        migrate_until(url, "0005_embedding_input_hash")
        alice, bob, target = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        legacy = [  # (id, member, stored key, age in minutes)
            (uuid.uuid4(), alice, "remember:a-1", 30),
            (uuid.uuid4(), alice, "derive:a-1", 20),  # the same id, another operation, younger
            (uuid.uuid4(), alice, f"supersede:{target}:s:1", 10),  # an id with a colon in it
            (uuid.uuid4(), alice, f"supersede:urn:uuid:{target.hex}:s-2", 5),
            (uuid.uuid4(), bob, "remember:a-1", 1),
        ]
        with psycopg.connect(url, autocommit=True) as conn:
            for mid, member, key, age in legacy:
                conn.execute(
                    """INSERT INTO memory (id, kind, body, purpose, origin, created_by, request_id, created_at)
                       VALUES (%s, 'note', 'old', 'conversation', 'told', %s, %s, now() - %s * interval '1 minute')""",
                    (mid, member, key, age),
                )
        migrate(url, "workspace")
        with psycopg.connect(url, autocommit=True) as conn:
            got = dict(
                (r[0], r[1:])
                for r in conn.execute("SELECT id, request_id, request_operation, request_fingerprint FROM memory")
            )
            assert got == {
                legacy[0][0]: ("a-1", "remember", None),
                legacy[1][0]: (None, None, None),
                legacy[2][0]: ("s:1", "supersede", None),
                legacy[3][0]: ("s-2", "supersede", None),
                legacy[4][0]: ("a-1", "remember", None),
            }
            caller = m.Caller(member_id=str(alice), granted_purposes=[CONV])
            key = idempotency.key("a-1", idempotency.REMEMBER, {"body": "old"})
            (answer,) = memories.by_request_ids(conn, caller, [key])
            assert answer.code == EXISTS and answer.metadata == {"request_id": "a-1", "operation": "remember"}
            assert "before request fingerprints were kept" in answer.message
            assert memories.by_request_ids(conn, caller, [idempotency.key("a-2", "remember", {})]) == [None]
    finally:
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(db_name)))
