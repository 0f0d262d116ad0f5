"""Validity, Invalidate, ``as_of`` and ``known_at`` (issue 23, items 3 and 4) through the gateway,
against real PostgreSQL and the real all-MiniLM-L6-v2: when a claim held, when it stopped, what held on
a day, and what was known on a day, with each rule's bad input and the change rules."""

from __future__ import annotations

import datetime
import json
import threading
import time

import grpc
import pytest
from google.protobuf import timestamp_pb2
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.errors import error_info
from store_service.search import lexical_index

CONV = m.PURPOSE_CONVERSATION
WS = m.AUDIENCE_WORKSPACE


def ts(when: datetime.datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(when)
    return out


def utc(*args) -> datetime.datetime:
    return datetime.datetime(*args, tzinfo=datetime.UTC)


def when(stamp: timestamp_pb2.Timestamp) -> datetime.datetime:
    return stamp.ToDatetime(tzinfo=datetime.UTC)


def fails(code, field, call, req, md):
    with pytest.raises(grpc.RpcError) as err:
        call(req, metadata=md)
    assert err.value.code() == code, err.value.details()
    if field is not None:
        assert error_info(err.value).metadata["field"] == field, err.value.details()
    return err.value


@pytest.fixture(scope="module")
def team(stack):
    ws = stack.workspace("validity")
    alice = stack.member(ws, purposes=[CONV])
    bob = stack.member(ws, purposes=[CONV])
    stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, context_bundle=True), metadata=stack.op()
    )
    return ws, alice, bob


def remember(stack, who, body, **kw) -> m.Memory:
    return stack.memory.Remember(
        g.RememberRequest(purpose=CONV, body=body, audience=WS, **kw), metadata=who.md()
    ).memory


def recall_ids(stack, who, query, **kw) -> list[str]:
    resp = stack.memory.Recall(
        g.RecallRequest(query=query, purpose=CONV, mode=m.RECALL_MODE_LEXICAL, top_k=20, **kw), metadata=who.md()
    )
    return [item.memory.id for item in resp.items]


def supersede(stack, who, mem: m.Memory, body: str, start: datetime.datetime) -> m.Memory:
    req = g.SupersedeRequest(id=mem.id, expected_revision=mem.revision, body=body, valid_from=ts(start))
    return stack.memory.Supersede(req, metadata=who.md()).memory


def invalidate(stack, who, mem: m.Memory, reason: str, end: datetime.datetime) -> m.Memory:
    req = g.InvalidateRequest(id=mem.id, expected_revision=mem.revision, reason=reason, at=ts(end))
    return stack.memory.Invalidate(req, metadata=who.md()).memory


def test_valid_from_defaults_to_occurred_at_then_the_write_time_and_is_kept_as_given(stack, team):
    _, alice, _ = team
    given = remember(
        stack, alice, "the ferry runs hourly", valid_from=ts(utc(2021, 5, 1)), occurred_at=ts(utc(2021, 6, 1))
    )
    assert when(given.valid_from) == utc(2021, 5, 1)
    occurred = remember(stack, alice, "the ferry runs twice an hour", occurred_at=ts(utc(2022, 2, 3)))
    assert when(occurred.valid_from) == utc(2022, 2, 3)
    plain = remember(stack, alice, "the ferry runs at night too")
    assert plain.valid_from == plain.created_at
    for mem in (given, occurred, plain):
        assert not mem.HasField("valid_until") and not mem.invalidated
    read = stack.memory.Read(g.ReadRequest(id=given.id), metadata=alice.md()).memory
    assert when(read.valid_from) == utc(2021, 5, 1)


def test_a_successor_ends_the_claim_it_supersedes_where_it_starts(stack, team):
    _, alice, _ = team
    old = remember(stack, alice, "Maria works at Nutrifax", valid_from=ts(utc(2022, 1, 1)))
    fails(
        grpc.StatusCode.INVALID_ARGUMENT,
        "valid_from",
        stack.memory.Supersede,
        g.SupersedeRequest(id=old.id, expected_revision=1, body="Maria works at Acme", valid_from=ts(utc(2021, 1, 1))),
        alice.md(),
    )
    new = stack.memory.Supersede(
        g.SupersedeRequest(id=old.id, expected_revision=1, body="Maria works at Acme", valid_from=ts(utc(2024, 3, 1))),
        metadata=alice.md(),
    ).memory
    assert when(new.valid_from) == utc(2024, 3, 1)
    read = stack.memory.Read(g.ReadRequest(id=old.id), metadata=alice.md()).memory
    assert when(read.valid_until) == utc(2024, 3, 1)
    assert read.superseded_by_id == new.id and not read.invalidated
    k = when(new.created_at)
    # Correcting the successor's start moves the end of what it superseded with it.
    stack.memory.Correct(
        g.CorrectRequest(id=new.id, expected_revision=1, valid_from=ts(utc(2024, 2, 1))), metadata=alice.md()
    )
    read = stack.memory.Read(g.ReadRequest(id=old.id), metadata=alice.md()).memory
    assert when(read.valid_until) == utc(2024, 2, 1)
    # As known before the correction, the old claim held until 2024-03-01 and the new one from then;
    # as known now, the new one from 2024-02-01.
    day = ts(utc(2024, 2, 15))
    then = stack.memory.ListMemories(g.ListMemoriesRequest(as_of=day, known_at=ts(k)), metadata=alice.md()).memories
    assert [(x.id, when(x.valid_until)) for x in then if x.id in (old.id, new.id)] == [(old.id, utc(2024, 3, 1))]
    now = stack.memory.ListMemories(g.ListMemoriesRequest(as_of=day), metadata=alice.md()).memories
    assert [x.id for x in now if x.id in (old.id, new.id)] == [new.id]
    # Moved before the old claim's own start, the successor leaves it an empty validity: it never held
    # on its own. Nothing is refused: the memories a successor replaced may be ones its corrector
    # cannot read, whose times must not be tested or named.
    stack.memory.Correct(
        g.CorrectRequest(id=new.id, expected_revision=2, valid_from=ts(utc(2020, 1, 1))), metadata=alice.md()
    )
    read = stack.memory.Read(g.ReadRequest(id=old.id), metadata=alice.md()).memory
    assert when(read.valid_from) == when(read.valid_until) == utc(2022, 1, 1)


def test_a_successor_some_readers_cannot_read_ends_the_claim_when_it_was_superseded(stack, team):
    """A member-only successor of a workspace memory: the memory's other readers must not learn when
    the successor's claim began (its end would name it), so its end is when it was superseded, and a
    later Correct of the successor's start does not move it. A successor all its readers can read
    ends it at its own start (the test above)."""
    _, alice, bob = team
    old = remember(stack, alice, "Kestrel office is in Lyon", valid_from=ts(utc(2021, 1, 1)))
    new = stack.memory.Supersede(
        g.SupersedeRequest(
            id=old.id,
            expected_revision=1,
            body="Kestrel office moved to Nantes",
            valid_from=ts(utc(2024, 3, 1)),
            audience=m.AUDIENCE_MEMBER,
        ),
        metadata=alice.md(),
    ).memory
    superseded_at = when(new.created_at)
    for who in (alice, bob):
        read = stack.memory.Read(g.ReadRequest(id=old.id), metadata=who.md()).memory
        assert when(read.valid_until) == superseded_at, who
    assert stack.memory.Read(g.ReadRequest(id=old.id), metadata=bob.md()).memory.superseded_by_id == ""
    # Bob's reads in time cannot find the successor's start: as of a day after it, the old claim held.
    day = ts(utc(2024, 6, 1))
    listed = stack.memory.ListMemories(g.ListMemoriesRequest(as_of=day), metadata=bob.md()).memories
    assert old.id in [x.id for x in listed]
    stack.memory.Correct(
        g.CorrectRequest(id=new.id, expected_revision=1, valid_from=ts(utc(2023, 1, 1))), metadata=alice.md()
    )
    read = stack.memory.Read(g.ReadRequest(id=old.id), metadata=bob.md()).memory
    assert when(read.valid_until) == superseded_at
    then = stack.memory.ListMemories(
        g.ListMemoriesRequest(as_of=day, known_at=ts(superseded_at)), metadata=bob.md()
    ).memories
    assert [(x.id, when(x.valid_until)) for x in then if x.id == old.id] == [(old.id, superseded_at)]


def test_an_imported_narrower_successor_does_not_date_the_claim_it_ends(stack, team):
    """An import supersedes a workspace memory by a member-only one: the older ends when it was last
    changed (as exported), not when the successor was written (found by a break-it review)."""
    ws, alice, bob = team
    older = m.ImportedMemory(
        import_key="kestrel-older",
        author_member_id=alice.id,
        body="Kestrel ferry leaves at noon",
        purpose=CONV,
        audience=WS,
        created_at=ts(utc(2024, 1, 1)),
        updated_at=ts(utc(2024, 5, 1)),
    )
    newer = m.ImportedMemory(
        import_key="kestrel-newer",
        author_member_id=alice.id,
        body="Kestrel ferry leaves at one",
        purpose=CONV,
        audience=m.AUDIENCE_MEMBER,
        created_at=ts(utc(2024, 4, 1)),
        supersedes_key="kestrel-older",
    )
    resp = stack.admin.ImportMemories(
        g.ImportMemoriesRequest(workspace_id=ws, memories=[older, newer]), metadata=stack.op()
    )
    assert [r.status for r in resp.memories] == [m.IMPORT_STATUS_CREATED] * 2
    read = stack.memory.Read(g.ReadRequest(id=resp.memories[0].id), metadata=bob.md()).memory
    assert when(read.valid_until) == utc(2024, 5, 1)


def test_forgetting_a_successor_puts_back_what_it_superseded(stack, team):
    _, alice, bob = team
    first = remember(stack, alice, "Ostrava depot shift begins at six", valid_from=ts(utc(2022, 1, 1)))
    second = supersede(stack, alice, first, "Ostrava depot shift begins at seven", utc(2023, 1, 1))
    third = supersede(stack, alice, second, "Ostrava depot shift begins at eight", utc(2024, 1, 1))
    # Forgetting the middle one: the first is superseded by the third, from the third's start, and
    # is not otherwise changed (its change time would date the forget to a reader of it alone).
    changed = stack.memory.Read(g.ReadRequest(id=first.id), metadata=bob.md()).memory.updated_at
    stack.memory.Forget(g.ForgetRequest(id=second.id, reason="wrong"), metadata=alice.md())
    read = stack.memory.Read(g.ReadRequest(id=first.id), metadata=bob.md()).memory
    assert (read.superseded_by_id, when(read.valid_until)) == (third.id, utc(2024, 1, 1))
    assert read.updated_at == changed
    assert first.id not in recall_ids(stack, bob, "Ostrava depot")
    # Forgetting the last one too: the first holds again, current, and can be changed.
    stack.memory.Forget(g.ForgetRequest(id=third.id, reason="wrong"), metadata=alice.md())
    read = stack.memory.Read(g.ReadRequest(id=first.id), metadata=bob.md()).memory
    assert (read.superseded_by_id, read.HasField("valid_until"), read.invalidated) == ("", False, False)
    assert recall_ids(stack, bob, "Ostrava depot") == [first.id]
    stack.wait_backlog_empty()
    dense = stack.memory.Recall(
        g.RecallRequest(query="when does the Ostrava depot shift begin", purpose=CONV, mode=m.RECALL_MODE_DENSE),
        metadata=bob.md(),
    )
    assert first.id in [item.memory.id for item in dense.items]
    corrected = stack.memory.Correct(
        g.CorrectRequest(id=first.id, expected_revision=read.revision, body="Ostrava depot shift begins at 6:30"),
        metadata=alice.md(),
    ).memory
    assert corrected.revision == read.revision + 1
    # Superseded again, by its own author: an edit, so no conflict flag (docs/curation.md).
    again = supersede(stack, alice, corrected, "Ostrava depot shift begins at nine", utc(2025, 1, 1))
    assert alice.read(first.id).superseded_by_id == again.id
    flags = stack.memory.ListConflictFlags(g.ListConflictFlagsRequest(), metadata=alice.md()).flags
    assert [(f.older.id, f.newer.id) for f in flags if f.older.id == first.id] == []


def _held_at_the_statistics_lock(stack, ws: str, calls: dict) -> dict:
    """Runs ``calls`` (name -> function) one after another while a session holds the keyword
    statistics lock, each started once the one before waits (on that lock or a row), then lets them
    go; returns name -> "OK" or the status code's name."""
    out: dict[str, str] = {}

    def run(name, fn):
        try:
            fn()
            out[name] = "OK"
        except grpc.RpcError as exc:
            out[name] = exc.code().name

    threads = []
    with stack.db(ws) as hold:
        hold.execute("SELECT pg_advisory_lock(%s)", (lexical_index._STATS_LOCK_KEY,))
        for n, (name, fn) in enumerate(calls.items(), start=1):
            threads.append(threading.Thread(target=run, args=(name, fn)))
            threads[-1].start()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                waiting = hold.execute(
                    """SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                        AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"""
                ).fetchone()[0]
                if waiting >= n:
                    break
                time.sleep(0.05)
            else:
                raise AssertionError(f"{name} never waited")
        hold.execute("SELECT pg_advisory_unlock(%s)", (lexical_index._STATS_LOCK_KEY,))
    for t in threads:
        t.join(60)
    return out


def test_forgetting_a_successor_races_neither_a_derive_nor_a_correct_of_the_next(stack, team):
    """A Forget locks what it puts back before the keyword statistics lock: a Derive holding the
    predecessor and waiting for that lock deadlocked with it (found by a break-it review), and a
    Correct of the next successor's start, run meanwhile, left the spliced end at its old start."""
    ws, alice, bob = team
    a = remember(stack, alice, "Margay rota starts at six", valid_from=ts(utc(2021, 1, 1)))
    b = supersede(stack, alice, a, "Margay rota starts at seven", utc(2022, 1, 1))
    got = _held_at_the_statistics_lock(
        stack,
        ws,
        {
            "forget": lambda: stack.memory.Forget(g.ForgetRequest(id=b.id, reason="wrong"), metadata=alice.md()),
            "derive": lambda: stack.memory.Derive(
                g.DeriveRequest(source_ids=[a.id], body="Margay rota summary"), metadata=bob.md()
            ),
        },
    )
    assert got == {"forget": "OK", "derive": "OK"}
    first = remember(stack, alice, "Caracal rota starts at six", valid_from=ts(utc(2021, 1, 1)))
    middle = supersede(stack, alice, first, "Caracal rota starts at seven", utc(2022, 1, 1))
    last = supersede(stack, alice, middle, "Caracal rota starts at eight", utc(2023, 1, 1))
    got = _held_at_the_statistics_lock(
        stack,
        ws,
        {
            "forget": lambda: stack.memory.Forget(g.ForgetRequest(id=middle.id, reason="wrong"), metadata=alice.md()),
            "correct": lambda: stack.memory.Correct(
                g.CorrectRequest(id=last.id, expected_revision=1, valid_from=ts(utc(2024, 6, 1))), metadata=alice.md()
            ),
        },
    )
    assert got == {"forget": "OK", "correct": "OK"}
    read = stack.memory.Read(g.ReadRequest(id=first.id), metadata=bob.md()).memory
    assert (read.superseded_by_id, when(read.valid_until)) == (last.id, utc(2024, 6, 1))


def test_a_claim_not_yet_started_cannot_be_invalidated(stack, team):
    _, alice, _ = team
    soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=6)
    mem = remember(stack, alice, "Kestrel rota starts tonight", valid_from=ts(soon))
    err = fails(
        grpc.StatusCode.FAILED_PRECONDITION,
        None,
        stack.memory.Invalidate,
        g.InvalidateRequest(id=mem.id, expected_revision=1, reason="cancelled"),
        alice.md(),
    )
    assert "has not held yet" in err.details()
    read = stack.memory.Read(g.ReadRequest(id=mem.id), metadata=alice.md()).memory
    assert not read.invalidated and not read.HasField("valid_until")


def test_invalidate_ends_a_claim_and_takes_it_out_of_current_recall(stack, team):
    _, alice, bob = team
    mem = remember(stack, alice, "Quillon lives in Porto", valid_from=ts(utc(2020, 1, 1)))
    stack.wait_backlog_empty()
    assert mem.id in recall_ids(stack, alice, "Quillon Porto")
    md = alice.md()
    bad = [
        (g.InvalidateRequest(id=mem.id, expected_revision=1, reason="  "), grpc.StatusCode.INVALID_ARGUMENT, "reason"),
        (
            g.InvalidateRequest(id=mem.id, expected_revision=0, reason="moved"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "expected_revision",
        ),
        (
            g.InvalidateRequest(id=mem.id, expected_revision=1, reason="moved", at=ts(utc(2019, 1, 1))),
            grpc.StatusCode.INVALID_ARGUMENT,
            "at",
        ),
        (
            g.InvalidateRequest(id=mem.id, expected_revision=1, reason="moved", at=ts(utc(2999, 1, 1))),
            grpc.StatusCode.INVALID_ARGUMENT,
            "at",
        ),
        (
            g.InvalidateRequest(
                id=mem.id,
                expected_revision=1,
                reason="moved",
                at=ts(datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=20)),
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "at",
        ),
        (
            g.InvalidateRequest(id=mem.id, expected_revision=1, reason="\u200b\u2060"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "reason",
        ),
        (
            g.InvalidateRequest(id=mem.id, expected_revision=1, reason="x" * 1001),
            grpc.StatusCode.INVALID_ARGUMENT,
            "reason",
        ),
        (g.InvalidateRequest(id=mem.id, expected_revision=2, reason="moved"), grpc.StatusCode.ABORTED, None),
        (g.InvalidateRequest(id="not-a-uuid", expected_revision=1, reason="moved"), grpc.StatusCode.NOT_FOUND, None),
    ]
    for req, code, field in bad:
        fails(code, field, stack.memory.Invalidate, req, md)
    # Bob may read the workspace memory but not change it (Correct's rule).
    fails(
        grpc.StatusCode.PERMISSION_DENIED,
        None,
        stack.memory.Invalidate,
        g.InvalidateRequest(id=mem.id, expected_revision=1, reason="moved"),
        bob.md(),
    )
    ended = stack.memory.Invalidate(
        g.InvalidateRequest(id=mem.id, expected_revision=1, reason="moved to Lisbon", at=ts(utc(2024, 9, 1))),
        metadata=md,
    ).memory
    assert ended.invalidated and ended.invalidation_reason == "moved to Lisbon"
    assert when(ended.valid_until) == utc(2024, 9, 1) and ended.revision == 1 and not ended.superseded_by_id
    assert mem.id not in recall_ids(stack, alice, "Quillon Porto")
    assert mem.id in recall_ids(stack, alice, "Quillon Porto", include_superseded=True)
    listed = stack.memory.ListMemories(g.ListMemoriesRequest(), metadata=md).memories
    assert mem.id not in [x.id for x in listed]
    retired = stack.memory.ListMemories(g.ListMemoriesRequest(superseded=m.SUPERSEDED_FILTER_SUPERSEDED), metadata=md)
    assert mem.id in [x.id for x in retired.memories]
    for req in (
        g.InvalidateRequest(id=mem.id, expected_revision=1, reason="again"),
        g.CorrectRequest(id=mem.id, expected_revision=1, body="Quillon lives in Lisbon"),
        g.SupersedeRequest(id=mem.id, expected_revision=1, body="Quillon lives in Lisbon"),
    ):
        call = {
            g.InvalidateRequest: stack.memory.Invalidate,
            g.CorrectRequest: stack.memory.Correct,
            g.SupersedeRequest: stack.memory.Supersede,
        }[type(req)]
        err = fails(grpc.StatusCode.FAILED_PRECONDITION, None, call, req, md)
        assert "invalidated" in err.details()


def test_as_of_answers_what_held_on_a_day(stack, team):
    _, alice, _ = team
    first = remember(stack, alice, "Ilsabet works at Corvane Mills", valid_from=ts(utc(2019, 1, 1)))
    second = supersede(stack, alice, first, "Ilsabet works at Dornick Labs", utc(2022, 7, 1))
    left = remember(stack, alice, "Ilsabet works at Dornick Labs part time", valid_from=ts(utc(2022, 8, 1)))
    invalidate(stack, alice, left, "went full time", utc(2023, 1, 1))
    stack.wait_backlog_empty()
    q = "Ilsabet"
    assert set(recall_ids(stack, alice, q)) == {second.id}
    assert set(recall_ids(stack, alice, q, as_of=ts(utc(2020, 5, 1)))) == {first.id}
    assert set(recall_ids(stack, alice, q, as_of=ts(utc(2022, 9, 1)))) == {second.id, left.id}
    assert set(recall_ids(stack, alice, q, as_of=ts(utc(2023, 6, 1)))) == {second.id}
    assert recall_ids(stack, alice, q, as_of=ts(utc(2018, 6, 1))) == []
    # The boundary: the end is exclusive, the start inclusive.
    assert set(recall_ids(stack, alice, q, as_of=ts(utc(2022, 7, 1)))) == {second.id}
    dense = g.RecallRequest(query=q, purpose=CONV, mode=m.RECALL_MODE_DENSE, as_of=ts(utc(2020, 5, 1)))
    fails(grpc.StatusCode.INVALID_ARGUMENT, "mode", stack.memory.Recall, dense, alice.md())
    hybrid = stack.memory.Recall(g.RecallRequest(query=q, purpose=CONV, as_of=ts(utc(2020, 5, 1))), metadata=alice.md())
    assert [i.memory.id for i in hybrid.items] == [first.id]
    listed = stack.memory.ListMemories(g.ListMemoriesRequest(as_of=ts(utc(2022, 9, 1))), metadata=alice.md())
    ids = {x.id for x in listed.memories}
    assert {second.id, left.id} <= ids and first.id not in ids
    # The context bundle and PromptContext read the same instant; the bundle says it.
    bundle = stack.memory.GetContext(g.GetContextRequest(purpose=CONV, as_of=ts(utc(2020, 5, 1))), metadata=alice.md())
    shown = {e.memory.id for e in bundle.items}
    assert first.id in shown and second.id not in shown and left.id not in shown
    assert "valid at 2020-05-01T00:00:00+00:00" in bundle.text
    prompt = stack.memory.PromptContext(
        g.PromptContextRequest(text="Ilsabet works", purpose=CONV, as_of=ts(utc(2020, 5, 1))),
        metadata=alice.md(),
    )
    # The superseded memory has no vector: it passes the relevance gate on its keywords alone.
    assert [it.memory.id for it in prompt.items] == [first.id]


def test_known_at_shows_what_was_believed_then_with_the_text_of_then(stack, team):
    _, alice, _ = team
    md = alice.md()
    mem = remember(stack, alice, "the Velmor bridge opens in May")
    k1 = when(mem.created_at)
    fixed = stack.memory.Correct(
        g.CorrectRequest(id=mem.id, expected_revision=1, body="the Velmor bridge opens in June"), metadata=md
    ).memory
    k2 = when(fixed.updated_at)
    succ = stack.memory.Supersede(
        g.SupersedeRequest(id=mem.id, expected_revision=2, body="the Velmor bridge opened in July"), metadata=md
    ).memory
    k3 = when(succ.created_at)
    stack.wait_backlog_empty()
    q = "Velmor bridge opens"

    def seen(k):
        resp = stack.memory.Recall(
            g.RecallRequest(query=q, purpose=CONV, mode=m.RECALL_MODE_LEXICAL, known_at=ts(k)), metadata=md
        )
        return [(i.memory.id, i.memory.body, i.memory.revision, i.memory.superseded_by_id) for i in resp.items]

    assert seen(k1 - datetime.timedelta(microseconds=1)) == []
    assert seen(k1) == [(mem.id, "the Velmor bridge opens in May", 1, "")]
    assert seen(k2) == [(mem.id, "the Velmor bridge opens in June", 2, "")]
    assert seen(k3) == [(succ.id, "the Velmor bridge opened in July", 1, "")]
    listed = stack.memory.ListMemories(g.ListMemoriesRequest(known_at=ts(k1), include_history=True), metadata=md)
    then = [x for x in listed.memories if x.id == mem.id]
    assert [(x.body, x.revision, len(x.history)) for x in then] == [("the Velmor bridge opens in May", 1, 0)]
    assert then[0].updated_at == mem.created_at  # not yet changed then
    listed = stack.memory.ListMemories(g.ListMemoriesRequest(known_at=ts(k2)), metadata=md)
    assert [x.updated_at for x in listed.memories if x.id == mem.id] == [fixed.updated_at]
    # Forgotten memories never come back, at any instant.
    stack.memory.Forget(g.ForgetRequest(id=succ.id, reason="wrong"), metadata=md)
    stack.memory.Forget(g.ForgetRequest(id=mem.id, reason="wrong"), metadata=md)
    for k in (k1, k2, k3):
        assert seen(k) == []
        listed = stack.memory.ListMemories(g.ListMemoriesRequest(known_at=ts(k)), metadata=md)
        assert mem.id not in {x.id for x in listed.memories}


def test_as_of_and_known_at_together_use_validity_as_it_stood_then(stack, team):
    _, alice, _ = team
    md = alice.md()
    mem = remember(stack, alice, "Orrin leads the Tallow team", valid_from=ts(utc(2020, 1, 1)))
    k1 = when(mem.created_at)
    stack.memory.Invalidate(
        g.InvalidateRequest(id=mem.id, expected_revision=1, reason="left", at=ts(utc(2021, 1, 1))), metadata=md
    )
    q = "Orrin Tallow"
    # Known at k1 the claim had no end, so it held in 2022 as then believed; as known now it did not.
    assert recall_ids(stack, alice, q, as_of=ts(utc(2022, 1, 1)), known_at=ts(k1)) == [mem.id]
    assert recall_ids(stack, alice, q, as_of=ts(utc(2022, 1, 1))) == []
    assert recall_ids(stack, alice, q, as_of=ts(utc(2020, 6, 1))) == [mem.id]


@pytest.mark.parametrize("field", ["as_of", "known_at"])
def test_an_instant_in_the_future_or_out_of_range_is_invalid_argument_naming_it(stack, team, field):
    _, alice, _ = team
    for bad in (ts(utc(2999, 1, 1)), timestamp_pb2.Timestamp(seconds=-62135596801)):
        window = {field: bad}
        calls = [
            (stack.memory.Recall, g.RecallRequest(query="ferry", purpose=CONV, **window)),
            (stack.memory.Recall, g.RecallRequest(query="ferry", purpose=CONV, mode=m.RECALL_MODE_LEXICAL, **window)),
            (stack.memory.ListMemories, g.ListMemoriesRequest(**window)),
            (stack.memory.PromptContext, g.PromptContextRequest(text="ferry", purpose=CONV, **window)),
        ]
        for call, req in calls:
            fails(grpc.StatusCode.INVALID_ARGUMENT, field, call, req, alice.md())


@pytest.mark.parametrize("field", ["valid_from"])
def test_a_bad_valid_from_is_invalid_argument_on_every_write(stack, team, field):
    _, alice, _ = team
    mem = remember(stack, alice, "a claim to supersede")
    bad = ts(utc(2999, 1, 1))
    for call, req in (
        (stack.memory.Remember, g.RememberRequest(purpose=CONV, body="x", audience=WS, valid_from=bad)),
        (stack.memory.Derive, g.DeriveRequest(source_ids=[mem.id], body="x", valid_from=bad)),
        (stack.memory.Supersede, g.SupersedeRequest(id=mem.id, expected_revision=1, body="x", valid_from=bad)),
        (stack.memory.Correct, g.CorrectRequest(id=mem.id, expected_revision=1, valid_from=bad)),
    ):
        fails(grpc.StatusCode.INVALID_ARGUMENT, field, call, req, alice.md())


def test_export_and_import_keep_validity(stack, tmp_path):
    """An export carries each memory's validity and an Invalidate's end and reason; an import into an
    empty workspace gives them back, and the invalidated memory is out of current recall there too."""
    from test_portability import export, file_into, import_

    ws = stack.workspace("validity export")
    alice = stack.member(ws, purposes=[CONV])
    old = remember(stack, alice, "the Harrowgate office is on Mill Street", valid_from=ts(utc(2018, 4, 1)))
    new = supersede(stack, alice, old, "the Harrowgate office is on Quay Road", utc(2023, 1, 1))
    gone = remember(stack, alice, "the Harrowgate office opens Saturdays", valid_from=ts(utc(2019, 1, 1)))
    invalidate(stack, alice, gone, "closed on weekends now", utc(2024, 5, 1))
    # A Correct that moves the start: revision 1's start is history, and "as of 2016 as known before
    # the correction" needs it (a break-it review found imports wrote it as none).
    moved = remember(stack, alice, "the Kestrel depot is in Leeds", valid_from=ts(utc(2016, 1, 1)))
    moved = stack.memory.Correct(
        g.CorrectRequest(id=moved.id, expected_revision=1, valid_from=ts(utc(2017, 1, 1))), metadata=alice.md()
    ).memory
    before_fix = when(moved.updated_at) - datetime.timedelta(microseconds=1)
    records = {r["id"]: r for r in export(stack, alice, tmp_path / "out.jsonl")[1:]}
    assert [r["valid_from"] for r in records[moved.id]["revisions"]] == ["2016-01-01T00:00:00.000000Z"]
    assert records[moved.id]["valid_from"] == "2017-01-01T00:00:00.000000Z"
    assert (records[old.id]["valid_from"], records[old.id]["valid_until"]) == (
        "2018-04-01T00:00:00.000000Z",
        "2023-01-01T00:00:00.000000Z",
    )
    assert records[old.id]["superseded"] and records[old.id]["invalidation_reason"] is None
    assert records[gone.id]["invalidation_reason"] == "closed on weekends now" and not records[gone.id]["superseded"]
    assert records[gone.id]["valid_until"] == "2024-05-01T00:00:00.000000Z"
    assert records[new.id]["valid_until"] is None

    target = stack.workspace("validity import")
    alice2 = stack.member(target, purposes=[CONV])
    mapping = tmp_path / "map.json"
    import_(
        stack,
        *file_into(tmp_path / "out.jsonl", target),
        "--member",
        f"{alice.id}={alice2.id}",
        "--mapping",
        str(mapping),
    )
    ids = json.loads(mapping.read_text())["memories"]
    got = {
        k: stack.memory.Read(g.ReadRequest(id=ids[k]), metadata=alice2.md()).memory for k in (old.id, new.id, gone.id)
    }
    assert (when(got[old.id].valid_from), when(got[old.id].valid_until)) == (utc(2018, 4, 1), utc(2023, 1, 1))
    assert got[old.id].superseded_by_id == ids[new.id] and not got[old.id].invalidated
    assert when(got[new.id].valid_from) == utc(2023, 1, 1) and not got[new.id].HasField("valid_until")
    assert got[gone.id].invalidated and got[gone.id].invalidation_reason == "closed on weekends now"
    assert when(got[gone.id].valid_until) == utc(2024, 5, 1)
    stack.wait_backlog_empty()
    assert recall_ids(stack, alice2, "Harrowgate office") == [ids[new.id]]
    assert set(recall_ids(stack, alice2, "Harrowgate office", as_of=ts(utc(2020, 1, 1)))) == {ids[old.id], ids[gone.id]}
    depot = stack.memory.Read(g.ReadRequest(id=ids[moved.id], include_history=True), metadata=alice2.md()).memory
    assert [when(r.valid_from) for r in depot.history] == [utc(2016, 1, 1)]
    for who, mid in ((alice, moved.id), (alice2, ids[moved.id])):  # the same answers before and after
        assert recall_ids(stack, who, "Kestrel depot", as_of=ts(utc(2016, 6, 1)), known_at=ts(before_fix)) == [mid]
        assert recall_ids(stack, who, "Kestrel depot", as_of=ts(utc(2016, 6, 1))) == []


def test_the_commands_write_and_read_validity(stack, team):
    """``remember --valid-from --occurred-at``, ``correct --valid-from`` (no new body), ``invalidate``,
    and ``recall`` / ``list`` with ``--as-of`` and ``--known-at``; a bad time is a usage error, a
    refused one names the flag."""
    from cli_runner import at_gateway

    _, alice, _ = team

    def cli(*args, check=True):
        return at_gateway(f"127.0.0.1:{stack.gateway.port}", *args, token=alice.token, check=check)

    out = json.loads(
        cli(
            "remember",
            "--json",
            "--occurred-at",
            "2021-03-04",
            "--valid-from",
            "2021-03-01",
            "Tamsin runs the Eskerfield depot",
        ).stdout
    )["memory"]
    assert (out["valid_from"], out["occurred_at"]) == ("2021-03-01T00:00:00Z", "2021-03-04T00:00:00Z")
    fixed = cli("correct", out["id"], "--revision", "1", "--valid-from", "2021-02-01", "").stdout
    assert "revision 2" in fixed and "valid from 2021-02-01T00:00:00Z" in fixed and "Eskerfield depot" in fixed
    ended = cli(
        "invalidate", out["id"], "--revision", "2", "--reason", "she moved to Hull", "--at", "2024-06-30"
    ).stdout
    assert "valid from 2021-02-01T00:00:00Z until 2024-06-30T00:00:00Z" in ended
    assert 'until 2024-06-30T00:00:00Z  invalidated: "she moved to Hull"\n' in ended
    stack.wait_backlog_empty()
    assert out["id"] in cli("recall", "Eskerfield", "--as-of", "2022-01-01", "--mode", "lexical").stdout
    assert "returned=0" in cli("recall", "Eskerfield", "--mode", "lexical").stdout
    listed = cli("list", "--as-of", "2022-01-01T12:00:00+02:00").stdout
    assert out["id"] in listed
    assert out["id"] not in cli("list", "--as-of", "2025-01-01").stdout
    bad = cli("recall", "Eskerfield", "--as-of", "next year", check=False)
    assert bad.returncode == 2 and "--as-of" in bad.stderr
    refused = cli("recall", "Eskerfield", "--known-at", "2999-01-01", check=False)
    assert refused.returncode == 1 and "INVALID_ARGUMENT" in refused.stderr and "--known-at" in refused.stderr
    again = cli("invalidate", out["id"], "--revision", "2", "--reason", "again", check=False)
    assert again.returncode == 1 and "FAILED_PRECONDITION" in again.stderr
