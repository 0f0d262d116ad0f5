"""Moving a workspace to another database server (issue 26, item 2; docs/scaling.md, "Moving a
workspace"), against two real embedded servers: a move under a write load of several clients loses
no acknowledged write, duplicates none, keeps the keyword statistics exact and the vectors, keeps
reads answering, and drops the old database; a move whose target server is killed half way leaves
the workspace where it was, writable, and runs again; bad requests are refused plainly."""

from __future__ import annotations

import os
import stat
import threading
import time
from collections import Counter

import grpc
import pytest
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from test_servers import databases_on, kill, summary, two_servers_up, wait_for

from servicekit.errors import MOVING, error_info, retry_info
from store_service.control.moves import pg_bin
from store_service.search import lexical_index

CONV = m.PURPOSE_CONVERSATION
LEX = m.RECALL_MODE_LEXICAL


@pytest.fixture(scope="module")
def servers(tmp_path_factory, encoder):
    with two_servers_up(tmp_path_factory.mktemp("moves"), encoder) as up:
        yield up


def move(stack, ws: str, server: str) -> g.MoveWorkspaceResponse:
    return stack.admin.MoveWorkspace(
        g.MoveWorkspaceRequest(workspace_id=ws, server=server), metadata=stack.op(), timeout=600
    )


def seeded(stack, name: str, n: int, server: str = "pg1") -> tuple[str, list]:
    ws = stack.admin.CreateWorkspace(
        g.CreateWorkspaceRequest(name=name, server=server), metadata=stack.op()
    ).workspace_id
    members = [stack.member(ws, display_name=f"Writer {k}") for k in range(3)]
    entries = [
        g.RememberRequest(purpose=CONV, audience=m.AUDIENCE_WORKSPACE, body=f"Seed note {k} on harbour cranes.")
        for k in range(n)
    ]
    for start in range(0, n, 500):
        stack.memory.RememberBatch(
            g.RememberBatchRequest(requests=entries[start : start + 500]), metadata=members[0].md()
        )
    return ws, members


@pytest.mark.cluster
def test_a_move_under_writes_loses_nothing_and_drops_the_old_database(servers):
    stack, first, second = servers
    ws, members = seeded(stack, "moved under load", 300)
    stack.wait_backlog_empty()
    db = f"recallatron_ws_{ws.replace('-', '')}"
    acked, refusals, reads = [], Counter(), Counter()
    lock, stop = threading.Lock(), threading.Event()

    def write(k: int) -> None:
        n = 0
        while not stop.is_set():
            body = f"Writer {k} note {n}: the ferry schedule changes in week {k * 1000 + n}."
            request = g.RememberRequest(purpose=CONV, audience=m.AUDIENCE_WORKSPACE, body=body, request_id=f"w{k}-{n}")
            while True:  # a client that retries a refused write with the same request id
                try:
                    mem = stack.memory.Remember(request, metadata=members[k].md(), timeout=30).memory
                    break
                except grpc.RpcError as exc:
                    assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc
                    info = error_info(exc)
                    with lock:
                        refusals[info.reason if info else "?"] += 1
                        if info and info.reason == MOVING:
                            refusals["with retry hint"] += retry_info(exc) is not None
                    time.sleep(0.05)
            with lock:
                acked.append((mem.id, body))
            n += 1

    def read() -> None:
        while not stop.is_set():
            try:
                members[2].recall("harbour cranes", mode=LEX)
                reads["ok"] += 1
            except grpc.RpcError as exc:
                reads[exc.code().name] += 1
            time.sleep(0.02)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(3)] + [threading.Thread(target=read)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    during = len(acked)
    reads_before = reads["ok"]
    resp = move(stack, ws, "pg2")
    reads_during = reads["ok"] - reads_before
    time.sleep(1.5)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)

    print(
        f"moved {resp.rows_copied} rows, writes refused {resp.write_pause_ms} ms, {len(acked)} writes acked, "
        f"refusals {dict(refusals)}, reads {dict(reads)}"
    )
    assert (resp.workspace_id, resp.from_server, resp.to_server, resp.resumed) == (ws, "pg1", "pg2", False)
    assert resp.write_pause_ms > 0 and resp.rows_copied > 300
    assert summary(stack, ws).server == "pg2"
    assert db not in databases_on(first) and db in databases_on(second)  # the old copy dropped
    assert during > 0 and len(acked) > during  # writes before, and after the move
    assert refusals[MOVING] > 0 and refusals["with retry hint"] == refusals[MOVING], refusals
    assert reads["ok"] > 0 and reads_during >= 0 and set(reads) <= {"ok", "UNAVAILABLE"}, reads
    with stack.db(ws) as conn:
        stored = dict(conn.execute("SELECT id::text, body FROM memory WHERE retired_at IS NULL").fetchall())
        # Every acknowledged write is there, once, as written; nothing else was added.
        assert len(acked) == len({i for i, _ in acked})
        assert {i: b for i, b in acked}.items() <= stored.items()
        assert len(stored) == 300 + len(acked)
        # The keyword statistics are exact, and the blocks whole.
        assert lexical_index.recount(conn) == lexical_index.maintained(conn)
        assert lexical_index.block_problems(conn) == []
    stack.wait_backlog_empty()
    with stack.db(ws) as conn:
        assert (
            conn.execute(
                "SELECT count(*) FROM memory mm WHERE retired_at IS NULL AND NOT EXISTS"
                " (SELECT 1 FROM memory_embedding e WHERE e.memory_id = mm.id)"
            ).fetchone()[0]
            == 0
        )
    # Reads and writes go on from the new server.
    later = members[1].remember("Written after the move.")
    assert members[2].read(later.id).body == "Written after the move."
    hits = members[2].recall("ferry schedule week", mode=LEX).items
    assert hits and all(h.memory.id in stored for h in hits)


def _slow_restore(folder, started) -> None:
    """A pg_bin folder whose pg_restore says it started (a file) and waits 5 s before the real one
    runs: the window in which the test kills the target server."""
    real = pg_bin()
    folder.mkdir()
    (folder / "pg_dump").symlink_to(real / "pg_dump")
    script = folder / "pg_restore"
    script.write_text(f'#!/bin/sh\ntouch "{started}"\nsleep 5\nexec "{real / "pg_restore"}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


@pytest.mark.cluster
def test_a_move_whose_target_dies_leaves_the_workspace_usable_where_it_was(servers, tmp_path, monkeypatch):
    stack, first, second = servers
    ws, members = seeded(stack, "target dies", 50)
    db = f"recallatron_ws_{ws.replace('-', '')}"
    started = tmp_path / "restore-started"
    _slow_restore(tmp_path / "bin", started)
    monkeypatch.setenv("RECALLATRON_PG_BIN", str(tmp_path / "bin"))
    outcome = {}

    def run() -> None:
        try:
            outcome["response"] = move(stack, ws, "pg2")
        except grpc.RpcError as exc:
            outcome["error"] = exc

    mover = threading.Thread(target=run)
    mover.start()
    wait_for(started.exists, 60, "the copy to start")
    # While the copy runs: reads answer, writes are refused with the retry hint.
    listed = stack.memory.ListMemories(g.ListMemoriesRequest(), metadata=members[0].md()).memories
    assert len(listed) == 50 and members[0].read(listed[0].id).body.startswith("Seed note")
    with pytest.raises(grpc.RpcError) as refused:
        members[0].remember("Refused while the copy runs.")
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE and error_info(refused.value).reason == MOVING
    assert "being moved" in refused.value.details()
    kill(second)
    mover.join(timeout=120)
    assert "error" in outcome, outcome
    err = outcome["error"]
    assert err.code() == grpc.StatusCode.UNAVAILABLE
    assert "stays on pg1" in err.details() and "pg2" in err.details()
    # Where it was, usable: writable again at once, nothing lost, nothing recorded as moving.
    assert summary(stack, ws).server == "pg1" and db in databases_on(first)
    kept = members[1].remember("Written after the failed move.")
    assert members[2].read(kept.id).body == "Written after the failed move."
    with stack.db(ws) as conn:
        assert conn.execute("SELECT count(*) FROM memory").fetchone()[0] == 51
    # Run again once the target is back: it moves, and the partial copy is replaced.
    second.restart()
    wait_for(lambda: dict(stack.store.dbs.server_status())["pg2"], 30, "pg2 serving again")
    monkeypatch.delenv("RECALLATRON_PG_BIN")
    resp = move(stack, ws, "pg2")
    assert (resp.from_server, resp.to_server) == ("pg1", "pg2")
    assert summary(stack, ws).server == "pg2" and db not in databases_on(first)
    assert members[2].read(kept.id).body == "Written after the failed move."


@pytest.mark.cluster
def test_bad_moves_are_refused_plainly(servers):
    stack = servers[0]
    ws, _ = seeded(stack, "bad moves", 5)

    def code(workspace: str, server: str) -> tuple[grpc.StatusCode, str]:
        try:
            move(stack, workspace, server)
        except grpc.RpcError as exc:
            return exc.code(), exc.details()
        return grpc.StatusCode.OK, ""

    assert code(ws, "pg9")[0] == grpc.StatusCode.INVALID_ARGUMENT and "configured: pg1, pg2" in code(ws, "pg9")[1]
    assert code(ws, "")[0] == grpc.StatusCode.INVALID_ARGUMENT
    assert code(ws, "pg1") == (grpc.StatusCode.FAILED_PRECONDITION, "the workspace is on pg1 already")
    assert code("no such workspace", "pg2")[0] == grpc.StatusCode.NOT_FOUND
    assert code("00000000-0000-4000-8000-000000000000", "pg2")[0] == grpc.StatusCode.NOT_FOUND
    no_operator = g.MoveWorkspaceRequest(workspace_id=ws, server="pg2")
    with pytest.raises(grpc.RpcError) as err:
        stack.admin.MoveWorkspace(no_operator)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert summary(stack, ws).server == "pg1"
    assert os.environ.get("RECALLATRON_PG_BIN") is None
