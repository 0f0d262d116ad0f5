"""The embedding backlog's drain at a given size against in-process encoding of the same texts, side
by side in one run (issue 28, item 3: "a drain at the model's speed at any size").

Starts the bench stack (``recallatron up`` on ``--home``, default ``.bench/home``) on a workspace
``bench.run`` built (``--size``, default 100,000), then ``--rounds`` times (default 2):

1. the vectors of ``--rows`` memories (default 5,000; a fixed sample, seed 11, of distinct texts, so
   that no twin's vector can be reused) are deleted in SQL (bench-only: the one step not made
   through the product) and ``AdminService.RebuildEmbeddings`` queues them as missing, the product's
   own repair; the HNSW index then holds the other vectors, as a backlog at that size would find it;
2. the store's embedding job drains them (rate from the first poll that shows the backlog shrink,
   ``bench.workspace.drain``);
3. the same texts (as the job composes them) are encoded in this process by the class the embed
   service runs (``embed_service.models.BiEncoder``, 256 a call), with the embed service idle.

Prints, per round, the drain rate, the encode rate and their ratio, the CPU each process spent
during the drain (``Stack.cpu_seconds``: what bounds it), and the median over rounds.

    .venv/bin/python -m bench.drain_bench [--size 100000] [--rows 5000] [--rounds 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

import psycopg
from recallatron.gateway.v1 import gateway_pb2 as g

import client
from bench import corpus, workspace
from bench.args import at_least_one
from bench.stack import Stack
from servicekit.embedding_input import compose
from store_service.database import new_db_name

SEED = 11


def _sample(conn: psycopg.Connection, rows: int) -> list[tuple[str, str, str]]:
    """(id, title, body) of ``rows`` live memories with a vector, whose composed text no other live
    memory shares, in a fixed pseudo-random order (md5 of the id and the seed)."""
    return conn.execute(
        """SELECT m.id::text, m.title, m.body FROM memory m JOIN memory_embedding e ON e.memory_id = m.id
            WHERE m.forgotten_at IS NULL AND m.retired_at IS NULL
              AND NOT EXISTS (SELECT 1 FROM memory_embedding o
                               WHERE o.input_sha256 = e.input_sha256 AND o.memory_id <> e.memory_id)
            ORDER BY md5(m.id::text || %s) LIMIT %s""",
        (str(SEED), rows),
    ).fetchall()


def round_(stack: Stack, gw, conn: psycopg.Connection, sample, encoder) -> dict:
    ids = [row[0] for row in sample]
    conn.execute("DELETE FROM memory_embedding WHERE memory_id = ANY(%s::uuid[])", (ids,))
    before = stack.cpu_seconds()
    queued = gw.admin.RebuildEmbeddings(g.RebuildEmbeddingsRequest(), metadata=gw.metadata).queued
    drained = workspace.drain(gw, "drain bench backlog")
    cpu = {name: after - before.get(name, 0.0) for name, after in stack.cpu_seconds().items()}
    texts = [compose(title, body) for _, title, body in sample]
    encoder.encode(texts[:64])  # warm
    t0 = time.perf_counter()
    for i in range(0, len(texts), 256):
        encoder.encode(texts[i : i + 256])
    encode_rate = len(texts) / (time.perf_counter() - t0)
    return {
        "queued": queued,
        "drain": drained,
        "encode_rate": round(encode_rate, 1),
        "drain_vs_encode": round(drained["rate"] / encode_rate, 3),
        "cpu_seconds": {name: round(v, 1) for name, v in cpu.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--home",
        type=Path,
        default=corpus.ROOT / ".bench" / "home",
        help="the bench's data folder (default .bench/home)",
    )
    parser.add_argument("--size", type=at_least_one, default=100_000, help="a size bench.run built (default 100000)")
    parser.add_argument("--rows", type=at_least_one, default=5_000, help="vectors re-made each round (default 5000)")
    parser.add_argument("--rounds", type=at_least_one, default=2, help="rounds (default 2)")
    parser.add_argument("--json", type=Path, help="also write the raw figures to this file")
    args = parser.parse_args(argv)
    if args.json is not None and not args.json.parent.is_dir():
        raise SystemExit(f"--json: no folder {args.json.parent}")
    entry = workspace.Manifest(args.home).get(f"{args.size}/{corpus.RECIPE}")
    if not entry or not entry.get("complete"):
        raise SystemExit(
            f"no built workspace of {args.size:,} in {args.home}: build it with "
            f"python -m bench.run --sizes {args.size} --build-only"
        )
    from embed_service.models import BiEncoder

    encoder = BiEncoder()
    stack = Stack.start(args.home)
    try:
        gw = client.Gateway(stack.addrs["gateway"], stack.operator_token())
        dbname = new_db_name(uuid.UUID(entry["workspace_id"]))
        with psycopg.connect(stack.pg_conninfo(dbname), autocommit=True) as conn:
            sample = _sample(conn, args.rows)
            if len(sample) < args.rows:
                raise SystemExit(f"only {len(sample)} memories with distinct texts in the workspace")
            rounds = [round_(stack, gw, conn, sample, encoder) for _ in range(args.rounds)]
    finally:
        stack.stop()
    ratio = statistics.median(r["drain_vs_encode"] for r in rounds)
    print(f"## Embedding drain at {args.size:,} memories: {args.rows:,} vectors re-made, {args.rounds} rounds\n")
    print("| round | drain | in-process encode | drain / encode | CPU s during the drain |")
    print("|---|---|---|---|---|")
    for n, r in enumerate(rounds, 1):
        cpu = ", ".join(f"{k} {v}" for k, v in sorted(r["cpu_seconds"].items()))
        print(
            f"| {n} | {r['drain']['rate']:.1f}/s ({r['drain']['rows']:,} in {r['drain']['seconds']:.0f} s) | "
            f"{r['encode_rate']:.1f}/s | {r['drain_vs_encode']:.2f} | {cpu} |"
        )
    print(f"\nmedian drain / encode: {ratio:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"size": args.size, "rows": args.rows, "rounds": rounds}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
