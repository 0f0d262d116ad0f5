"""Reads in time against a reference model (issue 23): random programs of remember, supersede,
correct, invalidate and forget (whose predecessors take a forgotten successor's place), with the
claims' starts and ends taken from a few days, run by one
member through the gateway. Then, at every instant the program made (each write's own time, and a
microsecond before it) and every day it named, on the narrow and the wide path, ListMemories with
``as_of``, ``known_at`` and both lists exactly the model's memories, each with the model's text,
revision and validity of then, and a lexical Recall at the same instants finds exactly those
memories. Every status (a start before the one it replaces, an end before a start, a change of a
retired memory) is the model's.

The model is written from docs/time.md's rules, not from the code: a memory is valid from its
start until its end; known at K are those written by K and not retired by K, shown with their text
and start of then and no end recorded after K; forgotten ones never show.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

import grpc
import pytest
from google.protobuf import timestamp_pb2
from hypothesis import given
from hypothesis import strategies as st
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from trust_program import EXAMPLES, call, property_test

from store_service.records import windows

CONV = m.PURPOSE_CONVERSATION
OK = grpc.StatusCode.OK
DAY0 = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
DAYS = [DAY0 + datetime.timedelta(days=100 * i) for i in range(6)]
WORD = "kestrel"
NARROW = windows.NARROW_ROWS


def ts(when: datetime.datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(when)
    return out


def at(stamp: timestamp_pb2.Timestamp) -> datetime.datetime:
    return stamp.ToDatetime(tzinfo=datetime.UTC)


@dataclass
class Mem:
    """A memory as the model knows it: each (write time, text, revision, start) it had, when it was
    retired and where its validity ended, and whether it is forgotten."""

    id: str
    states: list[tuple[datetime.datetime, str, int, datetime.datetime]]
    retired_at: datetime.datetime | None = None
    until: datetime.datetime | None = None
    invalidated: bool = False
    successor: str | None = None
    forgotten: bool = False
    predecessors: list[str] = field(default_factory=list)

    @property
    def start(self) -> datetime.datetime:
        return self.states[-1][3]

    def then(self, known_at: datetime.datetime | None, model: dict[str, Mem]):
        """(text, revision, start, end) as known at ``known_at`` (None: now); None if not yet written.
        A superseded memory's end as known then is its successor's start as it stood then (a forget
        erases the successor's earlier revisions: then its start now), never before its own."""
        if known_at is None:
            _, text, rev, start = self.states[-1]
            return text, rev, start, self.until
        past = [s for s in self.states if s[0] <= known_at]
        if not past:
            return None
        _, text, rev, start = past[-1]
        end = None
        if self.retired_at is not None and self.retired_at <= known_at:
            end = self.until
            if self.successor is not None:
                successor = model[self.successor]
                state = None if successor.forgotten else successor.then(known_at, model)
                # Not yet written at known_at (it took a forgotten successor's place later): its first start.
                then = successor.start if successor.forgotten else state[2] if state else successor.states[0][3]
                end = max(then, self.start)
        return text, rev, start, end


def shown(model: dict[str, Mem], as_of, known_at) -> dict[str, tuple]:
    """The model's answer to a read at ``as_of`` and ``known_at`` (either may be None): memory id ->
    (text, revision, start, end) as shown."""
    out = {}
    for mem in model.values():
        if mem.forgotten:
            continue
        state = mem.then(known_at, model)
        if state is None:
            continue
        if known_at is not None and mem.retired_at is not None and mem.retired_at <= known_at and as_of is None:
            continue  # retired by then: not what was current then
        if as_of is None and known_at is None and mem.retired_at is not None:
            continue  # current only
        _, _, start, end = state
        if as_of is not None and not (start <= as_of and (end is None or as_of < end)):
            continue
        out[mem.id] = state
    return out


def ending(target: Mem, day: datetime.datetime) -> grpc.StatusCode:
    """The status of ending ``target``'s claim at ``day`` (a supersede from it, or an invalidate):
    a retired memory cannot end again, and no claim ends before it starts."""
    if target.retired_at is not None:
        return grpc.StatusCode.FAILED_PRECONDITION
    return grpc.StatusCode.INVALID_ARGUMENT if day < target.start else OK


ops = st.lists(
    st.tuples(
        st.sampled_from(
            ["remember", "remember", "supersede", "supersede", "correct", "correct_start", "correct_start"]
            + ["invalidate", "forget"]
        ),
        st.integers(0, 20),
        st.integers(0, len(DAYS) - 1),
    ),
    min_size=1,
    max_size=10,
)


@pytest.fixture(scope="module")
def time_workspace(stack):
    return stack.workspace("time property")


@property_test(max(EXAMPLES // 6, 8))
@given(program=ops, wide=st.booleans())
def test_reads_in_time_answer_as_the_reference_model(stack, time_workspace, monkeypatch, program, wide):
    # Both of each arm's paths: the instants' memories read from an index (narrow), or the arms' top
    # rows tested and read deeper (wide, as in a workspace where many memories pass).
    monkeypatch.setattr(windows, "NARROW_ROWS", 0 if wide else NARROW)
    ws = stack.emptied(time_workspace)
    me = stack.member(ws, purposes=[CONV])
    md = me.md()
    api = stack.memory
    model: dict[str, Mem] = {}
    order: list[str] = []  # ids in the order written
    instants: set[datetime.datetime] = set()
    for n, (op, pick, d) in enumerate(program):
        day = DAYS[d]
        live = [i for i in order if not model[i].forgotten]
        if op == "remember" or not live:
            code, resp = call(
                api.Remember,
                g.RememberRequest(
                    purpose=CONV, body=f"{WORD} note {n}", audience=m.AUDIENCE_WORKSPACE, valid_from=ts(day)
                ),
                md,
            )
            assert code == OK
            mem = resp.memory
            model[mem.id] = Mem(mem.id, [(at(mem.created_at), mem.body, 1, day)])
            order.append(mem.id)
            instants.add(at(mem.created_at))
            continue
        target = model[live[pick % len(live)]]
        current = target.states[-1]
        retired = target.retired_at is not None
        if op == "forget":
            code, _ = call(api.Forget, g.ForgetRequest(id=target.id, reason="test"), md)
            assert code == OK
            target.forgotten = True
            # What it superseded takes its place: superseded by the first live memory down its chain
            # of successors, else current again (docs/time.md, "Validity").
            for p in [model[p] for p in target.predecessors if not model[p].forgotten]:
                if p.successor != target.id:
                    continue
                nxt = target.successor
                while nxt is not None and model[nxt].forgotten:
                    nxt = model[nxt].successor
                if nxt is None:
                    p.retired_at, p.until, p.successor = None, None, None
                else:
                    p.successor, p.until = nxt, max(model[nxt].start, p.start)
                    model[nxt].predecessors.append(p.id)
            continue
        if op == "supersede":
            req = g.SupersedeRequest(
                id=target.id, expected_revision=current[2], body=f"{WORD} successor {n}", valid_from=ts(day)
            )
            code, resp = call(api.Supersede, req, md)
            assert code == ending(target, day), (op, code)
            if code == OK:
                new = resp.memory
                when = at(new.created_at)
                model[new.id] = Mem(new.id, [(when, new.body, 1, day)], predecessors=[target.id])
                order.append(new.id)
                target.retired_at, target.until, target.successor = when, day, new.id
                instants.add(when)
            continue
        if op == "invalidate":
            req = g.InvalidateRequest(id=target.id, expected_revision=current[2], reason=f"ended {n}", at=ts(day))
            code, resp = call(api.Invalidate, req, md)
            assert code == ending(target, day), (op, code)
            if code == OK:
                when = at(resp.memory.updated_at)
                target.retired_at, target.until, target.invalidated = when, day, True
                instants.add(when)
            continue
        # correct: the text, or the start (which moves the end of what it superseded)
        start = day if op == "correct_start" else current[3]
        body = current[1] if op == "correct_start" else f"{WORD} corrected {n}"
        req = g.CorrectRequest(id=target.id, expected_revision=current[2], body=body)
        if op == "correct_start":
            req.valid_from.CopyFrom(ts(day))
        code, resp = call(api.Correct, req, md)
        want = grpc.StatusCode.FAILED_PRECONDITION if retired else OK
        assert code == want, (op, code, want)
        if code == OK:
            when = at(resp.memory.updated_at)
            target.states.append((when, body, current[2] + 1, start))
            for p in (model[p] for p in target.predecessors if model[p].successor == target.id):
                p.until = max(start, p.start)  # what it superseded ends where it starts, never before its own start
            instants.add(when)

    asked_k = sorted(instants | {k - datetime.timedelta(microseconds=1) for k in instants})
    asked_a = DAYS + [d - datetime.timedelta(microseconds=1) for d in DAYS]
    # Every pair is listed; a sample of them (every day alone, every instant alone, a spread of
    # pairs) is recalled too, which costs more.
    reads = [(a, k) for a in [None, *asked_a] for k in [None, *asked_k]]
    recalled_too = {(None, None), *((a, None) for a in asked_a), *((None, k) for k in asked_k)}
    recalled_too |= {(a, k) for a in asked_a[::2] for k in asked_k[::3]}
    for as_of, known_at in reads:
        kw = {}
        if as_of is not None:
            kw["as_of"] = ts(as_of)
        if known_at is not None:
            kw["known_at"] = ts(known_at)
        want = shown(model, as_of, known_at)
        code, listed = call(api.ListMemories, g.ListMemoriesRequest(page_size=200, **kw), md)
        assert code == OK
        got = {}
        for x in listed.memories:
            end = at(x.valid_until) if x.HasField("valid_until") else None
            got[x.id] = (x.body, x.revision, at(x.valid_from), end)
        assert got == want, (as_of, known_at)
        if (as_of, known_at) not in recalled_too:
            continue
        code, recalled = call(
            api.Recall, g.RecallRequest(query=WORD, purpose=CONV, mode=m.RECALL_MODE_LEXICAL, top_k=200, **kw), md
        )
        assert code == OK
        assert {it.memory.id: (it.memory.body, it.memory.revision) for it in recalled.items} == {
            i: s[:2] for i, s in want.items()
        }, (as_of, known_at)
