"""What moving a workspace between database servers costs (docs/scaling.md, "Moving a workspace").

``recallatron up --embedded-servers 2`` in a bench folder (two embedded PostgreSQL servers on this
machine, pg1 holding the control plane); for each size a workspace built through the product's
write path (``bench.workspace.ensure``: the bench recipe, every memory embedded) on pg1, then moved
to pg2 with ``AdminService.MoveWorkspace`` while one client recalls (hybrid, top 10, the recall mix's
questions in turn) before, during and after the move. Reported per size: the write pause the move
reports (database read-only to switch), the whole call's time, the rows copied, and recall p50 /
p95 in each phase, with the recalls that failed. Then the workspace is moved back, so a later run
finds it on pg1 again.

    python -m bench.move_bench --sizes 10000,100000 [--home .bench/move-home] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

import grpc
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from bench import corpus, workspace
from bench.measure import summary
from bench.stack import Stack

SETTLE_SECONDS = 5.0  # recalls before and after the move, each phase


def _recalls(gw: client.Gateway, token: str, questions: list[str], stop: threading.Event, out: list) -> None:
    """Recalls in turn until ``stop``; each as (start, milliseconds, status code name)."""
    md = client.bearer(token)
    n = 0
    while not stop.is_set():
        q = questions[n % len(questions)]
        t0 = time.monotonic()
        try:
            gw.memory.Recall(
                g.RecallRequest(query=q, purpose=m.PURPOSE_CONVERSATION, mode=m.RECALL_MODE_HYBRID, top_k=10),
                metadata=md,
                timeout=30,
            )
            code = "OK"
        except grpc.RpcError as exc:
            code = exc.code().name
        out.append((t0, (time.monotonic() - t0) * 1000, code))
        n += 1


def measure(stack: Stack, gw: client.Gateway, size: int, questions: list[str]) -> dict:
    entry = workspace.ensure(stack, gw, size)
    ws = entry["workspace_id"]
    where = gw.admin.GetWorkspace(g.GetWorkspaceRequest(workspace_id=ws), metadata=gw.metadata).workspace.server
    there = "pg2" if where == "pg1" else "pg1"
    samples: list = []
    stop = threading.Event()
    prober = threading.Thread(target=_recalls, args=(gw, entry["token"], questions, stop, samples))
    prober.start()
    try:
        time.sleep(SETTLE_SECONDS)
        started = time.monotonic()
        resp = gw.admin.MoveWorkspace(
            g.MoveWorkspaceRequest(workspace_id=ws, server=there), metadata=gw.metadata, timeout=3600
        )
        ended = time.monotonic()
        time.sleep(SETTLE_SECONDS)
    finally:
        stop.set()
        prober.join()
    phases = {"before": lambda t: t < started, "during": lambda t: started <= t < ended, "after": lambda t: t >= ended}
    recall = {}
    for name, inside in phases.items():
        ok = [ms for t, ms, code in samples if inside(t) and code == "OK"]
        failed = sorted({code for t, _, code in samples if inside(t) and code != "OK"})
        recall[name] = {
            **{k: round(v, 1) for k, v in summary(ok).items() if k != "n"},
            "n": len(ok),
            "failed": sum(1 for t, _, code in samples if inside(t) and code != "OK"),
            "codes": failed,
        }
    home = g.MoveWorkspaceRequest(workspace_id=ws, server=where)
    back = gw.admin.MoveWorkspace(home, metadata=gw.metadata, timeout=3600)
    return {
        "size": size,
        "from": resp.from_server,
        "to": resp.to_server,
        "rows_copied": resp.rows_copied,
        "write_pause_ms": resp.write_pause_ms,
        "move_seconds": round(ended - started, 2),
        "back_write_pause_ms": back.write_pause_ms,
        "recall_hybrid_ms": recall,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000", help="workspace sizes, comma-separated")
    ap.add_argument("--home", type=Path, default=corpus.ROOT / ".bench" / "move-home", help="bench data folder")
    ap.add_argument("--json", type=Path, help="also write the results to this file")
    args = ap.parse_args()
    corpus.require_eval()
    sizes = [int(s) for s in args.sizes.split(",")]
    questions = [q.text for q in corpus.questions()][:200]
    stack = Stack.start(args.home, port_base=50250, args=("--embedded-servers", "2"))
    try:
        gw = client.Gateway(stack.addrs["gateway"], stack.operator_token())
        results = [measure(stack, gw, size, questions) for size in sizes]
    finally:
        stack.stop()
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    for r in results:
        b, d, a = (r["recall_hybrid_ms"][p] for p in ("before", "during", "after"))
        print(
            f"| {r['size']:,} | {r['write_pause_ms'] / 1000:.1f} s | {r['move_seconds']:.1f} s | {r['rows_copied']:,} "
            f"| {b['p50']} / {b['p95']} | {d['p50']} / {d['p95']} ({d['failed']} failed) | {a['p50']} / {a['p95']} |",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
