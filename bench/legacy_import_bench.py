"""Wall time of ``recallatron import-legacy`` on the default store of the old store's generator
(issue 10, item 2: under 60 s here, embeddings excluded).

Store: ``--store DIR`` holding legacy.sqlite, graph.jsonl and expected.json, or else one made now
by the old store's generator (tools/make_legacy_store.py, docs/legacy_format.md) with its defaults
(seed 7, 4,000 turns, 523 items: 3,878 turns, 580 digests and 511 items imported, 21 entities, 461
mentions), moved into the past as its ``--into-the-past`` does (its rows run past today, and the
import skips times ahead of the clock).

System: a private ``recallatron up`` (``bench.stack.Stack``) on ports ``--port-base``+1..4 with the
embed service paused (SIGSTOP), so embedding takes no CPU while the jobs are still queued in each
write transaction (embedding excluded, as ``bench/ingest_bench.py`` excludes it).

Each of ``--runs`` runs: a fresh workspace and two members, then the command as an operator types it
(``python -m cli.main import-legacy ... --json`` in a new process: start-up, reading the store, the
member check and every call included), timed from start to exit; its counts must equal
expected.json. Then one re-run on the last workspace (everything answers already imported).
Prints the median and p95 (nearest rank) of the runs, and the re-run.

Usage: ``.venv/bin/python -m bench.legacy_import_bench [--runs 5] [--store DIR] [--json]``
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from recallatron.gateway.v1 import gateway_pb2 as g

import client
from bench.corpus import ROOT
from tools.make_legacy_store import counts_of, into_the_past, write_store

CHATS = ("tg:100200300", "tg:100200301")


def p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def run_import(gw: client.Gateway, gateway: str, token: str, store: Path, ws: str, members: list[str]) -> tuple:
    """One timed ``import-legacy`` in a new process; (seconds, printed counts)."""
    argv = [sys.executable, "-m", "cli.main", "import-legacy", "--workspace", ws, "--json"]
    argv += ["--sqlite", str(store / "legacy.sqlite"), "--graph", str(store / "graph.jsonl")]
    argv += ["--report", str(store / f"report-{ws}.jsonl"), "--gateway", gateway, "--operator-token", token]
    for chat, member in zip(CHATS, members, strict=True):
        argv += ["--member", f"{chat}={member}"]
    started = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=dict(os.environ), check=False)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"import-legacy failed ({done.returncode}): {done.stderr.strip()}")
    return seconds, json.loads(done.stdout)


def measure(gw: client.Gateway, gateway: str, token: str, store: Path, runs: int) -> dict:
    expected = json.loads((store / "expected.json").read_text())
    wanted = counts_of(expected)
    times, ws, members = [], "", []
    for n in range(runs):
        ws = gw.admin.CreateWorkspace(g.CreateWorkspaceRequest(name=f"legacy bench {n}"), metadata=gw.metadata)
        ws = ws.workspace_id
        members = [
            gw.admin.AddMember(g.AddMemberRequest(workspace_id=ws), metadata=gw.metadata).member_id for _ in CHATS
        ]
        seconds, counts = run_import(gw, gateway, token, store, ws, members)
        if counts_of(counts) != wanted:
            raise SystemExit(f"run {n}: counts differ from expected.json: {counts}")
        times.append(seconds)
        print(f"legacy bench: run {n + 1}/{runs}: {seconds:.2f}s", file=sys.stderr)
    rerun, _ = run_import(gw, gateway, token, store, ws, members)
    return {
        "runs": runs,
        "seconds": [round(t, 2) for t in times],
        "median_seconds": round(statistics.median(times), 2),
        "p95_seconds": round(p95(times), 2),
        "rerun_seconds": round(rerun, 2),
        "imported": {k: expected[k]["imported"] for k in ("history", "memories", "digests")},
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--store", type=Path, help="a generated store (default: the generator's default, made now)")
    p.add_argument("--port-base", type=int, default=50350, help="ports of the private system: base+1..4")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    from bench.stack import Stack

    with tempfile.TemporaryDirectory(prefix="legacy-bench-") as home:
        store = args.store
        if store is None:
            store = Path(home) / "store"
            write_store(store)
            into_the_past(store / "legacy.sqlite", datetime.datetime.now(datetime.UTC))
        stack = Stack.start(Path(home) / "system", port_base=args.port_base)
        print(f"legacy bench: private system up in {stack.startup_seconds:.1f}s", file=sys.stderr)
        try:
            stack.pause_embed()
            token = stack.operator_token()
            gw = client.Gateway(stack.addrs["gateway"], token)
            try:
                result = measure(gw, stack.addrs["gateway"], token, store, args.runs)
            finally:
                gw.close()
        finally:
            stack.stop()
    result["embedding"] = "excluded (embed service paused; jobs queued)"
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"import-legacy, default store ({result['imported']}): median {result['median_seconds']}s, "
            f"p95 {result['p95_seconds']}s over {result['runs']} runs {result['seconds']}; "
            f"re-run {result['rerun_seconds']}s; embedding excluded"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
