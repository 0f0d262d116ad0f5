"""examples/chat_bot.py (docs/clients.md) as a user runs it: a process of its own with only the
generated stubs on its path, against the in-process stack (real PostgreSQL, real MiniLM;
tests/conftest.py). What it remembers is stored as the member's own memory; it comes back in a
recall, in the per-turn block put before the model and in the context bundle, exactly as the same
calls made here answer; a session shows a memory once; the example imports nothing of the
project's but the stubs the package installs; and docs/clients.md's Python block runs as written."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "chat_bot.py"
DOC = ROOT / "docs" / "clients.md"
# The stubs alone, as a program of a user's finds them once the package is installed: the
# repository's own packages (client, servicekit, ...) are not on this path.
ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "gen")}
PARROT = "Maria's parrot is called Captain Hook."
KEY = "The boat house key hangs by the kitchen door."
QUESTION = "What is the name of Maria's parrot?"
EARLIER = "bot> I told you earlier in this conversation."
BUILT = re.compile(r"built \d{4}-\d\d-\d\d \d\d:\d\d UTC")  # the bundle's heading says when it was built


def chat(stack, token: str, *lines: str, args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    argv = [sys.executable, str(EXAMPLE), "--gateway", f"127.0.0.1:{stack.gateway.port}", "--token", token, *args]
    return subprocess.run(
        argv, input="".join(f"{x}\n" for x in lines), env=ENV, capture_output=True, text=True, timeout=120
    )


def between(text: str, start: str, end: str) -> list[str]:
    return re.findall(re.escape(start) + r"\n(.*?)\n" + re.escape(end), text, re.DOTALL)


def unbuilt(text: str) -> str:
    """``text`` with the bundle's build time left out: the example's bundle and the one asked for here
    are built a moment apart."""
    found = BUILT.findall(text)
    assert found, text
    return BUILT.sub("built <time>", text)


def test_what_the_bot_remembers_comes_back_in_recall_the_block_and_the_bundle(stack):
    ws = stack.workspace("chat bot example")
    stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, context_bundle=True), metadata=stack.op()
    )
    member = stack.member(ws)
    done = chat(stack, member.token, f"/remember {PARROT}", f"/remember {KEY}")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    said = re.findall(r"^remembered ([0-9a-f-]{36}): (.*)$", done.stdout, re.MULTILINE)
    assert [body for _, body in said] == [PARROT, KEY] and done.stdout.count("\n") == 2, done.stdout
    parrot, key = (member.read(mid) for mid, _ in said)
    assert (parrot.body, key.body) == (PARROT, KEY)
    for mem in (parrot, key):  # the member's own, for conversation, as the example asks
        assert (mem.audience, mem.audience_member_id, mem.created_by) == (m.AUDIENCE_MEMBER, member.id, member.id)
        assert (mem.purpose, mem.kind, mem.origin) == (m.PURPOSE_CONVERSATION, m.KIND_NOTE, m.ORIGIN_TOLD)
    stack.wait_backlog_empty()  # the meaning arm (and so the relevance gate) reads their vectors

    lines = ["/recall what is the parrot called?", QUESTION, "/context", QUESTION, "/quit", f"/remember {KEY}"]
    done = chat(stack, member.token, *lines, args=("--session", "chat-1", "--show-prompt"))
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    out = unbuilt(done.stdout)
    # Recall: the parrot first, every item as the same Recall made here answers it.
    recalled = member.recall("what is the parrot called?", top_k=5)
    assert recalled.items[0].memory.id == parrot.id and recalled.dense_available
    expected = [f"{i.rank}. [{i.memory.id}] {i.memory.body} (cosine {i.cosine:.2f})" for i in recalled.items]
    assert out.splitlines()[: len(expected)] == expected
    assert out.splitlines()[0].startswith(f"1. [{parrot.id}] {PARROT} (cosine ")
    # The turn: the block the gate let through holds the parrot (not the key), and it is in the prompt,
    # after the context bundle; the stand-in model answers from it.
    block = stack.memory.PromptContext(g.PromptContextRequest(text=QUESTION), metadata=member.md())
    assert [i.memory.id for i in block.items] == [parrot.id] and PARROT in block.text
    bundle = stack.memory.GetContext(g.GetContextRequest(purpose=m.PURPOSE_CONVERSATION), metadata=member.md())
    assert {i.memory.id for i in bundle.items} == {parrot.id, key.id} and PARROT in bundle.text and KEY in bundle.text
    bundle_text = unbuilt(bundle.text)
    prompts = between(out, "--- prompt ---", "--- end of prompt ---")
    assert len(prompts) == 2
    assert prompts[0].index(bundle_text) < prompts[0].index(block.text) < prompts[0].index(f"User: {QUESTION}")
    assert f"bot> From memory: {PARROT}" in out
    # /context prints the bundle as GetContext gives it.
    assert f"\n{bundle_text}\n" in out
    # The same turn again in the session: the parrot was put before the model already, so not again.
    assert block.text not in prompts[1] and out.rstrip("\n").endswith(EARLIER)
    # Nothing was read after /quit: the key was not remembered a second time.
    assert len(member.recall(KEY, mode=m.RECALL_MODE_LEXICAL).items) == 1


def test_the_bundle_off_bad_input_and_a_bad_token_are_said_plainly(stack):
    ws = stack.workspace("chat bot example, bundle off")
    member = stack.member(ws)
    done = chat(stack, member.token, "/context", "/remember ", "/recall", f"/remember {PARROT}")
    assert done.returncode == 0
    out = done.stdout.splitlines()
    assert out[0] == "the context bundle is off for this workspace" and out[1].endswith(f": {PARROT}")
    assert len(out) == 2
    errors = done.stderr.splitlines()  # the blank remember and the empty question fail alone
    assert len(errors) == 2 and all(e.startswith("INVALID_ARGUMENT: ") for e in errors), errors
    nothing = chat(stack, member.token, "What did Kofi say about the lease?")
    assert (nothing.returncode, nothing.stdout) == (0, "bot> I have nothing on that yet; tell me with /remember.\n")
    done = chat(stack, "rct_not_a_token", QUESTION)
    assert (done.returncode, done.stdout) == (1, "") and done.stderr.startswith("UNAUTHENTICATED: "), done.stderr
    assert "Traceback" not in done.stderr


def test_the_example_imports_only_grpc_and_the_stubs_the_package_installs():
    """What a user's program can import: the standard library, grpc and the ``recallatron`` stubs;
    every stub package it imports is one pyproject.toml installs (the public import path)."""
    tree = ast.parse(EXAMPLE.read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    ours = {name for name in imported if name.split(".")[0] not in sys.stdlib_module_names}
    assert ours == {"grpc", "recallatron.gateway.v1", "recallatron.memory.v1"}
    installed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    assert ours - {"grpc"} <= installed
    stubs = {".".join(p.relative_to(ROOT / "gen").parent.parts) for p in (ROOT / "gen").rglob("*_pb2_grpc.py")}
    assert stubs == {f"recallatron.{s}.v1" for s in ("embed", "gateway", "memory", "rank", "store")} <= installed


def test_the_python_block_of_docs_clients_md_runs_as_written(stack):
    (snippet,) = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    ws = stack.workspace("clients.md")
    stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, context_bundle=True), metadata=stack.op()
    )
    member = stack.member(ws)
    env = ENV | {"RECALLATRON_GATEWAY_ADDR": f"127.0.0.1:{stack.gateway.port}", "RECALLATRON_TOKEN": member.token}
    done = subprocess.run([sys.executable, "-c", snippet], env=env, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    (stored,) = member.recall("parrot", mode=m.RECALL_MODE_LEXICAL).items
    assert stored.memory.body == PARROT and stored.memory.audience == m.AUDIENCE_MEMBER
    assert done.stdout == f"1 {stored.memory.id} {PARROT}\n"
