"""Two gateways side by side on one stack: this checkout's and another checkout's (or commit's)
code, asked the same questions in turn, so a change to the recall path is measured against the
code before it under the same machine load (this host's figures drift by 10 to 20% between runs
minutes apart, more than most changes to the path).

    .venv/bin/python -m bench.gateway_ab --other /path/to/other/checkout [--size 100000] [--rounds 2]

Starts ``recallatron up`` (this checkout) on a workspace built by ``bench.run`` in ``--home``,
then a second gateway from ``--other`` (``recallatron serve gateway`` with that checkout's code on
``PYTHONPATH``) on ``--other-port``, pointed at the same store, embed and rank services. The other
checkout's gateway must speak the same store, embed and rank contracts (fields it does not know
are ignored, so a gateway from before an additive proto change works). Each question is recalled
once through each gateway per round, the order alternating per question, after one warm-up round
that is not counted. Re-rank off, top 10, purpose conversation. Prints p50 / p95 per mode and the
ratio of the p50s (this checkout over the other); never writes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from bench import corpus
from bench.stack import Stack
from servicekit import clients

MODES = {"hybrid": m.RECALL_MODE_HYBRID, "lexical": m.RECALL_MODE_LEXICAL, "dense": m.RECALL_MODE_DENSE}
READY_SECONDS = 60.0


def _other_gateway(other: Path, stack: Stack, addr: str) -> subprocess.Popen:
    """``recallatron serve gateway`` from the other checkout, on ``addr``, using the stack's services."""
    env = dict(
        os.environ,
        PYTHONPATH=f"{other}:{other / 'gen'}",
        RECALLATRON_HOME=str(stack.home.resolve()),
        RECALLATRON_GATEWAY_ADDR=addr,
        RECALLATRON_STORE_ADDR=stack.addrs["store"],
        RECALLATRON_EMBED_ADDR=stack.addrs["embed"],
        RECALLATRON_RANK_ADDR=stack.addrs["rank"],
        RECALLATRON_GATEWAY_METRICS_PORT="0",
    )
    env.pop("DATABASE_URL", None)
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", "gateway"],
        cwd=other,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _percentile(sorted_ms: list[float], q: float) -> float:
    return sorted_ms[int(q * (len(sorted_ms) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--other", type=Path, required=True, help="the other checkout (its gateway is B)")
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=2, help="counted rounds over the questions (default 2)")
    ap.add_argument("--modes", default="hybrid,lexical", help="comma-separated: hybrid, lexical, dense")
    ap.add_argument("--home", type=Path, default=corpus.ROOT / ".bench" / "home")
    ap.add_argument("--other-port", type=int, default=50161)
    args = ap.parse_args()
    modes = [name.strip() for name in args.modes.split(",") if name.strip()]
    unknown = [name for name in modes if name not in MODES]
    if unknown or not modes:
        raise SystemExit(f"--modes takes {', '.join(MODES)}; got {args.modes!r}")
    if not (args.other / "cli" / "main.py").is_file():
        raise SystemExit(f"{args.other} is not a Recallatron checkout (no cli/main.py)")
    manifest = args.home / "bench-workspaces.json"
    key = f"{args.size}/{corpus.RECIPE}"
    entries = json.loads(manifest.read_text()) if manifest.is_file() else {}
    if key not in entries:
        raise SystemExit(f"no {args.size:,} workspace in {args.home}: build it with python -m bench.run --build-only")
    entry = entries[key]
    stack = Stack.start(args.home)
    addr = f"127.0.0.1:{args.other_port}"
    other = _other_gateway(args.other.resolve(), stack, addr)
    try:
        a, b = client.Gateway(stack.addrs["gateway"], None), client.Gateway(addr, None)
        probe = clients.channel(addr)
        deadline = time.monotonic() + READY_SECONDS
        while not clients.is_serving(probe):
            if other.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the gateway of {args.other} did not start on {addr}")
            time.sleep(0.5)
        probe.close()
        md = client.bearer(entry["token"])
        questions = corpus.questions()
        ms: dict[tuple[str, str], list[float]] = {}
        for mode in modes:
            for rnd in range(args.rounds + 1):
                for i, q in enumerate(questions):
                    pair = [("A", a), ("B", b)] if i % 2 == 0 else [("B", b), ("A", a)]
                    for name, gw in pair:
                        req = g.RecallRequest(
                            query=q.text, purpose=m.PURPOSE_CONVERSATION, mode=MODES[mode], top_k=10, skip_rerank=True
                        )
                        start = time.perf_counter()
                        gw.memory.Recall(req, metadata=md, timeout=120)
                        if rnd:  # round 0 warms both
                            ms.setdefault((mode, name), []).append((time.perf_counter() - start) * 1000)
        print(f"## Gateway A/B at {args.size:,} memories: A = this checkout, B = {args.other}\n")
        print(f"{len(questions)} questions x {args.rounds} rounds per mode, alternating; ms\n")
        print("| mode | A p50 / p95 | B p50 / p95 | A p50 / B p50 |")
        print("|---|---|---|---|")
        for mode in modes:
            av, bv = sorted(ms[(mode, "A")]), sorted(ms[(mode, "B")])
            a50, b50 = statistics.median(av), statistics.median(bv)
            print(
                f"| {mode} | {a50:.1f} / {_percentile(av, 0.95):.1f} | {b50:.1f} / {_percentile(bv, 0.95):.1f} "
                f"| {a50 / b50:.3f} |"
            )
        a.close()
        b.close()
    finally:
        other.terminate()
        other.wait()
        stack.stop()


if __name__ == "__main__":
    main()
