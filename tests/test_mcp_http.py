"""`recallatron mcp --http` at its edges, driven over raw HTTP (status codes and headers) and with the
SDK's own client, against the real stack (tests/conftest.py): the gateway checks a request's bearer
token before any session exists, a session serves only the member that opened it, a member holds a
bounded number of sessions, idle sessions are closed, and Host and Origin headers are checked on a
bind to 0.0.0.0 too."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import time

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from test_mcp import ROOT, TOOLS, call_ok, free_port, gateway_addr, text_of

from cli.mcp_command import mcp_parser
from servicekit import settings as settings_mod


def cli_main(argv: list[str]) -> int:
    """``recallatron ARGV`` in process for the mcp command alone (nothing imports cli.main)."""
    parser = argparse.ArgumentParser(prog="recallatron")
    mcp_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.handler(args, settings_mod.load())


PROTOCOL = "2025-06-18"  # a handshake-era version: the SDK keeps a session for it
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "edge-test", "version": "1"}},
}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
NOT_TOKENS = [
    "rct_not_a_real_token",
    "rct_" + "x" * 600,  # longer than any token the store accepts
    "rct_" + "x" * 20_000,  # longer than gRPC metadata carries
    "rct_" + "x" * 70_000,
    "Bearer",
    "rct_\tinner tab",
]


@contextlib.contextmanager
def serve_http(stack, bind: str, *flags: str, gateway: str | None = None):
    """`recallatron mcp --http BIND:PORT FLAGS...` in its own process; yields (URL, port), the URL on
    127.0.0.1. A server that fails to start fails the test with its output."""
    port = free_port()
    gateway = gateway or gateway_addr(stack)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "mcp", "--http", f"{bind}:{port}", "--gateway", gateway, *flags],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "RECALLATRON_TOKEN"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        assert proc.poll() is None, proc.stdout.read()
        yield f"http://127.0.0.1:{port}/mcp", port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def post(url: str, token: str | bytes | None, body: dict, session: str | None = None, **headers) -> httpx2.Response:
    """One JSON-RPC POST as a streamable HTTP client sends it, with ``token`` as the bearer (None: no
    Authorization header) and, given a session id, the session headers."""
    sent = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if token is not None:
        sent["Authorization"] = b"Bearer " + token if isinstance(token, bytes) else f"Bearer {token}"
    if session is not None:
        sent |= {"Mcp-Session-Id": session, "Mcp-Protocol-Version": PROTOCOL}
    return httpx2.post(url, content=json.dumps(body), headers=sent | headers, timeout=60)


def result_of(response: httpx2.Response) -> dict:
    """The JSON-RPC message of a response, whether sent as JSON or as one server-sent event."""
    if response.headers["content-type"].startswith("application/json"):
        return response.json()
    data = [line[len("data:") :] for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads("".join(data))


def open_session(url: str, token: str, **headers) -> str:
    """Opens a session with the initialize handshake; returns its id."""
    response = post(url, token, INITIALIZE, **headers)
    assert response.status_code == 200, (response.status_code, response.text)
    session = response.headers["mcp-session-id"]
    assert result_of(response)["result"]["serverInfo"]["name"] == "recallatron"
    initialized = post(url, token, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    assert initialized.status_code == 202, initialized.text
    return session


def tool_names(url: str, token: str | None, session: str) -> set[str]:
    response = post(url, token, TOOLS_LIST, session)
    assert response.status_code == 200, (response.status_code, response.text)
    return {tool["name"] for tool in result_of(response)["result"]["tools"]}


def assert_unauthenticated(response: httpx2.Response) -> None:
    """401 with a Bearer challenge and no session."""
    assert response.status_code == 401, (response.status_code, response.text)
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["error"] == "UNAUTHENTICATED"
    assert "mcp-session-id" not in response.headers


@pytest.fixture(scope="module")
def workspace(stack):
    return stack.workspace("mcp-http")


@pytest.fixture(scope="module")
def public(stack):
    """A server bound to 0.0.0.0 that names one more host and one more origin, two sessions a member."""
    with serve_http(
        stack,
        "0.0.0.0",
        "--allowed-host",
        "MCP.example.test:*",
        "--allowed-origin",
        "https://app.example.test",
        "--sessions-per-member",
        "2",
    ) as (url, port):
        yield url, port


def test_a_token_the_gateway_refuses_gets_401_and_no_session(stack, workspace, public):
    url, _ = public
    revoked = stack.member(workspace)
    stack.admin.RevokeMember(g.RevokeMemberRequest(workspace_id=workspace, member_id=revoked.id), metadata=stack.op())
    for token in [*NOT_TOKENS, revoked.token, stack.operator_token, b"rct_\xe9\xff"]:
        assert_unauthenticated(post(url, token, INITIALIZE))
    missing = post(url, None, INITIALIZE)
    assert_unauthenticated(missing)
    assert missing.headers["www-authenticate"] == "Bearer"
    basic = post(url, None, INITIALIZE, Authorization="Basic dXNlcjpwYXNz")
    assert_unauthenticated(basic)
    # GET (the server-sent event stream) and DELETE are refused the same way.
    for method in ("GET", "DELETE"):
        assert_unauthenticated(httpx2.request(method, url, headers={"Authorization": "Bearer rct_nope"}, timeout=60))

    # The SDK client with a bad token fails at the handshake: nothing is served.
    async def session(client):
        return await client.call_tool("recallatron_recall", {"query": "anything"})

    async def main():
        async with httpx2.AsyncClient(headers={"Authorization": "Bearer rct_not_a_real_token"}) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                return await session(client)

    with pytest.raises(ExceptionGroup) as refused:
        anyio.run(main)
    assert refused.group_contains(MCPError, match="error response", depth=2)


def test_a_session_serves_only_the_member_that_opened_it(stack, workspace, public):
    url, _ = public
    alice, bob = stack.member(workspace), stack.member(workspace)
    narrow = stack.member(workspace, purposes=[m.PURPOSE_CONVERSATION])
    secret = alice.remember("Alice's bicycle lock code is 7319.", audience=m.AUDIENCE_MEMBER)
    read = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "recallatron_read"}}
    read["params"]["arguments"] = {"id": secret.id}

    mine = open_session(url, alice.token)
    assert tool_names(url, alice.token, mine) == TOOLS
    served = post(url, alice.token, read, mine)
    assert served.status_code == 200 and "7319" in json.dumps(result_of(served))

    # Bob's token is valid, but not for Alice's session: refused as if the session did not exist.
    for request in (TOOLS_LIST, read):
        refused = post(url, bob.token, request, mine)
        assert refused.status_code == 404 and "7319" not in refused.text, (refused.status_code, refused.text)
    # A bad token or none on her session is refused before the session is looked up.
    for token in ("rct_not_a_real_token", None):
        assert_unauthenticated(post(url, token, read, mine))
    # Alice's session is untouched by all that; Bob and a narrow token get sessions of their own.
    assert tool_names(url, alice.token, mine) == TOOLS
    assert tool_names(url, bob.token, open_session(url, bob.token)) == TOOLS
    assert tool_names(url, narrow.token, open_session(url, narrow.token)) == TOOLS

    # Through the SDK client, in both protocol eras, each member sees only what it may read.
    async def reads(client):
        return text_of(await client.call_tool("recallatron_read", {"id": secret.id}))

    async def main(token: str, mode: str):
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
            async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
                await call_ok(client, "recallatron_recall", {"query": "bicycle lock", "mode": "lexical"})
                return await reads(client)

    for mode in ("legacy", "auto"):
        assert "7319" in anyio.run(main, alice.token, mode)
        assert anyio.run(main, bob.token, mode).startswith("NOT_FOUND: ")


def test_a_revoked_token_stops_at_its_next_request(stack, workspace, public):
    url, _ = public
    carol = stack.member(workspace)
    session = open_session(url, carol.token)
    assert tool_names(url, carol.token, session) == TOOLS
    stack.admin.RevokeMember(g.RevokeMemberRequest(workspace_id=workspace, member_id=carol.id), metadata=stack.op())
    assert_unauthenticated(post(url, carol.token, TOOLS_LIST, session))
    assert_unauthenticated(post(url, carol.token, INITIALIZE))


def test_a_member_holds_at_most_its_bound_of_sessions(stack, workspace, public):
    url, _ = public
    dave, erin = stack.member(workspace), stack.member(workspace)
    first, second = open_session(url, dave.token), open_session(url, dave.token)
    over = post(url, dave.token, INITIALIZE)
    assert over.status_code == 429 and "mcp-session-id" not in over.headers, (over.status_code, over.text)
    assert over.json()["error"] == "RESOURCE_EXHAUSTED" and "2 open MCP sessions" in over.json()["message"]
    # A GET without a session would open one too: refused the same way.
    assert httpx2.get(url, headers={"Authorization": f"Bearer {dave.token}"}, timeout=60).status_code == 429
    # The bound is per member, and the sessions held still serve.
    assert tool_names(url, erin.token, open_session(url, erin.token)) == TOOLS
    assert tool_names(url, dave.token, first) == TOOLS and tool_names(url, dave.token, second) == TOOLS

    # Ending a session (DELETE) frees its place; another member cannot end it.
    assert post(url, erin.token, TOOLS_LIST, first).status_code == 404
    assert (
        httpx2.delete(url, headers={"Authorization": f"Bearer {erin.token}", "Mcp-Session-Id": first}).status_code
        == 404
    )
    deleted = httpx2.delete(url, headers={"Authorization": f"Bearer {dave.token}", "Mcp-Session-Id": first})
    assert deleted.status_code == 200, (deleted.status_code, deleted.text)
    assert post(url, dave.token, TOOLS_LIST, first).status_code == 404

    # One place is free: of several openings at once exactly one gets it, whatever their order.
    async def opening(statuses: list):
        async with httpx2.AsyncClient(timeout=60) as http:
            headers = {"Authorization": f"Bearer {dave.token}", "Accept": "application/json, text/event-stream"}
            response = await http.post(url, json=INITIALIZE, headers=headers)
            statuses.append(response.status_code)

    async def race():
        statuses = []
        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(opening, statuses)
        return statuses

    assert sorted(anyio.run(race)) == [200] + [429] * 5


def test_an_idle_session_is_closed(stack, workspace):
    """With a short idle timeout and one session a member: a new session is admitted only once the
    idle one is gone, so polling for it needs no clock; the old id then answers 404."""
    frank = stack.member(workspace)
    with serve_http(stack, "127.0.0.1", "--session-idle-timeout", "0.5", "--sessions-per-member", "1") as (url, _):
        idle = open_session(url, frank.token)
        deadline = time.monotonic() + 60
        while (response := post(url, frank.token, INITIALIZE)).status_code == 429:
            assert time.monotonic() < deadline, "the idle session was never closed"
            time.sleep(0.2)
        assert response.status_code == 200 and response.headers["mcp-session-id"] != idle
        gone = post(url, frank.token, TOOLS_LIST, idle)
        assert gone.status_code == 404 and "Session not found" in gone.text


def test_foreign_host_and_origin_are_refused_on_a_public_bind(stack, workspace, public):
    url, port = public
    token = stack.member(workspace).token
    foreign = [
        ({"Host": f"evil.example:{port}"}, 421),
        ({"Host": "evil.example"}, 421),
        ({"Host": f"localhost.evil.example:{port}"}, 421),
        ({"Host": "mcp.example.test.evil.example:80"}, 421),
        ({"Origin": "http://evil.example"}, 403),
        ({"Origin": f"http://127.0.0.1.evil.example:{port}"}, 403),
        ({"Origin": "https://app.example.test.evil.example"}, 403),
        ({"Origin": "null"}, 403),
    ]
    for headers, status in foreign:
        for sent in (token, None):  # refused before the token is looked at
            response = post(url, sent, INITIALIZE, **headers)
            assert response.status_code == status and "mcp-session-id" not in response.headers, (headers, response)
    # The loopback names, the named host (any port) and the named origin are admitted.
    for headers in (
        {},
        {"Host": f"localhost:{port}"},
        {"Host": f"mcp.example.test:{port}"},
        {"Host": "mcp.example.test:443"},
        {"Origin": "https://app.example.test"},
        {"Origin": f"http://localhost:{port}"},
    ):
        member = stack.member(workspace)
        session = open_session(url, member.token, **headers)
        assert tool_names(url, member.token, session) == TOOLS, headers


def test_an_unreachable_gateway_is_503_not_a_session(stack, workspace):
    token = stack.member(workspace).token
    with serve_http(stack, "127.0.0.1", gateway=f"127.0.0.1:{free_port()}") as (url, _):
        for _ in range(2):
            response = post(url, token, INITIALIZE)
            assert response.status_code == 503 and "mcp-session-id" not in response.headers, response.text
            assert response.json()["error"] == "UNAVAILABLE" and "UNAVAILABLE" in response.json()["message"]
        assert_unauthenticated(post(url, None, INITIALIZE))


def test_http_options_are_checked(stack, capsys):
    def refused(*argv: str):
        with pytest.raises(SystemExit) as stopped:
            cli_main(["mcp", "--gateway", gateway_addr(stack), *argv])
        return stopped.value.code, capsys.readouterr().err

    bad = [
        ("--allowed-host", "http://mcp.example.test"),
        ("--allowed-host", "mcp.example.test/mcp"),
        ("--allowed-host", "*"),
        ("--allowed-host", "mcp example"),
        ("--allowed-host", "mcp.example.test:99999"),
        ("--allowed-host", ""),
        ("--allowed-origin", "app.example.test"),
        ("--allowed-origin", "https://app.example.test/"),
        ("--allowed-origin", "ftp://app.example.test"),
        ("--sessions-per-member", "0"),
        ("--sessions-per-member", "-3"),
        ("--sessions-per-member", "many"),
        ("--session-idle-timeout", "0"),
        ("--session-idle-timeout", "nan"),
        ("--session-idle-timeout", "inf"),
        ("--session-idle-timeout", "-1"),
    ]
    for flag, value in bad:
        code, err = refused("--http", "127.0.0.1:1", flag, value)
        assert code == 2 and f"argument {flag}: expected" in err, (flag, value, err)
    for flag, value in (("--allowed-host", "mcp.example.test"), ("--sessions-per-member", "4")):
        code, _ = refused("--token", "x", flag, value)
        assert "are for --http" in code, (flag, code)
    with pytest.raises(SystemExit):
        cli_main(["mcp", "--help"])
    helped = capsys.readouterr().out
    for text in ("--allowed-host", "--allowed-origin", "--sessions-per-member", "default 16", "default 1800"):
        assert text in helped, text
