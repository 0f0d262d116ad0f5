"""Where the keyword arm's time goes in a bench workspace: per question, the postings of the kept
terms, the memories they name and the statement's time, then ``EXPLAIN (ANALYZE, BUFFERS)`` of the
slowest questions split into the postings scan and the aggregation.

    .venv/bin/python -m bench.lexical_profile --size 1000000 [--home .bench/home] [--explain 3]

Needs a workspace built by ``bench.run`` in ``--home`` (its manifest names the member); starts that
folder's embedded PostgreSQL if no stack is running on it, and never writes. The statement is the
store's own (``candidates._score_all`` through ``candidates.lexical``, limit 100, as the gateway
asks); each question is timed 3 times after a warm-up pass, the best counted, so the figures are
of cached pages. Prints markdown.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo
from recallatron.memory.v1 import memory_pb2 as m

from bench import corpus
from servicekit.embedded_pg import EmbeddedPostgres
from store_service import candidates
from store_service.database import new_db_name

LIMIT = 100


class _Capture:
    """Wraps ``candidates._score_all`` to keep the arguments of its last call."""

    def __init__(self) -> None:
        self.inner, self.last = candidates._score_all, {}

    def __call__(self, conn, part_ids, idf, avg, limit, identifiers=()):
        self.last = {"part_ids": part_ids, "idf": idf, "avg": avg, "limit": limit, "ids": list(identifiers)}
        return self.inner(conn, part_ids, idf, avg, limit, identifiers)


def _plan_times(conn: psycopg.Connection, last: dict) -> dict:
    """Postings scanned, groups, and milliseconds in the scan, the aggregation and the whole statement."""
    import re

    params = {
        "terms": list(last["idf"]),
        "idf": list(last["idf"].values()),
        "k1": candidates.BM25_K1,
        "b": candidates.BM25_B,
        "avg": last["avg"],
        "parts": last["part_ids"],
        "limit": LIMIT,
        "scale": candidates.TIE_SCALE,
        "ids": last["ids"],
    }
    source = Path(candidates.__file__).read_text()
    statement = re.search(r'def _score_all.*?"""(SELECT p.memory_id.*?LIMIT %\(limit\)s)"""', source, re.S).group(1)
    plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, params).fetchone()[0][0]

    def find(node, kind):
        if node.get("Node Type") == kind:
            return node
        for child in node.get("Plans", []):
            hit = find(child, kind)
            if hit:
                return hit
        return None

    top = plan["Plan"]
    agg, loop = find(top, "Aggregate"), find(top, "Nested Loop")
    return {
        "postings": int(loop["Actual Rows"]) if loop else 0,
        "groups": int(agg["Actual Rows"]) if agg else 0,
        "scan_ms": loop["Actual Total Time"] if loop else 0.0,
        "aggregate_ms": (agg["Actual Total Time"] - loop["Actual Total Time"]) if agg and loop else 0.0,
        "total_ms": plan["Execution Time"],
        "shared_hit": top.get("Shared Hit Blocks", 0),
        "shared_read": top.get("Shared Read Blocks", 0),
        "hash_batches": agg.get("HashAgg Batches", 1) if agg else 0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--home", type=Path, default=corpus.ROOT / ".bench" / "home")
    ap.add_argument("--explain", type=int, default=3, help="slowest questions explained (default 3)")
    args = ap.parse_args()
    entry = json.loads((args.home / "bench-workspaces.json").read_text())[f"{args.size}/{corpus.RECIPE}"]
    pg = EmbeddedPostgres(args.home / "pg")
    capture = _Capture()
    candidates._score_all = capture
    try:
        url = make_conninfo(pg.control_url, dbname=new_db_name(uuid.UUID(entry["workspace_id"])))
        caller = m.Caller(member_id=entry["member_id"], granted_purposes=[m.PURPOSE_CONVERSATION])
        questions = [q.text for q in corpus.questions()]
        rows = []
        with psycopg.connect(url, autocommit=True) as conn:
            for q in questions:
                candidates.lexical(conn, caller, "conversation", q, LIMIT, False)
            for q in questions:
                best = float("inf")
                for _ in range(3):
                    start = time.perf_counter()
                    candidates.lexical(conn, caller, "conversation", q, LIMIT, False)
                    best = min(best, (time.perf_counter() - start) * 1000)
                rows.append((best, q, dict(capture.last)))
            rows.sort(key=lambda r: r[0])
            times = [r[0] for r in rows]
            print(f"## Keyword arm at {args.size:,} memories, {len(rows)} bench questions (best of 3, cached)\n")
            print(
                f"p50 {statistics.median(times):.1f} ms, p95 {times[int(0.95 * (len(times) - 1))]:.1f} ms, "
                f"max {times[-1]:.1f} ms\n"
            )
            print(
                "| question | ms | postings | memories | scan ms | aggregate ms | buffers hit / read | hash batches |"
            )
            print("|---|---|---|---|---|---|---|---|")
            for best, q, last in rows[::-1][: args.explain]:
                p = _plan_times(conn, last)
                print(
                    f"| {q[:60]} | {best:.1f} | {p['postings']:,} | {p['groups']:,} | {p['scan_ms']:.1f} | "
                    f"{p['aggregate_ms']:.1f} | {p['shared_hit']:,} / {p['shared_read']:,} | {p['hash_batches']} |"
                )
    finally:
        candidates._score_all = capture.inner
        pg.stop()


if __name__ == "__main__":
    main()
