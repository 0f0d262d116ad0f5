"""`recallatron hook claude-code` as Claude Code runs it: a process given the hook's JSON on stdin
(docs/agents.md, "Claude Code hooks"). UserPromptSubmit adds the PromptContext block of the prompt
in the documented shape, nothing for an off-topic prompt, and nothing already shown in the session;
SessionStart adds the context bundle when the workspace has it on; another member's memories never
appear. Whatever goes wrong (bad input of every kind, bad options, no token, a dead or slow gateway)
the hook prints nothing, exits 0 and logs one JSON line."""

from __future__ import annotations

import io
import json
import os
import re
import stat
import subprocess
import sys
import threading
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from conftest import free_port
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.gateway.v1 import gateway_pb2_grpc
from recallatron.memory.v1 import memory_pb2 as m

from cli import hook_command
from servicekit.render import quote, short_id

ROOT = Path(__file__).resolve().parent.parent
# Far above the hook's own deadline: a hook that hangs fails the test here instead of stalling it.
PROCESS_TIMEOUT = 60


def hook(home: Path, stdin: bytes, *args: str, token: str | None = "rct_none", gateway: str = "", **env: str):
    """Runs the hook as Claude Code does; (the finished process, the log's lines)."""
    environ = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{ROOT / 'gen'}", "RECALLATRON_HOME": str(home)}
    if token is not None:
        environ["RECALLATRON_TOKEN"] = token
    if gateway:
        environ["RECALLATRON_GATEWAY_ADDR"] = gateway
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", "hook", "claude-code", *args],
        cwd=ROOT,
        env=environ | env,
        input=stdin,
        capture_output=True,
        timeout=PROCESS_TIMEOUT,
    )
    log = home / "logs" / "hook.log"
    lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return out, lines


def prompt_input(prompt: str, session: str = "session-1") -> bytes:
    """The documented UserPromptSubmit input."""
    return json.dumps(
        {
            "session_id": session,
            "transcript_path": f"/home/u/.claude/projects/p/{session}.jsonl",
            "cwd": "/home/u/p",
            "permission_mode": "default",
            "hook_event_name": "UserPromptSubmit",
            "prompt": prompt,
        }
    ).encode()


def start_input(source: str = "startup", session: str = "session-1") -> bytes:
    """The documented SessionStart input."""
    return json.dumps(
        {
            "session_id": session,
            "transcript_path": f"/home/u/.claude/projects/p/{session}.jsonl",
            "cwd": "/home/u/p",
            "hook_event_name": "SessionStart",
            "source": source,
        }
    ).encode()


def quiet_failure(out: subprocess.CompletedProcess, lines: list[dict], *words: str) -> dict:
    """Exit 0, nothing on stdout, exactly one log line (whose error has ``words``); that line."""
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"", out.stdout[:300]
    assert len(lines) == 1, lines
    line = lines[0]
    assert line["command"] == "hook claude-code" and line["time"].endswith("+00:00")
    for word in words:
        assert word in line["error"], (word, line)
    return line


# --- Bad input, bad options, no gateway: nothing printed, exit 0, one log line ---------------------


@pytest.mark.parametrize(
    ("stdin", "words"),
    [
        (b"", ["empty input"]),
        (b"   \n", ["empty input"]),
        (b"not json at all", ["not JSON"]),
        (b'{"hook_event_name": "UserPromptSubmit", "prompt": "x"', ["not JSON"]),  # cut off
        (b"\xff\xfe{}", ["not JSON"]),  # not UTF-8
        (b"[" * 100_000 + b"]" * 100_000, ["not JSON"]),  # nested past the parser's recursion limit
        (b'["UserPromptSubmit"]', ["a JSON list, not an object"]),
        (b"{}", ["hook_event_name: missing"]),
        (b'{"hook_event_name": 7}', ["hook_event_name: a int"]),
        (b'{"hook_event_name": "UserPromptSubmit", "session_id": "s"}', ["prompt: missing"]),
        (b'{"hook_event_name": "UserPromptSubmit", "prompt": ["a"], "session_id": "s"}', ["prompt: a list"]),
        (b'{"hook_event_name": "UserPromptSubmit", "prompt": "a", "session_id": null}', ["session_id: missing"]),
        (b'{"hook_event_name": "UserPromptSubmit", "prompt": "a", "session_id": 12}', ["session_id: a int"]),
        (b'{"hook_event_name": "UserPromptSubmit", "prompt": "\\ud800", "session_id": "s"}', ["UnicodeEncodeError"]),
        (b'{"hook_event_name": "Stop", "session_id": "s"}', ["'Stop' is not one this hook handles"]),
        (b'{"hook_event_name": "PreToolUse", "tool_name": "Bash"}', ["'PreToolUse'"]),
        (b'{"prompt": "' + b"a" * (3 * 1024 * 1024) + b'"}', ["input over 1048576 bytes"]),  # several MiB
    ],
    ids=lambda v: v[:24].decode("latin-1") if isinstance(v, bytes) else None,
)
def test_bad_input_prints_nothing_exits_0_and_logs_one_line(tmp_path, stdin, words):
    # The gateway is a free port: nothing here may get as far as calling it.
    out, lines = hook(tmp_path, stdin, gateway=f"127.0.0.1:{free_port()}")
    quiet_failure(out, lines, *words)
    assert "UNAVAILABLE" not in lines[0]["error"]


@pytest.mark.parametrize(
    ("args", "env", "words"),
    [
        (("--budget", "abc"), {}, ["--budget: not an integer"]),
        (("--budget", "199"), {}, ["--budget: 199 is not in 200..2500"]),
        (("--budget", "2501"), {}, ["--budget: 2501 is not in 200..2500"]),
        (("--purpose", "gossip"), {}, ["--purpose: unknown 'gossip'"]),
        (("--timeout", "0"), {}, ["--timeout"]),
        (("--timeout", "nan"), {}, ["--timeout"]),
        (("--timeout", "-1"), {}, ["--timeout"]),
        (("--timeout", "61"), {}, ["--timeout"]),
        ((), {"RECALLATRON_HOOK_TIMEOUT_SECONDS": "soon"}, ["RECALLATRON_HOOK_TIMEOUT_SECONDS: not a number"]),
        ((), {"RECALLATRON_HOOK_TIMEOUT_SECONDS": "inf"}, ["RECALLATRON_HOOK_TIMEOUT_SECONDS"]),
        (("--no-such-option",), {}, ["usage: unrecognized arguments: --no-such-option"]),
        ((), {"RECALLATRON_TOKEN": ""}, ["no token"]),
        ((), {"RECALLATRON_TOKEN": "rct_a b\n"}, ["RECALLATRON_TOKEN is not a token"]),
    ],
)
def test_bad_options_and_environment_are_logged_not_usage_errors(tmp_path, args, env, words):
    """A usage error's exit status 2 would block the user's prompt in Claude Code: logged instead."""
    out, lines = hook(tmp_path, prompt_input("Where is the staging database?"), *args, **env)
    line = quiet_failure(out, lines, *words)
    assert line["event"] == "UserPromptSubmit" or args == ("--no-such-option",)
    assert "rct_a b" not in json.dumps(line)  # a token is never logged


def test_dead_gateway(tmp_path):
    out, lines = hook(tmp_path, prompt_input("Where is the staging database?"), gateway=f"127.0.0.1:{free_port()}")
    line = quiet_failure(out, lines, "PromptContext: UNAVAILABLE")
    assert line["event"] == "UserPromptSubmit" and line["session_id"] == "session-1"
    out, lines = hook(tmp_path, start_input(), gateway=f"127.0.0.1:{free_port()}")
    assert out.returncode == 0 and out.stdout == b"" and len(lines) == 2
    assert lines[1]["error"].startswith("GetContext: UNAVAILABLE") and lines[1]["event"] == "SessionStart"


class SlowGateway(gateway_pb2_grpc.MemoryServiceServicer):
    """Answers nothing until released: a gateway slower than any deadline."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls: list[str] = []

    def PromptContext(self, request, context):
        self.calls.append(request.session_key)
        self.release.wait(PROCESS_TIMEOUT)
        return g.PromptContextResponse(text="too late")

    def GetContext(self, request, context):
        self.calls.append("bundle")
        self.release.wait(PROCESS_TIMEOUT)
        return g.GetContextResponse(text="too late")


@pytest.fixture
def slow_gateway():
    servicer = SlowGateway()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    gateway_pb2_grpc.add_MemoryServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    servicer.release.set()
    server.stop(0)


def test_slow_gateway_meets_the_deadline(tmp_path, slow_gateway):
    servicer, addr = slow_gateway
    out, lines = hook(tmp_path, prompt_input("Where is the staging database?"), "--timeout", "0.5", gateway=addr)
    line = quiet_failure(out, lines, "PromptContext: DEADLINE_EXCEEDED")
    assert servicer.calls == ["session-1"] and line["seconds"] < PROCESS_TIMEOUT
    # The variable sets the deadline when --timeout is absent.
    out, lines = hook(tmp_path, start_input(), gateway=addr, RECALLATRON_HOOK_TIMEOUT_SECONDS="0.4")
    assert out.returncode == 0 and out.stdout == b"" and len(lines) == 2
    assert lines[1]["error"].startswith("GetContext: DEADLINE_EXCEEDED")
    assert servicer.calls == ["session-1", "bundle"]


def test_an_input_never_closed_meets_the_deadline_and_long_fields_are_cut_in_the_log(tmp_path):
    """A harness that never closes the hook's input does not hold the turn past the deadline; a huge
    event name or session id is cut in the log line, not written whole."""
    environ = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{ROOT / 'gen'}", "RECALLATRON_HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "hook", "claude-code", "--timeout", "0.5"],
        cwd=ROOT,
        env=environ | {"RECALLATRON_TOKEN": "rct_none"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        proc.stdin.write(prompt_input("Where is the staging database?")[:40])
        proc.stdin.flush()
        proc.wait(timeout=PROCESS_TIMEOUT)  # its input still open: the hook must end on its own
        out, err = proc.stdout.read(), proc.stderr.read()
    finally:
        proc.kill()
        proc.stdin.close()
    log = tmp_path / "logs" / "hook.log"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert proc.returncode == 0 and out == b"" and len(lines) == 1, (err, lines)
    assert lines[0]["error"] == "the input was not closed before the deadline"
    huge = json.dumps({"hook_event_name": "E" * 500_000, "session_id": "S" * 500_000}).encode()
    done, lines = hook(tmp_path, huge)
    assert done.returncode == 0 and done.stdout == b"" and len(lines) == 2
    assert len(lines[1]["event"]) == len(lines[1]["session_id"]) == 300 and log.stat().st_size < 2_000


def test_the_log_is_private_and_never_followed_through_a_link(tmp_path, monkeypatch):
    out, lines = hook(tmp_path, b"")
    quiet_failure(out, lines, "empty input")
    log = tmp_path / "logs" / "hook.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600 and stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    # A link planted at the log's name is not written through; the line goes to stderr, never stdout.
    target = tmp_path / "elsewhere"
    target.write_text("")
    log.unlink()
    log.symlink_to(target)
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", "hook", "claude-code"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{ROOT / 'gen'}", "RECALLATRON_HOME": str(tmp_path)},
        input=b"{",
        capture_output=True,
        timeout=PROCESS_TIMEOUT,
    )
    assert out.returncode == 0 and out.stdout == b"" and target.read_text() == ""
    assert b"input is not JSON" in out.stderr and b"not logged" in out.stderr


def test_the_hook_loads_neither_the_store_nor_the_model(tmp_path):
    """Start-up: ``recallatron hook`` imports gRPC and the gateway's messages, not the other commands."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "cli.main", "hook", "claude-code"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{ROOT / 'gen'}", "RECALLATRON_HOME": str(tmp_path)},
        input="",
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT,
    )
    assert out.returncode == 0 and out.stdout == ""
    loaded = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert {"grpc", "cli.hook_command", "recallatron.gateway.v1.gateway_pb2"} <= loaded
    heavy = {"numpy", "torch", "sentence_transformers", "transformers", "hypothesis", "psycopg", "pydantic"}
    ours = {
        "store_service",
        "gateway",
        "embed_service",
        "client.gateway",
        "cli.command",
        "cli.memory_commands",
        "servicekit.settings",
    }
    assert not loaded & (heavy | ours), sorted(loaded & (heavy | ours))


def test_in_process_handling_writes_only_the_output(tmp_path, monkeypatch):
    """``claude_code`` as the bench calls it: the same checks without a process."""
    monkeypatch.setenv("RECALLATRON_HOME", str(tmp_path))
    monkeypatch.setenv("RECALLATRON_TOKEN", "rct_none")
    monkeypatch.setenv("RECALLATRON_GATEWAY_ADDR", f"127.0.0.1:{free_port()}")
    args = hook_command.parse(["claude-code"])
    stdout = io.StringIO()
    assert hook_command.claude_code(args, io.BytesIO(b'{"hook_event_name": 1}'), stdout) == 0
    assert stdout.getvalue() == ""
    lines = (tmp_path / "logs" / "hook.log").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["error"] == "hook_event_name: a int, not a string"
    assert os.environ["RECALLATRON_TOKEN"] not in lines[0]


# --- The real stack: what the model sees -----------------------------------------------------------

STAGING = "The staging database runs on host pg-staging-7 in Frankfurt, behind the office VPN."


@pytest.fixture(scope="module")
def world(stack):
    ws = stack.workspace("hook")
    alice, bob = stack.member(ws), stack.member(ws)
    ids = {
        "staging": alice.remember(STAGING).id,
        "lunch": bob.remember("Lunch on Fridays is at the Thai place on Main Street.").id,
        "report": alice.remember("The quarterly report for the board is due on the 15th of March.").id,
        "alice locker": alice.remember("My locker code at the climbing gym is 4417.", audience=m.AUDIENCE_MEMBER).id,
        "bob locker": bob.remember("My locker code at the climbing gym is 9902.", audience=m.AUDIENCE_MEMBER).id,
    }
    stack.wait_backlog_empty()
    return {"ws": ws, "alice": alice, "bob": bob, "ids": ids, "gateway": f"127.0.0.1:{stack.gateway.port}"}


def added(out: subprocess.CompletedProcess, lines: list[dict], event: str) -> str:
    """The additionalContext of a hook's output, checked against the documented shape."""
    assert out.returncode == 0 and lines == [], (out.stderr, lines)
    output = json.loads(out.stdout)
    assert list(output) == ["hookSpecificOutput"]
    assert list(output["hookSpecificOutput"]) == ["hookEventName", "additionalContext"]
    assert output["hookSpecificOutput"]["hookEventName"] == event
    context = output["hookSpecificOutput"]["additionalContext"]
    assert isinstance(context, str) and 0 < len(context) <= hook_command.MAX_CONTEXT_CHARS
    return context


def memory_ids(context: str) -> list[str]:
    """The ids of the memories a block shows, as it shows them (each memory's header starts with its
    bracketed id, shortened by ``short_id``)."""
    return re.findall(r"^\[([0-9a-f]{8})\] ", context, re.M)


def test_user_prompt_submit_adds_the_recalled_memory_in_the_documented_shape(tmp_path, world):
    prompt = "Where does the staging database run?"
    alice = world["alice"]
    out, lines = hook(tmp_path, prompt_input(prompt, "shape"), token=alice.token, gateway=world["gateway"])
    context = added(out, lines, "UserPromptSubmit")
    # PromptContext's block as the gateway renders it: its opening line (what the memories are, that
    # they are to be judged, how to recall more), then the memories, the asked one first.
    direct = alice.stack.memory.PromptContext(g.PromptContextRequest(text=prompt), metadata=alice.md())
    assert context.splitlines()[0] == direct.text.splitlines()[0] and "recall" in context.splitlines()[0]
    assert memory_ids(context) == [short_id(item.memory.id) for item in direct.items]
    assert memory_ids(context)[0] == short_id(world["ids"]["staging"])
    assert quote(STAGING) in context  # the body as render quotes it, never raw


def test_an_off_topic_prompt_adds_nothing(tmp_path, world):
    for prompt in ("Can you suggest a good recipe for banana bread?", "hi there!"):
        out, lines = hook(tmp_path, prompt_input(prompt, "off"), token=world["alice"].token, gateway=world["gateway"])
        assert out.returncode == 0 and out.stdout == b"" and lines == [], (prompt, out.stdout[:300], lines)


def test_a_memory_shown_in_a_session_is_not_shown_again_in_it(tmp_path, world):
    question = prompt_input("Which host does the staging database run on?", "twice")
    alice = {"token": world["alice"].token, "gateway": world["gateway"]}
    first = added(*hook(tmp_path, question, **alice), "UserPromptSubmit")
    assert short_id(world["ids"]["staging"]) in memory_ids(first)
    out, lines = hook(tmp_path, question, **alice)
    assert out.returncode == 0 and lines == []
    assert short_id(world["ids"]["staging"]) not in (
        memory_ids(added(out, lines, "UserPromptSubmit")) if out.stdout else []
    )
    # Another session is shown it again.
    other = prompt_input("Which host does the staging database run on?", "another")
    assert short_id(world["ids"]["staging"]) in memory_ids(added(*hook(tmp_path, other, **alice), "UserPromptSubmit"))


def test_session_start_adds_the_bundle_when_the_workspace_has_it_on(tmp_path, stack):
    ws = stack.workspace("hook bundle")
    carol = stack.member(ws)
    carol.remember("Carol prefers code reviews in the morning.")
    gateway = f"127.0.0.1:{stack.gateway.port}"
    out, lines = hook(tmp_path, start_input(), token=carol.token, gateway=gateway)
    assert out.returncode == 0 and out.stdout == b"" and lines == []  # off: nothing, and nothing to log
    stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, context_bundle=True), metadata=stack.op()
    )
    for source in ("startup", "resume", "clear", "compact"):
        context = added(*hook(tmp_path, start_input(source), token=carol.token, gateway=gateway), "SessionStart")
        request = g.GetContextRequest(purpose=m.PURPOSE_CONVERSATION, token_budget=600)
        direct = stack.memory.GetContext(request, metadata=carol.md()).text
        # The same bundle (its first line says when it was made).
        assert context.splitlines()[1:] == direct.splitlines()[1:]
        assert quote("Carol prefers code reviews in the morning.") in context
    # A budget the hook may use at most: 2,500 tokens, within 10,000 characters.
    out, lines = hook(tmp_path, start_input(), "--budget", "2500", token=carol.token, gateway=gateway)
    context = added(out, lines, "SessionStart")
    assert len(context) <= 10_000


def test_another_members_memories_never_reach_the_hooks_output(tmp_path, world):
    """The trust property for the hook: only what the member may read, never another's member-only memory."""
    mine = {"alice": "4417", "bob": "9902"}
    for who, other in (("alice", "bob"), ("bob", "alice")):
        member = world[who]
        for session, prompt in enumerate(
            ("What is my locker code at the climbing gym?", "climbing gym locker code", "locker 4417 9902")
        ):
            stdin = prompt_input(prompt, f"{who}-{session}")
            out, lines = hook(tmp_path, stdin, token=member.token, gateway=world["gateway"])
            context = added(out, lines, "UserPromptSubmit")
            assert mine[who] in context and mine[other] not in context, (who, prompt, context)
            ids = memory_ids(context)
            mine_id, theirs_id = short_id(world["ids"][f"{who} locker"]), short_id(world["ids"][f"{other} locker"])
            assert mine_id in ids and theirs_id not in ids
            # Every memory shown is one the member can read: the block's ids are the items' (a first
            # ask in a fresh session, as the hook's was), each read back whole.
            direct = member.stack.memory.PromptContext(g.PromptContextRequest(text=prompt), metadata=member.md())
            assert ids == [short_id(item.memory.id) for item in direct.items]
            for item in direct.items:
                assert member.read(item.memory.id).id == item.memory.id
