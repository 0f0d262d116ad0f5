"""History evidence end to end through the gateway, against real PostgreSQL: AppendHistory (limits,
idempotency, sessions), SearchHistory (BM25 against tests/history_reference.py over the caller's own
turns, filters, pages), ForgetHistory (by ids, by range), bad input to each, and that history is
owner-only and never a memory."""

import datetime
import random
import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from conftest import code_of
from google.protobuf import timestamp_pb2
from google.rpc import code_pb2, error_details_pb2
from history_reference import bm25
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from client import bearer
from store_service.history import turn_index, turn_sessions

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
    again = append(alice, [turn("first words", request_id=key, chat="idem"), turn("x", request_id=key, chat="idem")])
    assert code(first) == OK and not first.replayed
    # The same turn again is a replay; another turn under the same id is refused, never dropped silently.
    assert (again[0].turn_id, again[0].replayed) == (first.turn_id, True)
    assert code(again[1]) == grpc.StatusCode.ALREADY_EXISTS
    pair = append(
        alice,
        [
            turn("one", request_id=key + "b", chat="idem"),
            turn("one", request_id=key + "b", chat="idem"),
            turn("two", request_id=key + "b", chat="idem"),
            turn("one", request_id=key + "b", chat="other chat"),
        ],
    )
    assert pair[0].turn_id == pair[1].turn_id and (pair[0].replayed, pair[1].replayed) == (False, True)
    assert [code(r) for r in pair[2:]] == [grpc.StatusCode.ALREADY_EXISTS] * 2
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
    gap = turn_sessions.SESSION_GAP
    t = [T0, T0 + minutes(1), T0 + minutes(2), T0 + minutes(3), T0 + gap + minutes(4)]
    got = turn_sessions.sessions_of_runs("c", [(t[0], None), (t[1], "A"), (t[2], None), (t[3], "B"), (t[4], None)])
    assert got == ["A", "A", "A", "B", "c@2026-03-02T10:04:00Z"]
    assert turn_sessions.sessions_of_runs("c", []) == []
    early = datetime.datetime(1, 1, 1, 0, 0, 0, 5, tzinfo=datetime.UTC)
    assert turn_sessions.sessions_of_runs("c", [(early, None)]) == ["c@0001-01-01T00:00:00.000005Z"]


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


# SearchHistory and ForgetHistory.


def search(member, query="", **kw) -> g.SearchHistoryResponse:
    return member.stack.memory.SearchHistory(g.SearchHistoryRequest(query=query, **kw), metadata=member.md())


def search_all(member, query="", page_size=3, **kw) -> list[g.HistoryEntry]:
    """Every page of a search, following next_page_token."""
    out, token = [], ""
    for _ in range(1000):
        page = search(member, query, page_size=page_size, page_token=token, **kw)
        out += page.entries
        token = page.next_page_token
        if not token:
            return out
    raise AssertionError("pagination did not end")


def forget(member, **kw):
    return member.stack.memory.ForgetHistory(g.ForgetHistoryRequest(**kw), metadata=member.md())


LINES = [
    "Can you remind me when the tax filing is due?",
    "Noted: the tax filing is due on 2026-04-30.",
    "I talked to Mira Okafor about the kitchen renovation today.",
    "Mira Okafor from Quarry Labs called about the budget.",
    "The kitchen renovation budget is now 4500 euros.",
    "Let's move the meeting for the tax filing to next week.",
    "ok",
    "thanks!",
    "Did Mira ever reply about the payment?",
    "Remind me to call Quarry Labs on 2026-05-02.",
]


@pytest.fixture(scope="module")
def searchers(stack):
    """A fresh workspace: alice's ten turns in two chats, and bob's turns full of the same words."""
    ws = stack.workspace("history search")
    alice, bob, admin = stack.member(ws), stack.member(ws), stack.member(ws, role=m.ROLE_ADMIN)
    turns = [
        turn(text, chat="tg:1" if i < 6 else "tg:2", at=T0 + minutes(10 * i), role="user" if i % 2 == 0 else "rheo")
        for i, text in enumerate(LINES)
    ]
    ids = [r.turn_id for r in append(alice, turns)]
    append(bob, [turn("tax filing kitchen renovation Mira budget " * k, chat="tg:1", at=T0) for k in range(1, 30)])
    return ws, alice, bob, admin, dict(zip(ids, LINES, strict=True))


@pytest.mark.parametrize(
    "query", ["tax filing", "Mira", "kitchen budget", "Quarry Labs", "2026-04-30", "euros", "Mira tax kitchen ok"]
)
def test_search_ranks_by_bm25_over_the_callers_own_turns(searchers, query):
    _, alice, _, _, texts = searchers
    want = bm25(texts, query)
    got = search(alice, query, page_size=200).entries
    assert [e.turn_id for e in got] == sorted(want, key=lambda i: (-round(want[i], 9), i))
    for e in got:
        assert e.score == pytest.approx(want[e.turn_id], rel=1e-12)
        assert e.turn.text == texts[e.turn_id]


def test_search_finds_nothing_for_words_no_turn_holds(searchers):
    _, alice, _, admin, _ = searchers
    assert list(search(alice, "parrot").entries) == []
    assert list(search(alice, "the of and").entries) == []  # stop words only: no term to search
    assert list(search(alice, "!!!").entries) == []
    assert list(search(admin, "tax filing").entries) == []  # an admin sees only its own (none)
    assert list(search(admin).entries) == []


def test_listing_without_a_query_gives_every_turn_oldest_first_as_stored(searchers):
    _, alice, _, _, texts = searchers
    entries = search_all(alice, page_size=4)
    assert [e.turn.text for e in entries] == LINES
    assert [e.turn.occurred_at.ToDatetime(tzinfo=datetime.UTC) for e in entries] == [
        T0 + minutes(10 * i) for i in range(10)
    ]
    assert [e.turn.role for e in entries] == ["user", "assistant"] * 5
    assert {e.turn.session_id for e in entries[:6]} == {"tg:1@2026-03-02T08:00:00Z"}
    assert {e.turn.session_id for e in entries[6:]} == {"tg:2@2026-03-02T09:00:00Z"}
    assert all(e.session_computed and e.score == 0 and e.appended_at.seconds > 0 for e in entries)
    assert list(search(alice, "   ", page_size=200).entries) == list(search(alice, page_size=200).entries)


def test_filters_narrow_the_turns_not_the_statistics(searchers):
    _, alice, _, _, texts = searchers
    want = bm25(texts, "tax filing")
    chat2 = search(alice, "Mira", chat_id="tg:2", page_size=200).entries
    assert [e.turn.text for e in chat2] == [LINES[8]]
    assert chat2[0].score == pytest.approx(bm25(texts, "Mira")[chat2[0].turn_id], rel=1e-12)
    session = search(alice, "tax filing", session_id="tg:1@2026-03-02T08:00:00Z", page_size=200).entries
    assert {e.turn_id for e in session} == set(want)
    window = dict(start_time=ts(T0 + minutes(10)), end_time=ts(T0 + minutes(50)))  # turns 1..4
    assert [e.turn.text for e in search(alice, page_size=200, **window).entries] == LINES[1:5]
    assert [e.turn.text for e in search(alice, "tax", page_size=200, **window).entries] == [LINES[1]]
    assert [e.turn.text for e in search(alice, start_time=ts(T0 + minutes(85))).entries] == LINES[9:]
    assert [e.turn.text for e in search(alice, end_time=ts(T0 + minutes(5))).entries] == LINES[:1]
    assert list(search(alice, chat_id="tg:9").entries) == [] and list(search(alice, session_id="x").entries) == []


@pytest.mark.parametrize(
    ("query", "filters", "least"),
    [
        ("", {}, 10),
        ("tax Mira", {}, 6),
        ("", {"chat_id": "tg:1"}, 6),
        ("tax Mira", {"end_time": ts(T0 + minutes(55))}, 5),
    ],
)
def test_pages_cover_the_search_once_in_order(searchers, query, filters, least):
    _, alice, _, _, _ = searchers
    whole = list(search(alice, query, page_size=200, **filters).entries)
    assert len(whole) == least
    for size in (1, 2, 3, 7):
        assert search_all(alice, query, page_size=size, **filters) == whole
    first = search(alice, query, page_size=len(whole), **filters)
    assert first.next_page_token == ""  # exactly one page: no further token


def test_page_size_zero_is_twenty_and_over_the_most_is_the_most(stack):
    ws = stack.workspace("history pages")
    carol = stack.member(ws)
    append(carol, [turn(f"line {i}", at=T0 + minutes(i)) for i in range(250)])
    assert len(search(carol).entries) == 20
    page = search(carol, page_size=1000)
    assert len(page.entries) == 200 and page.next_page_token
    assert len(search(carol, page_size=1000, page_token=page.next_page_token).entries) == 50


def test_bad_search_input_is_invalid_argument(searchers):
    _, alice, bob, _, _ = searchers
    api = alice.stack.memory
    token = search(alice, "tax", page_size=1).next_page_token
    listing_token = search(alice, page_size=1).next_page_token
    assert token and listing_token
    bad_time = ts(T0)
    bad_time.seconds = -62135596801  # before year 1
    cases = [
        g.SearchHistoryRequest(page_size=-1),
        g.SearchHistoryRequest(query="x" * 32_769),
        g.SearchHistoryRequest(page_token="not a token"),
        g.SearchHistoryRequest(page_token="e30"),  # {} in base64
        g.SearchHistoryRequest(query="tax", page_token=token[:-2]),
        g.SearchHistoryRequest(query="Mira", page_token=token),  # a token of another query
        g.SearchHistoryRequest(query="tax", chat_id="tg:1", page_token=token),  # another filter
        g.SearchHistoryRequest(query="tax", page_token=listing_token),
        g.SearchHistoryRequest(page_token=token),
        g.SearchHistoryRequest(start_time=ts(T0), end_time=ts(T0)),
        g.SearchHistoryRequest(start_time=ts(T0 + minutes(1)), end_time=ts(T0)),
        g.SearchHistoryRequest(start_time=bad_time),
        g.SearchHistoryRequest(chat_id="c" * 201),
        g.SearchHistoryRequest(chat_id="a\x00b"),
        g.SearchHistoryRequest(session_id="s" * 229),
    ]
    for req in cases:
        assert code_of(api.SearchHistory, req, metadata=alice.md()) == INVALID, req
    # Another member's token, even for the same search, is not a token of theirs.
    assert code_of(api.SearchHistory, g.SearchHistoryRequest(query="tax", page_token=token), metadata=bob.md()) == (
        INVALID
    )
    assert code_of(api.SearchHistory, g.SearchHistoryRequest(query="tax")) == grpc.StatusCode.UNAUTHENTICATED
    operator = bearer(alice.stack.operator_token)
    assert code_of(api.SearchHistory, g.SearchHistoryRequest(), metadata=operator) == grpc.StatusCode.UNAUTHENTICATED
    # A NUL in the query is a space; a session filter as long as a computed one is accepted.
    assert [e.turn_id for e in search(alice, "tax\x00filing").entries] == [
        e.turn_id for e in search(alice, "tax filing").entries
    ]
    assert list(search(alice, session_id="s" * 228).entries) == []


def stats_match(stack, ws) -> None:
    with stack.db(ws) as conn:
        assert turn_index.maintained(conn) == turn_index.recount(conn)


def test_forget_by_ids_erases_the_turns_from_search_and_statistics(stack):
    ws = stack.workspace("history forget")
    dan, eve = stack.member(ws), stack.member(ws)
    results = append(
        dan,
        [
            turn("the parrot Captain likes grapes", request_id="legacy-turn-1"),
            turn("the parrot sleeps at nine", at=T0 + minutes(5)),
            turn("grapes are on the list", at=T0 + minutes(6), request_id="legacy-turn-3"),
        ],
    )
    keep_eve = append(eve, [turn("the parrot of eve", at=T0)])[0].turn_id
    first, second, third = (r.turn_id for r in results)
    assert forget(dan, turn_ids=[first, second, first]).forgotten_count == 2
    assert [e.turn_id for e in search(dan, "parrot grapes", page_size=200).entries] == [third]
    assert [e.turn_id for e in search(dan).entries] == [third]
    stats_match(stack, ws)
    with stack.db(ws) as conn:
        rows = conn.execute(
            "SELECT id::text, text, chat_id, occurred_at, request_id, forgotten_at IS NOT NULL FROM history_turn"
            " WHERE owner_member_id = %s ORDER BY request_id",
            (uuid.UUID(dan.id),),
        ).fetchall()
        assert conn.execute(
            "SELECT count(*) FROM history_posting WHERE turn_id = ANY(%s)", ([first, second],)
        ).fetchone() == (0,)
    # The turn with a request id leaves a bare tombstone; the other is gone.
    assert rows == [
        (first, "", None, None, "legacy-turn-1", True),
        (third, "grapes are on the list", "tg:1", T0 + minutes(6), "legacy-turn-3", False),
    ]
    # Appending it again (an import run twice) stores nothing and answers with the first id.
    again = append(dan, [turn("the parrot Captain likes grapes", request_id="legacy-turn-1")])[0]
    assert (again.turn_id, again.replayed) == (first, True)
    assert [e.turn_id for e in search(dan, "Captain").entries] == []
    # Forgotten, unknown, malformed or another member's: NOT_FOUND alike, and nothing is forgotten.
    for ids in ([first], [second], [str(uuid.uuid4())], ["not-a-uuid"], [keep_eve], [third, keep_eve]):
        try:
            forget(dan, turn_ids=ids)
            raise AssertionError(f"forgot {ids}")
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.NOT_FOUND
            assert exc.details() == f"history turn {ids[-1]} not found"
    assert [e.turn_id for e in search(dan).entries] == [third]
    assert [e.turn_id for e in search(eve, "parrot").entries] == [keep_eve]
    stats_match(stack, ws)


def test_forget_by_time_range_takes_only_the_callers_turns_in_it(stack):
    ws = stack.workspace("history forget range")
    dan, eve = stack.member(ws), stack.member(ws)
    at = [T0, T0 + minutes(100), T0 + minutes(200), T0 + minutes(300)]  # one run: no gap over 2h
    ids = [r.turn_id for r in append(dan, [turn(f"dan word{i}", chat="c", at=w) for i, w in enumerate(at)])]
    eves = [r.turn_id for r in append(eve, [turn(f"eve word{i}", chat="c", at=w) for i, w in enumerate(at)])]
    assert {e.turn.session_id for e in search(dan).entries} == {"c@2026-03-02T08:00:00Z"}
    # Forgetting the turns at 100 and 200 minutes leaves a gap of five hours: the run splits.
    resp = forget(dan, start_time=ts(at[1]), end_time=ts(at[3]))
    assert resp.forgotten_count == 2
    left = search(dan).entries
    assert [e.turn_id for e in left] == [ids[0], ids[3]]
    assert [e.turn.session_id for e in left] == ["c@2026-03-02T08:00:00Z", "c@2026-03-02T13:00:00Z"]
    assert [e.turn_id for e in search(eve).entries] == eves  # untouched, sessions and all
    assert {e.turn.session_id for e in search(eve).entries} == {"c@2026-03-02T08:00:00Z"}
    assert forget(dan, start_time=ts(at[1]), end_time=ts(at[3])).forgotten_count == 0
    stats_match(stack, ws)


def test_bad_forget_input_is_invalid_argument(searchers):
    _, alice, _, _, texts = searchers
    api = alice.stack.memory
    some = next(iter(texts))
    cases = [
        g.ForgetHistoryRequest(),
        g.ForgetHistoryRequest(start_time=ts(T0)),
        g.ForgetHistoryRequest(end_time=ts(T0)),
        g.ForgetHistoryRequest(start_time=ts(T0), end_time=ts(T0)),
        g.ForgetHistoryRequest(start_time=ts(T0 + minutes(1)), end_time=ts(T0)),
        g.ForgetHistoryRequest(turn_ids=[some], start_time=ts(T0), end_time=ts(T0 + minutes(1))),
        g.ForgetHistoryRequest(turn_ids=[str(uuid.uuid4()) for _ in range(1001)]),
    ]
    for req in cases:
        assert code_of(api.ForgetHistory, req, metadata=alice.md()) == INVALID, req
    assert code_of(api.ForgetHistory, g.ForgetHistoryRequest(turn_ids=[some])) == grpc.StatusCode.UNAUTHENTICATED
    assert some in {e.turn_id for e in search(alice, page_size=200).entries}


def test_concurrent_appends_store_each_request_id_once(stack):
    """Eight clients racing to append the same turns: each is stored once, every client is answered
    with its id, the run has one session and the statistics stay exact."""
    ws = stack.workspace("history race")
    fay = stack.member(ws)
    turns = [turn(f"race word {i}", chat="race", at=T0 + minutes(i), request_id=f"race-{i}") for i in range(20)]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: append(fay, turns), range(8)))
    assert len({tuple(r.turn_id for r in answer) for answer in answers}) == 1
    assert sum(not r.replayed for answer in answers for r in answer) == 20
    rows = stored(stack, ws, fay.id)
    assert [r[0] for r in rows] == [r.turn_id for r in answers[0]]
    assert {r[6] for r in rows} == {"race@2026-03-02T08:00:00Z"}
    stats_match(stack, ws)


@pytest.mark.parametrize("span_turns", [3, 5_000])
def test_stored_sessions_always_equal_a_recomputation_over_all_live_turns(stack, monkeypatch, span_turns):
    """Random batches appended out of time order into two chats, some turns naming a session, and
    forgets by ids and by range: after every call each turn's session is what the rule gives over
    the whole chat (with a span of 3 turns, the recomputation splits its spans on every batch)."""
    monkeypatch.setattr(turn_sessions, "SPAN_TURNS", span_turns)
    rnd = random.Random(span_turns)
    ws = stack.workspace("history sessions")
    gil = stack.member(ws)

    def check():
        rows = stored(stack, ws, gil.id)
        for chat in ("a", "b"):
            mine = [r for r in rows if r[1] == chat]
            want = turn_sessions.sessions_of_runs(chat, [(r[4], r[5]) for r in mine])
            assert [r[6] for r in mine] == want

    for step in range(12):
        batch = [
            turn(
                f"step {step} turn {i}",
                chat=rnd.choice("ab"),
                at=T0 + minutes(rnd.randrange(0, 3000)),
                session=rnd.choice(["", "", "", "S1", "S2"]),
            )
            for i in range(rnd.randint(1, 12))
        ]
        assert all(code(r) == OK for r in append(gil, batch))
        check()
        if step % 3 == 2:
            live = [r[0] for r in stored(stack, ws, gil.id)]
            forget(gil, turn_ids=rnd.sample(live, 3))
            check()
            lo = T0 + minutes(rnd.randrange(0, 3000))
            forget(gil, start_time=ts(lo), end_time=ts(lo + minutes(90)))
            check()
