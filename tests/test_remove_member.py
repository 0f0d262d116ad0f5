"""Member removal (AdminService.RemoveMember, issue 9, item 5) end to end through the gateway against
real PostgreSQL: tokens revoked, member-only memories forgotten with their derivations and listed,
workspace memories kept naming their creator, history evidence forgotten, idempotence, admins, bad
input and `recallatron member remove`."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid

import grpc
import pytest
from cli_runner import at_gateway
from conftest import code_of
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from servicekit import deadlines
from store_service.control import members
from store_service.history import turns
from store_service.intake import capture
from store_service.records import lifecycle, memories

NOT_FOUND = grpc.StatusCode.NOT_FOUND
CONV = m.PURPOSE_CONVERSATION


def remove(stack, ws: str, member_id: str) -> g.RemoveMemberResponse:
    return stack.admin.RemoveMember(g.RemoveMemberRequest(workspace_id=ws, member_id=member_id), metadata=stack.op())


def derive(member, sources: list[str], body: str) -> m.Memory:
    return member.stack.memory.Derive(g.DeriveRequest(source_ids=sources, body=body), metadata=member.md()).memory


def test_removal_forgets_what_is_the_members_alone_and_keeps_the_rest(stack):
    ws = stack.workspace("remove member")
    carol, dave = stack.member(ws), stack.member(ws)
    shared = carol.remember("Carol: the workshop opens at eight.")
    own = carol.remember("Carol's locker code is 4711.", audience=m.AUDIENCE_MEMBER)
    own_tasks = carol.remember("Carol must renew her badge.", audience=m.AUDIENCE_MEMBER, purpose=m.PURPOSE_TASKS)
    from_own = derive(carol, [own.id], "Carol keeps a locker.")  # member-only: Derive's intersection
    from_shared = derive(carol, [shared.id], "The workshop is open mornings.")  # a workspace memory
    dave_own = dave.remember("Dave's locker code is 1234.", audience=m.AUDIENCE_MEMBER)
    stack.memory.AppendHistory(
        g.AppendHistoryRequest(
            turns=[
                g.HistoryTurn(chat_id="tg:1", role="user", text="Carol said her locker code is 4711."),
                g.HistoryTurn(chat_id="tg:1", role="assistant", text="Noted.", request_id="turn-2"),
            ]
        ),
        metadata=carol.md(),
    )
    dave_turn = stack.memory.AppendHistory(
        g.AppendHistoryRequest(turns=[g.HistoryTurn(chat_id="tg:2", role="user", text="Dave's locker.")]),
        metadata=dave.md(),
    )
    resp = remove(stack, ws, carol.id)
    assert resp.revoked == 1 and resp.history_forgotten == 2 and resp.already_removed is False
    assert resp.forgotten_ids == [own.id, from_own.id, own_tasks.id]  # each, then its derivations
    # Her next call, any call, is refused.
    for call, req in (
        (stack.memory.Read, g.ReadRequest(id=shared.id)),
        (stack.memory.ListMemories, g.ListMemoriesRequest()),
        (stack.memory.SearchHistory, g.SearchHistoryRequest()),
    ):
        assert code_of(call, req, metadata=carol.md()) == grpc.StatusCode.UNAUTHENTICATED
    # Her workspace memories stay, naming her; dave's own memory and turns are untouched.
    for x in (shared, from_shared):
        kept = dave.read(x.id)
        assert kept.body == x.body and kept.created_by == carol.id and not kept.forgotten
    assert dave.read(dave_own.id).body == dave_own.body
    assert [e.turn.text for e in stack.memory.SearchHistory(g.SearchHistoryRequest(), metadata=dave.md()).entries] == [
        "Dave's locker."
    ]
    assert dave_turn.results[0].turn_id
    with stack.db(ws) as conn:
        rows = conn.execute(
            "SELECT id::text, title, body, forgotten_at IS NOT NULL, invalidation_reason FROM memory"
            " WHERE id = ANY(%s)",
            ([uuid.UUID(i) for i in resp.forgotten_ids],),
        ).fetchall()
        assert len(rows) == 3 and all(r[1] == "" and r[2] == "" and r[3] for r in rows)  # tombstones, text erased
        reasons = {r[0]: r[4] for r in rows}
        assert reasons[own.id] == "its member was removed from the workspace"
        assert reasons[from_own.id] == f"forgotten with its source {own.id}"
        assert (
            conn.execute(
                "SELECT count(*) FROM lexical_document WHERE memory_id = ANY(%s)",
                ([uuid.UUID(i) for i in resp.forgotten_ids],),
            ).fetchone()[0]
            == 0
        )
        turns = conn.execute(
            "SELECT text, forgotten_at IS NOT NULL FROM history_turn WHERE owner_member_id = %s", (uuid.UUID(carol.id),)
        ).fetchall()
        assert turns == [("", True)]  # the one with a request id keeps a tombstone; the other is gone
    # Nothing of hers is recalled any more, by anyone.
    assert [it.memory.id for it in dave.recall("locker code", top_k=50).items] == [dave_own.id]


def test_removing_again_finishes_and_changes_nothing_more(stack):
    ws = stack.workspace("remove twice")
    erin = stack.member(ws)
    note = erin.remember("Erin's own note.", audience=m.AUDIENCE_MEMBER)
    first = remove(stack, ws, erin.id)
    assert list(first.forgotten_ids) == [note.id] and first.revoked == 1
    second = remove(stack, ws, erin.id)
    assert second.already_removed is True and second.revoked == 0
    assert list(second.forgotten_ids) == [] and second.history_forgotten == 0
    # A member-only memory written by a call already in flight at removal (as if it landed just
    # after the sweep) is found by the next run.
    with stack.db(ws) as conn:
        late = uuid.uuid4()
        conn.execute(
            """INSERT INTO memory (id, kind, title, body, audience_member_id, purpose, confidence, origin, created_by)
               VALUES (%s, 'note', '', 'landed late', %s, 'conversation', 1, 'told', %s)""",
            (late, uuid.UUID(erin.id), uuid.UUID(erin.id)),
        )
    assert list(remove(stack, ws, erin.id).forgotten_ids) == [str(late)]


def test_admins_can_be_removed_the_last_one_too(stack):
    ws = stack.workspace("remove admin")
    admin = stack.member(ws, role=m.ROLE_ADMIN)
    member = stack.member(ws)
    note = admin.remember("Admin's workspace note.")
    resp = remove(stack, ws, admin.id)
    assert resp.revoked == 1
    assert code_of(stack.memory.Read, g.ReadRequest(id=note.id), metadata=admin.md()) == grpc.StatusCode.UNAUTHENTICATED
    assert member.read(note.id).created_by == admin.id
    # Its workspace memories are now changed by admins only: the operator adds one.
    assert (
        code_of(
            stack.memory.Correct,
            g.CorrectRequest(id=note.id, expected_revision=1, body="changed"),
            metadata=member.md(),
        )
        == grpc.StatusCode.PERMISSION_DENIED
    )
    new_admin = stack.member(ws, role=m.ROLE_ADMIN)
    stack.memory.Correct(g.CorrectRequest(id=note.id, expected_revision=1, body="changed"), metadata=new_admin.md())


def test_unknown_members_and_bad_input(stack):
    ws, other = stack.workspace("remove input"), stack.workspace("remove other")
    stranger = stack.member(other)
    kept = stranger.remember("The stranger's own note.", audience=m.AUDIENCE_MEMBER)
    for workspace, member in (
        (ws, str(uuid.uuid4())),  # nobody
        (ws, stranger.id),  # another workspace's member
        (str(uuid.uuid4()), stranger.id),  # an unknown workspace
        (ws, "not-a-uuid"),
        ("not-a-uuid", stranger.id),
        (ws, ""),
        (ws, "x" * 10_000),
    ):
        with pytest.raises(grpc.RpcError) as err:
            remove(stack, workspace, member)
        assert err.value.code() == NOT_FOUND
    assert stranger.read(kept.id).body == kept.body  # nothing happened to the stranger
    # Operator only.
    req = g.RemoveMemberRequest(workspace_id=other, member_id=stranger.id)
    assert code_of(stack.admin.RemoveMember, req, metadata=stranger.md()) == grpc.StatusCode.UNAUTHENTICATED
    assert code_of(stack.admin.RemoveMember, req) == grpc.StatusCode.UNAUTHENTICATED
    assert stranger.read(kept.id).body == kept.body


def cli(stack, *args: str) -> subprocess.CompletedProcess:
    return at_gateway(f"127.0.0.1:{stack.gateway.port}", *args, check=False)


def test_the_command(stack):
    ws = stack.workspace("remove cli")
    fred = stack.member(ws)
    note = fred.remember("Fred's own note.", audience=m.AUDIENCE_MEMBER)
    op = ("--operator-token", stack.operator_token)
    out = cli(stack, "member", "remove", "--workspace", ws, fred.id, *op)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"removed member {fred.id}: revoked 1 token(s), forgot 1 member-only memories and 0 history turn(s)",
        f"  forgot {note.id}",
    ]
    again = json.loads(cli(stack, "member", "remove", "--workspace", ws, fred.id, "--json", *op).stdout)
    assert again == {"revoked": "0", "forgotten_ids": [], "history_forgotten": "0", "already_removed": True}
    missing = cli(stack, "member", "remove", "--workspace", ws, str(uuid.uuid4()), *op)
    assert missing.returncode == 1 and missing.stderr.strip() == "NOT_FOUND: member not found"
    assert cli(stack, "member", "remove", fred.id, *op).returncode == 2  # --workspace is required
    assert cli(stack, "member", "remove", "--workspace", ws, *op).returncode == 2
    bad = cli(stack, "member", "remove", "--workspace", ws, fred.id, "--operator-token", "wrong")
    assert bad.returncode == 1 and bad.stderr.startswith("UNAUTHENTICATED: ")


# --- removal racing writes ------------------------------------------------------------------------


class Call(threading.Thread):
    """A call in a thread of its own: ``result`` is its answer, or the grpc.RpcError it raised."""

    def __init__(self, fn, *args, **kwargs) -> None:
        super().__init__(daemon=True)
        self.fn, self.args, self.kwargs, self.result = fn, args, kwargs, None

    def run(self) -> None:
        try:
            self.result = self.fn(*self.args, **self.kwargs)
        except grpc.RpcError as exc:
            self.result = exc


class Gate:
    """Holds the first thread to make its ``at``-th call (from 1) of a patched function until ``go``;
    every other call runs."""

    def __init__(self, real, at: int = 1) -> None:
        self.real, self.at, self.calls, self.held = real, at, {}, False
        self.reached, self.go = threading.Event(), threading.Event()
        self.lock = threading.Lock()

    def __call__(self, *args, **kwargs):
        me = threading.get_ident()
        with self.lock:
            self.calls[me] = self.calls.get(me, 0) + 1
            mine = self.calls[me] == self.at and not self.held
            self.held = self.held or mine
        if mine:
            self.reached.set()
            assert self.go.wait(120)
        return self.real(*args, **kwargs)


def wait_until(condition, what: str, limit: float = 120.0) -> None:
    """Waits for ``condition()`` (a state the test needs, not a timing it asserts)."""
    end = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < end, f"never happened: {what}"
        time.sleep(0.05)


def batch(member, bodies: list[str], audience=m.AUDIENCE_MEMBER) -> g.RememberBatchResponse:
    reqs = [g.RememberRequest(purpose=CONV, kind=m.KIND_NOTE, body=b, audience=audience) for b in bodies]
    return member.stack.memory.RememberBatch(g.RememberBatchRequest(requests=reqs), metadata=member.md())


def live_own(stack, ws: str, member_id: str) -> list[str]:
    """The member's live member-only memories, as stored."""
    with stack.db(ws) as conn:
        rows = conn.execute(
            "SELECT id::text FROM memory WHERE audience_member_id = %s AND forgotten_at IS NULL ORDER BY id",
            (uuid.UUID(member_id),),
        ).fetchall()
    return [r[0] for r in rows]


def waiting_on_advisory_lock(stack, ws: str) -> bool:
    with stack.db(ws) as conn:
        return conn.execute(
            """SELECT count(*) > 0 FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'"""
        ).fetchone()[0]


def live_turns(stack, ws: str, member_id: str) -> int:
    with stack.db(ws) as conn:
        return conn.execute(
            "SELECT count(*) FROM history_turn WHERE owner_member_id = %s AND forgotten_at IS NULL",
            (uuid.UUID(member_id),),
        ).fetchone()[0]


SECRET = "Gina's PIN is 8841."
# Each write, and a function it calls after the gateway authenticated it and before its transaction.
WRITES = {
    "RememberBatch": (memories, "prepare_remember", lambda member: batch(member, [SECRET, "Gina has a doctor."])),
    "Capture": (
        capture,
        "_validate",
        lambda member: member.stack.memory.Capture(
            g.CaptureRequest(
                purpose=CONV,
                turn=f"By the way: {SECRET}",
                proposals=[m.CaptureProposal(span=SECRET, body=SECRET, audience=m.AUDIENCE_MEMBER)],
            ),
            metadata=member.md(),
        ),
    ),
    "AppendHistory": (
        turns,
        "check_history_turn",
        lambda member: member.stack.memory.AppendHistory(
            g.AppendHistoryRequest(turns=[g.HistoryTurn(chat_id="c", role="user", text=SECRET)]), metadata=member.md()
        ),
    ),
}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_write_authenticated_before_the_removal_but_not_yet_writing_is_refused(stack, monkeypatch, write):
    ws = stack.workspace("remove before write")
    gina = stack.member(ws)
    gina.remember("Gina's earlier note.", audience=m.AUDIENCE_MEMBER)
    module, name, call = WRITES[write]
    gate = Gate(getattr(module, name))
    monkeypatch.setattr(module, name, gate)
    pending = Call(call, gina)
    pending.start()
    try:
        assert gate.reached.wait(60)
        removed = remove(stack, ws, gina.id)
    finally:
        gate.go.set()
        pending.join(120)
    assert len(removed.forgotten_ids) == 1
    assert isinstance(pending.result, grpc.RpcError), pending.result
    assert pending.result.code() == grpc.StatusCode.UNAUTHENTICATED
    assert live_own(stack, ws, gina.id) == [] and live_turns(stack, ws, gina.id) == 0
    with stack.db(ws) as conn:
        assert conn.execute("SELECT count(*) FROM memory WHERE body LIKE '%8841%'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM history_turn WHERE text LIKE '%8841%'").fetchone()[0] == 0


def test_a_write_in_flight_commits_before_the_removal_sweeps_and_is_forgotten(stack, monkeypatch):
    ws = stack.workspace("remove during write")
    hana, ivan = stack.member(ws), stack.member(ws)
    gate = Gate(deadlines.check_before_commit)  # inside the batch's transaction, its rows written
    monkeypatch.setattr(deadlines, "check_before_commit", gate)
    write = Call(batch, hana, ["Hana's PIN is 8841.", "Hana's locker is 12."])
    write.start()
    removal = Call(remove, stack, ws, hana.id)
    try:
        assert gate.reached.wait(60)
        removal.start()
        # The removal either waits for the write (its member lock) or, without one, has swept already.
        wait_until(lambda: not removal.is_alive() or waiting_on_advisory_lock(stack, ws), "removal waits or ends")
    finally:
        gate.go.set()
        write.join(120)
        removal.join(120)
    assert not isinstance(write.result, grpc.RpcError), write.result
    written = [r.memory.id for r in write.result.results]
    assert all(written)
    assert not isinstance(removal.result, grpc.RpcError), removal.result
    assert sorted(removal.result.forgotten_ids) == sorted(written)  # swept after the write committed
    assert live_own(stack, ws, hana.id) == []
    # Nothing of it is found by anyone, and the other member works on.
    assert ivan.recall("PIN locker note", mode=m.RECALL_MODE_LEXICAL).items == []
    assert ivan.remember("Ivan is still here.").id


def test_two_removals_of_one_member_at_once_sweep_once(stack, monkeypatch):
    ws = stack.workspace("remove twice at once")
    june = stack.member(ws)
    own = [r.memory.id for r in batch(june, [f"June's own note {i}." for i in range(30)]).results]
    monkeypatch.setattr(lifecycle, "SWEEP_BATCH", 7, raising=False)  # several batches
    gate = Gate(lifecycle.forget)  # the first removal holds before its first forget
    monkeypatch.setattr(lifecycle, "forget", gate)
    arrived = []
    real_turn = getattr(members, "_turn", None)

    def counted_turn(db_name):
        arrived.append(db_name)
        return real_turn(db_name)

    monkeypatch.setattr(members, "_turn", counted_turn, raising=False)
    first, second = Call(remove, stack, ws, june.id), Call(remove, stack, ws, june.id)
    try:
        first.start()
        assert gate.reached.wait(60)
        second.start()
        wait_until(lambda: not second.is_alive() or len(arrived) == 2, "the second removal waits or ends")
    finally:
        gate.go.set()
        first.join(120)
        second.join(120)
    for call in (first, second):
        assert not isinstance(call.result, grpc.RpcError), call.result
    a, b = first.result, second.result
    assert (a.already_removed, a.revoked, sorted(a.forgotten_ids)) == (False, 1, sorted(own))
    assert (b.already_removed, b.revoked, list(b.forgotten_ids), b.history_forgotten) == (True, 0, [], 0)
    assert live_own(stack, ws, june.id) == []


def test_other_members_keep_working_while_removals_sweep(stack, monkeypatch):
    ws = stack.workspace("remove many at once")
    leaving = [stack.member(ws) for _ in range(5)]
    staying = stack.member(ws)
    kept = staying.remember("Staying's parrot is called Captain.", audience=m.AUDIENCE_MEMBER)
    for i, member in enumerate(leaving):
        batch(member, [f"Leaver {i} note {j} about the parrot." for j in range(25)])
    monkeypatch.setattr(lifecycle, "SWEEP_BATCH", 10, raising=False)
    gate = Gate(lifecycle.forget, at=2)  # a removal holds mid-sweep, after its first Forget
    monkeypatch.setattr(lifecycle, "forget", gate)
    removals = [Call(remove, stack, ws, member.id) for member in leaving]
    try:
        for call in removals:
            call.start()
        assert gate.reached.wait(60)
        # Every call of the member who stays succeeds while the removals are under way.
        note = staying.remember("Staying bought a second parrot.")
        assert note.id
        assert all(
            r.memory.id for r in batch(staying, ["Staying's parrot eats seeds.", "Captain sleeps late."]).results
        )
        hits = staying.recall("parrot", mode=m.RECALL_MODE_LEXICAL, top_k=200)
        assert {kept.id, note.id} <= {it.memory.id for it in hits.items}
        assert staying.read(kept.id).body == kept.body
        assert staying.recall("parrot Captain").items
    finally:
        gate.go.set()
        for call in removals:
            call.join(300)
    for member, call in zip(leaving, removals, strict=True):
        assert not isinstance(call.result, grpc.RpcError), call.result
        assert len(call.result.forgotten_ids) == 25
        assert live_own(stack, ws, member.id) == []
    assert staying.read(kept.id).body == kept.body


def test_no_import_brings_back_a_removed_members_own_memories(stack):
    ws = stack.workspace("remove then import")
    kim, lee = stack.member(ws), stack.member(ws)
    remove(stack, ws, kim.id)

    def imported(key: str, author: str, audience) -> m.ImportedMemory:
        return m.ImportedMemory(
            import_key=key, author_member_id=author, body=f"{key}: Kim's PIN is 8841.", purpose=CONV, audience=audience
        )

    req = g.ImportMemoriesRequest(workspace_id=ws, memories=[imported("own", kim.id, m.AUDIENCE_MEMBER)])
    assert code_of(stack.admin.ImportMemories, req, metadata=stack.op()) == grpc.StatusCode.FAILED_PRECONDITION
    assert live_own(stack, ws, kim.id) == []
    # Her workspace memories may still come back (a workspace's export imported again), as may anyone else's.
    req = g.ImportMemoriesRequest(
        workspace_id=ws,
        memories=[imported("shared", kim.id, m.AUDIENCE_WORKSPACE), imported("lee", lee.id, m.AUDIENCE_MEMBER)],
    )
    done = stack.admin.ImportMemories(req, metadata=stack.op())
    assert all(r.id for r in done.memories) and live_own(stack, ws, lee.id) == [done.memories[1].id]
    assert lee.read(done.memories[0].id).created_by == kim.id
