"""The keyword arm's top k, side by side: the packed posting blocks (the product,
``candidates._BlockScores``) against the single aggregate statement they replaced (session 6's
``candidates._score_all``, kept here verbatim as the reference), on one connection, each question
asked of both in turn, the order alternating.

    .venv/bin/python -m bench.lexical_ab --size 1000000 [--home .bench/home] [--rounds 2]

Needs a workspace built by ``bench.run`` in ``--home`` (default ``.bench/home``), or by
``bench.lexical_scale`` (``--home .bench/lexical``: keyword index only, no embeddings). The former
statement read the impact-ordered index that migration 0012 dropped; this bench builds a like
index for the run
(``bench_lexical_posting_ab``: ``(lexeme, partition_id) INCLUDE (memory_id, tf, doc_len)``, so the
former statement is again an index-only scan) and drops it at the end. Both paths get the same
arguments (the statistics of ``candidates.lexical`` for each of the 179 bench questions, limit
100); every answer is compared (ids, scores to ``TIE_DIGITS`` decimals, counts). Prints p50 / p95 /
max milliseconds per path and the ratio of the p50s and p95s; exit status 1 if any answer differs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import psycopg
from psycopg.conninfo import make_conninfo
from recallatron.memory.v1 import memory_pb2 as m

from bench import corpus
from servicekit.embedded_pg import EmbeddedPostgres
from store_service.database import named, new_db_name
from store_service.search import bm25, candidates

LIMIT = 100
INDEX = "bench_lexical_posting_ab"
# The former top-k statement, session 6's candidates._score_all (7d9a2a3 and before), verbatim.
FORMER = """SELECT p.memory_id,
                  sum(q.idf * p.tf * (%(k1)s + 1)
                      / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.doc_len / %(avg)s)))::float8 AS score,
                  count(*)::int AS terms,
                  count(*) FILTER (WHERE p.lexeme = ANY(%(ids)s::text[]))::int AS identifiers
             FROM unnest(%(terms)s::text[], %(idf)s::float8[]) AS q(lexeme, idf)
             JOIN lexical_posting p ON p.lexeme = q.lexeme AND p.partition_id = ANY(%(parts)s)
            GROUP BY p.memory_id
            ORDER BY floor(sum(q.idf * p.tf * (%(k1)s + 1)
                      / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.doc_len / %(avg)s))) * %(scale)s + 0.5) DESC,
                     p.memory_id
            LIMIT %(limit)s"""


def former(conn, part_ids, idf, avg, identifiers=()) -> list[tuple]:
    """The former statement's rows ``(id, score, terms, identifiers)``."""
    params = {
        "terms": list(idf),
        "idf": list(idf.values()),
        "k1": bm25.K1,
        "b": bm25.B,
        "avg": avg,
        "parts": part_ids,
        "limit": LIMIT,
        "scale": bm25.TIE_SCALE,
        "ids": list(identifiers),
    }
    return [(r.memory_id, r.score, r.terms, r.identifiers) for r in named(conn).execute(FORMER, params)]


def packed(conn, part_ids, idf, avg, identifiers=()) -> list[tuple]:
    """The product's rows, as ``candidates._lexical`` reads them with the expiry gate off."""
    return candidates._BlockScores(conn, part_ids, idf, avg, identifiers).top(LIMIT)


def _key(rows: list[tuple]) -> list[tuple]:
    return [(mid, bm25.tie_key(score), terms, ids) for mid, score, terms, ids in rows]


def _stats(ms: list[float]) -> dict:
    return {"p50": float(np.percentile(ms, 50)), "p95": float(np.percentile(ms, 95)), "max": max(ms)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--home", type=Path, default=corpus.ROOT / ".bench" / "home")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    manifest, scale = args.home / "bench-workspaces.json", args.home / f"workspace-{args.size}.json"
    if manifest.is_file() and f"{args.size}/{corpus.RECIPE}" in json.loads(manifest.read_text()):
        entry = json.loads(manifest.read_text())[f"{args.size}/{corpus.RECIPE}"]
        folder, db, member = args.home / "pg", new_db_name(uuid.UUID(entry["workspace_id"])), entry["member_id"]
    elif scale.is_file():  # bench.lexical_scale's layout
        entry = json.loads(scale.read_text())
        folder, db, member = args.home / f"pg-{args.size}", entry["db"], entry["member"]
    else:
        ap.error(f"no workspace of {args.size:,} memories in {args.home} (bench.run or bench.lexical_scale builds one)")
    was_running = (folder / "postmaster.pid").exists()
    pg = EmbeddedPostgres(folder)
    url = make_conninfo(pg.control_url, dbname=db)
    caller = m.Caller(member_id=member, granted_purposes=[m.PURPOSE_CONVERSATION])
    calls = []
    real = candidates._BlockScores

    class Capture(real):
        def __init__(self, conn, part_ids, idf, avg, identifiers=()) -> None:
            calls.append((part_ids, dict(idf), avg, list(identifiers)))
            super().__init__(conn, part_ids, idf, avg, identifiers)

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            start = time.perf_counter()
            conn.execute(
                f"CREATE INDEX IF NOT EXISTS {INDEX} ON lexical_posting (lexeme, partition_id) "
                "INCLUDE (memory_id, tf, doc_len)"
            )
            conn.execute("VACUUM ANALYZE lexical_posting")
            print(f"bench index built in {time.perf_counter() - start:.1f} s", file=sys.stderr)
            candidates._BlockScores = Capture
            try:
                for q in corpus.questions():
                    candidates.lexical(conn, caller, "conversation", q.text, LIMIT, False)
                candidates._BlockScores = real
                for call in calls:  # warm both
                    former(conn, *call)
                    packed(conn, *call)
                ms = {"former": [], "packed": []}
                differ = 0
                for r in range(args.rounds):
                    for i, call in enumerate(calls):
                        order = [former, packed] if (i + r) % 2 == 0 else [packed, former]
                        got = {}
                        for f in order:
                            t0 = time.perf_counter()
                            got[f.__name__] = f(conn, *call)
                            ms[f.__name__].append((time.perf_counter() - t0) * 1000)
                        differ += _key(got["former"]) != _key(got["packed"])
            finally:
                candidates._BlockScores = real
                conn.execute(f"DROP INDEX IF EXISTS {INDEX}")
        old, new = _stats(ms["former"]), _stats(ms["packed"])
        print(f"## Keyword top k at {args.size:,} memories: former statement against packed blocks\n")
        print(f"{len(calls)} questions x {args.rounds} rounds, alternating; answers differing: {differ}\n")
        print("| path | p50 ms | p95 ms | max ms |\n|---|---|---|---|")
        print(f"| former aggregate statement | {old['p50']:.2f} | {old['p95']:.2f} | {old['max']:.1f} |")
        print(f"| packed blocks (product) | {new['p50']:.2f} | {new['p95']:.2f} | {new['max']:.1f} |")
        print(f"\npacked / former: p50 {new['p50'] / old['p50']:.3f}, p95 {new['p95'] / old['p95']:.3f}")
        if differ:
            sys.exit(1)
    finally:
        if not was_running:
            pg.stop()


if __name__ == "__main__":
    main()
