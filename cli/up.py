"""``recallatron up``: the whole system locally, each service its own process, supervised.

Starts the embedded PostgreSQL unless ``DATABASE_URL`` is set, writes the operator credential into
the data folder (mode 0600, never logged), starts ``recallatron serve NAME`` for the four services
and ``recallatron web`` (the curation screen, on ``RECALLATRON_WEB_ADDR``, 127.0.0.1:8080 by
default), prints one line containing ``ready`` once the services answer SERVING and the screen
answers, restarts a process that dies (backoff
1 s doubling to 30 s, back to 1 s once it has run ``STABLE_SECONDS``) and the embedded PostgreSQL
when it dies (``kill -9`` included: its crash recovery brings back every committed transaction; the
store's pools reconnect on their own), and stops everything cleanly on SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from cli.serve import metrics_variable
from servicekit import clients
from servicekit.settings import Settings, host_port
from servicekit.signals import die_with_parent, stop_on_signals

if TYPE_CHECKING:
    from servicekit.embedded_pg import EmbeddedPostgres

ORDER = ("rank", "embed", "store", "gateway")
# The web screen is one more child, started after the services and stopped before them: it only
# calls the gateway.
WEB = "web"
CHILDREN = (*ORDER, WEB)
READY_TIMEOUT_SECONDS = 300
BACKOFF_START, BACKOFF_MAX = 1.0, 30.0
# A process that ran this long before it died restarts after BACKOFF_START again: only a process
# that keeps dying right after its start waits longer and longer.
STABLE_SECONDS = 10.0
# Each embedded server is a postmaster with its own shared memory: a handful is what one machine
# is for (trying several servers out, and the tests).
MOST_EMBEDDED_SERVERS = 8


def ensure_operator_token(path: Path) -> None:
    """Creates the operator credential file (0600) unless it exists."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("rco_" + secrets.token_urlsafe(32) + "\n")


class Supervisor:
    """Runs and restarts the service processes."""

    def __init__(
        self,
        settings: Settings,
        env: dict[str, str],
        stopping: threading.Event,
        pgs: list[EmbeddedPostgres] | None = None,
    ) -> None:
        self.settings, self.env, self.stopping, self.pgs = settings, env, stopping, pgs or []
        self.logs = settings.home / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.run_dir = settings.home / "run"
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen] = {}
        self.started: dict[str, float] = {}
        self.backoff = {name: BACKOFF_START for name in CHILDREN}

    def spawn(self, name: str) -> None:
        """Starts ``recallatron serve NAME`` (``recallatron web --gateway <gateway>`` for the screen); log
        (JSON lines, appended) in <home>/logs/NAME.log, pid in <home>/run/NAME.pid."""
        log = open(self.logs / f"{name}.log", "ab")
        command = ["web", "--gateway", self.addr("gateway")] if name == WEB else ["serve", name]
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", *command],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        self.procs[name] = proc
        self.started[name] = time.monotonic()
        (self.run_dir / f"{name}.pid").write_text(f"{proc.pid}\n")

    def addr(self, name: str) -> str:
        """The dialable address of a service."""
        addr = getattr(self.settings, f"{name}_addr")
        return addr.replace("0.0.0.0", "127.0.0.1").replace("[::]", "127.0.0.1")

    def web_answers(self) -> bool:
        """Whether the screen answers its /healthz (it calls nothing behind it)."""
        host, port = host_port(self.settings.web_addr)
        host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        try:
            with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=2) as resp:
                return resp.status == 200
        except OSError:
            return False

    def wait_ready(self) -> bool:
        """Waits until every service answers SERVING and the screen answers; False on timeout, stop, or
        a process that exits."""
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        channels = {n: clients.channel(self.addr(n)) for n in ORDER}
        try:
            while time.monotonic() < deadline and not self.stopping.is_set():
                for name, proc in self.procs.items():
                    if proc.poll() is not None:
                        print(
                            f"recallatron: {name} exited with status {proc.returncode} during start-up"
                            f"{self.last_words(name)}; see {self.logs / (name + '.log')}",
                            file=sys.stderr,
                            flush=True,
                        )
                        return False
                if all(clients.is_serving(ch) for ch in channels.values()) and self.web_answers():
                    return True
                self.stopping.wait(0.5)
            return False
        finally:
            for ch in channels.values():
                ch.close()

    def last_words(self, name: str) -> str:
        """``: <the last line of NAME's log>``, or nothing: a child that refuses to start says why on
        its last line (a port in use, a bad setting), which the user should not have to go and find."""
        try:
            with open(self.logs / f"{name}.log", "rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - 4096))
                lines = log.read().decode("utf-8", "replace").strip().splitlines()
        except OSError:
            return ""
        return f": {lines[-1].strip()}" if lines else ""

    def watch(self) -> None:
        """Restarts the embedded PostgreSQL and dead processes (with backoff) until asked to stop."""
        while not self.stopping.wait(1.0):
            for pg in self.pgs:
                if not pg.running():
                    self.restart_postgres(pg)
            for name, proc in list(self.procs.items()):
                if proc.poll() is None:
                    continue
                if time.monotonic() - self.started[name] >= STABLE_SECONDS:
                    self.backoff[name] = BACKOFF_START
                delay = self.backoff[name]
                print(f"recallatron: {name} exited ({proc.returncode}); restarting in {delay:.0f}s", flush=True)
                if self.stopping.wait(delay):
                    return
                self.backoff[name] = min(delay * 2, BACKOFF_MAX)
                self.spawn(name)

    def restart_postgres(self, pg: EmbeddedPostgres) -> None:
        """Starts an embedded server again (the services keep running and reconnect); a failure is
        printed and retried on the next round."""
        print(f"recallatron: PostgreSQL in {pg.data_dir} exited; restarting it (crash recovery)", flush=True)
        t0 = time.monotonic()
        try:
            pg.restart()
        except Exception as exc:  # noqa: BLE001 - reported, and tried again a second later
            print(f"recallatron: PostgreSQL did not restart: {exc}; see {pg.data_dir / 'log'}", flush=True)
            return
        print(f"recallatron: PostgreSQL back after {time.monotonic() - t0:.1f}s", flush=True)

    def stop(self) -> None:
        """SIGTERM to each process in turn, the screen first, then the gateway, each waited for (SIGKILL
        after its grace period and 5 s more), so the calls a service lets finish still find the
        services behind it."""
        self.stopping.set()
        for name in reversed(CHILDREN):
            proc = self.procs.get(name)
            if proc is None:
                continue
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=self.settings.shutdown_grace_seconds + 5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _host(host: str) -> str:
    """A configured host as a socket takes it: IPv6 brackets stripped, none meaning the loopback."""
    return host.strip("[]") or "127.0.0.1"


def _listeners(settings: Settings) -> list[tuple[str, str, str, int]]:
    """Every port ``up`` starts something on: (what, the variable that sets it, host, port), the gRPC
    addresses and the screen's first, then each service's metrics port. A wildcard host is dialled
    on the loopback."""
    out = []
    for name in CHILDREN:
        host, _, port = getattr(settings, f"{name}_addr").rpartition(":")
        out.append((name, f"RECALLATRON_{name.upper()}_ADDR", _host(host), int(port)))
    for name in ORDER:
        out.append(
            (f"{name} metrics", metrics_variable(name), _host(settings.metrics_addr), settings.metrics_port(name))
        )
    return [(what, var, "127.0.0.1" if host in ("0.0.0.0", "::") else host, port) for what, var, host, port in out]


def busy_ports(settings: Settings) -> list[str]:
    """The configured ports something already listens on (another stack, say), each with the variable
    that sets it; a port 0 is never busy (``choose_ports`` picks a free one)."""
    busy = []
    for what, variable, host, port in _listeners(settings):
        if port == 0:
            continue
        try:
            with socket.create_connection((host, port), timeout=0.5):
                busy.append(f"{what} ({host}:{port}; {variable})")
        except OSError:
            continue
    return busy


def _free_port(host: str) -> int:
    """A port on ``host`` nothing listens on now (the kernel's pick)."""
    family, kind, _, _, sockaddr = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0]
    with socket.socket(family, kind) as sock:
        sock.bind(sockaddr)
        return sock.getsockname()[1]


def choose_ports(settings: Settings) -> tuple[Settings, dict[str, str], list[str]]:
    """Every gRPC or metrics port set to 0 made a free one here, before any child starts: ``up`` must
    dial the services and say where they are, and a child that picked its own port would keep it to
    itself (in its log) and take another at each restart, losing its Prometheus scrape. Returns the
    settings with those ports, the variables that pass them to the children, and a line each for
    the user. The port is free when chosen and bound a moment later by its child: the kernel hands
    out ephemeral ports in turn, and should another process take it meanwhile, the child stops with
    the message naming the port and the variable (``cli.serve.start_metrics``)."""
    update, env, said = {}, {}, []
    for name in ORDER:
        host, _, port = getattr(settings, f"{name}_addr").rpartition(":")
        if int(port) == 0:
            addr = f"{host}:{_free_port(_host(host))}"
            update[f"{name}_addr"] = env[f"RECALLATRON_{name.upper()}_ADDR"] = addr
            said.append(f"{name} {addr} (RECALLATRON_{name.upper()}_ADDR)")
        if settings.metrics_port(name) == 0:
            update[f"{name}_metrics_port"] = chosen = _free_port(_host(settings.metrics_addr))
            env[metrics_variable(name)] = str(chosen)
            said.append(f"{name} metrics {settings.metrics_addr}:{chosen} ({metrics_variable(name)})")
    return settings.model_copy(update=update), env, said


def embedded_folder(home: Path, k: int) -> Path:
    """The data folder of embedded server ``pg<k>``: ``pg`` for the first (as with one server), then
    ``pg2``, ``pg3`` ..."""
    return home / ("pg" if k == 1 else f"pg{k}")


def run(settings: Settings, embedded_servers: int = 1) -> int:
    """Brings the system up and blocks until SIGTERM or Ctrl-C; returns the exit status."""
    if embedded_servers > 1 and settings.database_url:
        print(
            "recallatron: --embedded-servers starts embedded PostgreSQL servers, but DATABASE_URL is set; "
            "unset it, or name your own servers in RECALLATRON_DATABASE_SERVERS (docs/scaling.md)",
            file=sys.stderr,
            flush=True,
        )
        return 2
    stop = stop_on_signals()  # servicekit.signals: the handler takes no lock
    busy = busy_ports(settings)
    if busy:
        print(
            f"recallatron: already in use: {', '.join(busy)}. Is another `recallatron up` running? "
            "Stop it, or set the variables named to other ports (a service's or metrics port 0: one `up` chooses).",
            file=sys.stderr,
            flush=True,
        )
        return 1
    settings, chosen, said = choose_ports(settings)
    if said:
        print(f"recallatron: ports chosen for those set to 0: {', '.join(said)}", flush=True)
    settings.home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ) | chosen
    env["RECALLATRON_HOME"] = str(settings.home)  # absolute (servicekit.settings)
    pgs = []
    if not settings.database_url:
        from servicekit.embedded_pg import EmbeddedPostgres

        # Named pg1..pgN, pg1 holding the control plane (docs/scaling.md). Servers an earlier run
        # started are started again, so the workspaces placed on them stay reachable.
        asked = embedded_servers
        while embedded_folder(settings.home, embedded_servers + 1).is_dir():
            embedded_servers += 1
        if embedded_servers > asked:
            extra = f"pg{asked + 1}" + (f"..pg{embedded_servers}" if embedded_servers > asked + 1 else "")
            print(
                f"recallatron: {embedded_servers} embedded PostgreSQL servers, not {asked}: {extra} in "
                f"{settings.home} started by an earlier run (they may hold workspaces) start too; move their "
                "workspaces away before removing a server's folder",
                flush=True,
            )
        pgs = [EmbeddedPostgres(embedded_folder(settings.home, k)) for k in range(1, embedded_servers + 1)]
        env["DATABASE_URL"] = pgs[0].control_url
        env["RECALLATRON_CONTROL_SERVER"] = "pg1"
        env["RECALLATRON_DATABASE_SERVERS"] = json.dumps(
            {f"pg{k}": pgs[k - 1].control_url for k in range(2, len(pgs) + 1)}
        )
        env.pop("RECALLATRON_DATABASE_SERVERS_FILE", None)
        where = f"embedded PostgreSQL in {settings.home / 'pg'}"
        if len(pgs) > 1:
            where = f"{len(pgs)} embedded PostgreSQL servers pg1..pg{len(pgs)} in {settings.home}"
    else:
        where = "DATABASE_URL"
    ensure_operator_token(settings.operator_token_path)
    env["RECALLATRON_OPERATOR_TOKEN_FILE"] = str(settings.operator_token_path)
    sup = Supervisor(settings, env, stop, pgs)
    status = 0
    try:
        for name in CHILDREN:
            sup.spawn(name)
        if sup.wait_ready():
            metrics = ", ".join(f"{name} {settings.metrics_port(name)}" for name in ORDER)
            print(
                f"recallatron ready: gateway on {settings.gateway_addr}, web screen on "
                f"http://{settings.web_addr}/, metrics on {settings.metrics_addr} ports {metrics}, "
                f"database: {where}, operator token in {settings.operator_token_path}",
                flush=True,
            )
            watcher = threading.Thread(target=sup.watch, daemon=True)
            watcher.start()
            # Wait in 1 s steps, not forever: the kernel may deliver SIGTERM to another thread (gRPC's),
            # and CPython runs the Python handler only when the main thread next runs bytecode; a main
            # thread blocked in one endless wait never does, and the service never stops.
            while not stop.wait(1.0):
                pass
        elif not stop.is_set():
            print(f"recallatron: services did not become ready; logs in {sup.logs}", file=sys.stderr, flush=True)
            status = 1
    finally:
        sup.stop()
        for pg in pgs:
            pg.stop()
        print("recallatron stopped", flush=True)
    return status


def up_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron up``."""
    up = sub.add_parser(
        "up", help="start the embedded database, all four services and the web screen; Ctrl-C stops them"
    )
    up.add_argument(
        "--embedded-servers",
        type=_server_count,
        default=1,
        metavar="N",
        help="start N embedded PostgreSQL servers, pg1..pgN (pg1 holds the control plane), and spread workspaces "
        "over them (docs/scaling.md); default 1",
    )
    up.set_defaults(handler=lambda args, settings: run(settings, args.embedded_servers))


def _server_count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MOST_EMBEDDED_SERVERS:
        raise argparse.ArgumentTypeError(f"expected a whole number 1..{MOST_EMBEDDED_SERVERS}, got {text!r}")
    return int(text)
