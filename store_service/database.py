"""Connections and schema: the control-plane database and one database per workspace.

Schema changes go through yoyo-migrations (``migrations/control`` and ``migrations/workspace``).
A migrated template database makes creating a workspace database a cheap ``CREATE DATABASE ...
TEMPLATE`` copy.

Every pool is a ``Pool``: when the server goes away (restart, crash, ``kill -9``) a call gets a
clear UNAVAILABLE within about a second instead of waiting for a connection, and when it comes
back the pools reconnect within seconds instead of waiting out a long reconnection backoff.
"""

from __future__ import annotations

import contextlib
import logging
import select
import threading
import time
import uuid
from collections import OrderedDict
from pathlib import Path

import psycopg
from pgvector.psycopg import register_vector
from psycopg import pq, sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import namedtuple_row
from psycopg_pool import ConnectionPool, PoolTimeout
from yoyo import get_backend, read_migrations

from servicekit.errors import NotFound, WorkspaceUnavailable
from servicekit.metrics import POOLS
from store_service import data_steps

log = logging.getLogger(__name__)
MIGRATIONS = Path(__file__).parent / "migrations"
TEMPLATE_DB = "recallatron_ws_template"
MIN_PGVECTOR = (0, 8)
_TEMPLATE_LOCK_KEY = 0x7265_6361  # pg advisory lock id serialising template (re)builds

# How long a call waits for a pooled connection while the server accepts connections (every
# connection busy): long enough to ride out a burst, short of a client's patience.
POOL_WAIT_SECONDS = 10.0
# How long it waits while the server refused the last connection attempt of any pool (down or
# restarting): the call fails UNAVAILABLE quickly, and a returning server is used by the next call.
DOWN_WAIT_SECONDS = 1.0
# A waiting call looks again at whether the server is down this often, so that calls already
# waiting when it goes down also fail within about DOWN_WAIT_SECONDS.
WAIT_SLICE_SECONDS = 0.25
# psycopg_pool retries a failed background connection with exponential backoff (1 s, 2 s, 4 s ...)
# until this many seconds have passed; the default 300 s let a chain sleep long after the server
# was back. Past it the chain gives up and the next call that needs a connection starts a new one.
RECONNECT_SECONDS = 4.0
# libpq connect_timeout: a server host that does not answer at all fails a connection attempt.
CONNECT_TIMEOUT_SECONDS = 5
# How long a pooled connection's check before use, and the health probe's query, wait for the
# server's answer. A server that accepts and never answers (a stopped process, a stalled disk) is
# taken for down after it, instead of holding every call of its workspaces until it wakes: libpq
# has no query timeout, and the server's own statement_timeout cannot fire in a server that waits.
ANSWER_TIMEOUT_SECONDS = 3.0


# SQLSTATE invalid_catalog_name: a connection to a database that does not exist (dropped or moved).
MISSING_DATABASE = "3D000"


class StartupError(RuntimeError):
    """The database server lacks something the store needs; the message says what."""


def named(conn: psycopg.Connection) -> psycopg.Cursor:
    """A cursor of ``conn`` whose rows are named tuples, one field per selected column, named as the
    column or its alias (``psycopg.rows.namedtuple_row``): the store reads ``row.revision``, never
    ``row[1]``. Set per cursor, not per connection, so it holds on any connection a caller passes."""
    return conn.cursor(row_factory=namedtuple_row)


def _url(base: str, dbname: str) -> str:
    return make_conninfo(base, dbname=dbname)


def _yoyo_url(conninfo: str) -> str:
    """yoyo wants a URL; build one from any libpq conninfo (Unix socket hosts go in the query)."""
    p = conninfo_to_dict(conninfo)
    from urllib.parse import quote, urlencode

    user = quote(p.get("user", ""), safe="")
    pw = (":" + quote(p["password"], safe="")) if p.get("password") else ""
    host = p.get("host", "")
    query = {}
    netloc_host = host
    if host.startswith("/"):
        query["host"], netloc_host = host, ""
    port = f":{p['port']}" if p.get("port") else ""
    auth = f"{user}{pw}@" if user else ""
    q = ("?" + urlencode(query)) if query else ""
    return f"postgresql+psycopg://{auth}{netloc_host}{port}/{quote(p.get('dbname', ''), safe='')}{q}"


# The key of the session advisory lock a migration of one database holds (advisory locks are per
# database, so workspaces migrate side by side).
MIGRATION_LOCK_KEY = 0x7263_6D69_6772  # "rcmigr"


@contextlib.contextmanager
def migration_lock(conninfo: str):
    """Holds the migration lock of one database, waiting for another store's migration of it to end.
    A session advisory lock, not yoyo's lock table: a store killed mid-step releases it with its
    connection, so the next start runs the step again instead of finding a stale lock row, and a
    second store waits for a long data step instead of giving up after yoyo's 10 seconds."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        if not conn.execute("SELECT pg_try_advisory_lock(%s)", (MIGRATION_LOCK_KEY,)).fetchone()[0]:
            log.info("waiting for another store's migration of database %s", conn.info.dbname)
            conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
        yield  # released when the connection closes, whatever happened inside


def migrate(conninfo: str, tree: str) -> None:
    """Applies every pending migration of ``tree`` ("control" or "workspace") to one database, and
    for a workspace database then the data steps its migrations left due (``store_service.data_steps``),
    under the same migration lock."""
    backend = get_backend(_yoyo_url(conninfo))
    migrations = read_migrations(str(MIGRATIONS / tree))
    try:
        with migration_lock(conninfo):
            backend.apply_migrations(backend.to_apply(migrations))
            if tree == "workspace":
                data_steps.run_due(conninfo)
    finally:
        # Closed here, not left to the garbage collector: a Python migration step keeps the backend
        # reachable, and an open session on the template database blocks CREATE DATABASE ... TEMPLATE.
        backend.connection.close()


def _configure(conn: psycopg.Connection) -> None:
    register_vector(conn)


def _restore(conn: psycopg.Connection, saved: dict) -> None:
    """Puts the ``saved`` connection attributes back on ``conn`` after one use changed them, or
    closes it when it cannot be (not idle: broken), so its pool discards it rather than lend it out
    as that use left it. Not a pool ``reset`` callback: psycopg_pool then gives every connection
    back through a worker thread, later than the call that used it (and a hand-off per call)."""
    if not conn.closed and conn.info.transaction_status == pq.TransactionStatus.IDLE:
        for name, value in saved.items():
            setattr(conn, name, value)
    else:
        conn.close()


@contextlib.contextmanager
def read_snapshot(conn: psycopg.Connection):
    """The block's statements in one REPEATABLE READ, READ ONLY transaction, begun by a single
    ``BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`` (not a BEGIN and then a SET TRANSACTION: a
    round trip fewer on every recall), when ``conn`` is idle, its own settings put back after; inside
    a caller's own transaction its isolation applies. A candidate arm's rows, their chain verdicts
    and the memories it carries are read this way, so all of them see one database state."""
    if conn.info.transaction_status != pq.TransactionStatus.IDLE:
        yield
        return
    saved = {"isolation_level": conn.isolation_level, "read_only": conn.read_only}
    conn.isolation_level, conn.read_only = psycopg.IsolationLevel.REPEATABLE_READ, True
    try:
        with conn.transaction():
            yield
    finally:
        _restore(conn, saved)


@contextlib.contextmanager
def one_statement(conn: psycopg.Connection):
    """``conn`` in autocommit for the block: for a lone read such as a token's lookup, which needs
    no transaction around it (a BEGIN and a COMMIT are two round trips of three)."""
    if conn.info.transaction_status != pq.TransactionStatus.IDLE:
        yield
        return
    saved = {"autocommit": conn.autocommit}
    conn.autocommit = True
    try:
        yield
    finally:
        _restore(conn, saved)


class NotAnswering(psycopg.OperationalError):
    """The server accepted a connection but did not answer a query in time: taken for down."""


def check_answering(conn: psycopg.Connection, seconds: float = ANSWER_TIMEOUT_SECONDS) -> None:
    """Runs an empty query on the idle ``conn`` and waits at most ``seconds`` for the server's
    answer (what ``ConnectionPool.check_connection`` does, with a bound): NotAnswering when none
    comes, psycopg.OperationalError when the answer is an error or the connection breaks. On
    either the connection is closed (nothing half read is left in it)."""
    if conn.closed or conn.pgconn.transaction_status != pq.TransactionStatus.IDLE:
        conn.close()
        raise psycopg.OperationalError("the connection is closed or not idle")
    pgconn, deadline = conn.pgconn, time.monotonic() + seconds
    with conn.lock:
        try:
            pgconn.send_query(b"")
            while pgconn.flush():  # the connection is non-blocking: 1 while the query is not all sent
                _wait_for(pgconn.socket, select.POLLOUT, deadline)
            errors = []
            while True:  # read to the end, errors or not; get_result would block while busy
                pgconn.consume_input()
                if pgconn.is_busy():
                    _wait_for(pgconn.socket, select.POLLIN, deadline)
                    continue
                result = pgconn.get_result()
                if result is None:
                    break
                if result.status not in (pq.ExecStatus.EMPTY_QUERY, pq.ExecStatus.COMMAND_OK):
                    errors.append(pq.error_message(result) or "the check query failed")
            if errors:
                raise psycopg.OperationalError(errors[0])
        except TimeoutError:
            conn.close()
            raise NotAnswering(f"the database server did not answer within {seconds:g} s") from None
        except (psycopg.Error, OSError) as exc:
            conn.close()
            raise psycopg.OperationalError(f"connection check failed: {exc}") from None


def _wait_for(fd: int, event: int, deadline: float) -> None:
    """Waits until ``fd`` is ready for ``event`` or ``deadline`` passes (TimeoutError). poll, not
    select: select cannot watch a descriptor of 1024 or more. Past the deadline it still looks once
    without waiting, so a thread scheduled late does not miss an answer already there."""
    poller = select.poll()
    poller.register(fd, event | select.POLLERR | select.POLLHUP)
    if not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
        raise TimeoutError


def connect(conninfo: str, **kwargs) -> psycopg.Connection:
    """A direct connection (not pooled) in autocommit, failing after ``CONNECT_TIMEOUT_SECONDS`` when
    the server does not answer: every administrative statement of the store opens one."""
    return psycopg.connect(conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS, **kwargs)


def check_server(conninfo: str) -> None:
    """Checks the rights and extensions the store needs; raises StartupError naming what is missing."""
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
            role = (
                named(conn)
                .execute(
                    "SELECT rolcreatedb OR rolsuper AS may_create, current_user AS name "
                    "FROM pg_roles WHERE rolname = current_user"
                )
                .fetchone()
            )
            if not role or not role.may_create:
                raise StartupError(
                    f"role {role.name if role else '?'} lacks CREATEDB: the store creates one database "
                    "per workspace (ALTER ROLE ... CREATEDB)"
                )
            ext = (
                named(conn)
                .execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")
                .fetchone()
            )
            if ext is None:
                raise StartupError("the pgvector extension is not installed on the server (need 0.8 or newer)")
            version = tuple(int(x) for x in ext.default_version.split(".")[:2])
            if version < MIN_PGVECTOR:
                raise StartupError(
                    f"pgvector {ext.default_version} is too old: iterative index scans need 0.8 or newer"
                )
    except psycopg.OperationalError as exc:
        raise StartupError(f"cannot connect to the database server: {exc}") from exc


class ServerHealth:
    """Whether the database server accepted the last connection attempt any pool (or the store's
    health probe, every 2 s) made: shared by every pool of one ``Databases``, which all connect to
    the same server. A refusal for another reason than a server away (a database that does not
    exist, say: libpq gives no SQLSTATE to tell them apart) is corrected by the next probe."""

    def __init__(self, name: str = "") -> None:
        self.name = name
        self._refused = threading.Event()

    @property
    def down(self) -> bool:
        """True from a refused connection attempt until the next one succeeds."""
        return self._refused.is_set()

    def answered(self) -> None:
        if self._refused.is_set():
            self._refused.clear()
            log.info("database server %r answers again", self.name)

    def refused(self) -> None:
        if not self._refused.is_set():
            self._refused.set()
            log.warning("database server %r is down: it refused or did not answer a connection", self.name)


def _missing_database(exc: psycopg.OperationalError, dbname: str | None) -> bool:
    """Whether a failed connection attempt was the server answering that the database does not
    exist. libpq gives a failed connection no SQLSTATE, so the server's message is read (English,
    as the embedded server and PostgreSQL's default lc_messages give it)."""
    return exc.sqlstate == MISSING_DATABASE or (bool(dbname) and f'database "{dbname}" does not exist' in str(exc))


def _tracked(health: ServerHealth, missing: threading.Event | None = None) -> type[psycopg.Connection]:
    """A connection class whose ``connect`` reports each attempt's outcome to ``health`` (the pools
    open every connection through it), and sets ``missing`` while the database does not exist (the
    server answered that: it is not down)."""

    class TrackedConnection(psycopg.Connection):
        @classmethod
        def connect(cls, *args, **kwargs):
            try:
                conn = super().connect(*args, **kwargs)
            except psycopg.OperationalError as exc:
                if _missing_database(
                    exc, kwargs.get("dbname") or conninfo_to_dict(args[0] if args else "").get("dbname")
                ):
                    if missing is not None:
                        missing.set()
                else:
                    health.refused()
                raise
            health.answered()
            if missing is not None:
                missing.clear()
            return conn

    return TrackedConnection


class MissingDatabase(psycopg.OperationalError):
    """A pool's database does not exist: it was dropped, or the workspace moved to another server.
    Raised before anything ran in it, so the call may be made again where the workspace is now."""


class DroppedDatabase(NotFound):
    """A workspace database this process dropped (deleted, or moved away from this server)."""


def session_lost(exc: BaseException) -> bool:
    """Whether ``exc`` is the loss of the connection itself, not a statement's error nor a pool's
    wait: the server ended the session (AdminShutdown, as a move ends every session of its source
    or a server shutting down ends all), or libpq found the connection gone, or could not make it,
    with no error of the server's to read (an OperationalError without SQLSTATE, such as "server
    closed the connection unexpectedly").
    What the session had open was rolled back; whether a COMMIT in flight took effect is unknown."""
    if isinstance(exc, psycopg.errors.AdminShutdown):
        return True
    return (
        isinstance(exc, psycopg.OperationalError)
        and not isinstance(exc, (PoolTimeout, MissingDatabase))
        and exc.sqlstate is None
    )


class Pool(ConnectionPool):
    """A psycopg_pool ``ConnectionPool`` that fails fast while the server is down.

    Connections are checked before use (``ConnectionPool.check_connection``: one dead after a
    server restart is replaced, not handed out), background reconnection gives up after
    ``RECONNECT_SECONDS``, and ``getconn`` waits at most ``POOL_WAIT_SECONDS`` (or the timeout
    asked), cut to ``DOWN_WAIT_SECONDS`` while ``health`` says the server is down. A call that gets
    no connection raises ``PoolTimeout``, which ``servicekit.errors`` maps to UNAVAILABLE.
    """

    def __init__(self, conninfo: str, *, health: ServerHealth, **kwargs) -> None:
        self.health = health
        self.missing = threading.Event()
        super().__init__(
            conninfo,
            connection_class=_tracked(health, self.missing),
            kwargs={"connect_timeout": CONNECT_TIMEOUT_SECONDS},
            check=self._check,
            timeout=POOL_WAIT_SECONDS,
            reconnect_timeout=RECONNECT_SECONDS,
            reconnect_failed=lambda pool: None if self.missing.is_set() else health.refused(),
            open=False,
            **kwargs,
        )

    def _check(self, conn: psycopg.Connection) -> None:
        """A connection is checked before use; one whose server does not answer in time marks the
        server down (its other calls then fail fast) and is discarded."""
        try:
            check_answering(conn)
        except NotAnswering:
            self.health.refused()
            raise
        self.health.answered()

    def getconn(self, timeout: float | None = None) -> psycopg.Connection:
        """A connection within ``timeout`` seconds (default ``POOL_WAIT_SECONDS``), at most
        ``DOWN_WAIT_SECONDS`` while the server is down; PoolTimeout otherwise."""
        budget = self.timeout if timeout is None else timeout
        start = time.monotonic()
        while True:
            if self.missing.is_set():
                raise MissingDatabase(f"the database of pool {self.name!r} does not exist")
            down = self.health.down
            left = (min(budget, DOWN_WAIT_SECONDS) if down else budget) - (time.monotonic() - start)
            if left <= 0:
                why = "the database server refused or did not answer" if down else "every connection is busy"
                raise PoolTimeout(
                    f"no connection from pool {self.name!r} after {time.monotonic() - start:.1f} s: {why}"
                )
            try:
                return super().getconn(min(left, WAIT_SLICE_SECONDS))
            except PoolTimeout:
                continue


class Databases:
    """The control-plane pool and a bounded LRU of workspace pools, over one or several PostgreSQL
    servers (docs/scaling.md, "Several database servers").

    ``servers`` names the other servers, each a libpq conninfo of any database on it; the control
    plane's own server is ``control_server``. A workspace row names its server (``""`` for the
    control plane's). Pools are keyed by (server, database) and each server has its own health, so
    a server that is down fails only its own workspaces' calls, fast (UNAVAILABLE)."""

    def __init__(
        self,
        control_conninfo: str,
        pool_max: int = 4,
        max_workspace_pools: int = 16,
        *,
        servers: dict[str, str] | None = None,
        control_server: str = "main",
    ) -> None:
        """Connections stay within ``pool_max * (max_workspace_pools + 1)`` (80 by default, under
        PostgreSQL's default 100): workspace pools open connections on demand, close idle ones
        after a minute, and the least recently used pool closes beyond ``max_workspace_pools``."""
        others = dict(servers or {})
        if control_server in others:
            raise StartupError(
                f"database server {control_server!r} is the control plane's own (DATABASE_URL): "
                "name it only there, or set RECALLATRON_CONTROL_SERVER to another name"
            )
        self.control_conninfo = control_conninfo
        self.control_server = control_server
        self.servers: dict[str, str] = {control_server: control_conninfo, **others}
        self.pool_max = pool_max
        self.max_workspace_pools = max_workspace_pools
        self.healths = {name: ServerHealth(name) for name in self.servers}
        self.health = self.healths[control_server]
        self.control = Pool(control_conninfo, health=self.health, min_size=1, max_size=pool_max, name="control")
        self._pools: OrderedDict[tuple[str, str], ConnectionPool] = OrderedDict()
        # Workspace databases this process dropped: never pooled again (a call authenticated before
        # the deletion would otherwise open a pool on a database that no longer exists).
        self._dropped: set[tuple[str, str]] = set()
        # Servers whose template and workspaces are migrated; one that was down at start is
        # prepared by the probe once it answers, and serves no workspace before.
        self._prepared: set[str] = set()
        self._prepare_locks = {name: threading.Lock() for name in self.servers}  # one server's never waits on another's
        self._lock = threading.Lock()
        POOLS.watch(self)

    def server_name(self, server: str) -> str:
        """The configured name of a workspace row's ``server`` (``""``: the control plane's)."""
        return server or self.control_server

    def open(self) -> None:
        """Checks the control plane's server, migrates the control plane, and prepares every server
        (its template and its workspaces migrated); a server other than the control plane's that
        cannot be prepared now is logged and prepared by ``probe`` when it answers."""
        check_server(self.control_conninfo)
        migrate(self.control_conninfo, "control")
        for name in self.servers:
            try:
                self._prepare(name)
            except (StartupError, psycopg.Error) as exc:
                if name == self.control_server:
                    raise
                log.warning("database server %r not prepared (%s); its workspaces wait for it", name, exc)
        self.control.open(wait=True, timeout=30)

    def _prepare(self, name: str) -> None:
        """Checks server ``name``, migrates its template and the workspace databases placed on it."""
        if name in self._prepared:  # without waiting on a preparation of it still running
            return
        with self._prepare_locks[name]:
            if name in self._prepared:
                return
            conninfo = self.servers[name]
            if name != self.control_server:
                check_server(conninfo)
            self._ensure_template(conninfo)
            with connect(self.control_conninfo) as conn:
                placed = named(conn).execute(
                    "SELECT db_name FROM workspace WHERE coalesce(server, %s) = %s ORDER BY created_at",
                    (self.control_server, name),
                )
                for ws in placed.fetchall():
                    migrate(_url(conninfo, ws.db_name), "workspace")  # existing workspaces catch up
            self._prepared.add(name)

    def pools(self) -> dict[str, list[ConnectionPool]]:
        """The pools by kind, ``{"control": [...], "workspace": [...]}`` (for metrics): a snapshot
        taken without the lock, which opening a pool holds for up to 30 s."""
        while True:
            try:
                return {"control": [self.control], "workspace": list(self._pools.values())}
            except RuntimeError:  # another thread opened or closed a pool during the copy
                continue

    def probe(self) -> None:
        """Opens a fresh connection to each server and runs ``SELECT 1`` (each outcome goes to that
        server's health), preparing a server that answers for the first time; raises
        psycopg.OperationalError when the control plane's server does not accept it."""
        for name, conninfo in self.servers.items():
            if name == self.control_server:
                continue
            try:
                self._answers(conninfo, self.healths[name])
                if name not in self._prepared:
                    self._prepare(name)
                    log.info("database server %r prepared", name)
            except Exception as exc:  # noqa: BLE001 - whatever it is, it is this server's, not the store's
                if not isinstance(exc, StartupError | psycopg.Error):
                    self.healths[name].refused()
                log.debug("database server %r: %s", name, exc)
        self._answers(self.control_conninfo, self.health)

    @staticmethod
    def _answers(conninfo: str, health: ServerHealth) -> None:
        """A fresh connection that the server answers within the bounds, each outcome told to
        ``health``; psycopg.OperationalError when it does not."""
        with _tracked(health).connect(conninfo, connect_timeout=CONNECT_TIMEOUT_SECONDS, autocommit=True) as conn:
            try:
                check_answering(conn)
            except psycopg.OperationalError:  # connected, but no answer or an error for one
                health.refused()
                raise

    def serving(self, server: str) -> bool:
        """Whether a workspace row's ``server`` is configured, prepared and not refusing connections."""
        name = self.server_name(server)
        return name in self._prepared and not self.healths[name].down

    def server_status(self) -> list[tuple[str, bool]]:
        """Each configured server's name and whether it serves (prepared and not refusing
        connections), the control plane's first."""
        return [(name, self.serving(name)) for name in self.servers]

    def close(self) -> None:
        """Closes every pool."""
        with self._lock:
            for pool in self._pools.values():
                pool.close()
            self._pools.clear()
        self.control.close()

    def _conninfo(self, server: str) -> str:
        name = self.server_name(server)
        if name not in self.servers:
            log.warning("a workspace is placed on database server %r, which is not configured", name)
            raise WorkspaceUnavailable("the workspace's database is unavailable; retry later")
        return self.servers[name]

    def _ensure_template(self, conninfo: str) -> None:
        with connect(conninfo) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (_TEMPLATE_LOCK_KEY,))
            try:
                exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (TEMPLATE_DB,)).fetchone()
                if not exists:
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEMPLATE_DB)))
                migrate(_url(conninfo, TEMPLATE_DB), "workspace")
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (_TEMPLATE_LOCK_KEY,))

    def create_workspace_db(self, db_name: str, server: str = "") -> None:
        """Creates a workspace database on ``server`` as a copy of its migrated template, then
        migrates it."""
        conninfo = self._conninfo(server)
        self._prepare(self.server_name(server))
        with connect(conninfo) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (_TEMPLATE_LOCK_KEY,))
            try:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        sql.Identifier(db_name), sql.Identifier(TEMPLATE_DB)
                    )
                )
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (_TEMPLATE_LOCK_KEY,))
        migrate(_url(conninfo, db_name), "workspace")

    def drop_workspace_db(self, db_name: str, server: str = "") -> None:
        """Drops a workspace database (if it exists) after closing this process's pool of it: from now
        on ``workspace(db_name, server)`` is NOT_FOUND here, and sessions still connected to it, of
        this process or another, are ended (``WITH (FORCE)``), so calls in flight in it fail at once."""
        key = (self.server_name(server), db_name)
        conninfo = self._conninfo(server)
        with self._lock:
            self._dropped.add(key)
            pool = self._pools.pop(key, None)
        if pool is not None:
            pool.close(timeout=2)  # its worker threads stop within it; 0 would leave them, warning
        with connect(conninfo) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db_name)))

    def recreated(self, db_name: str, server: str = "") -> None:
        """Notes that a database this process dropped exists again on ``server`` (a workspace moved
        back to a server it had left), so it may be pooled again."""
        with self._lock:
            self._dropped.discard((self.server_name(server), db_name))

    def workspace(self, db_name: str, server: str = "") -> ConnectionPool:
        """The pool of one workspace database on ``server`` (``""``: the control plane's), opened on
        first use; least recently used pools close. NOT_FOUND for a database this process dropped;
        UNAVAILABLE while its server is not configured or not yet prepared."""
        name = self.server_name(server)
        conninfo = self._conninfo(server)
        if name not in self._prepared:
            log.debug("database server %r is not prepared yet (down since the store started)", name)
            raise WorkspaceUnavailable("the workspace's database is unavailable; retry later")
        key = (name, db_name)
        with self._lock:
            if key in self._dropped:
                raise DroppedDatabase("workspace not found (it was deleted)")
            pool = self._pools.get(key)
            if pool is not None:
                self._pools.move_to_end(key)
                return pool
            pool = Pool(
                _url(conninfo, db_name),
                health=self.healths[name],
                min_size=0,
                max_size=self.pool_max,
                max_idle=60.0,
                configure=_configure,
                name=db_name,
            )
            pool.open(wait=True, timeout=30)
            self._pools[key] = pool
            while len(self._pools) > self.max_workspace_pools:
                _, old = self._pools.popitem(last=False)
                old.close()
            return pool


class WorkspaceHandle:
    """One workspace database, its pool looked up in ``Databases`` at each ``connection()``: for a
    holder that keeps it across a wait or many batches (a removal waiting for its turn, a drain).
    The least recently used pool is closed when others open, so a pool object held that long could
    be closed under its holder (a removal failed UNAVAILABLE, "the pool is already closed"); the
    handle opens it again instead."""

    def __init__(self, dbs: Databases, db_name: str, server: str = "") -> None:
        self.dbs, self.db_name, self.server = dbs, db_name, server

    def connection(self, timeout: float | None = None):
        """A connection of the database's current pool (``ConnectionPool.connection``)."""
        return self.dbs.workspace(self.db_name, self.server).connection(timeout=timeout)


def new_db_name(workspace_id: uuid.UUID) -> str:
    """Database name of a workspace: ``recallatron_ws_<32 hex>``."""
    return f"recallatron_ws_{workspace_id.hex}"
