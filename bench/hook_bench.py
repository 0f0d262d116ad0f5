"""What ``recallatron hook claude-code`` adds to a user's turn (issue 22: at most 50 ms p50 over a plain
Recall at 10,000 memories, process start-up counted separately).

Starts ``recallatron up`` on the bench data folder and ports (``bench.stack``), reuses or builds the
workspace of ``--size`` memories (``bench.workspace``, the rows of ``make bench``), then asks the
bench's questions (``bench.corpus.questions``, the first ``--questions``), and for each one, in turn
so that all three see the same machine load:

- ``Recall``: the request PromptContext makes inside the gateway (hybrid, top 10, re-rank as the
  workspace has it), over one open channel;
- ``PromptContext``: the same text, default budget, no session key, over the same channel;
- the hook in this process: ``cli.hook_command.claude_code`` given the UserPromptSubmit JSON on a
  fresh session id (so the store's session memory is read and written as on a session's first
  turn), as the process runs it after start-up: options, input, a new channel, the call, the output.

Then, separately, the start-up of the process Claude Code runs (``--startup-runs`` times each,
interleaved): ``.venv/bin/recallatron hook claude-code`` with empty input (it logs one line and
exits), and ``python -c pass`` for reference.

Prints p50 / p95 of each (milliseconds) and the hook's p50 over Recall's, as markdown.

Usage: ``.venv/bin/python -m bench.hook_bench [--size 10000] [--questions 120] [--startup-runs 30]``
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from recallatron.embed.v1 import embed_pb2, embed_pb2_grpc
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from bench import corpus, measure, workspace
from bench.run import commit, machine
from bench.stack import Stack
from cli import hook_command
from gateway.prompt_context import TOP_K
from servicekit import clients

SCRIPT = Path(sys.executable).parent / "recallatron"


def ms_since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


def measure_calls(gw: client.Gateway, token: str, addr: str, questions: list[corpus.Question], home: Path) -> dict:
    """Recall, PromptContext and the in-process hook per question, interleaved; milliseconds."""
    md = client.bearer(token)
    os.environ.update(RECALLATRON_TOKEN=token, RECALLATRON_GATEWAY_ADDR=addr, RECALLATRON_HOME=str(home))
    args = hook_command.parse(["claude-code", "--timeout", "30"])
    times: dict[str, list[float]] = {"Recall": [], "PromptContext": [], "hook in process": []}
    blocks = tokens = 0
    for q in questions:
        t0 = time.perf_counter()
        gw.memory.Recall(
            g.RecallRequest(query=q.text, purpose=m.PURPOSE_CONVERSATION, mode=m.RECALL_MODE_HYBRID, top_k=TOP_K),
            metadata=md,
            timeout=120,
        )
        times["Recall"].append(ms_since(t0))
        t0 = time.perf_counter()
        resp = gw.memory.PromptContext(g.PromptContextRequest(text=q.text), metadata=md, timeout=120)
        times["PromptContext"].append(ms_since(t0))
        blocks += bool(resp.text)
        tokens += resp.tokens
        data = {"session_id": str(uuid.uuid4()), "hook_event_name": "UserPromptSubmit", "prompt": q.text}
        out = io.StringIO()
        t0 = time.perf_counter()
        hook_command.claude_code(args, io.BytesIO(json.dumps(data).encode()), out)
        times["hook in process"].append(ms_since(t0))
        if bool(out.getvalue()) != bool(resp.text):
            print(f"bench: note: the hook and PromptContext disagree on {q.text[:60]!r}", file=sys.stderr)
    log = home / "logs" / "hook.log"
    failures = log.read_text().splitlines() if log.exists() else []
    for line in failures[:5]:
        print(f"bench: the hook logged: {line}", file=sys.stderr)
    result = {name: measure.summary(values) for name, values in times.items()}
    result["hook_failures"] = len(failures)
    result["blocks"] = blocks
    result["mean_tokens"] = tokens / max(len(questions), 1)
    return result


def transcript(questions: list[corpus.Question], off_topic: str) -> list[tuple[str, str]]:
    """The hook's input and output (in this process, environment as set by ``measure_calls``) for the
    first question whose block is not empty and for an off-topic prompt: what docs/agents.md shows."""
    args = hook_command.parse(["claude-code", "--timeout", "30"])

    def run(prompt: str) -> tuple[str, str]:
        data = {"session_id": str(uuid.uuid4()), "cwd": "/home/me/project", "hook_event_name": "UserPromptSubmit"}
        text = json.dumps(data | {"prompt": prompt})
        out = io.StringIO()
        hook_command.claude_code(args, io.BytesIO(text.encode()), out)
        return text, out.getvalue()

    found = next((pair for pair in map(run, (q.text for q in questions)) if pair[1]), None)
    return [*([found] if found else []), run(off_topic)]


def measure_startup(runs: int, home: Path) -> dict:
    """The hook's process with empty input, beside ``python -c pass``; milliseconds."""
    env = dict(os.environ, RECALLATRON_HOME=str(home))
    times: dict[str, list[float]] = {"recallatron hook claude-code (empty input)": [], "python -c pass": []}
    commands = {
        "recallatron hook claude-code (empty input)": [str(SCRIPT), "hook", "claude-code"],
        "python -c pass": [sys.executable, "-c", "pass"],
    }
    for _ in range(runs):
        for name, cmd in commands.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, input=b"", capture_output=True, env=env, check=True, timeout=60)
            times[name].append(ms_since(t0))
    return {name: measure.summary(values) for name, values in times.items()}


def markdown(res: dict) -> str:
    calls, start = res["calls"], res["startup"]
    rows = [
        "| | p50 ms | p95 ms |",
        "|---|---:|---:|",
        *(f"| {name} | {s['p50']:.1f} | {s['p95']:.1f} |" for name, s in calls.items() if isinstance(s, dict)),
    ]
    over = calls["hook in process"]["p50"] - calls["Recall"]["p50"]
    lines = [
        f"Run {res['date']}, commit {res['commit']}, {res['machine']}.",
        f"Command: `{res['command']}`. {res['questions']} questions of `bench.corpus.questions` at "
        f"{res['size']:,} memories; {calls['blocks']} PromptContext blocks were not empty "
        f"(mean {calls['mean_tokens']:.0f} tokens a question); the hook logged {calls['hook_failures']} failures.",
        "",
        *rows,
        "",
        f"The hook's in-process handling p50 is {over:+.1f} ms over a plain Recall's (target: at most +50 ms).",
        "",
        "| process start-up | p50 ms | p95 ms |",
        "|---|---:|---:|",
        *(f"| {name} | {s['p50']:.1f} | {s['p95']:.1f} |" for name, s in start.items()),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hook_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000, help="memories in the workspace")
    parser.add_argument("--questions", type=int, default=120, help="the first N of the bench's questions")
    parser.add_argument("--startup-runs", type=int, default=30, help="process start-ups of each command")
    parser.add_argument("--home", default=str(corpus.ROOT / ".bench" / "home"), help="the measured stack's data folder")
    parser.add_argument("--port-base", type=int, default=50150)
    args = parser.parse_args(argv)
    questions = list(corpus.questions())[: args.questions]
    res = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="minutes"),
        "commit": commit(),
        "machine": machine(),
        "command": "python -m bench.hook_bench " + " ".join(argv if argv is not None else sys.argv[1:]),
        "questions": len(questions),
        "size": args.size,
    }
    stack = Stack.start(Path(args.home), args.port_base)
    try:
        gw = client.Gateway(stack.addrs["gateway"], stack.operator_token())
        ch = clients.channel(stack.addrs["embed"])
        version = embed_pb2_grpc.EmbedServiceStub(ch).GetModelInfo(embed_pb2.GetModelInfoRequest()).input_version
        ch.close()
        entry = workspace.ensure(stack, gw, args.size, input_version=version)
        with tempfile.TemporaryDirectory() as tmp:
            res["calls"] = measure_calls(gw, entry["token"], stack.addrs["gateway"], questions, Path(tmp) / "calls")
            res["startup"] = measure_startup(args.startup_runs, Path(tmp) / "startup")
            res["transcript"] = transcript(questions, "Can you suggest a good recipe for banana bread?")
        gw.close()
    finally:
        stack.stop()
    print(markdown(res))
    for data, output in res["transcript"]:
        print(f"\nhook input:  {data}\nhook output: {output or '(nothing)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
