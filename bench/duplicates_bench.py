"""Latency of ``MemoryService.ListDuplicateProposals`` for one member of a 10,000-memory workspace
(issue 9: "with 10,000 memories in a workspace, the duplicate list for one member answers in under a
second"; a bench figure, never a timed test).

Workspace: the recall bench's (``bench.workspace.ensure``: the ``bench.corpus`` recipe written
through RememberBatch as one member, every row embedded by the store's own job), reused when
``--home`` already holds it (``python -m bench.run`` builds the same one), else built now.

System: a private ``recallatron up`` (``bench.stack.Stack``) on ports ``--port-base``+1..4 with the
workspace's data folder ``--home``.

Measured (``measure``): ``--warmup`` calls, then ``--calls`` calls of the first page (page size 0:
the default 50) as the workspace's member for the conversation purpose, each timed on the client
from request to answer (authentication, the stamp from the embed service, the 500-memory window, the
vectors, 124,750 cosines and the page's memories included); median and p95 (nearest rank) in
milliseconds, with the answer's counts (proposals over all pages, memories compared, memories
without a vector) so a figure is never read without what it computed. Then one walk over every page.

Usage: ``.venv/bin/python -m bench.duplicates_bench [--size 10000] [--calls 20] [--json]``
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

from recallatron.embed.v1 import embed_pb2, embed_pb2_grpc
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from bench import corpus
from servicekit import clients

BENCH_DIR = corpus.ROOT / ".bench"
SIZE = 10_000
CALLS = 20
WARMUP = 3


def p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def measure(gw: client.Gateway, token: str, calls: int = CALLS, warmup: int = WARMUP) -> dict:
    """Times ``calls`` first-page ListDuplicateProposals calls (after ``warmup`` untimed ones) as the
    member of ``token``, then walks every page once. Milliseconds; SystemExit when the answer says
    the vectors could not be used (the figure would not be the real work)."""
    md = client.bearer(token)
    req = g.ListDuplicateProposalsRequest(purpose=m.PURPOSE_CONVERSATION)
    for _ in range(warmup):
        gw.memory.ListDuplicateProposals(req, metadata=md, timeout=60)
    times, first = [], None
    for _ in range(calls):
        started = time.perf_counter()
        first = gw.memory.ListDuplicateProposals(req, metadata=md, timeout=60)
        times.append((time.perf_counter() - started) * 1000)
    if first is None or not first.dense_available:
        raise SystemExit("ListDuplicateProposals answered dense_available=false: is the embed service up?")
    pages, seen, token_ = 0, 0, ""
    walk_started = time.perf_counter()
    while True:
        page = gw.memory.ListDuplicateProposals(
            g.ListDuplicateProposalsRequest(purpose=m.PURPOSE_CONVERSATION, page_size=200, page_token=token_),
            metadata=md,
            timeout=60,
        )
        pages, seen, token_ = pages + 1, seen + len(page.proposals), page.next_page_token
        if not token_:
            break
    return {
        "calls": calls,
        "ms": [round(t, 1) for t in times],
        "median_ms": round(statistics.median(times), 1),
        "p95_ms": round(p95(times), 1),
        "proposals": first.total_size,
        "first_page": len(first.proposals),
        "memories_considered": first.memories_considered,
        "memories_without_vectors": first.memories_without_vectors,
        "walk": {"pages": pages, "proposals": seen, "ms": round((time.perf_counter() - walk_started) * 1000, 1)},
    }


def input_version(addr: str) -> str:
    """The embed service's input-version stamp (what the workspace's vectors must carry)."""
    ch = clients.channel(addr)
    try:
        return embed_pb2_grpc.EmbedServiceStub(ch).GetModelInfo(embed_pb2.GetModelInfoRequest()).input_version
    finally:
        ch.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=SIZE, help="memories in the workspace")
    p.add_argument("--calls", type=int, default=CALLS, help="timed calls")
    p.add_argument("--warmup", type=int, default=WARMUP, help="untimed calls first")
    p.add_argument("--home", default=str(BENCH_DIR / "home"), help="data folder (the recall bench's by default)")
    p.add_argument("--port-base", type=int, default=50150, help="ports of the private system: base+1..4")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    from bench import workspace
    from bench.stack import Stack

    stack = Stack.start(Path(args.home), port_base=args.port_base)
    print(f"duplicates bench: system up in {stack.startup_seconds:.1f}s", file=sys.stderr)
    try:
        gw = client.Gateway(stack.addrs["gateway"], stack.operator_token())
        try:
            entry = workspace.ensure(stack, gw, args.size, input_version=input_version(stack.addrs["embed"]))
            result = measure(gw, entry["token"], args.calls, args.warmup)
        finally:
            gw.close()
    finally:
        stack.stop()
    result.update(size=args.size, workspace_built_now=entry["built_now"])
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"ListDuplicateProposals, {args.size:,} memories, one member: median {result['median_ms']} ms, "
            f"p95 {result['p95_ms']} ms over {result['calls']} calls; {result['proposals']} proposals among the "
            f"{result['memories_considered']} newest ({result['memories_without_vectors']} without a vector); "
            f"every page ({result['walk']['pages']}) in {result['walk']['ms']} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
