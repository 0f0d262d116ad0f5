"""Ingest rate, single ``Remember`` against ``RememberBatch``, side by side in one run (issue 7, item 6:
>= 1,000 memories/s through the batch form, embedding excluded).

Texts: short real sentences from the eval data (``bench.corpus.EVAL``) (every LoCoMo turn and SciFact abstract split
after ``.``, ``!`` or ``?`` followed by white space and a capital, digit, quote or bracket; sentences
of 4..60 words, first occurrence only, shuffled with a fixed seed), each with its source's title and
occurred_at, written as workspace-audience notes for the conversation purpose with a unique
request_id (as ``recallatron load`` writes them).

System: by default a private ``recallatron up`` (``bench.stack.Stack``: embedded PostgreSQL, the
four services as separate processes) in a temporary folder on ports ``--port-base``+1..4, with the
embed service paused (SIGSTOP) so the embedding job takes no CPU: the rates exclude embedding while
the embedding jobs are still queued in each write transaction (the backlog printed at the end
counts them). ``--gateway`` with ``--operator-token`` measures a running system instead (its
embedding job keeps running, so embedding is then not excluded).

Then, on one fresh workspace and member: ``--single`` rows through ``Remember`` from ``--threads``
client threads (one call per row), and ``--batch`` rows through ``RememberBatch`` from
``--threads`` client threads, ``--batch-size`` rows a call. Rate = rows / wall time of that phase;
every row must succeed.

Usage: ``.venv/bin/python -m bench.ingest_bench [--single 2000] [--batch 20000] [--threads 4]
[--batch-size 500] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from bench.corpus import EVAL, require_eval
from cli.dataset import occurred_at as _occurred
from cli.dataset import read_jsonl

SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
MIN_WORDS, MAX_WORDS = 4, 60
SEED = 11


def sentences(n: int) -> list[tuple[str, str, str | None]]:
    """``n`` distinct (title, sentence, occurred_at) from the shared eval data (see the module doc)."""
    sources = [p for d in sorted((EVAL / "locomo").iterdir()) if (p := d / "memories.jsonl").is_file()]
    sources.append(EVAL / "scifact" / "memories.jsonl")
    seen: set[str] = set()
    out = []
    for path in sources:
        for row in read_jsonl(path):
            for text in SENTENCE_SPLIT.split(row["body"]):
                text = text.strip()
                if MIN_WORDS <= len(text.split()) <= MAX_WORDS and text not in seen:
                    seen.add(text)
                    out.append((row.get("title") or "", text, row.get("occurred_at")))
    if len(out) < n:
        raise SystemExit(f"only {len(out)} distinct sentences in {EVAL}; ask for fewer rows")
    random.Random(SEED).shuffle(out)
    return out[:n]


def request(title: str, body: str, occurred: str | None, request_id: str) -> g.RememberRequest:
    req = g.RememberRequest(
        purpose=m.PURPOSE_CONVERSATION,
        kind=m.KIND_NOTE,
        title=title,
        body=body,
        audience=m.AUDIENCE_WORKSPACE,
        request_id=request_id,
    )
    when = _occurred(occurred)
    if when is not None:
        req.occurred_at.FromDatetime(when)
    return req


def timed(fn, items, threads: int) -> tuple[float, list[float]]:
    """Runs ``fn`` over ``items`` on ``threads`` threads; (wall seconds, per-call seconds)."""

    def one(item):
        start = time.perf_counter()
        fn(item)
        return time.perf_counter() - start

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        calls = list(pool.map(one, items))
    return time.perf_counter() - start, calls


def measure(gw: client.Gateway, args) -> dict:
    """Both phases on a fresh workspace; the figures as a dict."""
    ws = gw.admin.CreateWorkspace(g.CreateWorkspaceRequest(name="ingest bench"), metadata=gw.metadata).workspace_id
    token = gw.admin.AddMember(
        g.AddMemberRequest(workspace_id=ws, display_name="ingest bench"), metadata=gw.metadata
    ).token
    md = client.bearer(token)
    texts = sentences(args.single + args.batch + 50)
    reqs = [request(t, b, o, f"ingest-bench:{i}") for i, (t, b, o) in enumerate(texts)]
    warm, single, batch = reqs[:50], reqs[50 : 50 + args.single], reqs[50 + args.single :]
    for req in warm:  # connections, pools and prepared statements, outside the timings
        gw.memory.Remember(req, metadata=md, timeout=60)

    def remember(req):
        gw.memory.Remember(req, metadata=md, timeout=60)

    def remember_batch(part):
        resp = gw.memory.RememberBatch(g.RememberBatchRequest(requests=part), metadata=md, timeout=300)
        failed = [r.error.message for r in resp.results if not r.HasField("memory")]
        if failed:
            raise SystemExit(f"{len(failed)} rows of a batch failed, e.g. {failed[0]}")

    rows = {}
    if single:  # --single 0 or --batch 0 leaves that form out
        seconds, calls = timed(remember, single, args.threads)
        rows["Remember"] = {
            "rows": len(single),
            "threads": args.threads,
            "rows_per_call": 1,
            "seconds": seconds,
            "memories_per_second": len(single) / seconds,
            "call_ms_p50": statistics.median(calls) * 1000,
        }
    parts = [batch[i : i + args.batch_size] for i in range(0, len(batch), args.batch_size)]
    if parts:
        seconds, calls = timed(remember_batch, parts, args.threads)
        rows["RememberBatch"] = {
            "rows": len(batch),
            "threads": args.threads,
            "rows_per_call": args.batch_size,
            "seconds": seconds,
            "memories_per_second": len(batch) / seconds,
            "call_ms_p50": statistics.median(calls) * 1000,
        }
    backlog = gw.admin.GetStatus(g.GetStatusRequest(), metadata=gw.metadata).embedding_backlog
    return {"forms": rows, "embedding_backlog_after": backlog, "load_average": os.getloadavg()}


def table(result: dict) -> str:
    lines = [
        "| form | rows | client threads | rows a call | seconds | memories/s | call p50 (ms) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in result["forms"].items():
        lines.append(
            f"| {name} | {r['rows']:,} | {r['threads']} | {r['rows_per_call']} | {r['seconds']:.1f} | "
            f"{r['memories_per_second']:,.0f} | {r['call_ms_p50']:.1f} |"
        )
    lines.append(
        f"\nembedding {result['embedding']}; backlog after the run: {result['embedding_backlog_after']:,} "
        f"jobs; load average {' / '.join(f'{x:.1f}' for x in result['load_average'])}"
    )
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--single", type=int, default=2000, help="rows through Remember")
    p.add_argument("--batch", type=int, default=20000, help="rows through RememberBatch")
    p.add_argument("--threads", type=int, default=4, help="client threads of each phase")
    p.add_argument("--batch-size", type=int, default=500)
    p.add_argument("--gateway", help="measure a running system at this address instead of starting one")
    p.add_argument("--operator-token", help="with --gateway: the operator credential")
    p.add_argument("--port-base", type=int, default=50250, help="ports of the private system: base+1..4")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.single < 0 or args.batch < 0 or args.threads < 1 or not 1 <= args.batch_size <= 500:
        p.error("--single and --batch must be >= 0, --threads >= 1, --batch-size 1..500")
    require_eval()
    if args.gateway:
        if not args.operator_token:
            p.error("--gateway needs --operator-token")
        gw = client.Gateway(args.gateway, args.operator_token)
        try:
            result = measure(gw, args)
        finally:
            gw.close()
        result["embedding"] = "running (a system given by --gateway: not excluded)"
    else:
        from bench.stack import Stack

        with tempfile.TemporaryDirectory(prefix="ingest-bench-") as home:
            stack = Stack.start(Path(home), port_base=args.port_base)
            print(f"ingest bench: private system up in {stack.startup_seconds:.1f}s", file=sys.stderr)
            try:
                stack.pause_embed()
                gw = client.Gateway(stack.addrs["gateway"], stack.operator_token())
                try:
                    result = measure(gw, args)
                finally:
                    gw.close()
            finally:
                stack.stop()
        result["embedding"] = "excluded (embed service paused; jobs queued)"
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
