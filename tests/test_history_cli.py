"""`recallatron history append|search|forget` as a user runs them: the real command (run in this process,
tests/cli_runner.py) against the test stack's gateway, its text and JSON output, and its exit status on bad input."""

import json
import subprocess

import pytest
from cli_runner import at_gateway


def run(stack, token, *args, check=True) -> subprocess.CompletedProcess:
    return at_gateway(f"127.0.0.1:{stack.gateway.port}", "history", *args, token=token, check=check)


@pytest.fixture(scope="module")
def people(stack):
    ws = stack.workspace("history cli")
    return stack.member(ws), stack.member(ws)


def test_append_search_forget(stack, people):
    alice, bob = people
    first = run(
        stack,
        alice.token,
        "append",
        "Mira moved the dentist to Friday",
        "--chat",
        "tg:1",
        "--at",
        "2026-03-02 08:00:00",
    )
    assert first.stdout.startswith("stored ")
    turn_id = first.stdout.split()[1]
    again = run(stack, alice.token, "append", "x", "--chat", "tg:1", "--request-id", "r1", "--json")
    replay = run(stack, alice.token, "append", "x", "--chat", "tg:1", "--request-id", "r1")
    assert replay.stdout.strip() == f"already stored {json.loads(again.stdout)['results'][0]['turn_id']}"
    reused = run(stack, alice.token, "append", "y", "--chat", "tg:1", "--request-id", "r1", check=False)
    assert reused.returncode == 1 and "ALREADY_EXISTS: request_id 'r1' was already used" in reused.stderr
    run(
        stack,
        alice.token,
        "append",
        "Noted, Friday at ten.",
        "--chat",
        "tg:1",
        "--role",
        "rheo",
        "--at",
        "2026-03-02T08:01:00Z",
    )

    found = run(stack, alice.token, "search", "dentist").stdout
    assert found.startswith(f"{turn_id}  2026-03-02T08:00:00Z  tg:1  ~tg:1@2026-03-02T08:00:00Z  user  score=")
    assert "Mira moved the dentist to Friday" in found and "next page" not in found
    listed = json.loads(
        run(stack, alice.token, "search", "--since", "2026-03-02", "--until", "2026-03-03", "--json").stdout
    )
    assert [e["turn"]["text"] for e in listed["entries"]] == [
        "Mira moved the dentist to Friday",
        "Noted, Friday at ten.",
    ]
    assert listed["entries"][1]["turn"]["role"] == "assistant" and listed["next_page_token"] == ""
    paged = run(stack, alice.token, "search", "--page-size", "1").stdout
    assert paged.count("\n    ") == 1 and "next page: --page-token " in paged
    everything = json.loads(run(stack, alice.token, "search", "--page-size", "1", "--all", "--json").stdout)
    assert len(everything["entries"]) == 3 and everything["next_page_token"] == ""
    assert run(stack, bob.token, "search", "dentist").stdout.strip() == "no turns"

    other = run(stack, bob.token, "forget", "--turn", turn_id, check=False)
    assert other.returncode == 1 and other.stderr.startswith("NOT_FOUND:")
    assert run(stack, alice.token, "forget", "--turn", turn_id).stdout.strip() == "forgot 1 turns"
    assert run(stack, alice.token, "search", "dentist").stdout.strip() == "no turns"
    gone = run(stack, alice.token, "forget", "--since", "2026-03-02T08:01:00Z", "--until", "2026-03-02T08:02:00Z")
    assert gone.stdout.strip() == "forgot 1 turns"


@pytest.mark.parametrize(
    ("args", "status", "start"),
    [
        (["append", "  ", "--chat", "c"], 1, "INVALID_ARGUMENT: text must not be empty"),
        (
            ["append", "x", "--chat", "c", "--role", "system"],
            1,
            "INVALID_ARGUMENT: role must be one of: user, assistant, rheo",
        ),
        (["append", "x", "--chat", ""], 1, "INVALID_ARGUMENT: chat_id must not be empty"),
        (["append", "x", "--chat", "c", "--at", "yesterday"], 2, "usage:"),
        (["append", "x"], 2, "usage:"),
        (["search", "--page-size", "-1"], 1, "INVALID_ARGUMENT: page_size"),
        (["search", "--page-token", "bogus"], 1, "INVALID_ARGUMENT: page_token"),
        (["search", "--since", "2026-03-03", "--until", "2026-03-02"], 1, "INVALID_ARGUMENT: end_time"),
        (["forget"], 1, "INVALID_ARGUMENT: name turn_ids"),
        (["forget", "--since", "2026-03-02"], 1, "INVALID_ARGUMENT: name turn_ids"),
        (["forget", "--turn", "nope"], 1, "NOT_FOUND: history turn nope not found"),
    ],
)
def test_bad_input_names_the_problem(stack, people, args, status, start):
    out = run(stack, people[0].token, *args, check=False)
    assert out.returncode == status and out.stdout == ""
    assert out.stderr.startswith(start) or (status == 2 and start in out.stderr), out.stderr


def test_a_bad_token_is_unauthenticated(stack):
    out = run(stack, "rct_bogus", "search", check=False)
    assert out.returncode == 1 and out.stderr.startswith("UNAUTHENTICATED:")
