"""Moving a workspace to another database server (issue 26, item 2; docs/scaling.md, "Moving a
workspace"), against two real embedded servers: a move under a write load of several clients loses
no acknowledged write, duplicates none, keeps the keyword statistics exact and the vectors, keeps
reads answering, and drops the old database; a move whose target server is killed half way leaves
the workspace where it was, writable, and runs again; bad requests are refused plainly."""

from __future__ import annotations

import logging
import os
import re
import stat
import threading
import time
import uuid
from collections import Counter

import grpc
import psycopg
import pytest
from cli_runner import at_gateway
from conftest import code_of
from psycopg import sql
from psycopg.conninfo import make_conninfo
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s
from recallatron.store.v1 import store_pb2_grpc
from test_servers import databases_on, frozen, kill, summary, two_servers_up, wait_for

from cli.operation_commands import _unfinished_move
from servicekit import clients
from servicekit.errors import MOVING, FailedPrecondition, error_info, retry_info
from store_service.control import moves
from store_service.control.moves import pg_bin
from store_service.control.plane import WHOLE_CLASS, whole_workspace
from store_service.database import Databases
from store_service.embedding.job import RESWEEP_SECONDS
from store_service.search import lexical_index
from store_service.server import StoreService

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
def test_a_move_under_writes_loses_nothing_and_drops_the_old_database(servers, caplog):
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
    caplog.set_level(logging.INFO, logger="store_service.embedding.job")
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
    # The embedding job meets the read-only source and the dropped copy as a move's routine, not as
    # errors (log alerts would fire on every move).
    job_errors = [r for r in caplog.records if r.name == "store_service.embedding.job" and r.levelno >= logging.ERROR]
    assert job_errors == [], [r.getMessage() for r in job_errors]
    assert resp.write_pause_ms > 0 and resp.rows_copied > 300
    assert summary(stack, ws).server == "pg2"
    assert db not in databases_on(first) and db in databases_on(second)  # the old copy dropped
    assert during > 0 and len(acked) > during  # writes before, and after the move
    assert refusals[MOVING] > 0 and refusals["with retry hint"] == refusals[MOVING], refusals
    # Reads go on from the source while it is copied (one whose session the move ended is made again).
    assert reads["ok"] > 0 and reads_during >= 0 and set(reads) == {"ok"}, reads
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


@pytest.mark.cluster
def test_a_session_ended_by_a_move_is_its_routine_and_one_ended_otherwise_a_failure(servers):
    """A move ends the source's sessions (read-only, then dropped), and the embedding job meets
    that as a lost session. That is a move's routine only while a move runs (recorded, its lock
    held) or once the workspace is placed elsewhere: a server shutting down ends sessions the same
    way, and that must still be logged and counted as a failure, also while a stopped move's record
    stays (``moving_to`` kept for the next move there, ``moved_from`` for a copy not dropped)."""
    stack, _, _ = servers
    ws, _ = seeded(stack, "sessions ended", 3)
    db = f"recallatron_ws_{ws.replace('-', '')}"
    worker, conninfo = stack.store.worker, make_conninfo(stack.store.dbs.servers["pg1"], dbname=db)
    with psycopg.connect(conninfo, autocommit=True) as victim, psycopg.connect(conninfo, autocommit=True) as killer:
        pid = victim.execute("SELECT pg_backend_pid()").fetchone()[0]
        assert killer.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
        with pytest.raises(psycopg.errors.AdminShutdown) as ended:
            victim.execute("SELECT 1")
    lost = psycopg.OperationalError("server closed the connection")  # libpq's own, no server message
    assert worker._by_move(ended.value, db) is False
    assert worker._by_move(ended.value, db, worker._server(db)) is False  # where it still is (pg1)
    assert worker._by_move(ended.value, db, "pg2") is True  # placed elsewhere since: moved, the move over
    control_info = stack.store.dbs.control_conninfo
    with psycopg.connect(control_info, autocommit=True) as control, psycopg.connect(control_info) as mover:
        mover.autocommit = True
        with whole_workspace(mover, uuid.UUID(ws), "test"):  # the lock alone: a deletion's, say
            assert worker._by_move(ended.value, db) is False
        for column in ("moving_to", "moved_from"):
            control.execute(
                sql.SQL("UPDATE workspace SET {} = 'pg2' WHERE id = %s").format(sql.Identifier(column)), (ws,)
            )
            try:
                assert worker._by_move(ended.value, db) is False, column  # a stopped move's record
                assert worker._by_move(lost, db) is False, column
                with whole_workspace(mover, uuid.UUID(ws), "test"):  # a move running
                    assert worker._by_move(ended.value, db) is True, column
                    assert worker._by_move(lost, db) is True, column
                    assert worker._by_move(psycopg.errors.QueryCanceled(), db) is False  # only a lost session
            finally:
                control.execute(
                    sql.SQL("UPDATE workspace SET {} = NULL WHERE id = %s").format(sql.Identifier(column)), (ws,)
                )
    assert worker._by_move(ended.value, "recallatron_ws_unknown") is False


def _wrapped_pg_bin(folder, started, program: str, read_input_first: bool = False) -> None:
    """A pg_bin folder whose ``program`` (pg_dump or pg_restore) says it started (a file) and waits
    5 s before the real one runs, having read all its input first when ``read_input_first``: the
    window in which a test kills a server or races a deletion. The other program is the real one."""
    real = pg_bin()
    folder.mkdir()
    other = "pg_restore" if program == "pg_dump" else "pg_dump"
    (folder / other).symlink_to(real / other)
    take = 'T=$(mktemp)\ncat > "$T"\n' if read_input_first else ""
    given = ' < "$T"' if read_input_first else ""
    script = folder / program
    script.write_text(f'#!/bin/sh\n{take}touch "{started}"\nsleep 5\nexec "{real / program}" "$@"{given}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def _slow_move(stack, ws: str, server: str, folder, monkeypatch, program: str) -> tuple[threading.Thread, dict]:
    """A move of ``ws`` to ``server`` in a thread, ``program`` (pg_dump or pg_restore) held 5 s
    (``_wrapped_pg_bin``); returns once the copy has started, with the thread and its outcome
    (``response`` or ``error``)."""
    started = folder / f"{program}-started"
    _wrapped_pg_bin(folder / "bin", started, program)
    monkeypatch.setenv("RECALLATRON_PG_BIN", str(folder / "bin"))
    outcome = {}

    def run() -> None:
        try:
            outcome["response"] = move(stack, ws, server)
        except grpc.RpcError as exc:
            outcome["error"] = exc

    mover = threading.Thread(target=run)
    mover.start()
    wait_for(started.exists, 60, "the copy to start")
    return mover, outcome


@pytest.mark.cluster
def test_a_move_whose_target_dies_leaves_the_workspace_usable_where_it_was(servers, tmp_path, monkeypatch):
    stack, first, second = servers
    ws, members = seeded(stack, "target dies", 50)
    db = f"recallatron_ws_{ws.replace('-', '')}"
    mover, outcome = _slow_move(stack, ws, "pg2", tmp_path, monkeypatch, "pg_restore")
    # While the copy runs: reads answer, writes are refused with the retry hint.
    listed = stack.memory.ListMemories(g.ListMemoriesRequest(), metadata=members[0].md()).memories
    assert len(listed) == 50 and members[0].read(listed[0].id).body.startswith("Seed note")
    with pytest.raises(grpc.RpcError) as refused:
        members[0].remember("Refused while the copy runs.")
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE and error_info(refused.value).reason == MOVING
    assert "being moved" in refused.value.details()
    # The embedding job's sweep meets the read-only source as routine: the others' jobs go on.
    worker = stack.store.worker
    worker._sweep(worker.current_version())
    assert worker._next_sweep - time.monotonic() <= RESWEEP_SECONDS  # soon again, not failed
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
    assert code(ws, "") == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "name the server to move it to; configured: pg1, pg2",
    )
    assert code(ws, "pg1") == (grpc.StatusCode.FAILED_PRECONDITION, "the workspace is on pg1 already")
    assert code("no such workspace", "pg2")[0] == grpc.StatusCode.NOT_FOUND
    assert code("00000000-0000-4000-8000-000000000000", "pg2")[0] == grpc.StatusCode.NOT_FOUND
    no_operator = g.MoveWorkspaceRequest(workspace_id=ws, server="pg2")
    with pytest.raises(grpc.RpcError) as err:
        stack.admin.MoveWorkspace(no_operator)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert summary(stack, ws).server == "pg1"
    assert os.environ.get("RECALLATRON_PG_BIN") is None


@pytest.mark.cluster
def test_a_workspace_moved_there_and_back_stays_usable(servers):
    """From the break-it review: moving back to a server it left made the moving store refuse the
    workspace for good (the database it had dropped there was 'deleted')."""
    stack = servers[0]
    ws, members = seeded(stack, "there and back", 5)
    note = members[0].remember("Before any move.")
    assert move(stack, ws, "pg2").to_server == "pg2"
    back = at_gateway(  # by the CLI and the workspace's name, which its line repeats beside the id
        f"127.0.0.1:{stack.gateway.port}",
        *("workspace", "move", "there and back", "--to", "pg1", "--operator-token", stack.operator_token),
    ).stdout
    assert re.fullmatch(
        rf"moved there and back \({ws}\) from pg2 to pg1: \d+ rows, writes refused for \d+ ms\n", back
    ), back
    later = members[1].remember("After moving back.")
    assert (
        members[2].read(note.id).body == "Before any move." and members[2].read(later.id).body == "After moving back."
    )
    stack.wait_backlog_empty()


@pytest.mark.cluster
def test_a_deletion_waits_for_no_move_and_leaves_no_copy_anywhere(servers, tmp_path, monkeypatch):
    """From the break-it review: a deletion during a move's copy left a full copy on the target, and
    a deletion after a move that had not dropped its old copy left that one."""
    stack, first, second = servers
    ws, members = seeded(stack, "deleted while moving", 5)
    db = f"recallatron_ws_{ws.replace('-', '')}"
    started = tmp_path / "started"
    _wrapped_pg_bin(tmp_path / "bin", started, "pg_restore", read_input_first=True)
    monkeypatch.setenv("RECALLATRON_PG_BIN", str(tmp_path / "bin"))
    moved = {}
    mover = threading.Thread(target=lambda: moved.setdefault("response", move(stack, ws, "pg2")))
    mover.start()
    wait_for(started.exists, 60, "the copy to start")
    delete = g.DeleteWorkspaceRequest(workspace_id=ws)
    with pytest.raises(grpc.RpcError) as refused:
        stack.admin.DeleteWorkspace(delete, metadata=stack.op())
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "a move, deletion or recovery of this workspace is running" in refused.value.details()
    mover.join(timeout=120)
    assert moved["response"].to_server == "pg2"
    stack.admin.DeleteWorkspace(delete, metadata=stack.op())
    assert db not in databases_on(first) and db not in databases_on(second)
    # An old copy a move did not drop (moved_from) goes with the workspace too.
    ws, _ = seeded(stack, "deleted with an old copy", 3)
    db = f"recallatron_ws_{ws.replace('-', '')}"
    monkeypatch.delenv("RECALLATRON_PG_BIN")
    move(stack, ws, "pg2")
    with psycopg.connect(first.control_url, autocommit=True) as conn:  # as a move whose drop failed leaves it
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
        conn.execute("UPDATE workspace SET moved_from = 'pg1' WHERE id = %s", (ws,))
    stack.admin.DeleteWorkspace(g.DeleteWorkspaceRequest(workspace_id=ws), metadata=stack.op())
    assert db not in databases_on(first) and db not in databases_on(second)


@pytest.mark.cluster
def test_a_move_whose_source_dies_says_so_and_is_undone_when_the_source_answers(servers, tmp_path, monkeypatch):
    """From the break-it review: the source's server dying during the copy left the workspace
    read-only with nothing recorded. Now the move stays recorded while the source is down, and once
    it answers the store undoes the move: writable where it was, the partial copy dropped."""
    stack, first, second = servers
    ws, members = seeded(stack, "source dies", 5, server="pg2")
    mover, outcome = _slow_move(stack, ws, "pg1", tmp_path, monkeypatch, "pg_dump")
    running = summary(stack, ws)  # a move under way is told from one that stopped
    assert (running.moving_to, running.move_running) == ("pg1", True)
    assert _unfinished_move(running) == [
        "  moving to pg1 now: writes are refused (retryable) until its copy is switched"
    ]
    kill(second)
    mover.join(timeout=120)
    err = outcome["error"]
    assert err.code() == grpc.StatusCode.UNAVAILABLE and "read-only until that server answers again" in err.details()
    stopped = summary(stack, ws)
    assert (stopped.server, stopped.moving_to, stopped.move_running) == ("pg2", "pg1", False)  # shown, to run again
    assert _unfinished_move(stopped) == [
        f"  a move to pg1 did not finish: run `recallatron workspace move {ws} --to pg1`"
    ]
    second.restart()
    wait_for(lambda: summary(stack, ws).moving_to == "", 60, "the stopped move undone")
    db = f"recallatron_ws_{ws.replace('-', '')}"
    assert summary(stack, ws).server == "pg2"
    wait_for(lambda: db not in databases_on(first), 30, "the partial copy dropped")
    wait_for(lambda: code_of(members[0].remember, "Written where it was.") == grpc.StatusCode.OK, 30, "writable")
    monkeypatch.delenv("RECALLATRON_PG_BIN")
    resp = move(stack, ws, "pg1")  # run again: a move of its own, from the start
    assert (resp.to_server, resp.resumed) == ("pg1", False)
    kept = members[0].remember("Written once the move finished.")
    assert summary(stack, ws).server == "pg1" and members[1].read(kept.id).body == "Written once the move finished."
    assert len(stack.memory.ListMemories(g.ListMemoriesRequest(), metadata=members[1].md()).memories) == 7


@pytest.mark.cluster
def test_a_move_left_by_a_killed_store_is_undone(servers):
    """What a store killed during a move's copy leaves (the source read-only, ``moving_to`` set, no
    move running) is undone by the stores' health loop: the workspace is writable where it was,
    within seconds, and nothing recorded stays."""
    stack, first, second = servers
    ws, members = seeded(stack, "mover killed", 3)
    db = f"recallatron_ws_{ws.replace('-', '')}"
    with psycopg.connect(first.control_url, autocommit=True) as conn:  # the state the killed store left
        conn.execute(sql.SQL("ALTER DATABASE {} SET default_transaction_read_only = on").format(sql.Identifier(db)))
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (db,),
        )
    with psycopg.connect(stack.store.dbs.control_conninfo, autocommit=True) as conn:
        conn.execute("UPDATE workspace SET moving_to = 'pg2' WHERE id = %s", (ws,))
    with psycopg.connect(second.control_url, autocommit=True) as conn:  # its partial copy
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
    wait_for(lambda: summary(stack, ws).moving_to == "", 30, "the stopped move undone")
    kept = members[0].remember("Written after the undone move.")
    assert members[1].read(kept.id).body == "Written after the undone move."
    wait_for(lambda: db not in databases_on(second), 30, "the partial copy dropped")
    assert summary(stack, ws).server == "pg1"
    assert moves.recover(stack.store.dbs) == 0  # nothing left to undo


@pytest.mark.cluster
def test_a_target_that_already_holds_the_database_is_refused_untouched(servers):
    """From the break-it review: two configured names for one PostgreSQL server made a move drop the
    live source as the 'leftover' on the target. Only a recorded move may replace a copy there."""
    stack, first, second = servers
    ws, members = seeded(stack, "two names one server", 3)
    db = f"recallatron_ws_{ws.replace('-', '')}"
    same = make_conninfo(first.control_url, dbname="postgres")
    dbs = Databases(first.control_url, servers={"pg2": second.control_url, "alias": same}, control_server="pg1")
    dbs.open()
    try:
        with pytest.raises(FailedPrecondition, match="holds a database of this workspace's name already"):
            moves.move(dbs, ws, "alias", lambda _: None)
    finally:
        dbs.close()
    assert db in databases_on(first) and summary(stack, ws).server == "pg1"
    assert len(stack.memory.ListMemories(g.ListMemoriesRequest(), metadata=members[0].md()).memories) == 3
    assert members[1].remember("Still writable.").body == "Still writable."


@pytest.mark.cluster
def test_finishing_a_switched_move_answers_where_it_is(servers):
    """From the break-it review: with the old copy left (moved_from), a move to the old server
    dropped it and answered as if the workspace had gone there."""
    stack, first, second = servers
    ws, members = seeded(stack, "switched, old copy left", 3)
    db = f"recallatron_ws_{ws.replace('-', '')}"
    move(stack, ws, "pg2")
    with psycopg.connect(first.control_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
        conn.execute("UPDATE workspace SET moved_from = 'pg1' WHERE id = %s", (ws,))
    assert summary(stack, ws).moved_from == "pg1"
    with pytest.raises(grpc.RpcError) as refused:
        move(stack, ws, "pg1")
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "with that server" in refused.value.details()
    resp = move(stack, ws, "pg2")
    assert (resp.from_server, resp.to_server, resp.resumed, resp.rows_copied) == ("pg1", "pg2", True, 0)
    assert db not in databases_on(first) and summary(stack, ws).server == "pg2"


@pytest.mark.cluster
def test_another_store_process_follows_a_move_at_its_next_call(servers):
    """From the break-it review: a second store process kept the moved workspace's old place, its
    next call failed with a plain UNAVAILABLE that the gateway's breaker counted, and it marked the
    healthy control-plane server down. Its next call now finds the workspace where it is."""
    stack, first, second = servers
    other = StoreService(
        first.control_url, "127.0.0.1:0", stack.embed_bind, servers={"pg2": second.control_url}, control_server="pg1"
    )
    channel = clients.channel(f"127.0.0.1:{other.port}")
    try:
        store = store_pb2_grpc.StoreServiceStub(channel)
        ws, members = seeded(stack, "seen by two stores", 3)
        caller = store.Authenticate(s.AuthenticateRequest(token=members[0].token), timeout=30).caller

        def remember(body: str) -> str:
            request = s.RememberRequest(caller=caller, purpose=CONV, audience=m.AUDIENCE_WORKSPACE, body=body)
            return store.Remember(request, timeout=30).memory.id

        before = remember("Through the other store, before.")
        move(stack, ws, "pg2")
        after = remember("Through the other store, after.")  # no error: it looked again
        assert members[1].read(before).body == "Through the other store, before."
        assert members[1].read(after).body == "Through the other store, after."
        assert other.dbs.server_status() == [("pg1", True), ("pg2", True)]
    finally:
        channel.close()
        other.stop()


@pytest.mark.cluster
def test_a_move_whose_target_hangs_gives_up_and_the_workspace_is_writable_where_it_was(servers, tmp_path, monkeypatch):
    """From the new-user trial: a target that stopped answering mid-copy held the move, and the
    workspace's writes, until it woke (up to the copy's hour). Now the copy stops once the store
    takes the server for down, and the workspace is writable on its source."""
    stack, first, second = servers
    ws, members = seeded(stack, "target hangs", 20)
    mover, outcome = _slow_move(stack, ws, "pg2", tmp_path, monkeypatch, "pg_restore")
    with frozen(second):
        kept = _failed_and_writable(stack, ws, mover, outcome, members, "Written while pg2 hangs.")
    wait_for(lambda: dict(stack.store.dbs.server_status())["pg2"], 60, "pg2 serving again")
    monkeypatch.delenv("RECALLATRON_PG_BIN")
    assert move(stack, ws, "pg2").to_server == "pg2"
    assert members[0].read(kept.id).body == "Written while pg2 hangs."


def _failed_and_writable(stack, ws, mover, outcome, members, text: str):
    """While the target hangs: the move (``mover``) has ended UNAVAILABLE saying the workspace stays
    on pg1, where it is writable and no move runs; returns the memory written then."""
    mover.join(timeout=120)
    assert not mover.is_alive(), "the move waited for the hung target"
    err = outcome["error"]
    assert err.code() == grpc.StatusCode.UNAVAILABLE and "stays on pg1" in err.details(), err.details()
    kept = members[1].remember(text)
    assert members[2].read(kept.id).body == text
    shown = summary(stack, ws)
    assert (shown.server, shown.move_running) == ("pg1", False)
    return kept


@pytest.mark.cluster
def test_a_move_that_loses_its_lock_stops_and_is_undone_without_losing_a_write(servers, tmp_path, monkeypatch):
    """From the break-it review: a move whose control-plane session ended (and its lock with it)
    went on copying while ``recover`` undid it, so a later move's switch could land the old copy
    and lose a write acknowledged in between. Now it stops at once and touches nothing."""
    stack, first, second = servers
    ws, members = seeded(stack, "lock lost", 3)
    mover, outcome = _slow_move(stack, ws, "pg2", tmp_path, monkeypatch, "pg_restore")
    with psycopg.connect(stack.store.dbs.control_conninfo, autocommit=True) as conn:
        ended = conn.execute(
            """SELECT pg_terminate_backend(pid) FROM pg_locks
                WHERE locktype = 'advisory' AND classid::bigint = %s
                  AND objid::bigint = hashtext(%s)::bigint & 4294967295""",
            (WHOLE_CLASS, ws),
        ).rowcount
    assert ended == 1
    mover.join(timeout=60)
    assert not mover.is_alive()
    err = outcome["error"]
    assert err.code() == grpc.StatusCode.UNAVAILABLE and "lost its lock" in err.details(), err.details()
    wait_for(lambda: summary(stack, ws).moving_to == "", 30, "the stopped move undone")
    acked = "Acknowledged after the lost move."
    wait_for(lambda: code_of(members[0].remember, acked) == grpc.StatusCode.OK, 30, "a write")
    monkeypatch.delenv("RECALLATRON_PG_BIN")
    # Run again, as the answer said (refused for the seconds the recovery still holds the lock).
    again = g.MoveWorkspaceRequest(workspace_id=ws, server="pg2")
    wait_for(lambda: code_of(stack.admin.MoveWorkspace, again, metadata=stack.op()) == grpc.StatusCode.OK, 30, "moved")
    assert summary(stack, ws).server == "pg2"
    bodies = [x.body for x in stack.memory.ListMemories(g.ListMemoriesRequest(), metadata=members[1].md()).memories]
    assert bodies.count(acked) == 1 and len(bodies) == 4
    assert f"recallatron_ws_{ws.replace('-', '')}" not in databases_on(first)


@pytest.mark.cluster
def test_a_target_that_hangs_after_the_copy_ends_the_move(servers, tmp_path, monkeypatch):
    """From the second new-user trial: a target frozen just after pg_restore held the move and the
    workspace's writes while it stayed frozen. Frozen here before the row counts connect, the move
    ends at their connect timeout or the watch, whichever comes first; a statement already running
    when the server stops is the watch's alone (``test_a_watched_statement_ends_when_the_move_stops``)."""
    stack, first, second = servers
    ws, members = seeded(stack, "hangs after the copy", 10)
    real, folder, restored = pg_bin(), tmp_path / "bin", tmp_path / "restored"
    folder.mkdir()
    (folder / "pg_dump").symlink_to(real / "pg_dump")
    script = folder / "pg_restore"  # the real one, then a pause in which the test freezes the target
    script.write_text(f'#!/bin/sh\n"{real / "pg_restore"}" "$@"\nrc=$?\ntouch "{restored}"\nsleep 2\nexit $rc\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("RECALLATRON_PG_BIN", str(folder))
    outcome = {}

    def run() -> None:
        try:
            outcome["response"] = move(stack, ws, "pg2")
        except grpc.RpcError as exc:
            outcome["error"] = exc

    mover = threading.Thread(target=run)
    mover.start()
    wait_for(restored.exists, 60, "the copy restored")
    with frozen(second):
        kept = _failed_and_writable(stack, ws, mover, outcome, members, "Written while the target hangs.")
    wait_for(lambda: dict(stack.store.dbs.server_status())["pg2"], 60, "pg2 serving again")
    monkeypatch.delenv("RECALLATRON_PG_BIN")
    wait_for(lambda: code_of(move, stack, ws, "pg2") == grpc.StatusCode.OK, 60, "moved once it answers")
    assert members[0].read(kept.id).body == "Written while the target hangs."


def test_a_watched_statement_ends_when_the_move_stops(pg):
    """The mechanism behind the two tests above, alone: a statement still running (a server that
    does not answer looks the same from here) ends once ``stopped()`` gives a reason, with an
    OperationalError, rather than when the server answers."""
    asked = []

    def stopped() -> str | None:
        asked.append(time.monotonic())
        return "the target stopped answering" if len(asked) > 3 else None

    start = time.monotonic()
    with pytest.raises(psycopg.OperationalError), moves._watched(pg, stopped) as conn:
        conn.execute("SELECT pg_sleep(60)")
    assert len(asked) == 4 and time.monotonic() - start < 30
    with moves._watched(pg, lambda: None) as conn:  # never stopped: answers as a plain connection
        assert conn.execute("SELECT 6 * 7").fetchone() == (42,)
