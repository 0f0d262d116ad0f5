"""Latency of ``MemoryService.GetEntity`` for an entity with 10,000 mentions (issue 24: "GetEntity for
an entity with 10,000 mentions answers in under 100 ms p95"; a bench figure, never a timed test).

Workspace, built fresh in ``--home`` (emptied first): one member writes ``--mentions`` memories about
one entity through RememberBatch (500 a call), every 10th stating an attribute of it (20 keys) and
every 7th a relation to one of 30 organisations; then 100 memories about a second name, merged into
the first (so the page reads a group of two, an alias and its merge record). The embed service is
paused from the first write to the end (``bench.stack.Stack.pause_embed``): GetEntity reads no vector,
and the embedding drain would otherwise share the two cores with the calls measured. The workspace's
tables are then analyzed (``ANALYZE``), as PostgreSQL's autovacuum does within about a minute of such
a burst of writes: measured before it, on the statistics of an empty workspace, the planner reads
every memory for the timeline (1.2 s; ``--no-analyze`` measures that).

Measured: ``--warmup`` calls, then ``--calls`` calls of each form, timed on the client from request to
answer (authentication and the gateway's relay included): the page by id (first page of the
timeline: 20 memories), by name, and as of a past day. Median and p95 (nearest rank), milliseconds,
with the page's counts so a figure is never read without what it computed.

Usage: ``.venv/bin/python -m bench.entity_bench [--mentions 10000] [--calls 50] [--json]``
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

import psycopg
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from bench import corpus
from bench.duplicates_bench import p95

BATCH = 500
NAME, ALIAS = "Maria Lind", "M. Lind"


def _write(gw: client.Gateway, md, name: str, count: int, statements: bool) -> str:
    """``count`` memories about ``name`` (RememberBatch, ``BATCH`` a call); the entity's id."""
    entity = ""
    for start in range(0, count, BATCH):
        reqs = []
        for i in range(start, min(count, start + BATCH)):
            extra = {}
            if statements and i % 10 == 0:
                extra["attributes"] = [
                    m.EntityAttribute(
                        subject=m.EntityMention(name=name), key=f"key_{(i // 10) % 20}", value=f"value {i}"
                    )
                ]
            if statements and i % 7 == 0:
                extra["relations"] = [
                    m.EntityRelation(
                        subject=m.EntityMention(name=name),
                        predicate="works_with",
                        object=m.EntityMention(name=f"Organisation {i % 30}"),
                    )
                ]
            reqs.append(
                g.RememberRequest(
                    purpose=m.PURPOSE_CONVERSATION,
                    audience=m.AUDIENCE_WORKSPACE,
                    body=f"{name} note {i}: a line of what was said about {name} that day.",
                    entities=[m.EntityMention(name=name)],
                    **extra,
                )
            )
        results = gw.memory.RememberBatch(g.RememberBatchRequest(requests=reqs), metadata=md, timeout=600).results
        failed = [r.error.message for r in results if r.HasField("error")]
        if failed:
            raise SystemExit(f"a write failed: {failed[0]}")
        entity = entity or results[0].memory.entity_resolutions[0].entity_id
    return entity


def _analyze(stack) -> None:
    """ANALYZE in every workspace database of the bench's server (there is one)."""
    with psycopg.connect(stack.pg_conninfo("postgres"), autocommit=True) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE 'recallatron_ws%%' "
                "AND datname <> 'recallatron_ws_template'"
            )
        ]
    for name in names:
        with psycopg.connect(stack.pg_conninfo(name), autocommit=True) as conn:
            conn.execute("ANALYZE")


def _timed(call, calls: int, warmup: int) -> tuple[dict, object]:
    for _ in range(warmup):
        call()
    times, answer = [], None
    for _ in range(calls):
        started = time.perf_counter()
        answer = call()
        times.append((time.perf_counter() - started) * 1000)
    return {"median_ms": round(statistics.median(times), 1), "p95_ms": round(p95(times), 1)}, answer


def measure(gw: client.Gateway, md, entity: str, calls: int, warmup: int) -> dict:
    """Times GetEntity by id, by name and as of a past day."""
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=1)
    as_of = g.GetEntityRequest(entity=entity)
    as_of.as_of.FromDatetime(past)
    out = {}
    for label, req in (
        ("by id", g.GetEntityRequest(entity=entity)),
        ("by name", g.GetEntityRequest(entity=NAME)),
        ("as of a day ago", as_of),
    ):
        figures, page = _timed(lambda req=req: gw.memory.GetEntity(req, metadata=md, timeout=60), calls, warmup)
        figures.update(
            mentions=page.entity.mentions,
            aliases=len(page.entity.aliases),
            attributes=len(page.attributes),
            relations=len(page.relations_out) + len(page.relations_in),
            timeline_page=len(page.timeline),
        )
        out[label] = figures
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mentions", type=int, default=10_000, help="memories about the entity")
    p.add_argument("--calls", type=int, default=50, help="timed calls of each form")
    p.add_argument("--warmup", type=int, default=5, help="untimed calls first")
    p.add_argument("--home", default=str(corpus.ROOT / ".bench" / "entity"), help="data folder (emptied first)")
    p.add_argument("--port-base", type=int, default=50170, help="ports of the private system: base+1..4")
    p.add_argument("--no-analyze", action="store_true", help="measure on the statistics of the empty workspace")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    from bench.stack import Stack

    home = Path(args.home)
    shutil.rmtree(home, ignore_errors=True)
    stack = Stack.start(home, port_base=args.port_base)
    try:
        gw = client.Gateway(stack.addrs["gateway"], stack.operator_token())
        try:
            ws = gw.admin.CreateWorkspace(g.CreateWorkspaceRequest(name="entity bench"), metadata=gw.metadata)
            member = gw.admin.AddMember(g.AddMemberRequest(workspace_id=ws.workspace_id), metadata=gw.metadata)
            md = client.bearer(member.token)
            stack.pause_embed()
            started = time.perf_counter()
            entity = _write(gw, md, NAME, args.mentions, statements=True)
            alias = _write(gw, md, ALIAS, 100, statements=False)
            gw.memory.MergeEntity(g.MergeEntityRequest(entity_id=alias, into_id=entity), metadata=md)
            built = time.perf_counter() - started
            if not args.no_analyze:
                _analyze(stack)
            result = measure(gw, md, entity, args.calls, args.warmup)
        finally:
            gw.close()
    finally:
        stack.stop()
    result = {
        "mentions": args.mentions,
        "calls": args.calls,
        "built_s": round(built, 1),
        "analyzed": not args.no_analyze,
        "forms": result,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"GetEntity, {args.mentions:,} mentions (+100 of a merged alias), built in {result['built_s']} s:")
        for label, f in result["forms"].items():
            print(
                f"  {label}: median {f['median_ms']} ms, p95 {f['p95_ms']} ms over {args.calls} calls; "
                f"{f['mentions']} mentions, {f['aliases']} alias, {f['attributes']} attributes, "
                f"{f['relations']} relations, {f['timeline_page']} on the timeline's first page"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
