"""The bounded check of a connection before use (store_service/database.py ``check_answering``)
and the health probe around it, against the real embedded server: a broken connection fails the
check cleanly (closed, nothing half read) without taking its server for down, descriptors past
1024 are watched, and a server that answers with errors is down for its own workspaces only, never
for the store (whose health follows the control plane's server)."""

from __future__ import annotations

import os
import uuid

import psycopg
import psycopg_pool
import pytest
from pg_error_front import start as error_front

from store_service.database import (
    Databases,
    NotAnswering,
    Pool,
    ServerHealth,
    WorkspaceHandle,
    check_answering,
    new_db_name,
    one_statement,
    read_snapshot,
    session_lost,
)


def _terminate(url: str, conn: psycopg.Connection) -> None:
    with psycopg.connect(url, autocommit=True) as killer:
        killer.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))


def test_a_broken_connection_fails_the_check_cleanly_and_the_pool_goes_on(pg):
    conn = psycopg.connect(pg, autocommit=True)
    check_answering(conn)  # an answering server passes, and the connection stays usable
    assert conn.execute("SELECT 41 + 1").fetchone() == (42,)
    _terminate(pg, conn)
    with pytest.raises(psycopg.OperationalError) as err:
        check_answering(conn)
    assert not isinstance(err.value, NotAnswering) and conn.closed
    health = ServerHealth("pg1")
    pool = Pool(pg, health=health, min_size=1, max_size=1, name="checks")
    pool.open(wait=True, timeout=10)
    try:
        with pool.connection() as first:
            _terminate(pg, first)
        with pool.connection() as second:  # the dead one is discarded, a new one made
            assert second.execute("SELECT 1").fetchone() == (1,)
        assert not health.down  # a connection ended by the server is not the server down
    finally:
        pool.close()


def test_descriptors_past_1024_are_watched(pg):
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        conn = psycopg.connect(pg, autocommit=True)
        assert conn.pgconn.socket >= 1024
        for _ in range(20):
            check_answering(conn)
        assert not conn.closed
        conn.close()
    finally:
        for fd in held:
            os.close(fd)


def test_a_server_answering_errors_is_down_for_its_own_workspaces_only(pg):
    dbs = Databases(pg, servers={"front": error_front()}, control_server="pg1")
    try:
        dbs.open()  # the front cannot be prepared: logged, the store starts
        for _ in range(2):
            dbs.probe()  # answers for the control plane's server: the store stays SERVING
        assert dbs.server_status() == [("pg1", True), ("front", False)]
        assert dbs.healths["front"].down and not dbs.health.down
    finally:
        dbs.close()


def test_a_held_workspace_handle_survives_its_pool_being_closed(stack, pg):
    """Found in a full run: a removal kept its workspace's pool while it waited for its turn, the
    least recently used pool was closed meanwhile (other workspaces opened theirs), and the removal
    failed UNAVAILABLE ("the pool is already closed"), which opened the gateway's breaker for the
    calls after it. A WorkspaceHandle looks the pool up at each use."""
    first, second = (new_db_name(uuid.UUID(stack.workspace("handle"))) for _ in range(2))
    dbs = Databases(pg, max_workspace_pools=1)
    dbs.open()
    try:
        handle = WorkspaceHandle(dbs, first)
        with handle.connection() as conn:
            assert conn.execute("SELECT current_database()").fetchone() == (first,)
        held = dbs.workspace(first)
        with dbs.workspace(second).connection():  # the least recently used pool (first's) closes
            pass
        assert held.closed
        with pytest.raises(psycopg_pool.PoolClosed):
            held.getconn()
        with handle.connection() as conn:  # opened again
            assert conn.execute("SELECT current_database()").fetchone() == (first,)
        assert not dbs.workspace(first).closed and dbs.workspace(first) is not held
    finally:
        dbs.close()


def _settings(conn: psycopg.Connection) -> tuple:
    return conn.execute(
        "SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only')"
    ).fetchone()


def test_a_read_snapshot_is_one_repeatable_read_only_transaction_and_its_connection_goes_back_as_lent(pg):
    pool = Pool(pg, health=ServerHealth("pg1"), min_size=1, max_size=1, name="snapshots")
    pool.open(wait=True, timeout=10)
    try:
        with pool.connection() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS snap_probe (n int)")
            conn.execute("TRUNCATE snap_probe")
        with pool.connection() as conn, read_snapshot(conn):
            assert _settings(conn) == ("repeatable read", "on")
            before = conn.execute("SELECT count(*) FROM snap_probe").fetchone()[0]
            with psycopg.connect(pg, autocommit=True) as other:
                other.execute("INSERT INTO snap_probe VALUES (1)")
            assert conn.execute("SELECT count(*) FROM snap_probe").fetchone()[0] == before  # one state
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
                with conn.transaction():
                    conn.execute("INSERT INTO snap_probe VALUES (2)")
        # A block that fails inside, and one whose connection the server ends inside, leave the pool
        # lending connections in the server's defaults, read-write.
        with pytest.raises(ZeroDivisionError), pool.connection() as conn, read_snapshot(conn):
            conn.execute("SELECT 1")
            raise ZeroDivisionError
        with pytest.raises(psycopg.OperationalError), pool.connection() as conn, read_snapshot(conn):
            _terminate(pg, conn)
            conn.execute("SELECT 1")
        with pytest.raises(psycopg.OperationalError), pool.connection() as conn, one_statement(conn):
            _terminate(pg, conn)
            conn.execute("SELECT 1")
        with pool.connection() as conn, one_statement(conn):
            assert conn.autocommit and _settings(conn) == ("read committed", "off")
        with pool.connection() as conn:
            assert not conn.autocommit and (conn.read_only, conn.isolation_level) == (None, None)
            assert _settings(conn) == ("read committed", "off")
            conn.execute("INSERT INTO snap_probe VALUES (3)")
        with pool.connection() as conn:
            assert conn.execute("SELECT count(*) FROM snap_probe WHERE n = 3").fetchone()[0] == 1
            conn.execute("DROP TABLE snap_probe")
    finally:
        pool.close()


def test_a_read_snapshot_inside_a_callers_transaction_keeps_its_isolation(pg):
    with psycopg.connect(pg) as conn:
        conn.execute("SELECT 1")  # a transaction begun by the caller
        with read_snapshot(conn):
            assert _settings(conn) == ("read committed", "off")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS


def test_the_helpers_put_back_the_connections_own_settings(pg):
    with psycopg.connect(pg, autocommit=True) as conn:
        with one_statement(conn):
            assert conn.autocommit
        assert conn.autocommit  # it was in autocommit before: still is
    with psycopg.connect(pg) as conn:
        conn.isolation_level, conn.read_only = psycopg.IsolationLevel.SERIALIZABLE, False
        with read_snapshot(conn):
            assert _settings(conn) == ("repeatable read", "on")
        assert (conn.isolation_level, conn.read_only) == (psycopg.IsolationLevel.SERIALIZABLE, False)


def test_a_lost_session_is_told_from_a_statements_error_and_a_pools_wait(pg):
    """``session_lost``: what the store makes a read again for, and what the embedding job takes for
    a move's routine while one is recorded (store_service/server.py, store_service/embedding/job.py)."""
    caught = []
    conn = psycopg.connect(pg, autocommit=True)
    _terminate(pg, conn)
    with pytest.raises(psycopg.Error) as ended:
        conn.execute("SELECT 1")
    caught.append((ended.value, True))
    with pytest.raises(psycopg.Error) as after:  # the connection is closed now: libpq's own error
        conn.execute("SELECT 1")
    caught.append((after.value, True))
    with psycopg.connect(pg, autocommit=True) as live:
        for statement in ("SET statement_timeout = 10; SELECT pg_sleep(1)", "SELEC 1", "SELECT 1/0"):
            with pytest.raises(psycopg.Error) as failed:
                live.execute(statement)
            caught.append((failed.value, False))
        assert live.execute("SELECT 1").fetchone() == (1,)
    with pytest.raises(psycopg.OperationalError) as refused:  # nothing listens there
        psycopg.connect("host=127.0.0.1 port=1 dbname=x connect_timeout=2")
    caught.append((refused.value, True))
    caught.append((psycopg_pool.PoolTimeout("couldn't get a connection after 1.0 sec"), False))
    assert [(type(e).__name__, session_lost(e)) for e, _ in caught] == [(type(e).__name__, lost) for e, lost in caught]
    assert isinstance(caught[0][0], psycopg.errors.AdminShutdown)
    assert [type(e).__name__ for e, _ in caught[2:5]] == ["QueryCanceled", "SyntaxError", "DivisionByZero"]
