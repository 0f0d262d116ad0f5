"""A `recallatron up` of the chaos run's own: its own data folder and free ports, and the process
ids of the parts to kill (the services' from ``<home>/run/NAME.pid``, PostgreSQL's from the first
line of ``<home>/pg/postmaster.pid``)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psycopg

from client.system import System
from servicekit import clients
from servicekit.signals import die_with_parent

TARGETS = ("store", "gateway", "embed", "postgres")
READY_SECONDS = 600.0  # first start: the embed service loads MiniLM on a shared, loaded machine


def wait_for(condition, timeout: float, what: str, poll: float = 0.2) -> float:
    """Polls ``condition()`` until true; returns the monotonic time it became true. TimeoutError
    naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return time.monotonic()
        time.sleep(poll)
    raise TimeoutError(f"{what} did not happen within {timeout:.0f} s")


class UpStack(System):
    """``recallatron up`` (``client.system``) in ``home`` on free ports, none of the caller's
    RECALLATRON_ settings, until ``stop``; its output goes to ``home/up.log``."""

    @classmethod
    def start(cls, home: Path) -> UpStack:
        """Starts it and returns once it is ready; RuntimeError with its last lines if it exits first."""
        environ = {k: v for k, v in os.environ.items() if not k.startswith("RECALLATRON_")}
        stack = super().start(
            home,
            {"HF_HUB_OFFLINE": "1"},
            environ=environ,
            timeout=READY_SECONDS,
            preexec_fn=die_with_parent,  # a dying chaos run takes its stack down
        )
        stack.log_path.write_text("".join(f"{line}\n" for line in stack.output))
        stack.drain(stack.log_path)
        return stack

    @property
    def log_path(self) -> Path:
        return self.home / "up.log"

    def kill(self, target: str) -> tuple[int, float]:
        """``kill -9`` of a target; returns its pid and the monotonic time of the kill."""
        pid = self.pid(target)
        os.kill(pid, signal.SIGKILL)
        return pid, time.monotonic()

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
