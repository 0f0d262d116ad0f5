"""Structured logs (servicekit/logs.py): one JSON object per line, a request id that follows a call
through all four services in gRPC metadata and comes back to the caller, and no token, memory text,
question or name in any line at the default level, both in-process and in the files `recallatron
up` keeps in <home>/logs/."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import warnings

import grpc
import pytest
import structlog
from conftest import ROOT, SERVICES, free_port
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.gateway.v1 import gateway_pb2_grpc
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.rank.v1 import rank_pb2, rank_pb2_grpc

from client import bearer
from servicekit import clients, logs

pytestmark = pytest.mark.system

MISSING = "00000000-0000-4000-8000-000000000000"
GENERATED = re.compile(r"[0-9a-f]{32}")
# The internal calls of a hybrid recall, by the service that handles them (README.md, "How recall works").
RECALL_PATH = {
    "/recallatron.gateway.v1.MemoryService/Recall",
    "/recallatron.store.v1.StoreService/Authenticate",
    "/recallatron.store.v1.StoreService/LexicalCandidates",
    "/recallatron.embed.v1.EmbedService/EmbedQueries",
    "/recallatron.store.v1.StoreService/DenseCandidates",
    "/recallatron.rank.v1.RankService/FuseAndWalk",
}
# A token's later recalls authenticate in their keyword call (tests/test_recall_fold.py).
FOLDED_PATH = RECALL_PATH - {"/recallatron.store.v1.StoreService/Authenticate"}


@pytest.fixture
def json_lines():
    """The process's log records, as configure() writes them, while the test runs: a function that
    returns the lines written so far, each parsed (a line that is not one JSON object fails)."""
    stream = io.StringIO()
    handler = logs.json_handler(stream)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)

    def lines() -> list[dict]:
        return [_object(line) for line in stream.getvalue().splitlines()]

    yield lines
    root.removeHandler(handler)
    root.setLevel(level)


def _object(line: str) -> dict:
    record = json.loads(line)
    assert isinstance(record, dict), line
    return record


def with_request_id(call, request, metadata, request_id=None):
    """Calls with ``x-request-id`` (when given); returns (response or the RpcError, the id the
    server sent back in the trailing metadata)."""
    md = (*metadata, (logs.REQUEST_ID_KEY, request_id)) if request_id is not None else metadata
    try:
        response, info = call.with_call(request, metadata=md)
    except grpc.RpcError as exc:
        response, info = exc, exc
    back = [v for k, v in info.trailing_metadata() if k == logs.REQUEST_ID_KEY]
    assert len(back) == 1, info.trailing_metadata()
    return response, back[0]


# ---- the formatter ---------------------------------------------------------------------------


def test_library_and_structlog_records_are_one_json_object_per_line(json_lines):
    logging.getLogger("psycopg.pool").warning("pool %s has %d waiting", "control", 3)
    structlog.stdlib.get_logger("recallatron.test").info("embedded", count=4, ratio=0.5)
    with structlog.contextvars.bound_contextvars(request_id="abc-123"):
        logging.getLogger("grpc._server").info("inside a call")
    try:
        raise ValueError("broken\nacross lines")
    except ValueError:
        logging.getLogger("recallatron.test").exception("it failed")
    first, second, third, fourth = json_lines()
    assert list(first)[:4] == ["timestamp", "level", "logger", "event"]
    assert first["event"] == "pool control has 3 waiting" and first["level"] == "warning"
    assert first["logger"] == "psycopg.pool" and "request_id" not in first
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", first["timestamp"]), first["timestamp"]
    assert (second["event"], second["count"], second["ratio"], second["level"]) == ("embedded", 4, 0.5, "info")
    assert third["request_id"] == "abc-123" and third["logger"] == "grpc._server"
    assert fourth["level"] == "error" and "ValueError: broken\nacross lines" in fourth["exception"]


def test_configure_routes_warnings_and_thread_deaths_to_one_handler():
    stream = io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level, threading.excepthook
    try:
        logs.configure("warning", stream)
        logs.configure("warning", stream)  # again: still one handler
        assert len(root.handlers) == 1 and root.level == logging.WARNING
        logging.getLogger("recallatron.test").info("below the level")
        warnings.warn("a deprecated call", DeprecationWarning, stacklevel=1)
        worker = threading.Thread(target=lambda: 1 / 0, name="doomed")
        worker.start()
        worker.join()
    finally:
        logging.captureWarnings(False)
        root.handlers[:], level, threading.excepthook = saved
        root.setLevel(level)
    lines = [_object(line) for line in stream.getvalue().splitlines()]
    assert [(r["logger"], r["level"]) for r in lines] == [("py.warnings", "warning"), ("thread", "error")]
    assert "a deprecated call" in lines[0]["event"]
    assert lines[1]["event"] == "exception ended thread doomed" and "ZeroDivisionError" in lines[1]["exception"]


@pytest.mark.parametrize("good", ["abc", "0f8c1e2a-7d1b-4c55-9e0d-3f1a2b3c4d5e", "A.b_c-9", "x" * 64])
def test_a_well_formed_request_id_is_kept(good):
    assert logs.incoming_request_id([("other", "1"), (logs.REQUEST_ID_KEY, good)]) == good


@pytest.mark.parametrize(
    "bad", ["", "x" * 65, "has space", "line\nbreak", 'quote"', "caf\u00e9", "a/b", "{}", b"bytes-value"]
)
def test_a_malformed_request_id_is_replaced(bad):
    generated = logs.incoming_request_id([(logs.REQUEST_ID_KEY, bad)])
    assert GENERATED.fullmatch(generated) and generated != bad


def test_no_request_id_gets_a_new_one_each_time():
    a, b = logs.incoming_request_id(()), logs.incoming_request_id(None)
    assert GENERATED.fullmatch(a) and GENERATED.fullmatch(b) and a != b


# ---- in-process: the four services of the session stack ------------------------------------


def test_a_recall_request_id_reaches_all_four_services_and_comes_back(stack, json_lines):
    alice = stack.member(stack.workspace("logs"))
    alice.remember("The lighthouse keeper polishes the brass lens.", title="Lighthouse")
    stack.wait_backlog_empty()
    request = g.RecallRequest(query="who polishes the lens?", purpose=m.PURPOSE_CONVERSATION)
    resp, back = with_request_id(stack.memory.Recall, request, alice.md(), "recall-0001")
    assert back == "recall-0001" and resp.dense_available and resp.items
    ours = [r for r in json_lines() if r.get("request_id") == "recall-0001"]
    assert {r["rpc"] for r in ours if r["event"] == "rpc handled"} == RECALL_PATH
    assert all(r["code"] == "OK" and r["duration_ms"] >= 0 for r in ours if r["event"] == "rpc handled")
    # Without an id of its own, the call gets a new one, and so does every later call.
    _, first = with_request_id(stack.memory.Recall, request, alice.md())
    _, second = with_request_id(stack.memory.Recall, request, alice.md(), "not well formed!")
    assert GENERATED.fullmatch(first) and GENERATED.fullmatch(second) and first != second
    handled = {(r["request_id"], r["rpc"]) for r in json_lines() if r["event"] == "rpc handled"}
    assert {(first, rpc) for rpc in FOLDED_PATH} | {(second, rpc) for rpc in FOLDED_PATH} <= handled
    assert not {(first, rpc) for rpc in RECALL_PATH - FOLDED_PATH} & handled


def test_a_failed_call_returns_its_request_id_and_logs_its_code(stack, json_lines):
    bob = stack.member(stack.workspace("logs-failure"))
    err, back = with_request_id(stack.memory.Read, g.ReadRequest(id=MISSING), bob.md(), "read-missing-1")
    assert isinstance(err, grpc.RpcError) and err.code() == grpc.StatusCode.NOT_FOUND and back == "read-missing-1"
    codes = {r["rpc"]: r["code"] for r in json_lines() if r.get("request_id") == "read-missing-1"}
    assert codes == {
        "/recallatron.gateway.v1.MemoryService/Read": "NOT_FOUND",
        "/recallatron.store.v1.StoreService/Authenticate": "OK",
        "/recallatron.store.v1.StoreService/Read": "NOT_FOUND",
    }
    err, back = with_request_id(stack.memory.Read, g.ReadRequest(id=MISSING), (), "no-token-1")
    assert err.code() == grpc.StatusCode.UNAUTHENTICATED and back == "no-token-1"


def test_health_checks_are_logged_only_at_debug(stack, json_lines):
    assert clients.is_serving(stack.channel)
    assert not [r for r in json_lines() if r.get("rpc") == "/grpc.health.v1.Health/Check"]


# ---- `recallatron up`: the files it keeps ----------------------------------------------------

SECRETS = {
    "title": "Zanzibar-Title-7Q4",
    "body": "Quetzalcoatl-Body-3K9 feeds the marmalade heron.",
    "entity": "Ophelia-Entity-8R2",
    "query": "Wombat-Query-5T1 marmalade heron",
    "corrected": "Xylophone-Correction-2M6 feeds the heron.",
    "reason": "Ptarmigan-Reason-4W8",
    "bad_token": "rct_Nonexistent-Token-6V3",
}


@pytest.fixture(scope="module")
def system(shared_system):
    """The session's shared system (tests/conftest.py), which these tests only call and read."""
    return shared_system


def log_lines(system) -> dict[str, list[str]]:
    return {name: (system["home"] / "logs" / f"{name}.log").read_text().splitlines() for name in SERVICES}


def test_up_keeps_one_json_log_per_service_without_secrets(system):
    operator = (system["home"] / "operator-token").read_text().strip()
    channel = clients.channel(system["gateway"])
    try:
        admin, memory = gateway_pb2_grpc.AdminServiceStub(channel), gateway_pb2_grpc.MemoryServiceStub(channel)
        op = bearer(operator)
        ws = admin.CreateWorkspace(g.CreateWorkspaceRequest(name="logs"), metadata=op).workspace_id
        token = admin.AddMember(g.AddMemberRequest(workspace_id=ws, role=m.ROLE_MEMBER), metadata=op).token
        md = bearer(token)
        mem = memory.Remember(
            g.RememberRequest(
                purpose=m.PURPOSE_CONVERSATION,
                kind=m.KIND_NOTE,
                title=SECRETS["title"],
                body=SECRETS["body"],
                audience=m.AUDIENCE_WORKSPACE,
                entities=[m.EntityMention(name=SECRETS["entity"])],
            ),
            metadata=md,
        ).memory
        deadline = time.monotonic() + 120
        while admin.GetStatus(g.GetStatusRequest(), metadata=op).embedding_backlog:
            assert time.monotonic() < deadline, "embedding backlog did not drain"
            time.sleep(0.2)
        request = g.RecallRequest(query=SECRETS["query"], purpose=m.PURPOSE_CONVERSATION)
        resp, back = with_request_id(memory.Recall, request, md, "up-recall-1")
        assert back == "up-recall-1" and resp.items[0].memory.id == mem.id and resp.dense_available
        assert memory.FindEntities(g.FindEntitiesRequest(name=SECRETS["entity"]), metadata=md).entities
        mem = memory.Correct(
            g.CorrectRequest(id=mem.id, expected_revision=mem.revision, body=SECRETS["corrected"]), metadata=md
        ).memory
        err, _ = with_request_id(memory.Recall, request, bearer(SECRETS["bad_token"]))
        assert err.code() == grpc.StatusCode.UNAUTHENTICATED
        err, _ = with_request_id(
            memory.Remember, g.RememberRequest(title=SECRETS["title"] * 100, body=SECRETS["body"]), md
        )
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        memory.Forget(g.ForgetRequest(id=mem.id, reason=SECRETS["reason"]), metadata=md)
    finally:
        channel.close()
    time.sleep(1)  # the last access lines are written after the responses
    files = log_lines(system)
    for name, lines in files.items():
        records = [_object(line) for line in lines]  # every line of every file is one JSON object
        assert any(r["event"].startswith("listening on") for r in records), name
        text = "\n".join(lines)
        for what, secret in {**SECRETS, "token": token, "operator": operator}.items():
            assert secret not in text, f"{what} in {name}.log"
    by_service = {
        name: {r["rpc"] for r in map(_object, lines) if r.get("request_id") == "up-recall-1"}
        for name, lines in files.items()
    }
    assert by_service == {
        "gateway": {"/recallatron.gateway.v1.MemoryService/Recall"},
        "store": {rpc for rpc in RECALL_PATH if ".store." in rpc},
        "embed": {"/recallatron.embed.v1.EmbedService/EmbedQueries"},
        "rank": {"/recallatron.rank.v1.RankService/FuseAndWalk"},
    }


# ---- `recallatron serve`: the level setting ----------------------------------------------------


def serve_rank(level: str) -> subprocess.CompletedProcess:
    """Runs ``recallatron serve rank`` at ``level`` on free ports, makes a health check and a
    FuseAndWalk call with a request id, and stops it (SIGINT); returns the finished process."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECALLATRON_")}
    env |= {"RECALLATRON_RANK_ADDR": f"127.0.0.1:{port}", "RECALLATRON_RANK_METRICS_PORT": "0"}
    env["RECALLATRON_LOG_LEVEL"] = level
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", "rank"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    channel = clients.channel(f"127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and not clients.is_serving(channel):
            assert time.monotonic() < deadline, "rank did not start"
            time.sleep(0.2)
        if proc.poll() is None:
            rank = rank_pb2_grpc.RankServiceStub(channel)
            rank.FuseAndWalk(rank_pb2.FuseAndWalkRequest(), metadata=((logs.REQUEST_ID_KEY, "rank-call-1"),))
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        channel.close()
        if proc.poll() is None:
            proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_the_log_level_setting_is_honoured_and_checked():
    debug = serve_rank("debug")
    assert debug.returncode == 0 and debug.stdout == "", debug.stderr
    lines = [_object(line) for line in debug.stderr.splitlines()]
    handled = {r["rpc"]: (r["level"], r.get("request_id")) for r in lines if r["event"] == "rpc handled"}
    assert handled["/grpc.health.v1.Health/Check"][0] == "debug"
    assert handled["/recallatron.rank.v1.RankService/FuseAndWalk"] == ("info", "rank-call-1")
    quiet = serve_rank("warning")
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == ""  # nothing at warning or above
    bad = serve_rank("verbose")
    assert bad.returncode != 0 and "RECALLATRON_LOG_LEVEL" in bad.stderr
