"""Inputs found by the breaker review of session 2, each a clear usage error or a correct answer:
out-of-range times and int32 overflows are usage errors (exit 2, no traceback); `supersede` without
`--kind` or `--title` keeps the superseded memory's kind and title; ForgetHistory counts the ids as sent."""

import json
import subprocess

import grpc
from cli_runner import at_gateway, recallatron
from conftest import code_of
from google.protobuf import timestamp_pb2
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m


def cli(stack, token, *args) -> subprocess.CompletedProcess:
    return at_gateway(f"127.0.0.1:{stack.gateway.port}", *args, token=token, check=False)


def test_out_of_range_times_and_integers_are_usage_errors(stack):
    alice = stack.member(stack.workspace("cli inputs"))
    for args in (
        ("history", "append", "--chat", "c", "--at", "0001-01-01T00:00:00+05:00", "x"),
        ("history", "search", "--since", "9999-12-31T23:59:59.999999-01:00"),
        ("history", "search", "--page-size", "2147483648"),
        ("recall", "--top-k", "2147483648", "parrot"),
    ):
        out = cli(stack, alice.token, *args)
        assert out.returncode == 2 and "Traceback" not in out.stderr, (args, out.stderr)
        assert "between years 1 and 9999" in out.stderr or "out of range" in out.stderr, (args, out.stderr)


def test_supersede_without_kind_or_title_keeps_them(stack):
    alice = stack.member(stack.workspace("cli supersede kind"))
    req = g.RememberRequest(
        purpose=m.PURPOSE_CONVERSATION,
        kind=m.KIND_FACT,
        title="Boiler",
        body="The boiler is serviced in May.",
        audience=m.AUDIENCE_WORKSPACE,
    )
    fact = stack.memory.Remember(req, metadata=alice.md()).memory
    out = cli(stack, alice.token, "supersede", fact.id, "--revision", "1", "The boiler is serviced in June.", "--json")
    assert out.returncode == 0, out.stderr
    new = json.loads(out.stdout)["memory"]
    assert (new["kind"], new["title"]) == ("KIND_FACT", "Boiler")
    text = cli(stack, alice.token, "supersede", new["id"], "--revision", "1", "--title", "Heating", "In July.").stdout
    assert text.splitlines()[1:3] == ["  Heating", "  In July."]
    newest = text.split()[0]
    # The way to drop a title the successor kept (README): correct it to "" (the body "" is kept).
    cleared = json.loads(
        cli(stack, alice.token, "correct", newest, "--revision", "1", "--title", "", "", "--json").stdout
    )
    assert (cleared["memory"]["title"], cleared["memory"]["body"]) == ("", "In July.")
    stale = cli(stack, alice.token, "supersede", fact.id, "--revision", "1", "Again.")
    assert stale.returncode == 1 and stale.stderr.startswith("FAILED_PRECONDITION: ")
    assert cli(stack, alice.token, "supersede", newest, "No revision.").returncode == 2


def test_forget_history_counts_the_ids_as_sent(stack):
    alice = stack.member(stack.workspace("forget history limit"))
    at = timestamp_pb2.Timestamp(seconds=1_780_000_000)
    appended = stack.memory.AppendHistory(
        g.AppendHistoryRequest(turns=[g.HistoryTurn(chat_id="c", role="user", text="hello", occurred_at=at)]),
        metadata=alice.md(),
    )
    turn_id = appended.results[0].turn_id
    req = g.ForgetHistoryRequest(turn_ids=[turn_id] * 1001)
    assert code_of(stack.memory.ForgetHistory, req, metadata=alice.md()) == grpc.StatusCode.INVALID_ARGUMENT
    kept = stack.memory.ForgetHistory(g.ForgetHistoryRequest(turn_ids=[turn_id] * 2), metadata=alice.md())
    assert kept.forgotten_count == 1


def test_purposes_naming_none_is_a_usage_error():
    # "," used to parse as no purposes, which the server reads as the default: all four.
    for value in (",", " , ", ""):
        out = recallatron("member", "add", "--workspace", "w", "--purposes", value)
        assert out.returncode == 2 and "names no purpose" in out.stderr, (value, out.stderr)


def test_history_search_refuses_a_bound_given_under_both_names(stack):
    """``--since`` and ``--after`` (and ``--until``/``--before``) name one option: given both, the last
    one used to win without a word; now it is a usage error naming both."""
    alice = stack.member(stack.workspace("history bound twice"))
    for args in (
        ("--since", "2026-03-01", "--after", "2026-11-01"),
        ("--until", "2026-03-01", "--before", "2026-11-01"),
        ("--after", "2026-03-01", "--after", "2026-03-02"),
    ):
        out = cli(stack, alice.token, "history", "search", *args)
        assert out.returncode == 2 and "Traceback" not in out.stderr, (args, out.stderr)
        assert "name one option: give it once" in out.stderr, (args, out.stderr)
    assert cli(stack, alice.token, "history", "search", "--after", "2026-03-01").returncode == 0


def test_recall_history_marks_what_no_longer_holds(stack):
    """``recall --history`` mixes superseded and invalidated memories with current ones: each that no
    longer holds is marked right after its id, and a successor its reader may not see is not named."""
    ws = stack.workspace("cli recall marks")
    alice, bob = stack.member(ws), stack.member(ws)
    old = alice.remember("The zqkettle is blue.", title="Kettle")
    new = stack.memory.Supersede(
        g.SupersedeRequest(id=old.id, expected_revision=1, body="The zqkettle is red."), metadata=alice.md()
    ).memory
    ended = alice.remember("The zqkettle sits on the hob.")
    stack.memory.Invalidate(
        g.InvalidateRequest(id=ended.id, expected_revision=1, reason="moved to the shelf"), metadata=alice.md()
    )
    # A workspace memory superseded by a member-only one: Bob reads the old claim, not its successor.
    shared = alice.remember("The zqkettle descaler is under the sink.")
    stack.memory.Supersede(
        g.SupersedeRequest(
            id=shared.id, expected_revision=1, body="The zqkettle descaler ran out.", audience=m.AUDIENCE_MEMBER
        ),
        metadata=alice.md(),
    )

    def lines(member, *args) -> dict[str, str]:
        out = cli(stack, member.token, "recall", "zqkettle", "--top-k", "10", *args)
        assert out.returncode == 0, out.stderr
        return {line.split("rerank=-  ")[1].split()[0]: line for line in out.stdout.splitlines() if "rerank=" in line}

    seen = lines(alice, "--history")
    assert f"{old.id}  [superseded by {new.id}]  valid from " in seen[old.id]
    assert f"{ended.id}  [invalidated]  valid from " in seen[ended.id]
    assert seen[new.id].endswith(f"{new.id}  by member {alice.id}")  # current: no mark, no end
    assert "[" not in seen[new.id]
    assert f"{shared.id}  [ended]  valid from " in lines(bob, "--history")[shared.id]
    # Without --history only current memories come back, none marked.
    current = lines(alice)
    assert old.id not in current and ended.id not in current and all("[" not in x for x in current.values())


def test_remember_occurred_at(stack):
    """``remember --occurred-at T``: the time read as every time flag reads one (UTC unless it names an
    offset), stored and shown; a time it cannot read is a usage error naming the flag, nothing stored."""
    alice = stack.member(stack.workspace("cli occurred at"))
    out = cli(
        stack, alice.token, "remember", "--occurred-at", "2024-02-10T09:30:00+02:00", "Kofi fixed the gate.", "--json"
    )
    assert out.returncode == 0, out.stderr
    stored = json.loads(out.stdout)["memory"]
    assert (stored["occurred_at"], stored["valid_from"]) == ("2024-02-10T07:30:00Z", "2024-02-10T07:30:00Z")
    text = cli(stack, alice.token, "remember", "--occurred-at", "2024-02-11", "Kofi oiled the gate.").stdout
    assert "  happened 2024-02-11T00:00:00+00:00  " in text.splitlines()[0]
    for bad in ("yesterday", "2024-02-30", "2024-02-10T25:00", ""):
        refused = cli(stack, alice.token, "remember", "--occurred-at", bad, "Kofi painted the gate.")
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, (bad, refused.stderr)
        assert "argument --occurred-at: not an ISO 8601 time" in refused.stderr, (bad, refused.stderr)
    listed = stack.memory.ListMemories(g.ListMemoriesRequest(), metadata=alice.md())
    assert sorted(mem.body for mem in listed.memories) == ["Kofi fixed the gate.", "Kofi oiled the gate."]


def test_a_relative_home_is_read_from_the_current_folder_and_named_whole(stack, tmp_path, monkeypatch):
    """RECALLATRON_HOME (and RECALLATRON_OPERATOR_TOKEN_FILE) relative: taken from the current folder,
    once; an operator command that finds no credential names the absolute file it looked for."""
    gateway = f"127.0.0.1:{stack.gateway.port}"
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    (here / "data").mkdir(parents=True)
    elsewhere.mkdir()
    (here / "data" / "operator-token").write_text(stack.operator_token + "\n")
    env = {"RECALLATRON_HOME": "data"}
    monkeypatch.chdir(here)
    made = recallatron("workspace", "create", "relative home", "--gateway", gateway, env=env)
    assert made.returncode == 0 and made.stdout.strip(), made.stderr
    monkeypatch.chdir(elsewhere)
    missing = recallatron("workspace", "create", "relative home", "--gateway", gateway, env=env)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert missing.stderr.strip().startswith(
        f"no operator credential at {elsewhere / 'data' / 'operator-token'} (No such file or directory): "
    ), missing.stderr
    assert "RECALLATRON_HOME" in missing.stderr and "--operator-token" in missing.stderr
    token_file = {"RECALLATRON_OPERATOR_TOKEN_FILE": "../here/data/operator-token"}
    found = recallatron("workspace", "create", "relative file", "--gateway", gateway, env=token_file)
    assert found.returncode == 0, found.stderr
    folder = recallatron("workspace", "create", "a folder", "--gateway", gateway, env={"RECALLATRON_HOME": ".."})
    assert folder.returncode == 1 and f"no operator credential at {tmp_path / 'operator-token'} (" in folder.stderr


def test_ctrl_c_ends_a_waiting_command_with_one_line(tmp_path):
    """Ctrl-C during a call that waits (a gRPC server that takes every call and answers none within
    the test) exits 130 with one line, not a traceback; `workspace move` says the store goes on."""
    import os
    import signal
    import sys
    import threading
    import time
    from concurrent import futures

    from client.system import ROOT

    release, called = threading.Event(), threading.Event()

    def hold(request, context):
        called.set()
        return release.wait(60) and b""

    class Silent(grpc.GenericRpcHandler):
        def service(self, handler_call_details):
            return grpc.unary_unary_rpc_method_handler(hold)

    server = grpc.server(futures.ThreadPoolExecutor(4), handlers=[Silent()])
    gateway = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    server.start()
    try:
        for argv, said in (
            (["workspace", "move", "team", "--to", "pg2", "--operator-token", "rco_x"], "the store goes on"),
            (["workspace", "list", "--operator-token", "rco_x"], "recallatron: interrupted"),
        ):
            proc = subprocess.Popen(
                [sys.executable, "-m", "cli.main", *argv, "--gateway", gateway],
                cwd=ROOT,
                env=dict(os.environ, RECALLATRON_HOME=str(tmp_path)),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                # A test worker may run with SIGINT ignored, which a child inherits (and Python then
                # installs no KeyboardInterrupt): the child gets the default, as from a terminal.
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
            assert called.wait(60), proc.communicate()  # its call arrived: it waits for the answer
            called.clear()
            time.sleep(0.5)
            assert proc.poll() is None, proc.communicate()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
            assert proc.returncode == 130 and said in err and "Traceback" not in err, err
    finally:
        release.set()
        server.stop(0)


def test_a_move_whose_answer_is_lost_says_where_to_look():
    """From the second new-user trial: a store killed during a move left its caller with "a
    dependency is unavailable" and nothing more; the move may have gone through. The command now
    says how to find out."""
    from concurrent import futures

    class Unavailable(grpc.GenericRpcHandler):
        def service(self, handler_call_details):
            def answer(request, context):
                context.abort(grpc.StatusCode.UNAVAILABLE, "a dependency is unavailable; retry later")

            return grpc.unary_unary_rpc_method_handler(answer)

    server = grpc.server(futures.ThreadPoolExecutor(2), handlers=[Unavailable()])
    gateway = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    server.start()
    try:
        out = at_gateway(gateway, "workspace", "move", "team", "--to", "pg2", "--operator-token", "rco_x", check=False)
    finally:
        server.stop(0)
    assert out.returncode == 1 and out.stderr.splitlines() == [
        "UNAVAILABLE: a dependency is unavailable; retry later",
        "recallatron: `recallatron workspace show team` says where the workspace is now and whether a move is running",
    ], out.stderr
