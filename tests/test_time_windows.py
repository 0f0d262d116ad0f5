"""Time windows (issue 23, item 1) against real PostgreSQL and the real all-MiniLM-L6-v2: a window is
the exact top k within it in both arms, on both of each arm's paths (a narrow window read from its
index, a wide one read by testing rows), in Recall's every mode, ListMemories, GetContext and
PromptContext; a memory without ``occurred_at`` is judged by when it was written; bad windows are
INVALID_ARGUMENT naming the field, on every call that takes one."""

from __future__ import annotations

import datetime
import json

import grpc
import pytest
from cli_runner import at_gateway
from google.protobuf import timestamp_pb2
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from test_mcp import call_ok, run_stdio, text_of

from servicekit.embedding_input import INPUT_VERSION
from servicekit.errors import error_info
from store_service.records import windows
from store_service.records.windows import Window
from store_service.search import candidates

CONV = m.PURPOSE_CONVERSATION
T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
DAYS = 120


def ts(when: datetime.datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(when)
    return out


def day(n: float) -> datetime.datetime:
    return T0 + datetime.timedelta(days=n)


@pytest.fixture(scope="module")
def said(stack):
    """A workspace (its context bundle on) of ``DAYS`` memories said one a day from T0 (a varying
    number of "gull"s, so BM25 orders them), four said today without ``occurred_at``, the caller, and
    each memory's said time."""
    ws = stack.workspace("time windows")
    alice = stack.member(ws, purposes=[CONV])
    batch = [
        g.RememberRequest(
            purpose=CONV,
            body=("gull " * (1 + i % 7)) + f"harbour note {i}",
            audience=m.AUDIENCE_WORKSPACE,
            occurred_at=ts(day(i)),
            entities=[m.EntityMention(name="Harbour")],
        )
        for i in range(DAYS)
    ] + [
        g.RememberRequest(purpose=CONV, body=f"gull harbour note written now {i}", audience=m.AUDIENCE_WORKSPACE)
        for i in range(4)
    ]
    results = stack.memory.RememberBatch(g.RememberBatchRequest(requests=batch), metadata=alice.md()).results
    assert all(r.HasField("memory") for r in results), [r.error for r in results if not r.HasField("memory")][:1]
    times = {r.memory.id: r.memory.created_at.ToDatetime(tzinfo=datetime.UTC) for r in results}
    for r, req in zip(results, batch, strict=True):
        if req.HasField("occurred_at"):
            times[r.memory.id] = req.occurred_at.ToDatetime(tzinfo=datetime.UTC)
    stack.wait_backlog_empty()
    stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, context_bundle=True), metadata=stack.op()
    )
    caller = m.Caller(workspace_id=ws, member_id=alice.id, role=m.ROLE_MEMBER, granted_purposes=[CONV])
    return ws, alice, caller, times


WINDOWS = [
    Window(day(10), day(15)),  # five days: narrow
    Window(day(30), None),  # from a day on, the notes written now included
    Window(None, day(50)),
    Window(day(0), day(DAYS)),  # every dated note, none written now
    Window(day(200), None),  # after the last dated note: only the ones written now
    Window(day(-30), day(-1)),  # before everything: empty
]


# Each arm's paths: "wide" reads the top and tests its rows however deep it goes; "narrow" reads the
# window's memories from the index; "wide, then narrow" starts wide and, the keyword arm once its next
# read would pass the window's size, scores the window's documents alone.
PATHS = ["wide", "narrow", "wide, then narrow"]


def take_path(monkeypatch, path: str) -> None:
    if path == "wide":
        monkeypatch.setattr(windows, "narrow_rows", lambda conn, window, most=None, *rest: None)
        monkeypatch.setattr(windows, "is_narrow", lambda conn, window, most=None: False)
    else:
        monkeypatch.setattr(windows, "NARROW_ROWS", 0 if path == "wide, then narrow" else windows.NARROW_ROWS)


def inside(window: Window, when: datetime.datetime) -> bool:
    return (window.after is None or when >= window.after) and (window.before is None or when < window.before)


@pytest.mark.parametrize("path", PATHS)
def test_the_keyword_arm_is_the_exact_top_within_a_window(stack, said, monkeypatch, path):
    """For every window and limit, the keyword arm's rows are exactly the best rows of the unwindowed
    ranking that the window holds, scores unchanged; the entity-filtered path too, and with the
    expiry gate hiding some of them."""
    take_path(monkeypatch, path)
    ws, _, caller, times = said
    with stack.db(ws) as conn:
        full = candidates.lexical(conn, caller, "conversation", "gull harbour", 1000, False)
        assert len(full) == DAYS + 4
        # Each mention made its own entity (nothing merges them).
        harbour = [r[0] for r in conn.execute("SELECT id FROM entity WHERE name = 'Harbour'")]
        about = candidates.lexical(conn, caller, "conversation", "gull harbour", 1000, False, harbour)
        assert len(about) == DAYS
        for window in WINDOWS:
            held = [(mid, score) for mid, score in full if inside(window, times[str(mid)])]
            for limit in (1, 3, 10, 200):
                got = candidates.lexical(conn, caller, "conversation", "gull harbour", limit, False, window=window)
                assert got == held[:limit], (window, limit)
            got = candidates.lexical(conn, caller, "conversation", "gull harbour", 1000, False, harbour, window=window)
            assert got == [(mid, score) for mid, score in about if inside(window, times[str(mid)])]
        # The gate and a window together: the rows either leaves out are out.
        aged = [mid for mid, _ in full[::3]]
        conn.execute("UPDATE memory SET updated_at = now() - interval '10 days' WHERE id = ANY(%s)", (aged,))
        try:
            window = Window(day(20), day(90))
            want = [(mid, s) for mid, s in full if inside(window, times[str(mid)]) and mid not in aged]
            got = candidates.lexical(
                conn, caller, "conversation", "gull harbour", 7, False, expiry_days=7, window=window
            )
            assert got == want[:7]
        finally:
            conn.execute("UPDATE memory SET updated_at = now() WHERE id = ANY(%s)", (aged,))


def test_a_wide_read_that_would_pass_the_windows_size_scores_the_window_alone(stack, said, monkeypatch):
    """A window the first count calls wide (NARROW_ROWS 2, the window holds 5) whose memories are few
    of the best: once the next read would be deeper than the window could be, the window is counted
    again up to that depth and its documents alone are scored; the answer is the exact top within it."""
    monkeypatch.setattr(windows, "NARROW_ROWS", 2)
    counts, read = [], []
    count, rows = windows.is_narrow, windows.narrow_rows

    def count_spy(conn, window, most=None):
        narrow = count(conn, window, most)
        counts.append((most, narrow))
        return narrow

    def rows_spy(conn, window, most=None, *rest):
        found = rows(conn, window, most, *rest)
        read.append(None if found is None else len(found))
        return found

    monkeypatch.setattr(windows, "is_narrow", count_spy)
    monkeypatch.setattr(windows, "narrow_rows", rows_spy)
    ws, _, caller, times = said
    window = Window(day(10), day(15))
    with stack.db(ws) as conn:
        full = candidates.lexical(conn, caller, "conversation", "gull harbour", 1000, False)
        held = [(mid, score) for mid, score in full if inside(window, times[str(mid)])]
        assert len(held) == 5 and full[:3] != held[:3]
        counts.clear()
        read.clear()
        assert candidates.lexical(conn, caller, "conversation", "gull harbour", 3, False, window=window) == held[:3]
    assert counts[0] == (None, False)  # wide at first
    assert counts[-1][1] and counts[-1][0] >= 5  # then narrow, counted up to the next read's depth
    assert read == [5]  # and only then are the window's documents read


def test_the_meaning_arms_narrow_threshold_grows_with_the_root_of_limit_times_vectors(stack, said, monkeypatch):
    """Half the square root of the limit times the workspace's vectors (the planner's count), never
    under NARROW_ROWS: 124 vectors give 55 rows at a limit of 100 and 5 at 1."""
    ws = said[0]
    monkeypatch.setattr(windows, "NARROW_ROWS", 4)
    with stack.db(ws) as conn:
        conn.execute("ANALYZE memory_embedding")
        assert conn.execute("SELECT count(*) FROM memory_embedding").fetchone()[0] == DAYS + 4
        assert windows.dense_narrow_rows(conn, 100) == 55
        assert windows.dense_narrow_rows(conn, 1) == 5
        monkeypatch.setattr(windows, "NARROW_ROWS", 500)
        assert windows.dense_narrow_rows(conn, 100) == 500


@pytest.mark.parametrize("path", PATHS[:2])
def test_the_meaning_arm_is_the_top_within_a_window(stack, said, monkeypatch, path):
    """The meaning arm within a window holds the best rows by cosine that the window holds: the
    exact scan of a narrow window, and the filtered HNSW scan of a wide one (exact at this size)."""
    take_path(monkeypatch, path)
    ws, _, caller, times = said
    vector, stamp = stack.encoder.encode(["a gull over the harbour"])[0], INPUT_VERSION
    with stack.db(ws) as conn:
        full, current = candidates.dense(conn, caller, "conversation", vector, stamp, 0.0, 1000)
        assert current and len(full) == DAYS + 4
        for window in WINDOWS:
            held = [mid for mid, _ in full if inside(window, times[str(mid)])]
            for limit in (1, 5, 200):
                got, _ = candidates.dense(conn, caller, "conversation", vector, stamp, 0.0, limit, window=window)
                assert [mid for mid, _ in got] == held[:limit], (window, limit)
                assert all(inside(window, times[str(mid)]) for mid, _ in got)


def recall_ids(member, **kw) -> list[str]:
    return [it.memory.id for it in member.recall("gull harbour", top_k=200, **kw).items]


def test_the_meaning_arm_plans_each_window_for_its_own_bounds(stack, said):
    """psycopg prepares a statement run five times, and PostgreSQL may then keep one generic plan for
    every window's bounds (at 100,000 memories such a plan read a month of 85,000 memories through its
    said_at index, 0.46 s instead of 2 ms). The meaning arm asks for a custom plan each time, even on a
    server set to prefer generic ones, and its answers are the same."""
    ws, _, caller, _ = said
    vector = stack.encoder.encode(["a gull over the harbour"])[0]
    with stack.db(ws) as conn:
        want = [
            candidates.dense(conn, caller, "conversation", vector, INPUT_VERSION, 0.0, 5, window=w) for w in WINDOWS
        ]
        conn.execute("SET plan_cache_mode = force_generic_plan")
        for _ in range(3):  # more than psycopg's five runs of each statement, so they are prepared
            got = [
                candidates.dense(conn, caller, "conversation", vector, INPUT_VERSION, 0.0, 5, window=w) for w in WINDOWS
            ]
            assert got == want
        plans = conn.execute(
            "SELECT sum(generic_plans), sum(custom_plans) FROM pg_prepared_statements WHERE statement LIKE %s",
            ("%nn AS MATERIALIZED%",),
        ).fetchone()
    assert plans[0] == 0, f"{plans[0]} runs of the meaning arm's statement used a generic plan"
    assert plans[1] > 0, "the meaning arm's statement was never prepared: the test shows nothing"


def test_recall_in_every_mode_answers_from_the_window(stack, said):
    """Through the gateway: every mode's items were said in the window; lexical mode returns every
    matching memory the window holds, and a small top_k is the best of them, not a filtered top."""
    _, alice, _, times = said
    everything = recall_ids(alice, mode=m.RECALL_MODE_LEXICAL)
    for window in WINDOWS:
        bounds = {}
        if window.after:
            bounds["occurred_after"] = ts(window.after)
        if window.before:
            bounds["occurred_before"] = ts(window.before)
        held = [i for i in everything if inside(window, times[i])]
        assert recall_ids(alice, mode=m.RECALL_MODE_LEXICAL, **bounds) == held
        top3 = [
            it.memory.id for it in alice.recall("gull harbour", top_k=3, mode=m.RECALL_MODE_LEXICAL, **bounds).items
        ]
        assert top3 == held[:3]
        for mode in (m.RECALL_MODE_DENSE, m.RECALL_MODE_HYBRID):
            resp = alice.recall("gull harbour", top_k=200, mode=mode, **bounds)
            assert resp.dense_available
            assert all(inside(window, times[it.memory.id]) for it in resp.items), window
            if mode == m.RECALL_MODE_HYBRID:
                assert {it.memory.id for it in resp.items} >= set(held)


def test_a_memory_without_occurred_at_is_judged_by_when_it_was_written(stack, said):
    _, alice, _, times = said
    now = datetime.datetime.now(datetime.UTC)
    undated = {i for i, t in times.items() if t > day(DAYS)}
    assert len(undated) == 4
    recent = recall_ids(alice, mode=m.RECALL_MODE_LEXICAL, occurred_after=ts(now - datetime.timedelta(hours=1)))
    assert set(recent) == undated
    assert not set(recall_ids(alice, occurred_before=ts(now - datetime.timedelta(hours=1)))) & undated


def test_a_bound_with_nanoseconds_holds_exactly_the_stored_times_it_covers(stack, said):
    """Stored times are whole microseconds; a bound 500 ns after a memory's said time is after it, so
    ``before`` takes the memory in and ``after`` leaves it out (a cut to the microsecond did the
    opposite of both), on recall and list alike."""
    _, alice, _, times = said
    mid = next(i for i, t in times.items() if t == day(20))
    half = timestamp_pb2.Timestamp(seconds=int(day(20).timestamp()), nanos=500)
    for kw, held in (({"occurred_before": half}, True), ({"occurred_after": half}, False)):
        assert (mid in recall_ids(alice, mode=m.RECALL_MODE_LEXICAL, **kw)) is held, kw
        listed = stack.memory.ListMemories(g.ListMemoriesRequest(page_size=500, **kw), metadata=alice.md())
        assert (mid in [x.id for x in listed.memories]) is held, kw
    # A range holding no whole microsecond is empty, not refused.
    empty = {"occurred_after": half, "occurred_before": timestamp_pb2.Timestamp(seconds=half.seconds, nanos=900)}
    assert recall_ids(alice, mode=m.RECALL_MODE_LEXICAL, **empty) == []


def test_list_memories_context_and_prompt_context_take_the_window(stack, said):
    """ListMemories lists and counts exactly the window's memories on every page, and a page token is
    bound to its window; GetContext's and PromptContext's memories were all said in the window."""
    ws, alice, _, times = said
    window = {"occurred_after": ts(day(10)), "occurred_before": ts(day(25))}
    want = {i for i, t in times.items() if day(10) <= t < day(25)}
    got, token = [], ""
    while True:
        resp = stack.memory.ListMemories(
            g.ListMemoriesRequest(page_size=4, page_token=token, **window), metadata=alice.md()
        )
        assert resp.total_size == len(want)
        got += [x.id for x in resp.memories]
        token = resp.next_page_token
        if not token:
            break
        with pytest.raises(grpc.RpcError) as err:  # the token is bound to its window
            stack.memory.ListMemories(g.ListMemoriesRequest(page_size=4, page_token=token), metadata=alice.md())
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert sorted(got) == sorted(want) and len(got) == len(want)

    bundle = stack.memory.GetContext(g.GetContextRequest(purpose=CONV, **window), metadata=alice.md())
    shown = [e.memory.id for e in list(bundle.items) + list(bundle.cut_items)]
    assert shown and set(shown) <= want
    everything = stack.memory.GetContext(g.GetContextRequest(purpose=CONV), metadata=alice.md())
    assert {e.memory.id for e in everything.items} - want  # without the window, newer memories lead
    # The text says the window, and counts the entities' mentions in it rather than in the last 30 days.
    assert "memories said from 2025-01-11T00:00:00+00:00 to before 2025-01-26T00:00:00+00:00" in bundle.text
    assert "the last 30 days" not in bundle.text and "in the last 30 days" in everything.text
    # Every memory names "Harbour", one entity (docs/entities.md): its mentions are the window's memories.
    assert f"mentioned by {len(want)} said from 2025-01-11" in bundle.text
    before_all = {"occurred_after": ts(day(-90)), "occurred_before": ts(day(-60))}
    none = stack.memory.GetContext(g.GetContextRequest(purpose=CONV, **before_all), metadata=alice.md())
    assert not none.items and "No memories of this purpose were said in this window." in none.text

    prompt = stack.memory.PromptContext(
        g.PromptContextRequest(text="gull harbour note", purpose=CONV, **window), metadata=alice.md()
    )
    assert prompt.items and {it.memory.id for it in prompt.items} <= want
    # Time words in the turn: read against the turn's reference time and reported, or not read.
    turn = g.PromptContextRequest(text="gull harbour note last month", purpose=CONV, reference_time=ts(day(70)))
    read = stack.memory.PromptContext(turn, metadata=alice.md())
    assert (read.time_window.words, read.time_window.applied) == ("last month", True)
    assert read.time_window.start.ToDatetime(tzinfo=datetime.UTC) == day(31)
    turn.skip_time_words = True
    assert not stack.memory.PromptContext(turn, metadata=alice.md()).HasField("time_window")


BAD_WINDOWS = [
    ({"occurred_after": ts(day(5)), "occurred_before": ts(day(5))}, "occurred_before"),
    ({"occurred_after": ts(day(9)), "occurred_before": ts(day(5))}, "occurred_before"),
    ({"occurred_after": timestamp_pb2.Timestamp(seconds=-62135596800 - 1)}, "occurred_after"),
    ({"occurred_before": timestamp_pb2.Timestamp(seconds=253402300800)}, "occurred_before"),
    ({"occurred_after": timestamp_pb2.Timestamp(seconds=0, nanos=-1)}, "occurred_after"),
]


@pytest.mark.parametrize(("window", "field"), BAD_WINDOWS)
def test_a_bad_window_is_invalid_argument_naming_the_field(stack, said, window, field):
    _, alice, _, _ = said
    calls = [
        (stack.memory.Recall, g.RecallRequest(query="gull", purpose=CONV, **window)),
        (stack.memory.Recall, g.RecallRequest(query="gull", purpose=CONV, mode=m.RECALL_MODE_LEXICAL, **window)),
        (stack.memory.ListMemories, g.ListMemoriesRequest(**window)),
        (stack.memory.GetContext, g.GetContextRequest(purpose=CONV, **window)),
        (stack.memory.PromptContext, g.PromptContextRequest(text="gull", purpose=CONV, **window)),
    ]
    for call, req in calls:
        with pytest.raises(grpc.RpcError) as err:
            call(req, metadata=alice.md())
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (call, req)
        assert error_info(err.value).metadata["field"] == field


def test_the_commands_take_after_and_before(stack, said):
    """``recall``, ``list``, ``context`` and ``prompt-context`` pass ``--after``/``--before``; a date
    is midnight UTC; a bad time is a usage error, an empty window the server's INVALID_ARGUMENT."""
    ws, alice, _, times = said

    def run(*args):
        return at_gateway(f"127.0.0.1:{stack.gateway.port}", *args, token=alice.token, check=False)

    want = sorted(i for i, t in times.items() if day(10) <= t < day(12))
    days = ("--after", "2025-01-11", "--before", "2025-01-13")
    out = run("recall", "gull harbour", "--mode", "lexical", *days, "--json")
    assert out.returncode == 0, out.stderr
    assert sorted(it["memory"]["id"] for it in json.loads(out.stdout)["items"]) == want
    out = run("list", "--after", "2025-01-11T00:00:00Z", "--before", "2025-01-13T01:00:00+01:00", "--json")
    assert out.returncode == 0, out.stderr
    assert sorted(x["id"] for x in json.loads(out.stdout)["memories"]) == want
    out = run("context", *days, "--json")
    assert out.returncode == 0, out.stderr
    got = {e["memory"]["id"] for e in json.loads(out.stdout).get("items", [])}
    assert got and got <= set(want)
    bad = run("recall", "gull", "--after", "last Tuesday")
    assert bad.returncode == 2 and "ISO 8601" in bad.stderr
    empty = run("recall", "gull", "--after", "2025-01-13", "--before", "2025-01-11")
    assert empty.returncode != 0 and "occurred_before" in empty.stderr
    assert empty.stderr.rstrip().endswith("(the field of --before)")  # the flag the user typed


def test_the_mcp_tools_take_the_window(stack, said):
    """The SDK's own client over stdio: recallatron_recall and recallatron_list_memories pass
    occurred_after and occurred_before; a time that is not RFC 3339 is a tool error naming it."""
    _, alice, _, times = said
    want = sorted(i for i, t in times.items() if day(10) <= t < day(12))
    window = {"occurred_after": "2025-01-11T00:00:00Z", "occurred_before": "2025-01-13T00:00:00Z"}

    async def session(client):
        recalled = await call_ok(client, "recallatron_recall", {"query": "gull harbour", "mode": "lexical", **window})
        listed = await call_ok(client, "recallatron_list_memories", window)
        dates = {"occurred_after": "2025-01-11", "occurred_before": "2025-01-13"}  # dates: midnight UTC
        by_date = await call_ok(client, "recallatron_recall", {"query": "gull harbour", "mode": "lexical", **dates})
        bad = await client.call_tool("recallatron_recall", {"query": "gull", "occurred_after": "last month"})
        empty = await client.call_tool("recallatron_recall", {"query": "gull", **reversed_window(window)})
        return recalled, listed, bad, empty, by_date

    recalled, listed, bad, empty, by_date = run_stdio(stack, alice.token, session)
    assert sorted(it["memory"]["id"] for it in recalled.structured_content["items"]) == want
    assert sorted(it["memory"]["id"] for it in by_date.structured_content["items"]) == want
    assert sorted(x["id"] for x in listed.structured_content["memories"]) == want
    assert bad.is_error and text_of(bad).startswith("INVALID_ARGUMENT: occurred_after 'last month'")
    assert empty.is_error and text_of(empty).startswith("INVALID_ARGUMENT: occurred_before must be after")


def reversed_window(window: dict) -> dict:
    return {"occurred_after": window["occurred_before"], "occurred_before": window["occurred_after"]}


def test_time_words_in_the_question_order_the_recall_and_are_reported(stack, said):
    """ "in January 2025" and "last month" (against reference_time) are read as their months, reported
    in time_window and applied: the memories said in the month come first, in the order the arm gives
    them, then every other one (the words order, never filter); skip_time_words reads none; a window
    the request sets wins (it filters) and the words are reported as not applied; a bad
    reference_time is INVALID_ARGUMENT naming it."""
    _, alice, _, times = said
    lexical = {"mode": m.RECALL_MODE_LEXICAL, "top_k": 200}
    resp = alice.recall("gull harbour notes in January 2025", **lexical)
    tw = resp.time_window
    assert (tw.words, tw.applied) == ("in January 2025", True)
    assert (tw.start.ToDatetime(tzinfo=datetime.UTC), tw.end.ToDatetime(tzinfo=datetime.UTC)) == (day(0), day(31))
    got = [it.memory.id for it in resp.items]
    january = {i for i, t in times.items() if day(0) <= t < day(31)}
    assert set(got[: len(january)]) == january and set(got) == set(times)  # the month first, then the rest

    february = {i for i, t in times.items() if day(31) <= t < day(59)}
    for mode in (m.RECALL_MODE_LEXICAL, m.RECALL_MODE_DENSE, m.RECALL_MODE_HYBRID):
        resp = alice.recall("gull harbour last month", reference_time=ts(day(70)), mode=mode, top_k=200)  # 12 March
        assert resp.time_window.words == "last month" and resp.dense_available
        assert {it.memory.id for it in resp.items[: len(february)]} == february, mode

    resp = alice.recall("gull harbour notes in January 2025", skip_time_words=True, **lexical)
    assert not resp.HasField("time_window") and len(resp.items) == len(times)

    resp = alice.recall("gull harbour notes in January 2025", occurred_after=ts(day(100)), **lexical)
    assert resp.time_window.words == "in January 2025" and not resp.time_window.applied
    assert {it.memory.id for it in resp.items} == {i for i, t in times.items() if t >= day(100)}

    for bad in (timestamp_pb2.Timestamp(seconds=253402300800), timestamp_pb2.Timestamp(nanos=-5)):
        with pytest.raises(grpc.RpcError) as err:
            alice.recall("gull last month", reference_time=bad)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_info(err.value).metadata["field"] == "reference_time"

    out = at_gateway(
        f"127.0.0.1:{stack.gateway.port}",
        "recall",
        "gull harbour last month",
        "--reference-time",
        "2025-03-12T00:00:00Z",
        "--mode",
        "lexical",
        token=alice.token,
    )
    assert (
        "time: read last month as said from 2025-02-01T00:00:00Z to before 2025-03-01T00:00:00Z"
        " (in each arm, those said then first)" in out.stdout
    )
    assert "  happened 2025-" in out.stdout  # each item says when it was said


@pytest.mark.slow
def test_the_meaning_arm_stays_exact_when_its_index_scan_gives_up(stack, monkeypatch):
    """A wide window whose memories are far from the question: the filtered HNSW scan spends its
    budget (hnsw.max_scan_tuples; here 200 rows, and the wide path taken above 100 rows, so that
    3,000 memories show what a break-it review found at 30,000: 0 of the top 100) on nearer memories
    outside the window and comes back short; the arm then orders the window exactly, so its rows are
    the best the window holds. The memories and vectors are written by SQL (synthetic vectors at a
    chosen cosine to the question: the window's far, the others near)."""
    ws = stack.workspace("far window")
    alice = stack.member(ws, purposes=[CONV])
    q = stack.encoder.encode(["the lighthouse keeper's salary"])[0]
    window = Window(
        datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC), datetime.datetime(2021, 1, 1, tzinfo=datetime.UTC)
    )
    with stack.db(ws) as conn:
        conn.execute(
            """INSERT INTO memory (id, kind, body, purpose, origin, created_by, occurred_at)
               SELECT gen_random_uuid(), 'note', 'synthetic ' || i, 'conversation', 'told', %s,
                      CASE WHEN i < 600 THEN '2020-03-01'::timestamptz ELSE '2024-03-01'::timestamptz END
                             + i * interval '10 minutes'
                 FROM generate_series(0, 2999) i""",
            (alice.id,),
        )
        conn.execute(
            """INSERT INTO memory_embedding (memory_id, memory_revision, model_id, input_version, embedding)
               SELECT m.id, 1, 'synthetic', %s,
                      (SELECT array_agg(q * w.w + (random() - 0.5) * 0.18 ORDER BY i)
                         FROM unnest(%s::real[]) WITH ORDINALITY AS u(q, i) WHERE m.id IS NOT NULL)::vector
                 FROM memory m,
                      LATERAL (SELECT CASE WHEN m.said_at < '2021-01-01' THEN 0.3 + 0.3 * random()
                                           ELSE 0.8 + 0.4 * random() END AS w WHERE m.id IS NOT NULL) w""",
            (INPUT_VERSION, q.tolist()),
        )
        conn.execute("ANALYZE memory; ANALYZE memory_embedding")
        exact = [
            r[0]
            for r in conn.execute(
                """SELECT m.id FROM memory m JOIN memory_embedding e ON e.memory_id = m.id
                    WHERE m.said_at >= %s AND m.said_at < %s ORDER BY (e.embedding <=> %s::vector) + 0, m.id""",
                (window.after, window.before, q.tolist()),
            )
        ]
        assert len(exact) == 600
        monkeypatch.setattr(windows, "NARROW_ROWS", 100)
        monkeypatch.setattr(windows, "dense_narrow_rows", lambda conn, limit: windows.NARROW_ROWS)
        monkeypatch.setattr(candidates, "HNSW_SCAN_TUPLES", 200)
        assert not windows.is_narrow(conn, window)  # the wide path
        caller = m.Caller(workspace_id=ws, member_id=alice.id, role=m.ROLE_MEMBER, granted_purposes=[CONV])
        for limit in (10, 100):
            got, _ = candidates.dense(conn, caller, "conversation", q, INPUT_VERSION, 0.0, limit, window=window)
            assert [mid for mid, _ in got] == exact[:limit], limit
