"""The trust model's property programs (Hypothesis) and their checks against a reference model;
tests/test_trust_properties.py and tests/test_trust_properties_more.py run them.

The leak property's examples are split in two halves, one a test file, so that `make test`'s two
workers run them side by side; each half is derandomized on its own test's name, so the halves
replay different examples and together run ``RECALLATRON_PROPERTY_EXAMPLES`` of them.

Each example starts from a fresh workspace (one workspace, emptied between examples) with three
members (one admin) holding random purpose grants, runs a random program of remember, derive,
correct, supersede and forget calls, and of history appends (request ids shared across members) and
history forgets (by id, anyone's, or by time range), and of the operator's imports
(AdminService.ImportMemories of a memory authored by a member, derived from or superseding an
earlier import now and then, and ImportHistory of a turn for a member), and checks every call's
status against a small reference model of the rules in README.md, "Who sees what", and of history
evidence (owner-only, never a memory; imported or appended alike). The program also pins and unpins
memories (anyone's: only a readable one is found). Half the examples turn the workspace's expiry
gate on (30 days); the program then also ages memories (their updated_at set 40 days back in the
database) and keeps them (KeepMemory, anyone's, under the revision the model holds: only the
caller's to change is kept).
Then, as every member and for every purpose, it asks Recall in all three modes,
the store's LexicalCandidates carrying memories (what recall reads its answer from),
GetContext, Read on every id, ListMemories (every page, with and without superseded memories, per
purpose, and the derivations of every source), ListExpiringMemories (likewise) and FindEntities on
every entity name, and the entity paths (docs/entities.md): merges and their undo among the entities
the program named (each call's status the model's), listings by every entity, the entity duplicate
proposals and every entity's page (GetEntity, every timeline page), with relations and attributes
stated by every other remember; and asserts:
- nothing ineligible appears in any item, count, link or entity list (ListMemories' pages and
  total_size hold exactly the memories Read shows);
- everything eligible and matching is found (the keyword arm returns exactly the eligible set);
- an ungranted purpose is PERMISSION_DENIED, an unreadable id NOT_FOUND (to PinMemory and UnpinMemory too);
- the context bundle is exactly the model's: the member's readable pins of the purpose, the newest
  memory about each of the 5 most mentioned entities and the 10 newest eligible memories, each once,
  in that order, newest first within each part;
- with the gate on, no aged memory is in Recall (any mode) or the bundle, and the keyword arm still
  finds every other eligible one; Read and ListMemories still show aged ones;
- ListExpiringMemories lists, and counts, exactly the aged memories the member may read (none with
  the gate off), oldest updated first;
- time windows: Recall (lexical mode) and ListMemories asked for a window that starts at the middle
  of what they showed without one show exactly the memories of that answer said in it; a question
  whose time words are read ("since 2020") recalls exactly the eligible memories, each once;
- reads in time: Recall (lexical) and ListMemories with ``as_of``, ``known_at`` or both, at instants
  before the example, at its first memory's writing and now, show only readable memories of the
  purpose and quote only readable bodies (no forgotten memory, no erased revision); the program
  also invalidates memories (Invalidate, under Correct's rules), which leave current recall;
- the keyword statistics maintained by the writes equal a full recount of the stored rows;
- curation: the program also decides about random pairs (DecideDuplicateProposal: keep both,
  supersede one by the other, forget one) and resolves random conflict flags (acknowledge or undo),
  each answered with the model's status; every supersession of two confident memories (all of
  them here: confidence 1) is a flag. ListDuplicateProposals (every page, every granted purpose)
  shows only pairs of memories the member may read, of its window, newer first, never a kept pair,
  and counts that window exactly; ListConflictFlags (open, and with resolved ones) holds and counts
  exactly the flags whose two memories the member may read. A second test runs longer programs
  weighted to writes and curation (a fifth of the examples), then replaces the stored vectors by the
  model's (two clusters: cosine 1 within, 0 across), so ListDuplicateProposals must hold and count
  exactly the model's pairs among what each member may read, kept pairs left out;
- history: SearchHistory gives each member exactly their own live turns, scored with the statistics
  of those turns alone (a reference BM25 over the model), and listed in time order; another
  member's turn id is NOT_FOUND to ForgetHistory, and any turn id to every call taking a memory id
  (Read, Derive, Correct, Supersede, Forget, KeepMemory, PinMemory, UnpinMemory), for the admin as
  for anyone; a history recall holds exactly the readable memories the gate does not hide,
  superseded too, and no turn; Capture stores a
  proposal whose body is any member's turn text (history is not a memory it knows) and adds no
  turn; a request id another member used is not a replay; the history statistics equal a recount.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import uuid
import zlib
from dataclasses import dataclass, field

import grpc
import numpy as np
import pytest
from google.protobuf import timestamp_pb2
from history_reference import bm25
from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2, store_pb2_grpc

from mcp_server import render as mcp_render
from servicekit import clients, render, vocabulary
from servicekit.render import Bound
from store_service.control import names as member_names
from store_service.history import turn_index
from store_service.search import lexical_index

PURPOSES = [m.PURPOSE_CONVERSATION, m.PURPOSE_TASKS, m.PURPOSE_REPORTING, m.PURPOSE_ADMINISTRATION]
# Entity names a program uses, each shared by the memories written with it (docs/entities.md).
ENTITY_NAMES = 3
MODES = [m.RECALL_MODE_LEXICAL, m.RECALL_MODE_DENSE, m.RECALL_MODE_HYBRID]
OK = grpc.StatusCode.OK
# Examples of the leak property, in two halves (the curation test runs a fifth as many);
# docs/testing.md gives a soak's command.
EXAMPLES = int(os.environ.get("RECALLATRON_PROPERTY_EXAMPLES", "300"))
FIRST_HALF, SECOND_HALF = EXAMPLES - EXAMPLES // 2, EXAMPLES // 2


# Unset, every run replays the same derandomized examples. Set, a test's examples are those of this
# seed mixed with the test's name: a soak longer than one sitting runs in chunks of other seeds, each
# chunk new examples, the halves of one chunk different from each other.
SEED = os.environ.get("RECALLATRON_PROPERTY_SEED")


def property_test(examples: int):
    """A Hypothesis property test of ``examples`` examples (derandomized unless
    ``RECALLATRON_PROPERTY_SEED`` is set), marked ``property``, its time limit grown with the count
    so that a soak is not cut short."""

    def mark(test):
        if SEED is not None:
            if not SEED.isdigit():
                raise ValueError(f"RECALLATRON_PROPERTY_SEED must be a non-negative integer, not {SEED!r}")
            test = seed(int(SEED) * 1_000_003 + zlib.crc32(test.__name__.encode()))(test)
        test = settings(
            max_examples=max(examples, 1),
            deadline=None,
            derandomize=SEED is None,
            database=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )(test)
        return pytest.mark.property(pytest.mark.timeout(max(3000, 20 * examples))(test))

    return mark


T0 = datetime.datetime(2026, 3, 2, 8, 0, tzinfo=datetime.UTC)
# The expiry gate of the examples that turn it on, and how far back an aged memory's last update is.
GATE_DAYS, AGED_DAYS = 30, 40


@dataclass
class Mem:
    """The reference model of one memory."""

    id: str
    audience: str | None
    purpose: int
    creator: str
    entity: str
    sources: list[str] = field(default_factory=list)
    revision: int = 1
    superseded: bool = False
    forgotten: bool = False
    key: str = ""  # the import key of an imported memory
    aged: bool = False  # updated_at set past the expiry gate's 30 days (a change or a keep resets it)
    successor: str | None = None  # the memory that superseded it
    entity_id: str = ""  # the entity its name resolved to (known for a remember or a derive)
    stated: str = ""  # the value of the attribute it states (every other remember states one)


@dataclass
class Flag:
    """The reference model of one conflict flag."""

    older: str
    newer: str
    state: str = "open"


@dataclass
class Turn:
    """The reference model of one history turn."""

    id: str
    owner: str
    text: str
    at: datetime.datetime
    live: bool = True


class Model:
    """README.md's rules ("Who sees what") over the model memories, and the model history turns."""

    def __init__(self, grants: dict[str, set[int]], admins: set[str], gate: bool = False) -> None:
        self.grants, self.admins, self.mems = grants, admins, {}  # mems in the order they were created
        self.gate = gate  # the expiry gate is on (GATE_DAYS)
        self.pins: dict[str, set[str]] = {who: set() for who in grants}
        self.turns: dict[str, Turn] = {}
        self.keys: dict[tuple[str, str], str] = {}  # (owner, request id) -> the first turn's id
        self.kept: set[frozenset[str]] = set()  # pairs kept as both (never proposed again)
        self.flags: list[Flag] = []  # conflict flags, oldest first
        self.captured: dict[str, list[str]] = {who: [] for who in grants}  # turns Capture put in history
        # Each body written ("<kind> <n>", n the op's index, so unique) -> the memory it belongs to.
        self.texts: dict[str, str] = {}
        self.entities: dict[str, str] = {}  # entity id -> its own name, in the order created
        self.merges: list[tuple[str, str, str]] = []  # standing merges: (entity, into, who merged)

    def supersede(self, old: Mem, new_id: str) -> None:
        """``old`` superseded by ``new_id``: every memory here has confidence 1, so it is flagged when
        their authors differ (a disagreement; docs/curation.md, "Conflict flags")."""
        old.superseded, old.successor = True, new_id
        old.aged = False  # superseding a memory updates it (the expiry gate shows it again)
        if self.mems[new_id].creator != old.creator:
            self.flags.append(Flag(old.id, new_id))

    def own_readable(self, mem: Mem, who: str) -> bool:
        return not mem.forgotten and mem.audience in (None, who) and mem.purpose in self.grants[who]

    def readable(self, mem_id: str, who: str) -> bool:
        mem = self.mems[mem_id]
        return self.own_readable(mem, who) and all(self.readable(s, who) for s in mem.sources)

    def may_change(self, mem: Mem, who: str) -> bool:
        return mem.audience == who if mem.audience else (mem.creator == who or who in self.admins)

    def eligible(self, who: str, purpose: int) -> set[str]:
        return {
            i for i, mem in self.mems.items() if mem.purpose == purpose and not mem.superseded and self.readable(i, who)
        }

    def recallable(self, who: str, purpose: int) -> set[str]:
        """What Recall and the context bundle may show: the eligible memories the gate does not hide."""
        return {i for i in self.eligible(who, purpose) if not (self.gate and self.mems[i].aged)}

    def expiring(self, who: str, superseded: bool = False) -> set[str]:
        """What ListExpiringMemories lists: readable aged memories (current ones, or all), with the gate on."""
        return {
            i
            for i, mem in self.mems.items()
            if self.gate and mem.aged and (superseded or not mem.superseded) and self.readable(i, who)
        }

    def change_code(self, mem_id: str, who: str) -> grpc.StatusCode:
        if not self.readable(mem_id, who):
            return grpc.StatusCode.NOT_FOUND
        if not self.may_change(self.mems[mem_id], who):
            return grpc.StatusCode.PERMISSION_DENIED
        return OK

    def forget(self, mem_id: str) -> None:
        todo = [mem_id]
        while todo:
            cur = todo.pop()
            if not self.mems[cur].forgotten or cur == mem_id:
                self.mems[cur].forgotten = True
                todo += [i for i, mem in self.mems.items() if cur in mem.sources and not mem.forgotten]
        # What a forgotten memory superseded takes its place (docs/time.md, "Validity"): superseded by
        # the first live memory down the chain of successors (unchanged otherwise), else current
        # again, which updates it and drops its conflict flag.
        for mem in self.mems.values():
            if mem.forgotten or mem.successor is None or not self.mems[mem.successor].forgotten:
                continue
            nxt = mem.successor
            while nxt is not None and self.mems[nxt].forgotten:
                nxt = self.mems[nxt].successor
            mem.successor, mem.superseded = nxt, nxt is not None
            if nxt is None:
                mem.aged = False
                self.flags = [f for f in self.flags if f.older != mem.id]

    def mentions(self, entity_id: str, who: str) -> int:
        """Memories about the entity (by resolution) that ``who`` can read: 0 when it is not visible."""
        return sum(1 for i, mem in self.mems.items() if mem.entity_id == entity_id and self.readable(i, who))

    def group(self, entity_id: str, who: str) -> list[str]:
        """The entity's group as ``who`` sees it (docs/entities.md): joined by the standing merges
        whose two entities ``who`` can see; empty when ``who`` cannot see the entity."""
        if not self.mentions(entity_id, who):
            return []
        out, todo = [entity_id], [entity_id]
        while todo:
            at = todo.pop()
            for a, b, _ in self.merges:
                for near, far in ((a, b), (b, a)):
                    if near == at and far not in out and self.mentions(far, who):
                        out.append(far)
                        todo.append(far)
        return out

    def view(self, entity_id: str, who: str) -> tuple[str, list[str], int]:
        """``who``'s view of the entity's group: its representative (of the members merged into no
        member, the most mentioned, then the oldest), its members, and their readable mentions."""
        members = self.group(entity_id, who)
        merged = {a for a, b, _ in self.merges if a in members and b in members}
        order = list(self.entities)
        roots = [e for e in members if e not in merged] or members
        rep = min(roots, key=lambda e: (-self.mentions(e, who), order.index(e), e))
        return rep, members, sum(self.mentions(e, who) for e in members)

    def named_groups(self, name: str, who: str) -> list[tuple[str, str, int, int]]:
        """The groups with a member named ``name`` that ``who`` can see: (representative, the member
        of that name a write links to, readable mentions, those in workspace memories)."""
        out = {}
        order = list(self.entities)
        for e, own in self.entities.items():
            if own == name and self.mentions(e, who):
                rep, members, total = self.view(e, who)
                named = [x for x in members if self.entities[x] == name]
                pick = min(named, key=lambda x: (-self.mentions(x, who), order.index(x), x))
                shared = sum(
                    1
                    for i, mem in self.mems.items()
                    if mem.entity_id in members and mem.audience is None and self.readable(i, who)
                )
                out[rep] = (rep, pick, total, shared)
        return list(out.values())

    def visible_entities(self, name: str, who: str) -> set[str]:
        """What FindEntities of ``name`` shows ``who``: the representatives of ``named_groups``."""
        return {rep for rep, _, _, _ in self.named_groups(name, who)}

    def may_change_all(self, entity_id: str, who: str) -> bool:
        """Whether ``who`` may change every memory about the entity it can read (the merge rule)."""
        return all(
            self.may_change(mem, who)
            for i, mem in self.mems.items()
            if mem.entity_id == entity_id and self.readable(i, who)
        )

    def merge_code(self, merged: str, into: str, who: str) -> grpc.StatusCode:
        if merged == into:
            return grpc.StatusCode.INVALID_ARGUMENT
        if not (self.mentions(merged, who) and self.mentions(into, who)):
            return grpc.StatusCode.NOT_FOUND
        if into in self.group(merged, who):
            return grpc.StatusCode.FAILED_PRECONDITION
        return OK if self.may_change_all(merged, who) else grpc.StatusCode.PERMISSION_DENIED

    def undone_by(self, merged: str, who: str) -> list[tuple[str, str, str]]:
        """The standing merges of ``merged`` an UnmergeEntity by ``who`` undoes: those into an entity
        ``who`` can see."""
        return [x for x in self.merges if x[0] == merged and self.mentions(x[1], who)]

    def unmerge_code(self, merged: str, who: str) -> grpc.StatusCode:
        if not self.mentions(merged, who):
            return grpc.StatusCode.NOT_FOUND
        undone = self.undone_by(merged, who)
        if not undone:
            return grpc.StatusCode.FAILED_PRECONDITION
        if any(by != who for _, _, by in undone) and not self.may_change_all(merged, who):
            return grpc.StatusCode.PERMISSION_DENIED
        return OK

    def check_resolution(self, resp_memory: m.Memory, name: str, groups: list, shared: bool) -> str:
        """The one resolution of a write naming ``name``, against the groups the writer saw before it
        (``named_groups``): a new entity when none, else the member of that name of the best group
        (for a workspace memory, the most workspace mentions first), the others reported, none the
        writer could not see. Returns the entity id."""
        res, *again = resp_memory.entity_resolutions
        for other in again:  # the same name stated again (a relation, an attribute): the same entity
            assert other.entity_id == res.entity_id, (res, other)
            if res.outcome == m.ENTITY_RESOLUTION_OUTCOME_CREATED:
                assert other.outcome == m.ENTITY_RESOLUTION_OUTCOME_LINKED and not other.other_entity_ids, other
            else:
                assert (other.outcome, other.other_entity_ids) == (res.outcome, res.other_entity_ids), other
        if not groups:
            assert res.outcome == m.ENTITY_RESOLUTION_OUTCOME_CREATED and not res.other_entity_ids, res
            assert res.entity_id not in self.entities, res
            self.entities[res.entity_id] = name
        else:
            rank = {pick: ((-sh,) if shared else ()) + (-total,) for _, pick, total, sh in groups}
            want = m.ENTITY_RESOLUTION_OUTCOME_LINKED if len(rank) == 1 else m.ENTITY_RESOLUTION_OUTCOME_CHOSEN
            assert res.outcome == want and res.entity_id in rank, (res, rank)
            assert set(res.other_entity_ids) == set(rank) - {res.entity_id}, (res, rank)
            assert rank[res.entity_id] == min(rank.values()), (res, rank)
        return res.entity_id


def ts(when: datetime.datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(when)
    return out


def append_history(api, model: Model, me: str, md, n: int, a: int, b: int, p: int, word: str, operator=None) -> None:
    """One turn of ``me``, at a time of its own; every other one shares a request id with whoever
    (when ``me`` used it before: ALREADY_EXISTS, the turns differing, or a replay once the first was
    forgotten). With ``operator``
    (``(workspace id, operator metadata, admin stub)``) the operator appends it for ``me`` through
    AdminService.ImportHistory: the same turn, owned by ``me`` alone."""
    key = f"key{a % 3}" if b % 2 else ""
    at = T0 + datetime.timedelta(minutes=7 * n)
    text = f"{word} turn {n}" + " more" * p
    turn = g.HistoryTurn(request_id=key, chat_id=f"chat{p % 2}", role="user", text=text, occurred_at=ts(at))
    if operator:
        ws, op_md, admin = operator
        code, resp = call(
            admin.ImportHistory, g.ImportHistoryRequest(workspace_id=ws, member_id=me, turns=[turn]), op_md
        )
    else:
        code, resp = call(api.AppendHistory, g.AppendHistoryRequest(turns=[turn]), md)
    assert code == OK, resp
    result, first = resp.results[0], model.keys.get((me, key))
    if key and first:
        if model.turns[first].live:  # another turn (its own time and text) under a used id: refused
            assert result.error.code == grpc.StatusCode.ALREADY_EXISTS.value[0], result
        else:  # the first was forgotten, its text erased: nothing to compare, a replay
            assert result.replayed and result.turn_id == first, result
        return
    assert result.HasField("turn_id"), result
    assert not result.replayed and result.turn_id not in model.turns
    model.turns[result.turn_id] = Turn(result.turn_id, me, text, at)
    if key:
        model.keys[(me, key)] = result.turn_id


def forget_history(api, model: Model, me: str, md, a: int, b: int) -> None:
    """Forgets one turn by id (any member's: only one's own live turn is found), or ``me``'s turns
    in a quarter-hour window (no other member's)."""
    turns = list(model.turns.values())
    if a % 2 == 0 and turns:
        target = turns[b % len(turns)]
        code, resp = call(api.ForgetHistory, g.ForgetHistoryRequest(turn_ids=[target.id]), md)
        assert code == (OK if target.owner == me and target.live else grpc.StatusCode.NOT_FOUND)
        if code == OK:
            assert resp.forgotten_count == 1
            target.live = False
        return
    lo = T0 + datetime.timedelta(minutes=7 * (b % 10))
    hi = lo + datetime.timedelta(minutes=15)
    code, resp = call(api.ForgetHistory, g.ForgetHistoryRequest(start_time=ts(lo), end_time=ts(hi)), md)
    gone = [t for t in turns if t.owner == me and t.live and lo <= t.at < hi]
    assert code == OK and resp.forgotten_count == len(gone)
    for t in gone:
        t.live = False


def check_history(api, model: Model, me: str, md, word: str) -> None:
    """``me`` finds exactly their own live turns, ranked by their own statistics, listed in time
    order; no turn id (their own included) is a memory to Read or Derive."""
    mine = {t.id: t for t in model.turns.values() if t.owner == me and t.live}
    code, resp = call(api.SearchHistory, g.SearchHistoryRequest(query=word, page_size=200), md)
    assert code == OK and {e.turn_id for e in resp.entries} == set(mine)
    want = bm25({i: t.text for i, t in mine.items()}, word)
    for entry in resp.entries:
        assert (
            entry.score == pytest.approx(want[entry.turn_id], rel=1e-12) and entry.turn.text == mine[entry.turn_id].text
        )
    code, resp = call(api.SearchHistory, g.SearchHistoryRequest(page_size=200), md)
    assert code == OK and [e.turn_id for e in resp.entries] == sorted(mine, key=lambda i: mine[i].at)
    # No turn id (their own included) is a memory to any call that takes a memory id.
    for turn_id in model.turns:
        for fn, req in (
            (api.Read, g.ReadRequest(id=turn_id)),
            (api.Derive, g.DeriveRequest(source_ids=[turn_id], body="x")),
            (api.Correct, g.CorrectRequest(id=turn_id, expected_revision=1, body="x")),
            (api.Supersede, g.SupersedeRequest(id=turn_id, expected_revision=1, body="x")),
            (api.Forget, g.ForgetRequest(id=turn_id, reason="x")),
            (api.PinMemory, g.PinMemoryRequest(id=turn_id)),
            (api.UnpinMemory, g.UnpinMemoryRequest(id=turn_id)),
            (api.KeepMemory, g.KeepMemoryRequest(id=turn_id, expected_revision=1)),
        ):
            assert call(fn, req, md)[0] == grpc.StatusCode.NOT_FOUND, (fn, turn_id)


def check_history_recall(api, model: Model, me: str, md, word: str, purpose: int) -> None:
    """A history recall (superseded memories too, keyword arm only) finds exactly the readable
    memories of the purpose, superseded or not, that the expiry gate does not hide, and never a
    history turn."""
    code, resp = call(api.Recall, g.RecallRequest(query=word, purpose=purpose, include_superseded=True, top_k=200), md)
    assert code == OK and resp.mode == m.RECALL_MODE_LEXICAL
    want = {
        i
        for i, mem in model.mems.items()
        if mem.purpose == purpose and model.readable(i, me) and not (model.gate and mem.aged)
    }
    got = {it.memory.id for it in resp.items}
    assert got == want and not got & set(model.turns), (got ^ want, got & set(model.turns))
    assert resp.counts.returned == len(want)


def check_capture_ignores_history(api, model: Model, me: str, md, purpose: int) -> None:
    """Capture judges "already known" against memories alone: a proposal whose body is the text of
    any member's turn (its own included) is stored; the whole turn goes to its author's history
    alone (chat "capture"), and the memory's evidence is its span."""
    texts = [t.text for t in model.turns.values() if t.live][:20]
    if not texts:
        return
    turn = "\n".join(texts)
    proposals = [m.CaptureProposal(span=t, body=t, audience=m.AUDIENCE_MEMBER) for t in texts]
    code, resp = call(api.Capture, g.CaptureRequest(purpose=purpose, turn=turn, proposals=proposals), md)
    assert code == OK, code
    for text, result in zip(texts, resp.results, strict=True):
        assert result.WhichOneof("outcome") == "memory" and result.memory.body == text, result
        assert result.memory.evidence.span == text and not result.memory.evidence.turn, result
    model.captured[me].append(turn)


def check_capture_span_alone(stack, api, model: Model, who: list[str], members, word: str) -> None:
    """A workspace-audience capture shows every member who may read it its span, never the rest of
    the turn: not in Read, not in Recall, not in the bundle, not in any rendering of them."""
    author = 0  # every member holds at least one purpose
    purpose = min(model.grants[who[author]])
    secret = "sx" + uuid.uuid4().hex[:8]
    span = f"{word} captured span"
    turn = f"{secret} before. {span}. after {secret}"
    code, resp = call(
        api.Capture,
        g.CaptureRequest(
            purpose=purpose,
            turn=turn,
            proposals=[m.CaptureProposal(span=span, body=span, audience=m.AUDIENCE_WORKSPACE)],
        ),
        members[author].md(),
    )
    assert code == OK and resp.results[0].WhichOneof("outcome") == "memory", resp
    mem_id = resp.results[0].memory.id
    model.captured[who[author]].append(turn)
    for i, member in enumerate(members):
        md, may = member.md(), purpose in model.grants[who[i]]
        code, read = call(api.Read, g.ReadRequest(id=mem_id, include_history=True), md)
        assert code == (OK if may else grpc.StatusCode.NOT_FOUND)
        if not may:
            continue
        assert read.memory.evidence.span == span and not read.memory.evidence.turn
        code, recalled = call(api.Recall, g.RecallRequest(query=word, purpose=purpose, top_k=200), md)
        code2, bundle = call(api.GetContext, g.GetContextRequest(purpose=purpose, token_budget=100_000), md)
        assert code == code2 == OK and mem_id in {it.memory.id for it in recalled.items}
        for shown in (*renderings(read), *renderings(recalled), bundle.text, str(read), str(recalled), str(bundle)):
            assert secret not in shown and (i == author or turn not in shown)


# What a rendering may quote of a body: "<kind> <n>" (the digit look-ahead keeps "note 1" from
# matching "note 12").
WRITTEN = re.compile(r"\b(note|derived|corrected|successor|imported|stated|turn) (\d+)(?!\d)")
UNBOUNDED = Bound(tokens=10**9, chars=10**9)  # nothing cut: a cut could hide a leak


def renderings(resp) -> list[str]:
    """What a model is shown of a Recall or Read response: the MCP tool result's text and its
    structured content as a client writes it, and each memory as rendered on its own."""
    text, content = mcp_render.result(resp, UNBOUNDED)
    mems = [it.memory for it in resp.items] if hasattr(resp, "items") else [resp.memory]
    return [text, json.dumps(content), *(render.memory(mem) for mem in mems)]


# A named member of another workspace, per stack: its name must never show in this one's answers.
_OUTSIDERS: dict[int, str] = {}


def outsider_name(stack) -> str:
    if id(stack) not in _OUTSIDERS:
        name = f"Outsider {uuid.uuid4().hex[:8]}"
        stack.member(stack.workspace("outsider"), display_name=name).remember(f"Written by {name}.")
        _OUTSIDERS[id(stack)] = name
    return _OUTSIDERS[id(stack)]


def check_names(resp, names: dict[str, str], hidden: list[str], shown: list[str]) -> None:
    """Every display name beside a member id in ``resp`` (at any depth) is that member's, among the
    example's members (``names``), and each of ``hidden`` (another workspace's member's name, the
    name of a member removed before writing anything) is nowhere in ``resp`` or what a model is
    ``shown`` of it."""
    found: list = []
    member_names._collect(resp, found)
    for msg, name_field, value in found:
        assert getattr(msg, name_field) == names.get(value, ""), (name_field, value)
    for name in hidden:
        assert name not in str(resp) and not any(name in text for text in shown), name


def check_rendered(model: Model, me: str, shown: str) -> None:
    """Every body quoted in ``shown`` belongs to a memory ``me`` may read; no history turn is."""
    for kind, n in WRITTEN.findall(shown):
        assert kind != "turn", shown
        mem_id = model.texts[f"{kind} {n}"]
        assert model.readable(mem_id, me), (f"{kind} {n}", mem_id)


def check_prompt_context(api, model: Model, me: str, md, word: str, purpose: int) -> None:
    """PromptContext of the example's word (every body holds it, so the embedded ones lie near it in
    meaning and pass the gate) shows only what ``me`` may recall for the purpose, in items and in
    the block, and the block quotes only bodies ``me`` may read; the same session key twice shows
    nothing new."""
    key = f"trust-{uuid.uuid4()}"
    seen: set[str] = set()
    for _ in range(2):
        code, resp = call(
            api.PromptContext,
            g.PromptContextRequest(text=word, purpose=purpose, token_budget=2_500, session_key=key),
            md,
        )
        assert code == OK
        check_rendered(model, me, resp.text)
        ids = {it.memory.id for it in resp.items} | set(resp.cut_ids)
        assert ids <= model.recallable(me, purpose), ids - model.recallable(me, purpose)
        assert not ids & seen  # shown once per session
        seen |= {it.memory.id for it in resp.items}


def list_pages(api, md, page_size: int = 200, **kw) -> tuple[list[m.Memory], set[int]]:
    """Every page of a ListMemories: the memories, and the total_size each page reported."""
    out, totals, token = [], set(), ""
    while True:
        resp = api.ListMemories(g.ListMemoriesRequest(page_size=page_size, page_token=token, **kw), metadata=md)
        out += resp.memories
        totals.add(resp.total_size)
        token = resp.next_page_token
        if not token:
            return out, totals


def said(mem: m.Memory) -> datetime.datetime:
    """When a memory was said, the time windows' rule: its occurred_at, else when it was written."""
    return (mem.occurred_at if mem.HasField("occurred_at") else mem.created_at).ToDatetime(tzinfo=datetime.UTC)


def middle(mems) -> datetime.datetime | None:
    """A window's start that splits ``mems`` by when they were said (the later half in), or None."""
    times = sorted({said(x) for x in mems})
    return times[len(times) // 2] if times else None


def check_window(api, md, call_name: str, req, shown: list[m.Memory], start: datetime.datetime, got) -> None:
    """``call_name`` asked with ``req`` and the window [start, ...) shows exactly the memories of
    ``shown`` (what it showed without the window, every eligible one) said in it: nothing unreadable
    or forgotten, nothing missing. ``got`` reads the memories out of the response."""
    req.occurred_after.CopyFrom(ts(start))
    code, resp = call(getattr(api, call_name), req, md)
    assert code == OK
    want = {x.id for x in shown if said(x) >= start}
    assert {x.id for x in got(resp)} == want, (call_name, start)


def check_in_time(api, model: Model, me: str, md, word: str, purpose: int, shown: list[m.Memory]) -> None:
    """Recall (lexical) and ListMemories read ``as_of`` and ``known_at`` instants across the example
    (before it, when its first shown memory was written, and now; alone and together) show
    only memories of the purpose that ``me`` may read, superseded ones among them, and quote only
    bodies ``me`` may read: no forgotten memory and no erased revision comes back at any instant."""
    now = datetime.datetime.now(datetime.UTC)
    first = min((x.created_at.ToDatetime(tzinfo=datetime.UTC) for x in shown), default=now)
    allowed = {i for i, mem in model.mems.items() if mem.purpose == purpose and model.readable(i, me)}
    before = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    asked = [{"as_of": ts(now)}, {"known_at": ts(first)}, {"as_of": ts(before), "known_at": ts(now)}]
    asked += [{"as_of": ts(first), "known_at": ts(first)}, {"known_at": ts(now)}]
    for kw in asked:
        req = g.RecallRequest(query=word, purpose=purpose, mode=m.RECALL_MODE_LEXICAL, top_k=200, **kw)
        code, resp = call(api.Recall, req, md)
        assert code == OK
        got = [it.memory.id for it in resp.items]
        assert len(got) == len(set(got)) and set(got) <= allowed, (kw, set(got) - allowed)
        if list(kw) in (["as_of"], ["known_at"]) and kw[next(iter(kw))] == ts(now):
            # What holds now, and what is known now, is what current recall finds.
            assert set(got) == model.recallable(me, purpose), kw
        for text in renderings(resp):
            check_rendered(model, me, text)
        code, listed = call(api.ListMemories, g.ListMemoriesRequest(purpose=purpose, page_size=200, **kw), md)
        assert code == OK
        assert {x.id for x in listed.memories} <= allowed
        for x in listed.memories:
            check_rendered(model, me, x.body)


def check_listing(api, model: Model, me: str, md, everything: set[str]) -> None:
    """ListMemories lists, and counts, exactly the memories ``me`` may read (the rule of Read): all of
    them with superseded ones, the current ones by default, the eligible ones of a granted purpose;
    an ungranted purpose is PERMISSION_DENIED. Links and successors name only readable memories. The
    whole listing goes three a page, so examples span pages; the narrower ones in one page."""
    readable = {i for i in everything if model.readable(i, me)}
    current = {i for i in readable if not model.mems[i].superseded}
    for kw, want in (({"superseded": m.SUPERSEDED_FILTER_ALL, "page_size": 3}, readable), ({}, current)):
        listed, totals = list_pages(api, md, **kw)
        assert len(listed) == len({x.id for x in listed})  # no memory twice across pages
        assert {x.id for x in listed} == want and totals == {len(want)}, (kw, totals, len(want))
        for x in listed:
            assert not x.superseded_by_id or model.readable(x.superseded_by_id, me)
            assert all(
                model.readable(link.target_memory_id, me) for link in x.links if link.type == m.LINK_TYPE_DERIVED_FROM
            )
        start = middle(listed)
        if start is not None:  # a time window lists exactly the readable memories said in it
            req = g.ListMemoriesRequest(**{**kw, "page_size": 200})
            check_window(api, md, "ListMemories", req, listed, start, lambda r: r.memories)
    for source in {src for mem in model.mems.values() for src in mem.sources}:  # each source's derivations
        listed, totals = list_pages(api, md, derived_from_id=source, superseded=m.SUPERSEDED_FILTER_ALL)
        want = {i for i in readable if source in model.mems[i].sources}
        assert {x.id for x in listed} == want and totals == {len(want)}
    for purpose in PURPOSES:
        if purpose not in model.grants[me]:
            assert call(api.ListMemories, g.ListMemoriesRequest(purpose=purpose), md)[0] == (
                grpc.StatusCode.PERMISSION_DENIED
            )
            continue
        listed, totals = list_pages(api, md, purpose=purpose)
        assert {x.id for x in listed} == model.eligible(me, purpose) and totals == {len(listed)}


def import_memory(stack, ws: str, model: Model, me: str, n: int, a: int, b: int, p: int, aud, word: str) -> None:
    """The operator imports a memory authored by ``me`` (AdminService.ImportMemories), derived from
    or superseding an earlier import now and then; the model takes it as the rules say: its
    audience as given, its sources' chain, a supersede only of a live, unsuperseded target of the
    same purpose whose audience it does not widen, and a derivation only of a live source of the same
    purpose whose audience it does not widen (Derive's rule)."""
    audience = aud or m.AUDIENCE_MEMBER
    mine = me if audience == m.AUDIENCE_MEMBER else None
    purpose = PURPOSES[p]
    imported = [mem for mem in model.mems.values() if mem.key]
    other = imported[a % len(imported)] if imported else None
    derived = [other.key] if other and b % 3 == 1 else []
    target = other if other and b % 3 == 2 else None
    item = m.ImportedMemory(
        import_key=f"imp{n}",
        author_member_id=me,
        body=f"{word} imported {n}",
        purpose=purpose,
        audience=audience,
        entities=[m.EntityMention(name=f"imported ent{n}")],
        derived_from_keys=derived,
        supersedes_key=target.key if target else "",
    )
    resp = stack.admin.ImportMemories(g.ImportMemoriesRequest(workspace_id=ws, memories=[item]), metadata=stack.op())
    (result,) = resp.memories
    ok = not (
        derived
        and (other.forgotten or other.purpose != purpose or (other.audience is not None and other.audience != mine))
    )
    if target is not None:
        ok = not (
            target.forgotten
            or target.superseded
            or target.purpose != purpose
            or (target.audience is not None and target.audience != mine)
        )
    assert result.status == (m.IMPORT_STATUS_CREATED if ok else m.IMPORT_STATUS_FAILED), (result, derived, target)
    if ok:
        sources = [other.id] if derived else list(target.sources) if target else []
        model.mems[result.id] = Mem(result.id, mine, purpose, me, f"imported ent{n}", sources, key=f"imp{n}")
        model.texts[f"imported {n}"] = result.id
        if target is not None:
            aged = target.aged
            model.supersede(target, result.id)
            # An import keeps the times it is given (a round trip keeps updated_at): unlike Supersede,
            # linking the older memory does not update it, so an aged one stays aged.
            target.aged = aged


def pin_or_unpin(api, model: Model, me: str, md, a: int, b: int) -> None:
    """Pins (or, every third time, unpins) any member's memory: found only when ``me`` may read it."""
    ids = list(model.mems)
    if not ids:
        return
    target = ids[a % len(ids)]
    readable = model.readable(target, me)
    if b % 3 == 0:
        code, resp = call(api.UnpinMemory, g.UnpinMemoryRequest(id=target), md)
        assert code == (OK if readable else grpc.StatusCode.NOT_FOUND)
        if code == OK:
            assert resp.was_pinned == (target in model.pins[me])
            model.pins[me].discard(target)
        return
    code, resp = call(api.PinMemory, g.PinMemoryRequest(id=target), md)
    assert code == (OK if readable else grpc.StatusCode.NOT_FOUND)
    if code == OK:
        assert resp.already_pinned == (target in model.pins[me])
        model.pins[me].add(target)


def check_context(api, model: Model, me: str, md, purpose: int) -> None:
    """GetContext gives exactly the model's bundle: nothing ineligible, nothing eligible missing."""
    code, resp = call(api.GetContext, g.GetContextRequest(purpose=purpose, token_budget=100_000), md)
    if purpose not in model.grants[me]:
        assert code == grpc.StatusCode.PERMISSION_DENIED
        return
    assert code == OK and not resp.cut_items
    created = list(model.mems)  # oldest first
    newest = sorted(model.recallable(me, purpose), key=created.index, reverse=True)
    shown = {i for i in model.mems if not (model.gate and model.mems[i].aged)}  # the gate hides pins too
    pinned = [i for i in model.pins[me] if model.readable(i, me) and model.mems[i].purpose == purpose and i in shown]
    # The five entities most mentioned by the bundle's memories (ties: the latest mention, then the
    # id), each by its newest memory. A remember or derive names a shared name, resolved to
    # ``entity_id``; an import's entity is its own (one mention, so the id never breaks a tie).
    # A merged entity counts as its group, under the representative the member sees, by its name.
    counts: dict[str, int] = {}
    latest: dict[str, str] = {}  # entity -> its newest memory here
    names: dict[str, str] = {}
    for i in reversed(newest):  # oldest first, so the last seen is the newest
        mem = model.mems[i]
        if mem.entity:
            eid, names_as = f"import {i}", mem.entity
            if mem.entity_id:
                eid = model.view(mem.entity_id, me)[0]
                names_as = model.entities[eid]
            counts[eid] = counts.get(eid, 0) + 1
            latest[eid], names[eid] = i, names_as
    ranked = sorted(counts, key=lambda e: (-counts[e], -created.index(latest[e]), e))[:5]
    about = sorted((latest[e] for e in ranked), key=created.index, reverse=True)
    mentions = {latest[e]: (names[e], counts[e]) for e in ranked}
    want = sorted(pinned, key=created.index, reverse=True)
    want += [i for i in about if i not in want]
    want += [i for i in newest[:10] if i not in want]
    got = [it.memory.id for it in resp.items]
    assert got == want, (got, want)
    parts = [m.CONTEXT_PART_PINNED] * len(pinned) + [m.CONTEXT_PART_ENTITY] * len(set(about) - set(pinned))
    assert [it.part for it in resp.items] == parts + [m.CONTEXT_PART_RECENT] * (len(want) - len(parts))
    for it in resp.items:
        assert it.memory.purpose == purpose and f"[{render.short_id(it.memory.id)}]" in resp.text
        assert [(e.name, e.mentions) for e in it.entities] == (
            [mentions[it.memory.id]] if it.memory.id in about else []
        )
        for link in it.memory.links:  # provenance shows only what the caller can read
            if link.type == m.LINK_TYPE_DERIVED_FROM:
                assert model.readable(link.target_memory_id, me)
    # No id of a memory the member may not read appears anywhere in the text, nor any of its bodies.
    assert not any(i in resp.text for i in model.mems if not model.readable(i, me))
    check_rendered(model, me, resp.text)
    # Nor is one the gate hides an item (its id may still be named as a shown derivation's readable
    # source: hidden is not unreadable).
    assert not {it.memory.id for it in resp.items} - shown


def expiring_pages(api, model: Model, md, page_size: int = 200, **kw) -> tuple[list[m.Memory], set[int]]:
    """Every page of a ListExpiringMemories: the memories, and each page's total_size."""
    out, totals, token = [], set(), ""
    while True:
        req = g.ListExpiringMemoriesRequest(page_size=page_size, page_token=token, **kw)
        resp = api.ListExpiringMemories(req, metadata=md)
        assert resp.expiry_days == (GATE_DAYS if model.gate else 0)
        out += resp.memories
        totals.add(resp.total_size)
        token = resp.next_page_token
        if not token:
            return out, totals


def check_expiring(api, model: Model, me: str, md) -> None:
    """ListExpiringMemories lists, and counts, exactly the aged memories ``me`` may read (with the
    gate on; nothing with it off), oldest updated first, per granted purpose too; an ungranted
    purpose is PERMISSION_DENIED. Links and successors name only readable memories. The current ones
    go two a page, so examples span pages; the whole list in one page."""
    for kw, superseded in (({"page_size": 2}, False), ({"superseded": m.SUPERSEDED_FILTER_ALL}, True)):
        listed, totals = expiring_pages(api, model, md, **kw)
        want = model.expiring(me, superseded)
        assert len(listed) == len(want) and {x.id for x in listed} == want, (kw, [x.id for x in listed], want)
        order = [(x.updated_at.ToDatetime(), uuid.UUID(x.id)) for x in listed]
        assert order == sorted(order)  # oldest updated first, then id (as PostgreSQL orders uuids)
        assert totals == {len(want)}, (kw, totals, len(want))
        for x in listed:
            assert not x.superseded_by_id or model.readable(x.superseded_by_id, me)
            assert all(
                model.readable(link.target_memory_id, me) for link in x.links if link.type == m.LINK_TYPE_DERIVED_FROM
            )
    for purpose in PURPOSES:
        code, resp = call(api.ListExpiringMemories, g.ListExpiringMemoriesRequest(purpose=purpose), md)
        if purpose not in model.grants[me]:
            assert code == grpc.StatusCode.PERMISSION_DENIED
            continue
        want = {i for i in model.expiring(me) if model.mems[i].purpose == purpose}
        assert code == OK and {x.id for x in resp.memories} == want and resp.total_size == len(want)


def age(stack, ws: str, model: Model, a: int) -> None:
    """Moves any memory's last update AGED_DAYS back (the database's clock): past the gate."""
    ids = list(model.mems)
    if not ids:
        return
    target = model.mems[ids[a % len(ids)]]
    with stack.db(ws) as conn:
        conn.execute(
            "UPDATE memory SET updated_at = now() - make_interval(days => %s) WHERE id = %s",
            (AGED_DAYS, uuid.UUID(target.id)),
        )
    target.aged = True


def keep(api, model: Model, me: str, md, a: int) -> None:
    """KeepMemory of any memory under the model's revision: kept only when ``me`` may change it
    (superseded ones too), NOT_FOUND when unreadable, PERMISSION_DENIED when readable only."""
    ids = list(model.mems)
    if not ids:
        return
    target = model.mems[ids[a % len(ids)]]
    code, resp = call(api.KeepMemory, g.KeepMemoryRequest(id=target.id, expected_revision=target.revision), md)
    assert code == model.change_code(target.id, me), (code, target)
    if code == OK:
        assert resp.memory.id == target.id and resp.memory.revision == target.revision
        target.aged = False


def decide_pair(api, model: Model, me: str, md, a: int, b: int, p: int) -> None:
    """Decides about two model memories (any member's, perhaps the same one twice): keep both,
    supersede the first by the second (under the first's revision), or forget the first; the status
    is the model's (INVALID_ARGUMENT for one id twice, NOT_FOUND unless both are readable, then the
    change rules of Supersede and Forget)."""
    ids = list(model.mems)
    firsts = ids
    if a % 2 == 0:  # half the time among what ``me`` reads, the first one its own to change, so decisions get made
        ids = [i for i in ids if model.readable(i, me)] or ids
        firsts = [i for i in ids if model.may_change(model.mems[i], me) and not model.mems[i].superseded] or ids
    first = model.mems[firsts[a % len(firsts)]]
    # Another memory, but the same one twice now and then (INVALID_ARGUMENT).
    others = [i for i in ids if i != first.id]
    second = first if b % 7 == 3 or not others else model.mems[others[b % len(others)]]
    decision = [m.DUPLICATE_DECISION_KEEP_BOTH, m.DUPLICATE_DECISION_SUPERSEDE, m.DUPLICATE_DECISION_FORGET][p % 3]
    req = g.DecideDuplicateProposalRequest(memory_a_id=first.id, memory_b_id=second.id, decision=decision)
    if decision == m.DUPLICATE_DECISION_SUPERSEDE:
        req.keep_id, req.expected_revision = second.id, first.revision
    elif decision == m.DUPLICATE_DECISION_FORGET:
        req.forget_id = first.id
    code, resp = call(api.DecideDuplicateProposal, req, md)
    if first.id == second.id:
        want = grpc.StatusCode.INVALID_ARGUMENT
    elif not (model.readable(first.id, me) and model.readable(second.id, me)):
        want = grpc.StatusCode.NOT_FOUND
    elif decision == m.DUPLICATE_DECISION_KEEP_BOTH:
        want = OK
    elif not model.may_change(first, me):
        want = grpc.StatusCode.PERMISSION_DENIED
    elif decision == m.DUPLICATE_DECISION_SUPERSEDE and (
        first.superseded or second.superseded or first.purpose != second.purpose
    ):
        want = grpc.StatusCode.FAILED_PRECONDITION
    else:
        want = OK
    assert code == want, (decision, code, want)
    if code != OK:
        return
    if decision == m.DUPLICATE_DECISION_KEEP_BOTH:
        model.kept.add(frozenset((first.id, second.id)))
    elif decision == m.DUPLICATE_DECISION_SUPERSEDE:
        assert resp.superseded.superseded_by_id == second.id and resp.conflict_flag_id
        model.supersede(first, second.id)
    else:
        assert resp.forgotten_ids[0] == first.id
        assert all(model.readable(i, me) for i in resp.forgotten_ids)  # only what the member could read
        model.forget(first.id)


def resolve_flag(stack, ws: str, api, model: Model, me: str, md, a: int, b: int) -> None:
    """Resolves a model flag (any: only one whose memories ``me`` reads is found) by acknowledging
    it or, every other time, undoing it under the newer memory's revision; the status is the
    model's, and an undo adds the restored memory (the newer's successor, derived from the older and
    member-only when the older is; no new flag)."""
    candidates = model.flags
    if a % 2 == 0:  # half the time among the flags ``me`` sees, so flags get resolved
        seen = [f for f in model.flags if model.readable(f.older, me) and model.readable(f.newer, me)]
        mine = [f for f in seen if f.state == "open" and model.may_change(model.mems[f.newer], me)]
        candidates = mine or seen or candidates
    if not candidates:
        return
    flag = candidates[b % len(candidates)]
    with stack.db(ws) as conn:  # the flag's id, as the member that sees it would have it
        (flag_id,) = conn.execute("SELECT id FROM conflict_flag WHERE older_id = %s", (flag.older,)).fetchone()
    older, newer = model.mems[flag.older], model.mems[flag.newer]
    undo = (a + b) % 2 == 1
    req = g.ResolveConflictFlagRequest(flag_id=str(flag_id))
    if undo:
        req.resolution, req.expected_revision = m.CONFLICT_RESOLUTION_UNDO, newer.revision
    else:
        req.resolution = m.CONFLICT_RESOLUTION_ACKNOWLEDGE
    code, resp = call(api.ResolveConflictFlag, req, md)
    if not (model.readable(older.id, me) and model.readable(newer.id, me)):
        want = grpc.StatusCode.NOT_FOUND
    elif flag.state != "open" or (undo and newer.superseded and model.may_change(newer, me)):
        want = grpc.StatusCode.FAILED_PRECONDITION
    elif not model.may_change(newer, me):
        want = grpc.StatusCode.PERMISSION_DENIED
    else:
        want = OK
    assert code == want, (undo, code, want)
    if code != OK:
        return
    flag.state = "undone" if undo else "acknowledged"
    if undo:
        restored = resp.restored
        # The older's text: derived from the older, and member-only (``me``'s) when the older is.
        audience = me if older.audience else newer.audience
        sources = list(dict.fromkeys([*newer.sources, older.id]))
        model.mems[restored.id] = Mem(restored.id, audience, newer.purpose, me, "", sources)
        assert restored.audience == (m.AUDIENCE_MEMBER if audience else m.AUDIENCE_WORKSPACE), restored
        newer.superseded, newer.aged = True, False  # by the restored memory (an update); an undo writes no flag
        assert resp.flag.restored_memory_id == restored.id


def set_model_vectors(stack, ws: str, model: Model) -> None:
    """Once the embedding job has drained, replaces the stored vector of every live, unsuperseded
    model memory (each has one then, of its current revision) by its cluster's: the cluster of the
    n-th model memory is n // 2 mod 2 (0, 0, 1, 1, 0, ...), one axis each, so two memories are at
    cosine 1 when they share a cluster and 0 otherwise."""
    stack.wait_backlog_empty()
    with stack.db(ws) as conn:
        for n, mem in enumerate(model.mems.values()):
            if mem.forgotten or mem.superseded:
                continue
            vec = np.zeros(384, dtype=np.float32)
            vec[n // 2 % 2] = 1.0
            done = conn.execute("UPDATE memory_embedding SET embedding = %s WHERE memory_id = %s", (vec, mem.id))
            assert done.rowcount == 1, mem


def check_curation(api, model: Model, me: str, md, exact: bool = True) -> None:
    """ListDuplicateProposals and ListConflictFlags show and count exactly the model's pairs and flags
    among what ``me`` may read; an ungranted purpose is PERMISSION_DENIED. With ``exact`` the stored
    vectors are the model's (``set_model_vectors``); without, they are MiniLM's as the embedding job
    writes them, perhaps still arriving, so a proposal's two memories must be eligible, distinct,
    newer first and not kept, and the window's count exact, whatever the cosines. With ``exact`` the
    lists go two a page, so examples span pages; without, in one page."""
    page_size = 2 if exact else 200
    order = list(model.mems)  # oldest first
    cluster = {i: n // 2 % 2 for n, i in enumerate(order)}
    for purpose in PURPOSES:
        if purpose not in model.grants[me]:
            code, _ = call(api.ListDuplicateProposals, g.ListDuplicateProposalsRequest(purpose=purpose), md)
            assert code == grpc.StatusCode.PERMISSION_DENIED
            continue
        window = sorted(model.eligible(me, purpose), key=order.index, reverse=True)  # newest first
        want = {
            (x, y)
            for n, x in enumerate(window)
            for y in window[n + 1 :]
            if cluster[x] == cluster[y] and frozenset((x, y)) not in model.kept
        }
        got, token = [], ""
        while True:
            code, resp = call(
                api.ListDuplicateProposals,
                g.ListDuplicateProposalsRequest(purpose=purpose, page_size=page_size, page_token=token),
                md,
            )
            assert code == OK and resp.memories_considered == len(window)
            assert resp.memories_without_vectors <= len(window)
            if exact:
                assert resp.total_size == len(want) and resp.dense_available and resp.memories_without_vectors == 0
            for prop in resp.proposals:
                pair = (prop.memory_a.id, prop.memory_b.id)
                got.append(pair)
                assert pair[0] in window and pair[1] in window and frozenset(pair) not in model.kept
                assert window.index(pair[0]) < window.index(pair[1])  # the newer first
                assert prop.cosine == 1.0 if exact else 0.8 <= prop.cosine <= 1.0
                for mem in (prop.memory_a, prop.memory_b):
                    assert not mem.superseded_by_id and mem.purpose == purpose
                    assert all(
                        model.readable(link.target_memory_id, me)
                        for link in mem.links
                        if link.type == m.LINK_TYPE_DERIVED_FROM
                    )
            token = resp.next_page_token
            if not token:
                break
        assert len(got) == len(set(got)), got
        assert set(got) == want or not exact, set(got) ^ want
    for include_resolved in (False, True):
        want = [
            (f.older, f.newer)
            for f in model.flags
            if (include_resolved or f.state == "open") and model.readable(f.older, me) and model.readable(f.newer, me)
        ]
        got, token = [], ""
        while True:
            code, resp = call(
                api.ListConflictFlags,
                g.ListConflictFlagsRequest(page_size=page_size, page_token=token, include_resolved=include_resolved),
                md,
            )
            assert code == OK and resp.total_size == len(want)
            for flag in resp.flags:
                got.append((flag.older.id, flag.newer.id))
                assert flag.older.superseded_by_id == flag.newer.id
                state = next(f.state for f in model.flags if f.older == flag.older.id)
                assert vocabulary.name_of(m.ConflictFlagState, flag.state) == state
                assert not flag.restored_memory_id or model.readable(flag.restored_memory_id, me)
            token = resp.next_page_token
            if not token:
                break
        assert got == list(reversed(want)), (got, want)  # newest first


def merge_op(api, model: Model, me: str, md, a: int, b: int, undo: bool) -> None:
    """A MergeEntity of one known entity into another (the same one now and then: INVALID_ARGUMENT),
    or an UnmergeEntity, by ``me``: the status is the model's (docs/entities.md, "Merges and
    aliases"), and the model takes a merge that succeeds."""
    known = list(model.entities)
    if not known:
        return
    merged, into = known[a % len(known)], known[b % len(known)]
    if undo:
        want = model.unmerge_code(merged, me)
        code, resp = call(api.UnmergeEntity, g.UnmergeEntityRequest(entity_id=merged), md)
    else:
        want = model.merge_code(merged, into, me)
        code, resp = call(api.MergeEntity, g.MergeEntityRequest(entity_id=merged, into_id=into, reason="same"), md)
    assert code == want, ("unmerge" if undo else "merge", code, want)
    if code != OK:
        return
    assert resp.merge.entity_id == merged
    if undo:
        undone = model.undone_by(merged, me)
        got = [(x.entity_id, x.into_id) for x in (resp.merge, *resp.also_undone)]
        assert sorted(got) == sorted((a, b) for a, b, _ in undone) and resp.merge.undone_by == me
        model.merges = [x for x in model.merges if x not in undone]
    else:
        assert (resp.merge.into_id, resp.merge.merged_by) == (into, me)
        model.merges.append((merged, into, me))


def check_entity(model: Model, me: str, ent) -> None:
    """An entity as ``me`` sees its group: the representative's name, the other members' names as
    aliases, the readable mentions, and only the merges whose two entities ``me`` can see."""
    rep, members, total = model.view(ent.id, me)
    assert (ent.id, ent.name, ent.mentions) == (rep, model.entities[rep], total), ent
    assert list(ent.aliases) == sorted({model.entities[e] for e in members} - {model.entities[rep]}), ent
    standing = {(a, b) for a, b, _ in model.merges if a in members and b in members}
    assert {(x.entity_id, x.into_id) for x in ent.merges} == standing, ent


def check_entity_pages(api, model: Model, me: str, md) -> None:
    """GetEntity of every entity: NOT_FOUND for one ``me`` cannot see, whatever it was merged with;
    else the group as ``check_entity`` says, the attributes and relations of exactly the current
    memories about it ``me`` can read that state them, and a timeline (every page) of exactly the
    memories about it ``me`` can read."""
    for entity_id in model.entities:
        code, resp = call(api.GetEntity, g.GetEntityRequest(entity=entity_id, page_size=3), md)
        group = model.group(entity_id, me)
        if not group:
            assert code == grpc.StatusCode.NOT_FOUND, entity_id
            continue
        assert code == OK, entity_id
        check_entity(model, me, resp.entity)
        about = {i for i, mem in model.mems.items() if mem.entity_id in group and model.readable(i, me)}
        stating = {i for i in about if model.mems[i].stated and not model.mems[i].superseded}
        assert {a.memory_id for a in resp.attributes} <= stating
        assert len(resp.attributes) == min(len(stating), 5) and all(a.key == "told" for a in resp.attributes)
        assert {r.memory_id for r in (*resp.relations_out, *resp.relations_in)} <= stating
        assert resp.timeline_size == len(about)
        for x in resp.undone_merges:  # an undone merge is shown only between entities ``me`` can see
            assert model.mentions(x.entity_id, me) and model.mentions(x.into_id, me), x
        seen, token = [x.id for x in resp.timeline], resp.next_page_token
        while token:
            code, more = call(api.GetEntity, g.GetEntityRequest(entity=entity_id, page_size=3, page_token=token), md)
            assert code == OK
            seen += [x.id for x in more.timeline]
            token = more.next_page_token
        assert len(seen) == len(set(seen)) and set(seen) == about, entity_id


def check_entity_filters(api, model: Model, me: str, md) -> None:
    """A listing by entity reads the entity's group as ``me`` sees it, and only memories ``me`` can
    read; an entity ``me`` cannot see reads nothing, whatever it was merged with."""
    for entity_id in model.entities:
        listed, totals = list_pages(api, md, entity_id=entity_id, superseded=m.SUPERSEDED_FILTER_ALL)
        group = model.group(entity_id, me)
        want = {i for i, mem in model.mems.items() if mem.entity_id in group and model.readable(i, me)}
        assert {x.id for x in listed} == want and totals == {len(want)}, entity_id


def check_entity_duplicates(api, model: Model, me: str, md) -> None:
    """ListEntityDuplicates proposes exactly the pairs of groups ``me`` sees whose members share a
    name, each entity shown as ``check_entity`` says (imports' names are all different: never a
    pair)."""
    views = {}
    for e in model.entities:
        if model.mentions(e, me):
            rep, members, _ = model.view(e, me)
            views[rep] = {model.entities[x] for x in members}
    reps = list(views)
    want = {frozenset((x, y)) for n, x in enumerate(reps) for y in reps[n + 1 :] if views[x] & views[y]}
    code, resp = call(api.ListEntityDuplicates, g.ListEntityDuplicatesRequest(page_size=200), md)
    assert code == OK and resp.total_size == len(want)
    assert {frozenset((p.entity_a.id, p.entity_b.id)) for p in resp.proposals} == want
    for p in resp.proposals:
        assert p.reason == m.ENTITY_DUPLICATE_REASON_SAME_NAME
        check_entity(model, me, p.entity_a)
        check_entity(model, me, p.entity_b)


def memory_op(api, model: Model, me: str, md, n: int, op: str, a: int, b: int, p: int, aud, word: str) -> None:
    """One remember, derive, correct, supersede or forget by ``me`` (a remember when there is no memory
    yet), its status checked against the model and the model updated (README.md, "Who sees what")."""
    ids = list(model.mems)
    # Names repeat (a few per program) so that writers meet each other's entities.
    name = f"ent{n % ENTITY_NAMES}"
    if op == "remember" or not ids:
        purpose = PURPOSES[p]
        aud = aud or m.AUDIENCE_WORKSPACE
        seen = model.named_groups(name, me)
        # Every other remember states a relation and an attribute of its own entity (their text is
        # the memory's: shown only to its readers, erased by a forget).
        stated = f"{word} stated {n}" if n % 2 == 0 else ""
        statements = {}
        if stated:
            statements = {
                "relations": [
                    m.EntityRelation(
                        subject=m.EntityMention(name=name), predicate="same_as", object=m.EntityMention(name=name)
                    )
                ],
                "attributes": [m.EntityAttribute(subject=m.EntityMention(name=name), key="told", value=stated)],
            }
        code, resp = call(
            api.Remember,
            g.RememberRequest(
                purpose=purpose,
                body=f"{word} note {n}",
                audience=aud,
                entities=[m.EntityMention(name=name)],
                **statements,
            ),
            md,
        )
        assert code == (OK if purpose in model.grants[me] else grpc.StatusCode.PERMISSION_DENIED)
        if code == OK:
            model.mems[resp.memory.id] = Mem(
                resp.memory.id,
                me if aud == m.AUDIENCE_MEMBER else None,
                purpose,
                me,
                name,
                entity_id=model.check_resolution(resp.memory, name, seen, aud == m.AUDIENCE_WORKSPACE),
                stated=stated,
            )
            model.texts[f"note {n}"] = resp.memory.id
            if stated:
                model.texts[f"stated {n}"] = resp.memory.id
    elif op == "derive":
        sources = list(dict.fromkeys([ids[a % len(ids)], ids[b % len(ids)]]))
        seen = model.named_groups(name, me)
        code, resp = call(
            api.Derive,
            g.DeriveRequest(source_ids=sources, body=f"{word} derived {n}", entities=[m.EntityMention(name=name)]),
            md,
        )
        if not all(model.readable(s, me) for s in sources):
            want = grpc.StatusCode.NOT_FOUND
        elif (
            len({model.mems[s].audience for s in sources} - {None}) > 1
            or len({model.mems[s].purpose for s in sources}) > 1
        ):
            want = grpc.StatusCode.FAILED_PRECONDITION
        else:
            want = OK
        assert code == want, (op, code, want)
        if code == OK:
            src = [model.mems[s] for s in sources]
            audience = next((s.audience for s in src if s.audience), None)
            entity_id = model.check_resolution(resp.memory, name, seen, audience is None)
            model.mems[resp.memory.id] = Mem(
                resp.memory.id, audience, src[0].purpose, me, name, sources, entity_id=entity_id
            )
            model.texts[f"derived {n}"] = resp.memory.id
    else:
        target = model.mems[ids[a % len(ids)]]
        want = model.change_code(target.id, me)
        if op == "forget":
            if (
                target.forgotten
                and target.audience in (None, me)
                and target.purpose in model.grants[me]
                and model.may_change(target, me)
            ):
                want = OK
            code, _ = call(api.Forget, g.ForgetRequest(id=target.id, reason="test"), md)
            assert code == want, (op, code, want)
            if code == OK:
                model.forget(target.id)
            return
        if want == OK and target.superseded:
            want = grpc.StatusCode.FAILED_PRECONDITION
        if op == "correct":
            code, resp = call(
                api.Correct,
                g.CorrectRequest(id=target.id, expected_revision=target.revision, body=f"{word} corrected {n}"),
                md,
            )
            assert code == want, (op, code, want)
            if code == OK:
                model.texts[f"corrected {n}"] = target.id
                target.revision += 1
                target.aged = False  # a change is an update
        elif op == "invalidate":
            code, _ = call(
                api.Invalidate,
                g.InvalidateRequest(id=target.id, expected_revision=target.revision, reason=f"no longer holds {n}"),
                md,
            )
            assert code == want, (op, code, want)
            if code == OK:
                target.superseded = True  # out of current recall, as a superseded memory (never flagged)
                target.aged = False  # a change is an update
        else:
            if want == OK and aud == m.AUDIENCE_WORKSPACE and target.audience is not None:
                want = grpc.StatusCode.INVALID_ARGUMENT
            code, resp = call(
                api.Supersede,
                g.SupersedeRequest(
                    id=target.id, expected_revision=target.revision, body=f"{word} successor {n}", audience=aud
                ),
                md,
            )
            assert code == want, (op, code, want)
            if code == OK:
                audience = me if aud == m.AUDIENCE_MEMBER else target.audience
                # The successor keeps the old memory's sources (a forget of a source reaches it).
                model.mems[resp.memory.id] = Mem(resp.memory.id, audience, target.purpose, me, "", list(target.sources))
                model.texts[f"successor {n}"] = resp.memory.id
                model.supersede(target, resp.memory.id)


def check_carried_memories(store, model: Model, me: str, token: str, word: str, purpose: int) -> None:
    """The store's keyword candidates, asked to carry every row's memory (memories_top 200, what
    recall asks with its head): a row carries its memory exactly when the caller may read its whole
    chain (the model's readable), each carried memory is that row's, of the purpose, and its
    provenance shows only readable sources; every eligible memory is a row."""
    caller = store.Authenticate(store_pb2.AuthenticateRequest(token=token)).caller
    for superseded in (False, True):
        resp = store.LexicalCandidates(
            store_pb2.LexicalCandidatesRequest(
                caller=caller,
                purpose=purpose,
                query=word,
                limit=200,
                include_superseded=superseded,
                memories_top=200,
            )
        )
        for c in resp.candidates:
            assert c.chain_readable == model.readable(c.memory_id, me), c.memory_id
            assert c.HasField("memory") == c.chain_readable, c.memory_id
            if c.HasField("memory"):
                assert c.memory.id == c.memory_id and c.memory.purpose == purpose
                for link in c.memory.links:
                    if link.type == m.LINK_TYPE_DERIVED_FROM:
                        assert model.readable(link.target_memory_id, me)
        rows = {c.memory_id for c in resp.candidates}
        if not superseded:
            assert model.eligible(me, purpose) <= rows


def call(fn, req, md):
    try:
        return OK, fn(req, metadata=md)
    except grpc.RpcError as exc:
        return exc.code(), None


ops = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "remember",
                "remember",
                "derive",
                "correct",
                "supersede",
                "invalidate",
                "forget",
                "history",
                "history",
                "forget_history",
                "import",
                "import_history",
                "pin",
                "decide",
                "decide",
                "resolve",
                "resolve",
                "age",
                "keep",
                "merge",
                "merge",
                "unmerge",
            ]
        ),
        st.integers(0, 2),
        st.integers(0, 50),
        st.integers(0, 50),
        st.integers(0, 3),
        st.sampled_from([m.AUDIENCE_WORKSPACE, m.AUDIENCE_MEMBER, m.AUDIENCE_UNSPECIFIED]),
    ),
    min_size=2,
    max_size=10,
)
grant_sets = st.lists(st.sets(st.sampled_from(PURPOSES), min_size=1), min_size=3, max_size=3)


def leak_example(stack, property_workspace: str, program, grants, gate: bool) -> None:
    """One example of the leak property (the module's docstring): ``program`` run by three members
    with ``grants``, the expiry gate on when ``gate``, then every read path checked as each member."""
    ws = stack.emptied(property_workspace)
    stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, context_bundle=True, expiry_days=GATE_DAYS if gate else None),
        metadata=stack.op(),
    )
    word = "pw" + uuid.uuid4().hex[:8]  # every body carries it: a one-term lexical query matches all
    members = [
        stack.member(
            ws,
            role=m.ROLE_ADMIN if i == 2 else m.ROLE_MEMBER,
            purposes=sorted(grants[i]),
            display_name="" if i == 1 else f"Member {i} {word[2:]}",  # one without a name
        )
        for i in range(3)
    ]
    who = [mb.id for mb in members]
    names = {who[0]: f"Member 0 {word[2:]}", who[2]: f"Member 2 {word[2:]}"}
    gone = stack.member(ws, display_name=f"Removed {word[2:]}")
    stack.admin.RemoveMember(g.RemoveMemberRequest(workspace_id=ws, member_id=gone.id), metadata=stack.op())
    hidden = [outsider_name(stack), f"Removed {word[2:]}"]
    model = Model({who[i]: set(grants[i]) for i in range(3)}, {who[2]}, gate)
    api = stack.memory

    for n, (op, actor, a, b, p, aud) in enumerate(program):
        me, md, ids = who[actor], members[actor].md(), list(model.mems)
        if op == "history":
            append_history(api, model, me, md, n, a, b, p, word)
        elif op == "import_history":
            append_history(api, model, me, md, n, a, b, p, word, operator=(ws, stack.op(), stack.admin))
        elif op == "import":
            import_memory(stack, ws, model, me, n, a, b, p, aud, word)
        elif op == "forget_history":
            forget_history(api, model, me, md, a, b)
        elif op == "pin":
            pin_or_unpin(api, model, me, md, a, b)
        elif op == "decide" and ids:
            decide_pair(api, model, me, md, a, b, p)
        elif op == "resolve":
            resolve_flag(stack, ws, api, model, me, md, a, b)
        elif op == "age":
            age(stack, ws, model, a)
        elif op == "keep":
            keep(api, model, me, md, a)
        elif op in ("merge", "unmerge"):
            merge_op(api, model, me, md, a, b, undo=op == "unmerge")
        else:
            memory_op(api, model, me, md, n, op, a, b, p, aud, word)

    # The keyword statistics maintained by every write equal a full recount of the stored rows, and
    # their partition sums equal the model's live memories (so nothing is counted twice or lost).
    with stack.db(ws) as conn:
        df, parts = lexical_index.maintained(conn)
        assert (df, parts) == lexical_index.recount(conn)
        # The packed blocks the keyword arm reads hold exactly the postings, once each.
        assert lexical_index.block_problems(conn) == []
        live = [mem for mem in model.mems.values() if not mem.forgotten]
        assert sum(count for count, _ in parts.values()) == len(live)
        # What a memory stated is kept while it lives and erased with it.
        for table in ("entity_attribute", "entity_relation"):
            rows = {str(r[0]) for r in conn.execute(f"SELECT memory_id FROM {table}")}
            assert rows == {mem.id for mem in live if mem.stated}, table
        assert sum(count for (_, _, sup), (count, _) in parts.items() if sup) == sum(mem.superseded for mem in live)
        # The history statistics are per owner and equal a recount of the live turns.
        df, sums = turn_index.maintained(conn)
        assert (df, sums) == turn_index.recount(conn)
        live_turns = [t for t in model.turns.values() if t.live]
        assert {str(o): c for o, (c, _) in sums.items()} == {
            o: sum(t.owner == o for t in live_turns) for o in {t.owner for t in live_turns}
        }

    everything = set(model.mems)
    store_channel = clients.channel(f"127.0.0.1:{stack.store.port}")
    store = store_pb2_grpc.StoreServiceStub(store_channel)
    for i, member in enumerate(members):
        me, md = who[i], member.md()
        check_history(api, model, me, md, word)
        check_curation(api, model, me, md, exact=False)  # exact pairs: the test below
        for purpose in PURPOSES:
            check_context(api, model, me, md, purpose)
            if purpose in model.grants[me]:
                check_history_recall(api, model, me, md, word, purpose)
                check_carried_memories(store, model, me, member.token, word, purpose)
                check_prompt_context(api, model, me, md, word, purpose)
            if purpose not in model.grants[me]:
                code, _ = call(api.Recall, g.RecallRequest(query=word, purpose=purpose), md)
                assert code == grpc.StatusCode.PERMISSION_DENIED
                code, _ = call(api.PromptContext, g.PromptContextRequest(text=word, purpose=purpose), md)
                assert code == grpc.StatusCode.PERMISSION_DENIED
                continue
            for mode in MODES:  # no re-ranker here: skip_rerank would change nothing
                code, resp = call(
                    api.Recall,
                    g.RecallRequest(query=word, purpose=purpose, mode=mode, top_k=200),
                    md,
                )
                assert code == OK
                for shown in renderings(resp):
                    check_rendered(model, me, shown)
                check_names(resp, names, hidden, renderings(resp))
                eligible = model.recallable(me, purpose)
                got = [it.memory.id for it in resp.items]
                # Nothing ineligible anywhere; ids outside this example never appear either.
                assert set(got) <= eligible, (mode, set(got) - eligible)
                for it in resp.items:
                    for link in it.memory.links:  # provenance shows only what the caller can read
                        if link.type == m.LINK_TYPE_DERIVED_FROM:
                            assert model.readable(link.target_memory_id, me)
                        else:
                            assert link.type == m.LINK_TYPE_ABOUT and link.target_entity_name
                    assert it.memory.purpose == purpose and not it.memory.superseded_by_id
                # top_k 200 holds every row that passed, and none is lost before the answer.
                assert resp.counts.fused == len(got) == resp.counts.returned
                assert resp.counts.lexical == sum(1 for it in resp.items if it.lexical_rank)
                ranks = sorted(it.lexical_rank for it in resp.items if it.lexical_rank)
                assert ranks == list(range(1, len(ranks) + 1))  # recomputed over rows that passed
                if mode == m.RECALL_MODE_LEXICAL:
                    assert set(got) == eligible  # everything eligible and matching is found
                    start = middle(it.memory for it in resp.items)
                    if start is not None:  # within a window: exactly the eligible ones said in it
                        req = g.RecallRequest(query=word, purpose=purpose, mode=mode, top_k=200)
                        shown = [it.memory for it in resp.items]
                        check_window(api, md, "Recall", req, shown, start, lambda r: [it.memory for it in r.items])
                    # Time words read in the question order each arm twice asked (within their window
                    # and without): still exactly the eligible ones, each once.
                    timed_req = g.RecallRequest(query=f"{word} since 2020", purpose=purpose, mode=mode, top_k=200)
                    code, timed = call(api.Recall, timed_req, md)
                    assert code == OK and timed.time_window.applied
                    ids = [it.memory.id for it in timed.items]
                    assert len(ids) == len(set(ids)) and set(ids) == eligible
                    check_in_time(api, model, me, md, word, purpose, [it.memory for it in resp.items])
        for mem_id in everything:
            code, resp = call(api.Read, g.ReadRequest(id=mem_id, include_history=True), md)
            readable = model.readable(mem_id, me)
            assert code == (OK if readable else grpc.StatusCode.NOT_FOUND)
            if readable:
                for shown in renderings(resp):
                    check_rendered(model, me, shown)
                check_names(resp, names, hidden, renderings(resp))
                for link in resp.memory.links:
                    if link.type == m.LINK_TYPE_DERIVED_FROM:
                        assert model.readable(link.target_memory_id, me)
                stated = model.mems[mem_id].stated
                assert [a.value for a in resp.memory.attributes] == ([stated] if stated else [])
                assert [r.predicate for r in resp.memory.relations] == (["same_as"] if stated else [])
        check_listing(api, model, me, md, everything)
        check_expiring(api, model, me, md)
        for name in {mem.entity for mem in model.mems.values() if mem.entity}:
            code, resp = call(api.FindEntities, g.FindEntitiesRequest(name=name), md)
            assert code == OK, name
            if name.startswith("imported "):  # an import's entity: one per name, its id not kept
                visible = any(mem.entity == name and model.readable(i, me) for i, mem in model.mems.items())
                assert len(resp.entities) == (1 if visible else 0), name
            else:
                assert {e.id for e in resp.entities} == model.visible_entities(name, me), name
                for ent in resp.entities:
                    check_entity(model, me, ent)
        check_entity_filters(api, model, me, md)
        check_entity_duplicates(api, model, me, md)
        check_entity_pages(api, model, me, md)
    store_channel.close()

    # Last, as it writes memories the model does not hold: Capture never takes a turn for a memory,
    # and history is unchanged by it.
    for i, member in enumerate(members):
        check_capture_ignores_history(api, model, who[i], member.md(), min(model.grants[who[i]]))
    check_capture_span_alone(stack, api, model, who, members, word)
    for i, member in enumerate(members):
        code, resp = call(api.SearchHistory, g.SearchHistoryRequest(page_size=200), member.md())
        assert code == OK
        assert {e.turn_id for e in resp.entries if e.turn.chat_id != "capture"} == {
            t.id for t in model.turns.values() if t.owner == who[i] and t.live
        }
        captured = sorted(e.turn.text for e in resp.entries if e.turn.chat_id == "capture")
        assert captured == sorted(model.captured[who[i]])


curation_ops = st.lists(
    st.tuples(
        st.sampled_from(
            ["remember"] * 4 + ["supersede"] * 2 + ["decide"] * 3 + ["resolve"] * 2 + ["forget", "derive", "import"]
        ),
        st.integers(0, 2),
        st.integers(0, 50),
        st.integers(0, 50),
        st.integers(0, 1),  # two purposes, so pairs share one
        st.sampled_from([m.AUDIENCE_WORKSPACE, m.AUDIENCE_MEMBER, m.AUDIENCE_UNSPECIFIED]),
    ),
    min_size=6,
    max_size=16,
)


def curation_example(stack, curation_workspace: str, program, grants) -> None:
    """One example of the curation test (its docstring, tests/test_trust_properties.py)."""
    ws = stack.emptied(curation_workspace)
    members = [
        stack.member(ws, role=m.ROLE_ADMIN if i == 2 else m.ROLE_MEMBER, purposes=sorted(grants[i])) for i in range(3)
    ]
    who = [mb.id for mb in members]
    model = Model({who[i]: set(grants[i]) for i in range(3)}, {who[2]})
    word = "cw" + uuid.uuid4().hex[:8]
    api = stack.memory
    for n, (op, actor, a, b, p, aud) in enumerate(program):
        me, md = who[actor], members[actor].md()
        if op == "decide" and model.mems:
            decide_pair(api, model, me, md, a, b, p + a)
        elif op == "resolve":
            resolve_flag(stack, ws, api, model, me, md, a, b)
        elif op == "import":
            import_memory(stack, ws, model, me, n, a, b, p, aud, word)
        else:
            memory_op(api, model, me, md, n, op, a, b, p, aud, word)
    set_model_vectors(stack, ws, model)
    for i, member in enumerate(members):
        check_curation(api, model, who[i], member.md())
        check_listing(api, model, who[i], member.md(), set(model.mems))
