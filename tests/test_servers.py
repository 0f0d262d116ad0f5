"""Workspaces over several PostgreSQL servers (issue 26, item 1; docs/scaling.md, "Several database
servers"), against two real embedded servers on one machine: placement by the documented rule or
by name, every call of a workspace going to its own server, a server that is down failing only its
own workspaces' calls (UNAVAILABLE, naming nothing internal) and coming back, status per server,
and a server that is down when the store starts."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import grpc
import psutil
import psycopg
import pytest
from cli_runner import recallatron
from conftest import code_of, services
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from trust_program import EXAMPLES, grant_sets, leak_example, ops, outsider_name, property_test

from client import system
from client.system import ROOT
from servicekit import settings
from servicekit.embedded_pg import EmbeddedPostgres
from servicekit.errors import WorkspaceUnavailable, status_proto_for
from servicekit.settings import Settings
from store_service.control.plane import ControlPlane
from store_service.database import TEMPLATE_DB, Databases

LEX = m.RECALL_MODE_LEXICAL
# What a call whose database server is down is told: no server, database, host or socket.
GENERIC = {"the workspace's database is unavailable; retry later"}


def wait_for(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def kill(pg: EmbeddedPostgres) -> None:
    """Stops a server the hard way (as a crash or a lost machine would)."""
    os.kill(pg.pid(), signal.SIGKILL)
    wait_for(lambda: not pg.running(), 60, "the postmaster gone")


def stop(pg: EmbeddedPostgres) -> None:
    """Stops a server a failed test may have left killed."""
    if pg.running():
        pg.stop()


def databases_on(pg: EmbeddedPostgres) -> set[str]:
    """The workspace databases on a server (its template left out)."""
    with psycopg.connect(pg.control_url, autocommit=True) as conn:
        names = {r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'recallatron_ws_%'")}
    return names - {TEMPLATE_DB}


def servers_of(stack) -> dict[str, tuple[bool, int, bool]]:
    status = stack.admin.GetStatus(g.GetStatusRequest(), metadata=stack.op())
    return {s.name: (s.serving, s.workspaces, s.control_plane) for s in status.database_servers}


def summary(stack, ws: str) -> m.WorkspaceSummary:
    return stack.admin.GetWorkspace(g.GetWorkspaceRequest(workspace_id=ws), metadata=stack.op()).workspace


@contextmanager
def two_servers_up(folder: Path, encoder):
    """Servers pg1 (the control plane's) and pg2, and the four services over them."""
    first, second = EmbeddedPostgres(folder / "pg1"), EmbeddedPostgres(folder / "pg2")
    try:
        with services(
            first.control_url, encoder, folder, servers={"pg2": second.control_url}, control_server="pg1"
        ) as stack:
            yield stack, first, second
    finally:
        for pg in (second, first):
            stop(pg)


@pytest.fixture(scope="module")
def two_servers(tmp_path_factory, encoder):
    with two_servers_up(tmp_path_factory.mktemp("servers"), encoder) as up:
        yield up


@pytest.fixture(scope="module")
def two_servers_for_properties(tmp_path_factory, encoder):
    """Two servers of the property test's own: property tests run first, and the placement test
    counts workspaces from none."""
    with two_servers_up(tmp_path_factory.mktemp("property-servers"), encoder) as up:
        yield up


@pytest.mark.cluster
def test_workspaces_are_placed_on_both_servers_and_a_down_one_fails_only_its_own(two_servers):
    stack, first, second = two_servers
    assert servers_of(stack) == {"pg1": (True, 0, True), "pg2": (True, 0, False)}
    # The rule: the serving server with the fewest workspaces, the first configured on a tie.
    a = stack.workspace("on pg1")
    b = stack.workspace("on pg2")
    c = stack.admin.CreateWorkspace(
        g.CreateWorkspaceRequest(name="asked for pg2", server="pg2"), metadata=stack.op()
    ).workspace_id
    d = stack.workspace("on pg1 again")  # pg1 has 1, pg2 has 2
    assert [summary(stack, w).server for w in (a, b, c, d)] == ["pg1", "pg2", "pg2", "pg1"]
    assert servers_of(stack) == {"pg1": (True, 2, True), "pg2": (True, 2, False)}
    db = {w: f"recallatron_ws_{w.replace('-', '')}" for w in (a, b, c, d)}
    assert databases_on(first) == {db[a], db[d]} and databases_on(second) == {db[b], db[c]}
    listed = stack.admin.ListWorkspaces(g.ListWorkspacesRequest(), metadata=stack.op()).workspaces
    assert {w.id: w.server for w in listed} == {a: "pg1", b: "pg2", c: "pg2", d: "pg1"}

    # Bad input: a server not configured, or spelled otherwise, is refused naming those there are.
    for name in ("pg3", "PG2", " pg2", "pg1; DROP DATABASE x"):
        with pytest.raises(grpc.RpcError) as err:
            stack.admin.CreateWorkspace(g.CreateWorkspaceRequest(name=f"bad {name}", server=name), metadata=stack.op())
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "configured: pg1, pg2" in err.value.details()
    assert servers_of(stack)["pg2"][1] == 2  # nothing was made

    # Each workspace's calls go to its own server: writes, recall (both arms once embedded), reads.
    on_a, on_b = stack.member(a), stack.member(b)
    note_a = on_a.remember("The ferry to the island leaves at seven.")
    note_b = on_b.remember("The lighthouse keeper changes shifts at noon.")
    stack.wait_backlog_empty()
    for member, note, words in ((on_a, note_a, "ferry island"), (on_b, note_b, "lighthouse keeper")):
        hits = member.recall(words).items
        assert [h.memory.id for h in hits] == [note.id] and hits[0].cosine > 0.3
    assert [h.memory.id for h in on_a.recall("lighthouse keeper", mode=LEX).items] == []  # no leak across

    # pg2 stops: its workspaces' calls fail UNAVAILABLE, fast and naming nothing internal; pg1's answer.
    kill(second)
    start = time.monotonic()
    for call in (
        lambda: on_b.recall("lighthouse", mode=LEX),
        lambda: on_b.read(note_b.id),
        lambda: on_b.remember("Written while its server is down."),
    ):
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE, err.value
        assert err.value.details() in GENERIC, err.value.details()
    assert time.monotonic() - start < 15
    assert [h.memory.id for h in on_a.recall("ferry island").items] == [note_a.id]
    kept = on_a.remember("Written on pg1 while pg2 is down.")
    assert on_a.read(kept.id).body == "Written on pg1 while pg2 is down."
    wait_for(lambda: not servers_of(stack)["pg2"][0], 30, "pg2 reported down")
    assert servers_of(stack)["pg1"] == (True, 2, True)
    e = stack.workspace("placed while pg2 is down")  # only serving servers take new workspaces
    assert summary(stack, e).server == "pg1"
    assert (
        code_of(
            stack.admin.CreateWorkspace,
            g.CreateWorkspaceRequest(name="asked for down pg2", server="pg2"),
            metadata=stack.op(),
        )
        == grpc.StatusCode.UNAVAILABLE
    )
    stack.wait_backlog_empty()  # the embedding worker goes on with pg1's jobs

    # pg2 comes back: its workspaces answer again with everything acknowledged before.
    second.restart()
    wait_for(lambda: code_of(on_b.read, note_b.id) == grpc.StatusCode.OK, 60, "pg2's workspace back")
    assert on_b.read(note_b.id).body == "The lighthouse keeper changes shifts at noon."
    assert [h.memory.id for h in on_b.recall("lighthouse keeper", mode=LEX).items] == [note_b.id]
    wait_for(lambda: servers_of(stack)["pg2"][0], 30, "pg2 reported serving")


@pytest.mark.cluster
@property_test(max(EXAMPLES // 15, 6))
@given(program=ops, grants=grant_sets, gate=st.booleans())
def test_nothing_leaks_across_servers(two_servers_for_properties, program, grants, gate):
    """The leak property's examples (tests/trust_program.py) in a workspace on pg2, whose outsider
    (another workspace's member, whose name must never show) is on pg1: every read path, checked
    as each member, over two servers."""
    stack = two_servers_for_properties[0]
    if not hasattr(stack, "property_workspace"):
        stack.property_workspace = stack.admin.CreateWorkspace(
            g.CreateWorkspaceRequest(name="property on pg2", server="pg2"), metadata=stack.op()
        ).workspace_id
        outsider_name(stack)
        assert summary(stack, stack.property_workspace).server == "pg2"
    leak_example(stack, stack.property_workspace, program, grants, gate)


@pytest.mark.cluster
def test_a_server_down_at_start_is_prepared_when_it_answers(tmp_path):
    first, second = EmbeddedPostgres(tmp_path / "pg1"), EmbeddedPostgres(tmp_path / "pg2")
    kill(second)
    dbs = Databases(first.control_url, servers={"pg2": second.control_url}, control_server="pg1")
    try:
        dbs.open()  # the control plane's server is enough to start
        assert dbs.server_status() == [("pg1", True), ("pg2", False)]
        with pytest.raises(Exception) as err:
            dbs.workspace("recallatron_ws_down", "pg2")
        assert status_proto_for(err.value).code == grpc.StatusCode.UNAVAILABLE.value[0]
        assert "pg2" not in status_proto_for(err.value).message
        dbs.probe()  # pg2 still down: the probe of the control plane's server passes
        assert dbs.server_status()[1] == ("pg2", False)
        second.restart()
        dbs.probe()
        assert dbs.server_status() == [("pg1", True), ("pg2", True)]
        dbs.create_workspace_db("recallatron_ws_later", "pg2")
        with dbs.workspace("recallatron_ws_later", "pg2").connection() as conn:
            assert conn.execute("SELECT count(*) FROM memory").fetchone()[0] == 0
        assert "recallatron_ws_later" in databases_on(second) and "recallatron_ws_later" not in databases_on(first)
        dbs.drop_workspace_db("recallatron_ws_later", "pg2")
        assert "recallatron_ws_later" not in databases_on(second)
    finally:
        dbs.close()
        for pg in (second, first):
            stop(pg)


def test_a_configuration_that_names_the_control_plane_twice_is_refused():
    with pytest.raises(Exception, match="control plane's own"):
        Databases("dbname=x", servers={"main": "dbname=y"})


@pytest.mark.system
def test_up_starts_several_embedded_servers_and_spreads_workspaces(tmp_path):
    """`recallatron up --embedded-servers 2`: pg1 (the control plane's, in <home>/pg) and pg2 (in
    <home>/pg2), new workspaces spread by the rule, the CLI shows each one's server and each server;
    bad counts and a count beside DATABASE_URL are refused before anything starts."""
    home = tmp_path / "home"
    with system.up(home, {}, args=["--embedded-servers", "2"], timeout=240) as up:
        assert "2 embedded PostgreSQL servers pg1..pg2" in up.output[-1]
        env = {"RECALLATRON_HOME": str(home), "RECALLATRON_GATEWAY_ADDR": up.gateway}
        made = [recallatron("workspace", "create", f"spread {k}", env=env) for k in range(3)]
        assert [r.returncode for r in made] == [0, 0, 0], [r.stderr for r in made]
        shown = [recallatron("workspace", "show", r.stdout.strip(), env=env).stdout for r in made]
        assert [re.search(r"server: (\S+)", s).group(1) for s in shown] == ["pg1", "pg2", "pg1"]
        assert [r.stderr.strip() for r in made] == [
            f"workspace 'spread {k}' created on database server {server}"
            for k, server in enumerate(("pg1", "pg2", "pg1"))
        ]
        status = recallatron("status", env=env)
        assert "  database server pg1: up, 2 workspace(s) (control plane)" in status.stdout.splitlines()
        assert "  database server pg2: up, 1 workspace(s)" in status.stdout.splitlines()
        assert (home / "pg" / "postmaster.pid").exists() and (home / "pg2" / "postmaster.pid").exists()
        refused = recallatron("workspace", "create", "nowhere", "--server", "pg3", env=env)
        assert refused.returncode != 0 and "configured: pg1, pg2" in refused.stderr
    with system.up(home, {}, timeout=240) as again:  # one asked for: pg2 holds a workspace, so it starts too, said
        said = [line for line in again.output if "started by an earlier run" in line]
        assert said and said[0].startswith("recallatron: 2 embedded PostgreSQL servers, not 1: pg2 in "), said
        env = {"RECALLATRON_HOME": str(home), "RECALLATRON_GATEWAY_ADDR": again.gateway}
        assert "  database server pg2: up, 1 workspace(s)" in recallatron("status", env=env).stdout.splitlines()
    for bad in ("0", "9", "two", "-1"):
        out = subprocess.run(
            [sys.executable, "-m", "cli.main", "up", "--embedded-servers", bad],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert out.returncode == 2 and "--embedded-servers: expected a whole number 1..8" in out.stderr, out.stderr
    beside = subprocess.run(
        [sys.executable, "-m", "cli.main", "up", "--embedded-servers", "2"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, DATABASE_URL="host=/nonexistent", RECALLATRON_HOME=str(tmp_path / "other")),
    )
    assert beside.returncode == 2 and "DATABASE_URL is set" in beside.stderr, beside.stderr


def test_database_servers_are_configured_by_variable_and_file_and_bad_ones_are_named(tmp_path, monkeypatch):
    for name in [k for k in os.environ if k.startswith("RECALLATRON_")]:
        monkeypatch.delenv(name)
    good = tmp_path / "servers.json"
    good.write_text('{"pg3": "host=db3 user=r"}')
    monkeypatch.setenv("RECALLATRON_DATABASE_SERVERS", '{"pg2": "host=db2 user=r"}')
    monkeypatch.setenv("RECALLATRON_DATABASE_SERVERS_FILE", str(good))
    assert Settings().all_database_servers() == {"pg2": "host=db2 user=r", "pg3": "host=db3 user=r"}
    for text, says in (
        ("[1, 2]", "expected a JSON object"),
        ("{not json", "RECALLATRON_DATABASE_SERVERS_FILE"),
        ('{"pg2": "host=x"}', "named twice"),
        ('{"Bad Name": "host=x"}', "database server name"),
    ):
        good.write_text(text)
        with pytest.raises(ValueError, match=says):
            Settings().all_database_servers()
    monkeypatch.setenv("RECALLATRON_DATABASE_SERVERS", "{not json")
    settings.load.cache_clear()
    try:
        with pytest.raises(SystemExit, match="invalid configuration"):
            settings.load()
    finally:
        settings.load.cache_clear()
    for bad in ('{"": "host=x"}', '{"pg2": "  "}', '{"PG2": "host=x"}'):
        monkeypatch.setenv("RECALLATRON_DATABASE_SERVERS", bad)
        with pytest.raises(ValidationError):
            Settings()


@contextmanager
def frozen(pg: EmbeddedPostgres):
    """The server's postmaster and backends stopped (SIGSTOP), as a hung host: connections and
    queries are accepted by the kernel and never answered. Thawed at the end, whatever happened."""
    pids = [pg.pid(), *(p.pid for p in psutil.Process(pg.pid()).children(recursive=True))]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


@pytest.mark.cluster
def test_a_hung_server_fails_its_own_calls_and_takes_no_workspace(tmp_path, encoder):
    """A server that stops answering (not refusing: hung) is reported down, its workspaces' calls
    fail UNAVAILABLE within their deadline instead of waiting for it, a workspace asked for on it
    is refused and never appears later, and the other server's workspaces answer throughout."""
    with two_servers_up(tmp_path, encoder) as (stack, first, second):
        a, b = stack.workspace("on pg1"), stack.workspace("on pg2")
        on_a, on_b = stack.member(a), stack.member(b)
        assert summary(stack, b).server == "pg2"
        note_b = on_b.remember("The lighthouse keeper changes shifts at noon.")
        note_a = on_a.remember("The ferry to the island leaves at seven.")
        stack.wait_backlog_empty()
        with frozen(second):
            start = time.monotonic()
            read = g.ReadRequest(id=note_b.id)
            write = g.RememberRequest(purpose=m.PURPOSE_CONVERSATION, kind=m.KIND_NOTE, body="Written while it hangs.")
            for call, req in ((stack.memory.Read, read), (stack.memory.Remember, write)):
                assert code_of(call, req, metadata=on_b.md(), timeout=30) == grpc.StatusCode.UNAVAILABLE
            took = time.monotonic() - start
            wait_for(lambda: not servers_of(stack)["pg2"][0], 30, "pg2 reported down")
            asked = g.CreateWorkspaceRequest(name="asked for hung pg2", server="pg2")
            created = code_of(stack.admin.CreateWorkspace, asked, metadata=stack.op(), timeout=30)
            assert created == grpc.StatusCode.UNAVAILABLE
            assert on_a.read(note_a.id).body == "The ferry to the island leaves at seven."
            assert summary(stack, stack.workspace("placed while pg2 hangs")).server == "pg1"
        print(f"two calls to the hung server's workspace failed in {took:.1f} s")
        wait_for(lambda: code_of(on_b.read, note_b.id) == grpc.StatusCode.OK, 60, "pg2's workspace back")
        wait_for(lambda: servers_of(stack)["pg2"][0], 30, "pg2 reported serving")
        time.sleep(3)  # a creation left waiting on the hung server would finish by now
        listed = stack.admin.ListWorkspaces(g.ListWorkspacesRequest(), metadata=stack.op()).workspaces
        assert "asked for hung pg2" not in {w.name for w in listed}
        assert len(databases_on(second)) == 1  # on pg2's workspace only: nothing half made
        # A creation whose caller is gone by the time the database is made drops it and says so.
        with pytest.raises(WorkspaceUnavailable, match="the call ended"):
            ControlPlane(stack.store.dbs).create_workspace("given up", "pg2", wanted=lambda: False)
        assert len(databases_on(second)) == 1
        listed = stack.admin.ListWorkspaces(g.ListWorkspacesRequest(), metadata=stack.op()).workspaces
        assert "given up" not in {w.name for w in listed}
