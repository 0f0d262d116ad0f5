"""History evidence end to end through the gateway, against real PostgreSQL: AppendHistory (limits,
idempotency, sessions), and that history is owner-only and never a memory."""

import datetime
import uuid

import grpc
import pytest
from conftest import code_of
from google.protobuf import timestamp_pb2
from google.rpc import code_pb2, error_details_pb2
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

from store_service import history

OK, INVALID = grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT
T0 = datetime.datetime(2026, 3, 2, 8, 0, tzinfo=datetime.UTC)


def ts(when: datetime.datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(when)
    return out


def turn(text="hello", *, chat="tg:1", role="user", at=T0, session="", request_id="") -> g.HistoryTurn:
    return g.HistoryTurn(
        text=text, chat_id=chat, role=role, occurred_at=ts(at), session_id=session, request_id=request_id
    )


def append(member, turns) -> list[g.AppendHistoryResult]:
    return list(member.stack.memory.AppendHistory(g.AppendHistoryRequest(turns=turns), metadata=member.md()).results)


def code(result: g.AppendHistoryResult) -> grpc.StatusCode:
    return OK if result.HasField("turn_id") else grpc.StatusCode[code_pb2.Code.Name(result.error.code)]


def field_of(result: g.AppendHistoryResult) -> str:
    info = error_details_pb2.ErrorInfo()
    assert result.error.details[0].Unpack(info)
    return info.metadata["field"]


def stored(stack, ws, member_id) -> list:
    """The member's live turns as stored, in time order."""
    with stack.db(ws) as conn:
        return conn.execute(
            """SELECT id::text, chat_id, role, text, occurred_at, session_id, session, request_id
                 FROM history_turn WHERE owner_member_id = %s AND forgotten_at IS NULL ORDER BY occurred_at, seq""",
            (uuid.UUID(member_id),),
        ).fetchall()


@pytest.fixture(scope="module")
def team(stack):
    ws = stack.workspace("history tests")
    return ws, stack.member(ws), stack.member(ws)


def test_gateway_and_store_history_messages_share_fields_and_numbers():
    """The gateway converts history messages through their wire form (gateway.server.same_fields)."""

    def shape(descriptor):
        return [
            (
                f.name,
                f.number,
                f.type,
                f.is_repeated,
                f.containing_oneof.name if f.containing_oneof else None,
                f.message_type.name if f.message_type else None,
            )
            for f in descriptor.fields
        ]

    for name in ("HistoryTurn", "AppendHistoryResult"):
        assert shape(g.DESCRIPTOR.message_types_by_name[name]) == shape(s.DESCRIPTOR.message_types_by_name[name]), name


def test_append_stores_each_turn_and_answers_in_order(stack, team):
    ws, alice, _ = team
    results = append(
        alice,
        [
            turn("Can you remind me when the tax filing is due?", at=T0, session="tg:1:1"),
            turn("Noted: the tax filing is due on 2026-04-30.", role="rheo", at=T0 + datetime.timedelta(minutes=1)),
            turn("stray\x00 NUL", role="assistant", at=T0 + datetime.timedelta(minutes=2), chat="tg:2"),
        ],
    )
    assert [code(r) for r in results] == [OK, OK, OK]
    assert not any(r.replayed for r in results)
    rows = {r[0]: r for r in stored(stack, ws, alice.id)}
    first, second, third = (rows[r.turn_id] for r in results)
    assert first[1:4] == ("tg:1", "user", "Can you remind me when the tax filing is due?")
    assert first[4] == T0 and first[5] == "tg:1:1" and first[6] == "tg:1:1"
    assert second[2] == "assistant"  # the old store's assistant name is stored as assistant
    assert second[5] is None and second[6] == "tg:1:1"  # no session: its run's named one
    assert third[3] == "stray NUL"  # NUL dropped, the text kept
    assert third[6] == "tg:2@2026-03-02T08:02:00Z"  # a run naming no session: computed


def test_a_request_id_is_stored_once_even_within_one_call(stack, team):
    ws, alice, bob = team
    key = f"legacy-turn-{uuid.uuid4().hex[:8]}"
    first = append(alice, [turn("first words", request_id=key, chat="idem")])[0]
    again = append(alice, [turn("other words", request_id=key, chat="idem"), turn("x", request_id=key, chat="idem")])
    assert code(first) == OK and not first.replayed
    assert [(r.turn_id, r.replayed) for r in again] == [(first.turn_id, True), (first.turn_id, True)]
    pair = append(
        alice, [turn("one", request_id=key + "b", chat="idem"), turn("two", request_id=key + "b", chat="idem")]
    )
    assert pair[0].turn_id == pair[1].turn_id and (pair[0].replayed, pair[1].replayed) == (False, True)
    assert [r[3] for r in stored(stack, ws, alice.id) if r[1] == "idem"] == ["first words", "one"]
    # The same request id is another member's own key: bob's turn is stored.
    theirs = append(bob, [turn("bob's words", request_id=key, chat="idem")])[0]
    assert code(theirs) == OK and not theirs.replayed and theirs.turn_id != first.turn_id


def test_bad_turns_fail_alone_with_the_field_named(stack, team):
    ws, alice, _ = team
    bad_time = turn("x")
    bad_time.occurred_at.seconds = 253402300800  # year 10000
    bad_nanos = turn("x")
    bad_nanos.occurred_at.nanos = 1_000_000_000
    cases = [
        (turn(""), "text"),
        (turn(" \n\t "), "text"),
        (turn("\x00\x00"), "text"),
        (turn("x" * 65_537), "text"),
        (turn("é" * 32_769), "text"),  # 65,538 bytes in 32,769 characters
        (turn("x", role="system"), "role"),
        (turn("x", role=""), "role"),
        (turn("x", role="User"), "role"),
        (turn("x", chat=""), "chat_id"),
        (turn("x", chat="  "), "chat_id"),
        (turn("x", chat="c" * 201), "chat_id"),
        (turn("x", chat="a\x00b"), "chat_id"),
        (turn("x", session="s" * 201), "session_id"),
        (turn("x", request_id="r" * 201), "request_id"),
        (bad_time, "occurred_at"),
        (bad_nanos, "occurred_at"),
    ]
    good = turn("x" * 65_536, chat="limits")  # exactly the limit
    nul_long = turn("x" * 65_536 + "\x00", chat="limits")  # the limit once the NUL is dropped
    results = append(alice, [good, *(c for c, _ in cases), nul_long])
    assert code(results[0]) == OK and code(results[-1]) == OK
    for (_, field), result in zip(cases, results[1:-1], strict=True):
        assert code(result) == INVALID and field_of(result) == field, (field, result.error.message)
        assert field in result.error.message
    assert [len(r[3]) for r in stored(stack, ws, alice.id) if r[1] == "limits"] == [65_536, 65_536]


def test_the_whole_call_fails_only_for_size_or_token(stack, team):
    _, alice, _ = team
    api = stack.memory
    assert code_of(api.AppendHistory, g.AppendHistoryRequest(), metadata=alice.md()) == INVALID
    many = g.AppendHistoryRequest(turns=[turn(f"t{i}", chat="many") for i in range(501)])
    assert code_of(api.AppendHistory, many, metadata=alice.md()) == INVALID
    five_hundred = g.AppendHistoryRequest(turns=[turn(f"t{i}", chat="many") for i in range(500)])
    assert [code(r) for r in api.AppendHistory(five_hundred, metadata=alice.md()).results] == [OK] * 500
    assert code_of(api.AppendHistory, g.AppendHistoryRequest(turns=[turn()])) == grpc.StatusCode.UNAUTHENTICATED


def test_an_unset_time_is_the_time_of_the_append(stack, team):
    ws, alice, _ = team
    before = datetime.datetime.now(datetime.UTC)
    result = append(alice, [g.HistoryTurn(text="no time given", chat_id="now", role="user")])[0]
    after = datetime.datetime.now(datetime.UTC)
    (row,) = [r for r in stored(stack, ws, alice.id) if r[0] == result.turn_id]
    assert before <= row[4] <= after


def minutes(n: float) -> datetime.timedelta:
    return datetime.timedelta(minutes=n)


def test_sessions_are_runs_with_no_gap_over_two_hours(stack, team):
    ws, alice, _ = team
    chat = f"runs-{uuid.uuid4().hex[:6]}"
    at = [T0, T0 + minutes(120), T0 + minutes(241), T0 + minutes(300)]  # 2h exactly joins; 2h01 splits
    append(alice, [turn(f"r{i}", chat=chat, at=when) for i, when in enumerate(at)])
    sessions = {r[3]: r[6] for r in stored(stack, ws, alice.id) if r[1] == chat}
    first, second = f"{chat}@2026-03-02T08:00:00Z", f"{chat}@2026-03-02T12:01:00Z"
    assert sessions == {"r0": first, "r1": first, "r2": second, "r3": second}
    # A turn appended later in the gap joins the two runs: the later one takes the first's session.
    append(alice, [turn("bridge", chat=chat, at=T0 + minutes(200))])
    sessions = {r[3]: r[6] for r in stored(stack, ws, alice.id) if r[1] == chat}
    assert set(sessions.values()) == {first}
    # A turn that names a session lends it to the run's unnamed turns after it (and before it, when
    # none before names one); other chats and other members are untouched.
    append(alice, [turn("named", chat=chat, at=T0 + minutes(130), session="S")])
    sessions = {r[3]: r[6] for r in stored(stack, ws, alice.id) if r[1] == chat}
    assert sessions == {"r0": "S", "r1": "S", "named": "S", "bridge": "S", "r2": "S", "r3": "S"}


def test_sessions_of_runs_rule():
    gap = history.SESSION_GAP
    t = [T0, T0 + minutes(1), T0 + minutes(2), T0 + minutes(3), T0 + gap + minutes(4)]
    got = history.sessions_of_runs("c", [(t[0], None), (t[1], "A"), (t[2], None), (t[3], "B"), (t[4], None)])
    assert got == ["A", "A", "A", "B", "c@2026-03-02T10:04:00Z"]
    assert history.sessions_of_runs("c", []) == []
    early = datetime.datetime(1, 1, 1, 0, 0, 0, 5, tzinfo=datetime.UTC)
    assert history.sessions_of_runs("c", [(early, None)]) == ["c@0001-01-01T00:00:00.000005Z"]


def test_history_writes_nothing_memories_are_made_of(stack, team):
    """No memory row, vector job, keyword posting or statistic comes from a turn; Recall of a word
    only history holds finds nothing, in every mode."""
    ws, alice, _ = team
    word = "hx" + uuid.uuid4().hex[:10]
    with stack.db(ws) as conn:
        tables = ("memory", "embedding_job", "lexical_posting", "lexical_df", "lexical_partition", "entity")
        before = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
        totals = conn.execute("SELECT sum(doc_count), sum(total_len) FROM lexical_partition").fetchone()
    assert [code(r) for r in append(alice, [turn(f"{word} about Maria", chat="iso")])] == [OK]
    with stack.db(ws) as conn:
        assert {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables} == before
        assert conn.execute("SELECT sum(doc_count), sum(total_len) FROM lexical_partition").fetchone() == totals
    for mode in (m.RECALL_MODE_LEXICAL, m.RECALL_MODE_DENSE, m.RECALL_MODE_HYBRID):
        resp = alice.recall(word, mode=mode)
        assert list(resp.items) == [] and resp.counts.lexical == 0
