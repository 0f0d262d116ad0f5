"""Hybrid recall with the embed service frozen: latencies before and after the circuit breakers.

The system as a user runs it (``recallatron up`` in a bench data folder on bench ports, the
embedded PostgreSQL, four service processes, default settings: embed deadline 2 s), one workspace
holding the demo conversation (``demo/memories.jsonl``, 60 memories) and the 31 demo questions
(``demo/queries.jsonl``) asked as hybrid recalls in turn, each with a 30 s deadline. In one run:

1. normal: ``--recalls`` recalls one after another (p50, p95, max);
2. the embed service frozen with SIGSTOP (its socket stays open: calls are accepted, never answered):
   the first ``--first`` recalls one after another (the first failures), then 40 at once from 40
   threads (wall time, slowest), then ``--recalls`` more one after another (p50, p95, max). Each
   phase notes when it began, in seconds after the freeze: the channel's keepalive (a ping every
   30 s, 10 s to answer; servicekit.clients) drops the frozen connection on its own 10 to 40 s in,
   after which calls fail at once with UNAVAILABLE even without a breaker;
3. SIGCONT, then a recall every 0.1 s: seconds until one answers ``dense_available=true`` again.

Every recall's ``dense_available`` is counted per phase. Run it on a checkout to measure that
checkout (the "before" figures come from running the same file in a copy of the old tree).

    .venv/bin/python -m bench.frozen_embed [--recalls 60] [--first 3] [--home .bench/frozen] [--port-base 50160]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from bench.stack import Stack

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "demo"
PARALLEL = 40
CALL_TIMEOUT = 30.0


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _summary(seconds: list[float]) -> dict:
    a = np.asarray(seconds) * 1000
    return {
        "n": int(a.size),
        "p50_ms": float(np.percentile(a, 50)),
        "p95_ms": float(np.percentile(a, 95)),
        "max_ms": float(a.max()),
    }


def _fill(stack: Stack) -> tuple[client.Gateway, client.Gateway]:
    """A workspace with the demo memories, all embedded; returns (operator, member) gateways."""
    addr = stack.addrs["gateway"]
    op = client.Gateway(addr, stack.operator_token())
    ws = op.admin.CreateWorkspace(g.CreateWorkspaceRequest(name="frozen-embed"), metadata=op.metadata).workspace_id
    token = op.admin.AddMember(g.AddMemberRequest(workspace_id=ws), metadata=op.metadata).token
    member = client.Gateway(addr, token)
    rows = _jsonl(DEMO / "memories.jsonl")
    for row in rows:
        member.memory.Remember(
            g.RememberRequest(
                purpose=m.PURPOSE_CONVERSATION,
                kind=m.KIND_NOTE,
                title=row["title"],
                body=row["body"],
                audience=m.AUDIENCE_WORKSPACE,
            ),
            metadata=member.metadata,
            timeout=CALL_TIMEOUT,
        )
    deadline = time.monotonic() + 600
    while op.admin.GetStatus(g.GetStatusRequest(), metadata=op.metadata, timeout=60).embedding_backlog:
        if time.monotonic() > deadline:
            raise SystemExit("the demo memories were not embedded within 10 minutes")
        time.sleep(0.5)
    return op, member


class Recaller:
    """The demo questions as hybrid recalls, in turn."""

    def __init__(self, member: client.Gateway) -> None:
        self.member = member
        self.questions = [q["question"] for q in _jsonl(DEMO / "queries.jsonl")]
        self.next = 0

    def one(self, i: int | None = None) -> tuple[float, bool]:
        """(seconds, dense_available) of one recall."""
        if i is None:
            i, self.next = self.next, self.next + 1
        req = g.RecallRequest(query=self.questions[i % len(self.questions)], purpose=m.PURPOSE_CONVERSATION)
        start = time.perf_counter()
        resp = self.member.memory.Recall(req, metadata=self.member.metadata, timeout=CALL_TIMEOUT)
        return time.perf_counter() - start, resp.dense_available

    def phase(self, n: int) -> dict:
        runs = [self.one() for _ in range(n)]
        return _summary([s for s, _ in runs]) | {"dense_available": sum(d for _, d in runs)}


def measure(stack: Stack, recalls: int, first: int) -> dict:
    op, member = _fill(stack)
    status = op.admin.GetStatus(g.GetStatusRequest(), metadata=op.metadata, timeout=60)
    rec = Recaller(member)
    for _ in range(5):  # warm-up: connections, caches
        rec.one()
    out = {"reranker": next((d.serving for d in status.dependencies if d.name == "reranker"), None)}
    out["normal"] = rec.phase(recalls)
    stack.pause_embed()
    frozen_at = time.perf_counter()
    try:
        out["first_failures"] = rec.phase(first) | {"from_s": 0.0}
        start = time.perf_counter()
        with ThreadPoolExecutor(PARALLEL) as pool:
            runs = list(pool.map(rec.one, range(PARALLEL)))
        out["parallel"] = {
            "n": PARALLEL,
            "from_s": start - frozen_at,
            "wall_s": time.perf_counter() - start,
            "slowest_s": max(s for s, _ in runs),
            "dense_available": sum(d for _, d in runs),
        }
        start = time.perf_counter()
        out["frozen"] = rec.phase(recalls) | {"from_s": start - frozen_at}
    finally:
        resumed = time.perf_counter()
        stack.resume_embed()
    while True:
        _, dense = rec.one()
        if dense:
            break
        if time.perf_counter() - resumed > 120:
            raise SystemExit("dense_available did not come back within 120 s of SIGCONT")
        time.sleep(0.1)
    out["dense_back_s"] = time.perf_counter() - resumed
    op.close()
    member.close()
    return out


def report(res: dict) -> str:
    lines = [
        f"commit {res['commit']}, reranker available: {res['reranker']}",
        "| phase | recalls | p50 ms | p95 ms | max ms | dense_available |",
        "|---|---|---|---|---|---|",
    ]
    for phase in ("normal", "first_failures", "parallel", "frozen"):
        s = res[phase]
        name = phase if "from_s" not in s else f"{phase} (frozen, from {s['from_s']:.1f} s)"
        if phase == "parallel":
            figures = f"wall {s['wall_s'] * 1000:.0f} | | slowest {s['slowest_s'] * 1000:.0f}"
        else:
            figures = f"{s['p50_ms']:.0f} | {s['p95_ms']:.0f} | {s['max_ms']:.0f}"
        lines.append(f"| {name} | {s['n']} | {figures} | {s['dense_available']} |")
    lines.append(f"dense_available back {res['dense_back_s']:.2f} s after SIGCONT")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recalls", type=int, default=60, help="sequential recalls per phase (default 60)")
    ap.add_argument("--first", type=int, default=3, help="recalls counted as the first failures (default 3)")
    ap.add_argument("--home", type=Path, default=ROOT / ".bench" / "frozen", help="data folder (emptied first)")
    ap.add_argument("--port-base", type=int, default=50160, help="gRPC on base+1..base+4 (default 50160)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--label", help="names the code measured in the report (default: the git commit)")
    args = ap.parse_args(argv)
    shutil.rmtree(args.home, ignore_errors=True)
    stack = Stack.start(args.home, port_base=args.port_base)
    try:
        res = measure(stack, args.recalls, args.first)
    finally:
        stack.stop()
    res["commit"] = (
        args.label
        or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
    )
    print(report(res))
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
