"""The whole system started as a user starts it: ``recallatron up`` in a data folder of its own, on
ports of its own, read back once it printed its ready line. The tests, the bench and the chaos run
start it through here.

    with system.up(tmp / "home") as sys_:  # every port a free one
        gw = client.Gateway(sys_.gateway, sys_.operator_token())

``System.start`` returns the running system (``stop`` it yourself); ``up`` stops it on leaving. ``up``'s
output is a pipe: the lines up to the ready line are in ``System.output``; ``drain`` keeps reading
the rest (into ``output`` and, if given, a file), else it is left for the caller to read.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from psycopg.conninfo import make_conninfo

from client.credential import Metadata, bearer
from servicekit.embedded_pg import CONTROL_DB

SERVICES = ("gateway", "store", "embed", "rank")
READY = "recallatron ready"
ROOT = Path(__file__).resolve().parent.parent


def _ephemeral_low() -> int:
    """The lowest port the kernel hands to outgoing connections (Linux's default when unreadable)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_handed_out: set[int] = set()
_handed_lock = threading.Lock()


def free_port() -> int:
    """A loopback port nothing listens on now, for a service started a moment later.

    Not the kernel's pick (``bind(0)``): that comes from the ephemeral range, where every outgoing
    connection (to PostgreSQL, between services) also takes its source port, so one could take the
    port before the service binds it. These come from below that range instead, each test worker
    (``PYTEST_XDIST_WORKER``) from a slice of its own so that two workers never race for one, and
    never the same port twice in one process."""
    low, high = 20000, _ephemeral_low()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")
    index, count = (int(worker), int(workers)) if worker.isdigit() and workers.isdigit() else (0, 1)
    count = max(count, 1)
    width = (high - low) // count
    if width < 256:  # a host whose ephemeral range starts low, or very many workers: the whole range
        low, high = 20000, max(high, 32768)
        width, index = high - low, 0
    start = low + width * (index % count)
    with _handed_lock:
        for _ in range(200):
            port = start + random.randrange(width)
            if port in _handed_out:
                continue
            try:
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            _handed_out.add(port)
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def free_addrs() -> dict[str, str]:
    """A free loopback gRPC address for each service."""
    return {name: f"127.0.0.1:{free_port()}" for name in SERVICES}


@dataclass
class System:
    """A running ``recallatron up``: its data folder, process and environment, each service's gRPC
    address and Prometheus port (0: a free one the service picks), the screen's ``HOST:PORT``, and
    the seconds from start to its ready line."""

    home: Path
    proc: subprocess.Popen
    env: dict[str, str]
    addrs: dict[str, str]
    metrics: dict[str, int]
    web: str
    startup_seconds: float = 0.0
    output: list[str] = field(default_factory=list)

    @property
    def gateway(self) -> str:
        """The gateway's address."""
        return self.addrs["gateway"]

    def operator_token(self) -> str:
        """The operator credential ``up`` wrote in the data folder."""
        return (self.home / "operator-token").read_text().strip()

    def operator(self) -> Metadata:
        """Bearer metadata with the operator credential."""
        return bearer(self.operator_token())

    @classmethod
    def start(
        cls,
        home: Path,
        env: Mapping[str, str] | None = None,
        *,
        addrs: Mapping[str, str] | None = None,
        metrics: Mapping[str, int] | None = None,
        web: str | None = None,
        environ: Mapping[str, str] = os.environ,
        timeout: float = 600.0,
        preexec_fn: Callable[[], None] | None = None,
        args: Sequence[str] = (),
    ) -> System:
        """Starts ``python -m cli.main up`` with ``RECALLATRON_HOME=home`` (created) and returns once it
        printed its ready line.

        Its environment is ``environ`` without DATABASE_URL (so ``up`` runs its own embedded PostgreSQL
        in ``home``) and then ``env``; each service listens on ``addrs`` (default: free loopback ports)
        with its metrics on ``metrics`` (default 0, a free port), the screen on ``web`` (default: a free
        port); ``args`` go after ``up`` (``--embedded-servers 2``, say). RuntimeError with ``up``'s last
        lines when it exits, or is not ready within ``timeout`` seconds (checked at each line it prints)."""
        home = home.resolve()
        home.mkdir(parents=True, exist_ok=True)
        addrs = dict(addrs or free_addrs())
        metrics = dict(metrics or dict.fromkeys(SERVICES, 0))
        web = web or f"127.0.0.1:{free_port()}"
        full = {k: v for k, v in environ.items() if k != "DATABASE_URL"}
        full.update(RECALLATRON_HOME=str(home), PYTHONUNBUFFERED="1", RECALLATRON_WEB_ADDR=web)
        for name in SERVICES:
            full[f"RECALLATRON_{name.upper()}_ADDR"] = addrs[name]
            full[f"RECALLATRON_{name.upper()}_METRICS_PORT"] = str(metrics[name])
        full.update(env or {})
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "up", *args],
            cwd=ROOT,
            env=full,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=preexec_fn,
        )
        output: list[str] = []
        for line in proc.stdout:
            output.append(line.rstrip())
            if READY in line or time.monotonic() > started + timeout:
                break
        running = cls(home, proc, full, addrs, metrics, web, time.monotonic() - started, output)
        if not output or READY not in output[-1]:
            status = running.stop(60)
            raise RuntimeError(f"`recallatron up` was not ready (exit status {status}):\n" + "\n".join(output[-40:]))
        return running

    def pid(self, name: str) -> int:
        """The process id of a service (``up`` writes ``<home>/run/NAME.pid``) or, for ``postgres``,
        of the embedded server's postmaster (the first line of its postmaster.pid)."""
        path = self.home / "pg" / "postmaster.pid" if name == "postgres" else self.home / "run" / f"{name}.pid"
        return int(path.read_text().split("\n", 1)[0])

    def conninfo(self, dbname: str = CONTROL_DB) -> str:
        """A libpq conninfo for one database of the embedded server (its socket folder and port from
        postmaster.pid)."""
        lines = (self.home / "pg" / "postmaster.pid").read_text().split("\n")
        return make_conninfo(host=lines[4], port=lines[3], user="postgres", dbname=dbname)

    def drain(self, log: Path | None = None) -> None:
        """Reads the rest of ``up``'s output in a daemon thread, into ``output`` and appended to ``log``."""

        def read() -> None:
            with open(log or os.devnull, "a") as sink:
                for line in self.proc.stdout:
                    self.output.append(line.rstrip())
                    sink.write(line)
                    sink.flush()

        threading.Thread(target=read, daemon=True).start()

    def stop(self, timeout: float = 90.0) -> int:
        """SIGTERM to ``up`` (it stops the services and PostgreSQL), SIGKILL after ``timeout``
        seconds; returns its exit status."""
        return terminate(self.proc, timeout)


def terminate(proc: subprocess.Popen, timeout: float) -> int:
    """SIGTERM to ``proc`` if it still runs, SIGKILL after ``timeout`` seconds; its exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


@contextmanager
def up(home: Path, env: Mapping[str, str] | None = None, **options) -> Iterator[System]:
    """``System.start`` (same arguments), yields the system, and stops it on leaving unless it has exited."""
    running = System.start(home, env, **options)
    try:
        yield running
    finally:
        running.stop()
