"""The keyword arm alone at scale: write N memories of the bench recipe straight into a workspace
database through the store's own write functions (no services, no embeddings), then time
``candidates.lexical`` on the bench questions.

    .venv/bin/python -m bench.lexical_scale --sizes 100000,1000000 [--home .bench/lexical]

Rows are the recipe of ``bench/corpus.py`` (past its unique rows, texts repeat as documented
there); they are written in batches of 2,000 by ``lexical_index.add_memories``, exactly what
``RememberBatch`` calls, so the statistics and postings are the product's. A built workspace is
reused (its size is recorded beside it). Prints, per size, the write rate of the index and
p50 / p95 / max in ms at limit 100.
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
from store_service.control.plane import ControlPlane
from store_service.database import Databases
from store_service.search import candidates, lexical_index

LIMIT = 100
BATCH = 2_000


def _build(url: str, member: uuid.UUID, n: int) -> float:
    """Writes the first ``n`` recipe rows; returns memories per second (index writes included)."""
    rows = corpus.rows(n)
    start = time.perf_counter()
    with psycopg.connect(url) as conn:
        for k in range(0, n, BATCH):
            chunk = rows[k : k + BATCH]
            ids = [uuid.uuid4() for _ in chunk]
            conn.execute(
                """INSERT INTO memory (id, kind, title, body, purpose, origin, created_by)
                   SELECT i, 'note', t, b, 'conversation', 'told', %s
                     FROM unnest(%s::uuid[], %s::text[], %s::text[]) AS r(i, t, b)""",
                (member, ids, [r.title for r in chunk], [r.body for r in chunk]),
            )
            lexical_index.add_memories(
                conn, [(i, None, "conversation", r.title, r.body) for i, r in zip(ids, chunk, strict=True)]
            )
            conn.commit()
    rate = n / (time.perf_counter() - start)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    return rate


def _workspace(home: Path, n: int) -> tuple[EmbeddedPostgres, str, uuid.UUID, float | None]:
    pg = EmbeddedPostgres(home / f"pg-{n}")
    dbs = Databases(pg.control_url)
    dbs.open()
    meta = home / f"workspace-{n}.json"
    try:
        if meta.exists():
            info = json.loads(meta.read_text())
            return pg, make_conninfo(pg.control_url, dbname=info["db"]), uuid.UUID(info["member"]), None
        control = ControlPlane(dbs)
        db = control.workspace(str(control.create_workspace(f"lexical-{n}")[0])).db_name
        member = uuid.uuid4()
        url = make_conninfo(pg.control_url, dbname=db)
        rate = _build(url, member, n)
        meta.write_text(json.dumps({"db": db, "member": str(member), "rows": n, "recipe": corpus.RECIPE}))
        return pg, url, member, rate
    finally:
        dbs.close()


def measure(url: str, member: uuid.UUID) -> dict[str, float]:
    """p50 / p95 / max ms of ``candidates.lexical`` over the bench questions (after one warm-up pass)."""
    caller = m.Caller(member_id=str(member), granted_purposes=[m.PURPOSE_CONVERSATION])
    questions = [q.text for q in corpus.questions()]
    with psycopg.connect(url, autocommit=True) as conn:
        for q in questions:
            candidates.lexical(conn, caller, "conversation", q, LIMIT, False)
        times = []
        for q in questions:
            start = time.perf_counter()
            candidates.lexical(conn, caller, "conversation", q, LIMIT, False)
            times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {"p50": statistics.median(times), "p95": times[int(0.95 * (len(times) - 1))], "max": times[-1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000")
    ap.add_argument("--home", type=Path, default=corpus.ROOT / ".bench" / "lexical")
    args = ap.parse_args()
    args.home.mkdir(parents=True, exist_ok=True)
    print("| memories | p50 ms | p95 ms | max ms |\n|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        pg, url, member, rate = _workspace(args.home, n)
        try:
            result = measure(url, member)
        finally:
            pg.stop()
        print(f"| {n:,} | {result['p50']:.1f} | {result['p95']:.1f} | {result['max']:.1f} |")
        built = f"built at {rate:,.0f} memories/s (memory rows + keyword index)" if rate else "reused"
        print(f"\n{n:,}: {built}\n")


if __name__ == "__main__":
    main()
