"""A `recallatron up` of the chaos run's own: its own data folder and free ports, and the process
ids of the parts to kill (the services' from ``<home>/run/NAME.pid``, PostgreSQL's from the first
line of ``<home>/pg/postmaster.pid``)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

from cli.up import die_with_parent
from servicekit import clients
from servicekit.embedded_pg import CONTROL_DB

REPO = Path(__file__).resolve().parents[2]
SERVICES = ("gateway", "store", "embed", "rank")
TARGETS = ("store", "gateway", "embed", "postgres")
READY_SECONDS = 600.0  # first start: the embed service loads MiniLM on a shared, loaded machine
STOP_SECONDS = 90.0


def free_port() -> int:
    """A loopback port nothing listens on now (the kernel's pick)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(condition, timeout: float, what: str, poll: float = 0.2) -> float:
    """Polls ``condition()`` until true; returns the monotonic time it became true. TimeoutError
    naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return time.monotonic()
        time.sleep(poll)
    raise TimeoutError(f"{what} did not happen within {timeout:.0f} s")


class UpStack:
    """Runs ``python -m cli.main up`` in ``home`` until ``stop``; its output goes to ``home/up.log``."""

    def __init__(self, home: Path) -> None:
        self.home = home.resolve()
        self.home.mkdir(parents=True, exist_ok=True)
        self.addrs = {name: f"127.0.0.1:{free_port()}" for name in SERVICES}
        env = {k: v for k, v in os.environ.items() if not k.startswith("RECALLATRON_") and k != "DATABASE_URL"}
        env.update({f"RECALLATRON_{name.upper()}_ADDR": addr for name, addr in self.addrs.items()})
        env.update({f"RECALLATRON_{name.upper()}_METRICS_PORT": "0" for name in SERVICES})
        env["RECALLATRON_WEB_ADDR"] = f"127.0.0.1:{free_port()}"  # the screen `up` starts too
        env.update(RECALLATRON_HOME=str(self.home), HF_HUB_OFFLINE="1")
        self.log_path = self.home / "up.log"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cli.main", "up"],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,  # a dying chaos run takes its stack down
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = READY_SECONDS) -> None:
        """Blocks until ``up`` printed its ready line; RuntimeError with the log if it exits first."""

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"recallatron up exited ({self.proc.returncode}):\n{self.log()[-4000:]}")
            return "recallatron ready" in self.log()

        wait_for(ready, timeout, "recallatron up ready", poll=0.5)

    def operator_token(self) -> str:
        return (self.home / "operator-token").read_text().strip()

    def pid(self, target: str) -> int:
        """The process id of a service or of the postmaster, as ``up`` and PostgreSQL wrote it."""
        path = self.home / "pg" / "postmaster.pid" if target == "postgres" else self.home / "run" / f"{target}.pid"
        return int(path.read_text().split("\n", 1)[0])

    def kill(self, target: str) -> tuple[int, float]:
        """``kill -9`` of a target; returns its pid and the monotonic time of the kill."""
        pid = self.pid(target)
        os.kill(pid, signal.SIGKILL)
        return pid, time.monotonic()

    def conninfo(self, dbname: str = CONTROL_DB) -> str:
        """A libpq conninfo for the embedded server (its socket folder and port from postmaster.pid)."""
        lines = (self.home / "pg" / "postmaster.pid").read_text().split("\n")
        return make_conninfo(host=lines[4], port=lines[3], user="postgres", dbname=dbname)

    def back(self, target: str, killed_pid: int) -> bool:
        """Whether a killed target runs again: a new process that answers (a service SERVING on its
        health check, PostgreSQL a query)."""
        try:
            if self.pid(target) == killed_pid:
                return False
            if target == "postgres":
                with psycopg.connect(self.conninfo(), connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return True
        except (OSError, ValueError, IndexError, psycopg.Error):
            return False
        channel = clients.channel(self.addrs[target])
        try:
            return clients.is_serving(channel)
        finally:
            channel.close()

    def stop(self) -> int:
        """SIGTERM to ``up`` (which stops the services and PostgreSQL); SIGKILL after STOP_SECONDS."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
