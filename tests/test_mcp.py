"""`recallatron mcp` as an MCP client meets it: the SDK's own client over stdio and over streamable
HTTP, against the real stack (tests/conftest.py). The tools are listed with the guidance, each
is called with good and with bad input (a tool error that names the gRPC status), and a member's
tools never show another member's memory. The context bundle's prompt and resource give the
caller's GetContext text, or an error naming the status."""

from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import grpc
import httpx2
import pytest
from cli_runner import recallatron
from conftest import code_of
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from client.system import free_port
from mcp_server import guidance, tools

ROOT = Path(__file__).resolve().parent.parent
TOOLS = {
    "recallatron_recall",
    "recallatron_read",
    "recallatron_remember",
    "recallatron_derive",
    "recallatron_correct",
    "recallatron_supersede",
    "recallatron_forget",
    "recallatron_invalidate",
    "recallatron_capture",
    "recallatron_find_entities",
    "recallatron_get_entity",
    "recallatron_search_history",
    "recallatron_list_memories",
    "recallatron_get_context",
}


def gateway_addr(stack) -> str:
    return f"127.0.0.1:{stack.gateway.port}"


def stdio_params(gateway: str, token: str) -> StdioServerParameters:
    """`python -m cli.main mcp` in this checkout, for one member, calling ``gateway``."""
    env = dict(os.environ, RECALLATRON_TOKEN=token, PYTHONUNBUFFERED="1")
    return StdioServerParameters(
        command=sys.executable, args=["-m", "cli.main", "mcp", "--gateway", gateway], env=env, cwd=ROOT
    )


def run_stdio(stack, token: str, session, mode: str = "auto", gateway: str | None = None):
    """Runs ``await session(client)`` on a stdio MCP server started for ``token``; returns its result.

    ``mode="legacy"`` opens with the ``initialize`` handshake, as clients of earlier protocol versions do."""

    async def main():
        async with Client(stdio_params(gateway or gateway_addr(stack), token), mode=mode) as client:
            return await session(client)

    return anyio.run(main)


def run_http(url: str, token: str | None, session):
    """Runs ``await session(client)`` over streamable HTTP, sending ``token`` as the bearer header."""

    async def main():
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                return await session(client)

    return anyio.run(main)


@pytest.fixture(scope="module")
def members(stack):
    """Two members of one workspace and one member of another."""
    ws, other_ws = stack.workspace("mcp"), stack.workspace("mcp-other")
    return stack.member(ws), stack.member(ws), stack.member(other_ws)


@pytest.fixture(scope="module")
def http_server(stack):
    """`recallatron mcp --http 127.0.0.1:PORT` in its own process; yields its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "mcp", "--http", f"127.0.0.1:{port}", "--gateway", gateway_addr(stack)],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "RECALLATRON_TOKEN"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    assert proc.poll() is None, proc.stdout.read()
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(timeout=30)


def text_of(result) -> str:
    return "\n".join(block.text for block in result.content)


async def call_ok(client, name: str, args: dict):
    result = await client.call_tool(name, args)
    assert not result.is_error, text_of(result)
    return result


def test_tools_are_listed_and_every_description_carries_the_guidance(stack, members):
    async def session(client):
        return (await client.list_tools()).tools, client.instructions

    tools, instructions = run_stdio(stack, members[0].token, session)
    assert {t.name for t in tools} == TOOLS
    for tool in tools:
        for sentence in guidance.SENTENCES:
            assert sentence in tool.description, (tool.name, sentence)
        assert tool.input_schema["type"] == "object"
    assert instructions == guidance.TEXT
    schema = {t.name: t.input_schema for t in tools}
    assert schema["recallatron_correct"]["required"] == ["id", "expected_revision"]
    assert set(schema["recallatron_remember"]["properties"]["kind"]["enum"]) == {"note", "fact", "decision", "summary"}


def test_a_client_that_opens_with_initialize_is_served(stack, members):
    async def session(client):
        listed = {t.name for t in (await client.list_tools()).tools}
        return listed, client.protocol_version, await call_ok(client, "recallatron_recall", {"query": "anything"})

    listed, version, recall = run_stdio(stack, members[0].token, session, mode="legacy")
    assert listed == TOOLS and version != "2026-07-28"
    assert "recalled (mode " in text_of(recall)


def test_docs_publish_the_same_guidance():
    text = (ROOT / "docs" / "agents.md").read_text()
    for sentence in guidance.SENTENCES:
        assert sentence in text, sentence
    for tool in TOOLS:
        assert tool in text


def test_each_tool_over_stdio(stack, members):
    alice = members[0]

    async def session(client):
        out = {}
        r = await call_ok(
            client,
            "recallatron_remember",
            {
                "body": "The quarterly audit of the zephyrine ledger moved to March 14.",
                "title": "audit date",
                "kind": "fact",
                "about": ["zephyrine ledger"],
                "occurred_at": "2026-11-30T09:00:00Z",
            },
        )
        out["remember"] = r
        mid = r.structured_content["memory"]["id"]
        out["read"] = await call_ok(client, "recallatron_read", {"id": mid})
        out["recall"] = await call_ok(
            client, "recallatron_recall", {"query": "zephyrine ledger audit", "mode": "lexical", "top_k": 3}
        )
        out["derive"] = await call_ok(
            client, "recallatron_derive", {"source_ids": [mid], "body": "Audit of the zephyrine ledger: March."}
        )
        derived_id = out["derive"].structured_content["memory"]["id"]
        out["derived_read"] = await call_ok(client, "recallatron_read", {"id": derived_id})
        out["correct"] = await call_ok(
            client,
            "recallatron_correct",
            {
                "id": mid,
                "expected_revision": 1,
                "body": "The quarterly audit of the zephyrine ledger moved to March 15.",
            },
        )
        out["history"] = await call_ok(client, "recallatron_read", {"id": mid, "include_history": True})
        out["supersede"] = await call_ok(
            client,
            "recallatron_supersede",
            {
                "id": mid,
                "expected_revision": 2,
                "body": "The zephyrine ledger audit is cancelled.",
                "kind": "decision",
                "relations": [{"subject": "zephyrine ledger", "predicate": "audited_by", "object": "Kestrel & Co"}],
                "attributes": [{"subject": "zephyrine ledger", "key": "audit_status", "value": "cancelled"}],
            },
        )
        # Without a kind the successor keeps the old memory's kind (the schema's default was "note").
        successor_id = out["supersede"].structured_content["memory"]["id"]
        out["supersede_again"] = await call_ok(
            client,
            "recallatron_supersede",
            {"id": successor_id, "expected_revision": 1, "body": "The zephyrine ledger audit is back on."},
        )
        out["forget"] = await call_ok(client, "recallatron_forget", {"id": mid, "reason": "test cleanup"})
        out["after"] = await client.call_tool("recallatron_read", {"id": mid})
        return mid, out

    mid, out = run_stdio(stack, alice.token, session)
    stored = out["remember"].structured_content["memory"]
    assert stored["body"] == "The quarterly audit of the zephyrine ledger moved to March 14."
    assert (stored["kind"], stored["origin"], stored["created_by"]) == ("KIND_FACT", "ORIGIN_TOLD", alice.id)
    assert stored["occurred_at"] == "2026-11-30T09:00:00Z"
    # The text puts provenance and dates before the claim.
    text = text_of(out["remember"])
    assert text.index(f"by member {alice.id}") < text.index("created ") < text.index('title: "audit date"')
    assert text.index('title: "audit date"') < text.index('body: "The quarterly audit')
    assert "happened 2026-11-30T09:00:00+00:00" in text
    read = out["read"].structured_content["memory"]
    assert read["id"] == mid and [link["target_entity_name"] for link in read["links"]] == ["zephyrine ledger"]
    assert 'about "zephyrine ledger" (' in text_of(out["read"])
    recall = out["recall"].structured_content
    assert recall["items"][0]["memory"]["id"] == mid and recall["mode"] == "RECALL_MODE_LEXICAL"
    assert text_of(out["recall"]).startswith(f"{recall['counts']['returned']} recalled (mode lexical")
    derived = out["derive"].structured_content["memory"]
    assert derived["origin"] == "ORIGIN_DERIVED" and derived["kind"] == "KIND_SUMMARY"
    # Derive answers with the stored row; its provenance edges come with Read.
    assert [link["target_memory_id"] for link in out["derived_read"].structured_content["memory"]["links"]] == [mid]
    assert f"derived from {mid}" in text_of(out["derived_read"])
    corrected = out["correct"].structured_content["memory"]
    assert (corrected["revision"], corrected["body"][-9:]) == ("2", "March 15.")
    assert "earlier revision 1" in text_of(out["history"]) and "March 14." in text_of(out["history"])
    successor = out["supersede"].structured_content["memory"]
    assert successor["kind"] == "KIND_DECISION" and successor["body"] == "The zephyrine ledger audit is cancelled."
    assert successor["title"] == "audit date"  # sent without one: the superseded memory's title is kept
    assert [(r["subject_name"], r["predicate"], r["object_name"]) for r in successor["relations"]] == [
        ("zephyrine ledger", "audited_by", "Kestrel & Co")
    ]
    assert [(a["key"], a["value"]) for a in successor["attributes"]] == [("audit_status", "cancelled")]
    said = text_of(out["supersede"])
    assert 'states "zephyrine ledger" audited_by "Kestrel & Co"' in said
    assert 'states "zephyrine ledger" audit_status = "cancelled"' in said
    assert out["supersede_again"].structured_content["memory"]["kind"] == "KIND_DECISION"
    assert out["forget"].structured_content["forgotten_ids"][:1] == [mid]
    assert derived["id"] in out["forget"].structured_content["forgotten_ids"]
    after = out["after"]
    assert after.is_error or after.structured_content["memory"]["forgotten"], text_of(after)


def test_bad_input_is_a_tool_error_naming_the_status(stack, members):
    alice = members[0]
    mem = alice.remember("A memory to fail against.")
    missing = "00000000-0000-4000-8000-000000000000"
    cases = [
        ("recallatron_recall", {"query": "x", "top_k": -1}, "INVALID_ARGUMENT"),
        ("recallatron_recall", {"query": ""}, "INVALID_ARGUMENT"),
        ("recallatron_read", {"id": missing}, "NOT_FOUND"),
        ("recallatron_read", {"id": "not-a-uuid"}, "NOT_FOUND"),
        ("recallatron_remember", {"body": "   "}, "INVALID_ARGUMENT"),
        ("recallatron_remember", {"body": "ok", "confidence": 1.5}, "INVALID_ARGUMENT"),
        ("recallatron_remember", {"body": "ok", "occurred_at": "yesterday"}, "INVALID_ARGUMENT"),
        (
            "recallatron_remember",
            {"body": "ok", "relations": [{"subject": "a", "predicate": "Audited By", "object": "b"}]},
            "INVALID_ARGUMENT: relations[0].predicate must be a lower-case snake_case predicate",
        ),
        ("recallatron_derive", {"source_ids": [missing], "body": "from nothing"}, "NOT_FOUND"),
        ("recallatron_derive", {"source_ids": [], "body": "from nothing"}, "INVALID_ARGUMENT"),
        ("recallatron_correct", {"id": mem.id, "expected_revision": 7, "body": "stale"}, "ABORTED"),
        ("recallatron_supersede", {"id": mem.id, "expected_revision": 7, "body": "stale"}, "ABORTED"),
        ("recallatron_forget", {"id": missing, "reason": "none"}, "NOT_FOUND"),
    ]

    async def session(client):
        results = [await client.call_tool(name, args) for name, args, _ in cases]
        # Arguments the schema refuses never reach the gateway, and the server goes on answering.
        results.append(await client.call_tool("recallatron_recall", {"query": "x", "top_k": "ten"}))
        results.append(await client.call_tool("recallatron_remember", {"title": "no body"}))
        results.append(await call_ok(client, "recallatron_read", {"id": mem.id}))
        return results

    results = run_stdio(stack, alice.token, session)
    for (name, _, status), result in zip(cases, results, strict=False):
        assert result.is_error, (name, text_of(result))
        assert text_of(result).startswith(status if ":" in status else f"{status}: "), (name, text_of(result))
    assert results[-3].is_error and text_of(results[-3]).startswith("INVALID_ARGUMENT: top_k: Input should be a valid")
    assert results[-2].is_error and text_of(results[-2]) == "INVALID_ARGUMENT: body: Field required"
    assert results[-1].structured_content["memory"]["revision"] == "1"
    assert alice.read(mem.id).revision == 1  # the stale correct and supersede changed nothing


def test_an_unreachable_gateway_is_unavailable_not_a_crash(stack, members):
    async def session(client):
        return [await client.call_tool("recallatron_recall", {"query": "anything"}) for _ in range(2)]

    results = run_stdio(stack, members[0].token, session, gateway=f"127.0.0.1:{free_port()}")
    assert all(r.is_error and text_of(r).startswith("UNAVAILABLE: ") for r in results), [text_of(r) for r in results]


def test_http_forwards_each_requests_own_token_and_members_stay_apart(stack, members, http_server):
    alice, bob, stranger = members
    word = "quillwort"
    private = alice.remember(f"Alice's private {word} note: her locker code is 4411.", audience=m.AUDIENCE_MEMBER)
    shared = alice.remember(f"The team {word} plan is on the wiki.")
    stack.wait_backlog_empty()

    async def recall_and_read(client):
        listed = {t.name for t in (await client.list_tools()).tools}
        recalls = [
            await call_ok(client, "recallatron_recall", {"query": f"{word} locker code", "mode": mode})
            for mode in ("lexical", "dense", "hybrid")
        ]
        read_private = await client.call_tool("recallatron_read", {"id": private.id})
        read_shared = await client.call_tool("recallatron_read", {"id": shared.id})
        return listed, recalls, read_private, read_shared

    def seen(recalls) -> set[str]:
        return {item["memory"]["id"] for r in recalls for item in r.structured_content.get("items", [])}

    listed, recalls, read_private, read_shared = run_http(http_server, alice.token, recall_and_read)
    assert listed == TOOLS
    assert {private.id, shared.id} <= seen(recalls)
    assert not read_private.is_error and "4411" in text_of(read_private)

    _, recalls, read_private, read_shared = run_http(http_server, bob.token, recall_and_read)
    assert shared.id in seen(recalls) and private.id not in seen(recalls)
    # The private text, not "4411" alone: four hex digits also turn up inside a uuid (seen once in a full run).
    assert not any("locker code is 4411" in text_of(r) for r in recalls)
    assert text_of(read_private).startswith("NOT_FOUND: ") and not read_shared.is_error

    _, recalls, read_private, read_shared = run_http(http_server, stranger.token, recall_and_read)
    assert not seen(recalls) & {private.id, shared.id}
    assert text_of(read_private).startswith("NOT_FOUND: ") and text_of(read_shared).startswith("NOT_FOUND: ")


def test_concurrent_members_on_one_http_server_each_see_only_their_own(stack, members, http_server):
    alice, bob, _ = members
    word = "marramgrass"
    mine = {
        who.id: who.remember(f"{word} secret of member {who.id}", audience=m.AUDIENCE_MEMBER).id for who in (alice, bob)
    }
    rounds = 5

    async def member_session(who, seen: list):
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {who.token}"}) as http:
            async with Client(streamable_http_client(http_server, http_client=http)) as client:
                for _ in range(rounds):
                    result = await call_ok(client, "recallatron_recall", {"query": word, "mode": "lexical"})
                    seen.append({item["memory"]["id"] for item in result.structured_content["items"]})
                    await anyio.sleep(0)

    seen = {alice.id: [], bob.id: []}

    async def main():
        async with anyio.create_task_group() as tg:
            tg.start_soon(member_session, alice, seen[alice.id])
            tg.start_soon(member_session, bob, seen[bob.id])

    anyio.run(main)
    for who in (alice, bob):
        other = next(v for k, v in mine.items() if k != who.id)
        assert len(seen[who.id]) == rounds
        assert all(mine[who.id] in ids and other not in ids for ids in seen[who.id]), seen[who.id]


def test_http_refuses_a_missing_token(stack, http_server):
    """(A token the gateway refuses is a 401 before any session: tests/test_mcp_http.py.)"""
    response = httpx2.post(
        http_server, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers={"Accept": "application/json"}
    )
    assert response.status_code == 401 and response.json()["error"] == "UNAUTHENTICATED"


def test_command_line_errors(stack):
    env = {k: v for k, v in os.environ.items() if k != "RECALLATRON_TOKEN"}
    mcp = functools.partial(recallatron, "mcp", "--gateway", gateway_addr(stack))  # in this process
    no_token = mcp(env=env)
    assert no_token.returncode == 1 and "no token" in no_token.stderr
    for bad in ("8080", "localhost:http", "127.0.0.1:70000", ":80"):
        usage = mcp("--http", bad, env=env)
        assert usage.returncode == 2 and "HOST:PORT" in usage.stderr, bad
    both = mcp("--http", "127.0.0.1:1", "--token", "x", env=env)
    assert both.returncode == 1 and "--token is for stdio" in both.stderr
    # The result bound is checked when the server starts (1,000..200,000 tokens, 4,000..800,000 characters).
    for name, value in [("TOKENS", "999"), ("TOKENS", "lots"), ("CHARS", "3999"), ("CHARS", "-1")]:
        bad_bound = mcp(env={**env, "RECALLATRON_TOKEN": "rct_x", f"RECALLATRON_MCP_MAX_{name}": value})
        assert bad_bound.returncode == 1 and f"RECALLATRON_MCP_MAX_{name}: " in bad_bound.stderr, bad_bound.stderr


def test_capture_over_stdio(stack, members):
    alice = members[0]
    turn = "Quick note: my daughter Ilse starts violin lessons on Tuesdays, and I hate mornings."

    async def session(client):
        ilse = "my daughter Ilse starts violin lessons on Tuesdays"
        proposals = [
            {"span": ilse, "body": "Ilse has violin on Tuesdays.", "kind": "fact", "about": ["Ilse"]},
            {"span": "Ilse plays the cello", "body": "Ilse plays the cello."},
            {"span": "I hate mornings", "body": "  "},
        ]
        stored = await call_ok(
            client, "recallatron_capture", {"turn": turn, "request_id": "turn-1", "proposals": proposals}
        )
        again = await call_ok(
            client,
            "recallatron_capture",
            {
                "turn": turn,
                "proposals": [{"span": "violin lessons on Tuesdays", "body": "ilse has VIOLIN on tuesdays."}],
            },
        )
        recalled = await call_ok(client, "recallatron_recall", {"query": "When is Ilse's violin?", "mode": "lexical"})
        bad = [
            await client.call_tool("recallatron_capture", {"turn": "", "proposals": []}),
            await client.call_tool(
                "recallatron_capture", {"turn": turn, "proposals": [{"span": "x", "body": "y"}] * 21}
            ),
            await client.call_tool("recallatron_capture", {"turn": turn, "proposals": [{"body": "no span"}]}),
            await client.call_tool(
                "recallatron_capture", {"turn": turn, "proposals": [{"span": "x", "body": "y"}], "request_id": "turn-1"}
            ),
        ]
        return stored, again, recalled, bad

    stored, again, recalled, bad = run_stdio(stack, alice.token, session)
    results = stored.structured_content["results"]
    memory = results[0]["memory"]
    assert memory["origin"] == "ORIGIN_TOLD" and memory["kind"] == "KIND_FACT" and memory["created_by"] == alice.id
    # The span alone: the rest of the turn is the caller's history, not the memory's.
    assert memory["evidence"] == {"span": "my daughter Ilse starts violin lessons on Tuesdays", "turn": ""}
    assert [r["skipped"]["reason"] for r in results[1:]] == [
        "CAPTURE_SKIP_REASON_SPAN_NOT_IN_TURN",
        "CAPTURE_SKIP_REASON_EMPTY_BODY",
    ]
    text = text_of(stored)
    assert text.startswith("proposal 0: stored\n") and "proposal 1: skipped, span_not_in_turn: " in text
    assert "captured from the turn's words \"my daughter Ilse" in text
    skip = again.structured_content["results"][0]["skipped"]
    assert skip["reason"] == "CAPTURE_SKIP_REASON_ALREADY_KNOWN" and skip["known_memory_id"] == memory["id"]
    assert recalled.structured_content["items"][0]["memory"]["id"] == memory["id"]
    assert all(r.is_error for r in bad), [text_of(r) for r in bad]
    assert text_of(bad[0]).startswith("INVALID_ARGUMENT: turn must not be empty")
    assert text_of(bad[1]).startswith("INVALID_ARGUMENT: at most 20 proposals")
    assert text_of(bad[2]) == "INVALID_ARGUMENT: proposals.0.span: Field required"
    assert text_of(bad[3]).startswith("ALREADY_EXISTS: request_id 'turn-1' was already used")


def test_capture_description_carries_its_guidance(stack, members):
    async def session(client):
        return {t.name: t.description for t in (await client.list_tools()).tools}

    described = run_stdio(stack, members[0].token, session)
    assert tools.CAPTURE_GUIDANCE in described["recallatron_capture"]
    assert (ROOT / "docs" / "agents.md").read_text().count("recallatron_capture") >= 2


@pytest.fixture(scope="module")
def bundled(stack):
    """A workspace with the context bundle on: two members, each with a private memory, and a shared one."""
    ws = stack.workspace("mcp bundle")
    stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, context_bundle=True), metadata=stack.op()
    )
    alice, bob = stack.member(ws), stack.member(ws)
    alice.remember("Alice's private bundle note: her desk is 4B.", audience=m.AUDIENCE_MEMBER)
    bob.remember("Bob's private bundle note: his desk is 7C.", audience=m.AUDIENCE_MEMBER)
    alice.remember("The team bundle note: standup moved to 9:30.")
    return alice, bob


async def context_both_ways(client, purpose: str = "conversation", budget: str = "0"):
    """The prompt's and the resource's text, or the MCPError each raised."""
    out = []
    for read in (
        lambda: client.get_prompt("recallatron_context", {"purpose": purpose, "token_budget": budget}),
        lambda: client.read_resource(f"recallatron://context/{purpose}"),
    ):
        try:
            result = await read()
        except MCPError as exc:
            out.append(exc)
            continue
        out.append(result.messages[0].content.text if hasattr(result, "messages") else result.contents[0].text)
    return out


def test_context_prompt_and_resource_over_stdio(stack, bundled, members):
    alice, _ = bundled

    async def session(client):
        prompts = [p.name for p in (await client.list_prompts()).prompts]
        templates = [r.uri_template for r in (await client.list_resource_templates()).resource_templates]
        return prompts, templates, await context_both_ways(client), await context_both_ways(client, budget="200")

    prompts, templates, (prompt, resource), (short, _) = run_stdio(stack, alice.token, session)
    assert prompts == ["recallatron_context"] and templates == ["recallatron://context/{purpose}"]
    for text in (prompt, resource):
        assert text.startswith("# Recallatron context (conversation, built ")
        assert "desk is 4B" in text and "standup moved to 9:30" in text and "7C" not in text
    assert prompt.split("\n")[1:] == resource.split("\n")[1:]
    assert "# Cut to fit 200 tokens: " in short and "desk is 4B" not in short

    async def refused(client):
        return await context_both_ways(client), await context_both_ways(client, purpose="gossip")

    off, bad_purpose = run_stdio(stack, members[0].token, refused)  # a workspace with the bundle off
    for exc in off:
        assert isinstance(exc, MCPError) and exc.message.startswith("FAILED_PRECONDITION: ")
        assert "context_bundle" in exc.message
    assert all(isinstance(exc, MCPError) for exc in bad_purpose)
    assert bad_purpose[1].message.startswith("INVALID_ARGUMENT: purpose must be one of")


def test_context_over_http_is_each_members_own(stack, bundled, http_server):
    alice, bob = bundled
    prompt, resource = run_http(http_server, alice.token, context_both_ways)
    assert "4B" in prompt and "4B" in resource and "7C" not in prompt + resource
    prompt, resource = run_http(http_server, bob.token, context_both_ways)
    assert "7C" in prompt and "7C" in resource and "4B" not in prompt + resource
    assert "standup moved to 9:30" in prompt


def bounded(text: str, tokens: int = 8_000, chars: int = 32_000) -> bool:
    """Within the default bound of an MCP result (servicekit.render.tokens counts the tokens)."""
    if len(text) > chars:
        return False
    from servicekit.render import tokens as count

    return count(text) <= tokens


@pytest.mark.slow
def test_a_recall_of_long_memories_stays_within_the_bound_and_says_what_was_cut(stack):
    ws = stack.workspace("mcp long")
    alice = stack.member(ws)
    words = ["ledger", "harbour", "violin", "pepper", "granite", "meadow", "lantern", "quartz"]
    bodies = [
        f"kestrelwing {i} " + " ".join(words[(i + j) % 8] + str(j) for j in range(5_500)) for i in range(40)
    ]  # about 55,000 characters each, under the 64 KiB a body may hold
    batch = g.RememberBatchRequest(
        requests=[
            g.RememberRequest(purpose=m.PURPOSE_CONVERSATION, body=b, audience=m.AUDIENCE_WORKSPACE) for b in bodies
        ]
    )
    ids = [r.memory.id for r in stack.memory.RememberBatch(batch, metadata=alice.md()).results]
    assert all(ids) and min(map(len, bodies)) > 50_000
    full = dict(zip(ids, bodies, strict=True))

    async def session(client):
        defaults = await call_ok(client, "recallatron_recall", {"query": "kestrelwing"})
        many = await call_ok(client, "recallatron_recall", {"query": "kestrelwing", "mode": "lexical", "top_k": 200})
        first = defaults.structured_content["items"][0]["memory"]
        offset = len(first["body"])
        rest = await call_ok(client, "recallatron_read", {"id": first["id"], "body_offset": offset})
        past = await call_ok(client, "recallatron_read", {"id": first["id"], "body_offset": 10**6})
        bad = await client.call_tool("recallatron_read", {"id": first["id"], "body_offset": -1})
        return defaults, many, rest, past, bad

    defaults, many, rest, past, bad = run_stdio(stack, alice.token, session)
    for result in (defaults, many, rest, past):
        assert bounded(text_of(result)), len(text_of(result))
        assert bounded(json.dumps(result.structured_content, ensure_ascii=False))
    # At the defaults all 10 are shown, each body cut alike in the text and the structured content.
    items = defaults.structured_content["items"]
    assert len(items) == 10 and "cut" not in defaults.structured_content
    text = text_of(defaults)
    for item in items:
        mem = item["memory"]
        shown = mem["body"]
        assert 200 <= len(shown) < len(full[mem["id"]]) and full[mem["id"]].startswith(shown)
        assert mem["cut"] == {"body": {"chars_left_out": len(full[mem["id"]]) - len(shown)}}
        marker = (
            f"  body: {json.dumps(shown)} [cut: {len(full[mem['id']]) - len(shown)} more characters; "
            f"recallatron_read id {mem['id']} body_offset {len(shown)} for the rest]"
        )
        assert marker in text.split("\n")
    # Reading on from the offset the cut named continues the body exactly.
    first = items[0]["memory"]
    more = rest.structured_content["memory"]
    offset = len(first["body"])
    assert full[first["id"]][offset:].startswith(more["body"]) and len(more["body"]) > 1_000
    assert more["cut"]["body"]["body_offset"] == offset
    assert more["cut"]["body"]["chars_left_out"] == len(full[first["id"]]) - offset - len(more["body"])
    assert f"  body from character {offset}: " in text_of(rest)
    assert past.structured_content["memory"]["body"] == "" and "body from character 10000" not in text_of(past)
    assert bad.is_error and text_of(bad).startswith("INVALID_ARGUMENT: body_offset")
    # 40 asked for: the list is cut from its end, and both parts say how many were left out.
    kept = many.structured_content["items"]
    left = many.structured_content["cut"]["items"]["items_left_out"]
    assert kept and left and len(kept) + left == many.structured_content["counts"]["returned"] == 40
    assert [it["rank"] for it in kept] == list(range(1, len(kept) + 1))
    assert text_of(many).split("\n")[-1].startswith(f"# {left} more recalled memories left out")


def test_remember_and_capture_default_to_the_member_alone(stack):
    ws = stack.workspace("mcp audience")
    alice, bob = stack.member(ws), stack.member(ws)
    turn = "By the way, I prefer tea to coffee, and the team offsite is in Lisbon."

    async def session(client):
        mine = await call_ok(client, "recallatron_remember", {"body": "The user prefers tea."})
        captured = await call_ok(
            client,
            "recallatron_capture",
            {"turn": turn, "proposals": [{"span": "I prefer tea to coffee", "body": "Prefers tea to coffee."}]},
        )
        shared = await call_ok(
            client,
            "recallatron_capture",
            {
                "turn": turn,
                "proposals": [
                    {"span": "the team offsite is in Lisbon", "body": "Offsite: Lisbon.", "audience": "workspace"}
                ],
            },
        )
        team = await call_ok(client, "recallatron_remember", {"body": "Standup at 9:30.", "audience": "workspace"})
        bad = await client.call_tool("recallatron_remember", {"body": "x", "audience": "everyone"})
        return mine, captured, shared, team, bad

    mine, captured, shared, team, bad = run_stdio(stack, alice.token, session)
    private = [mine.structured_content["memory"], captured.structured_content["results"][0]["memory"]]
    public = [shared.structured_content["results"][0]["memory"], team.structured_content["memory"]]
    for mem in private:
        assert (mem["audience"], mem["audience_member_id"]) == ("AUDIENCE_MEMBER", alice.id)
        assert code_of(bob.read, mem["id"]) == grpc.StatusCode.NOT_FOUND
        assert alice.read(mem["id"]).body == mem["body"]
    assert f"private to member {alice.id}" in text_of(mine)
    for mem in public:
        assert mem["audience"] == "AUDIENCE_WORKSPACE" and bob.read(mem["id"]).body == mem["body"]
    assert bad.is_error and text_of(bad).startswith("INVALID_ARGUMENT: audience: ")
