"""Bench workspaces: built through the product's write path once, then reused.

A workspace of N memories (``bench.corpus`` recipe) is created through the gateway's
``AdminService`` (CreateWorkspace, AddMember) and filled through ``MemoryService.RememberBatch``
when the gateway offers it (up to 500 rows a call), otherwise through ``Remember`` from
``SINGLE_THREADS`` client threads, with request ids ``bench-<row>`` (so an interrupted build resumes
where it stopped without duplicating rows). While rows are written the embed service is paused
(SIGSTOP), so the write rate excludes embedding; then it is resumed and the embedding backlog
drains through the store's own embedding job, watched through ``AdminService.GetStatus``.

Rows past the unique texts (only at 1,000,000) are copies of earlier rows. Their vectors are not
computed again: the store's embedding job copies the vector of an identical embed input (it keeps
the input's sha256 with every vector, migration 0005), so the product itself builds the workspace.
Only as a fallback, when the workspace holds vectors written before that migration (no input hash,
so the worker cannot match them), ``reuse_vectors`` writes, for each queued copy, the vector of an
identical text (same title and body, so the same embedding input) already embedded at the current
input-version stamp, under the same rules as the store's worker (job row locked, memory live at the
queued revision, job deleted in the same transaction). It is a bench-only step, described in
bench/RESULTS.md; any queued row without an identical embedded text is left to the worker.

Built workspaces are recorded in ``<bench home>/bench-workspaces.json`` keyed by size and recipe
version, with the member token, the ids of the core memories, and the build's own ingest and drain
figures; a later run checks the rows are there and embedded and measures only.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
from google.rpc import code_pb2
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from bench import corpus
from bench.stack import Stack
from store_service.database import new_db_name

BATCH = 500
CHUNK = 4_000  # rows between checkpoints of a build
SINGLE_THREADS = 4  # client threads when only Remember exists (as `recallatron load`)
BATCH_THREADS = 2  # concurrent RememberBatch calls
DRAIN_TIMEOUT = 6 * 3600
REUSE_CHUNK = 5_000
MANIFEST = "bench-workspaces.json"
MIGRATIONS = corpus.ROOT / "store_service" / "migrations" / "workspace"


def _occurred(row: corpus.Row, req: g.RememberRequest) -> None:
    if row.occurred_at:
        dt = datetime.datetime.fromisoformat(row.occurred_at)
        req.occurred_at.FromDatetime(dt if dt.tzinfo else dt.replace(tzinfo=datetime.UTC))


def remember_request(row: corpus.Row, request_id: str) -> g.RememberRequest:
    """The RememberRequest of one bench row: a workspace-audience note for the conversation purpose."""
    req = g.RememberRequest(
        purpose=m.PURPOSE_CONVERSATION,
        kind=m.KIND_NOTE,
        title=row.title,
        body=row.body,
        audience=m.AUDIENCE_WORKSPACE,
        request_id=request_id,
    )
    _occurred(row, req)
    return req


def has_batch_form() -> bool:
    """Whether this build's gateway offers ``MemoryService.RememberBatch``."""
    return "RememberBatch" in g.DESCRIPTOR.services_by_name["MemoryService"].methods_by_name


class Writer:
    """Writes bench rows as one member through the batch form (or Remember); returns memory ids."""

    def __init__(self, gw: client.Gateway, token: str) -> None:
        self.gw = gw
        self.md = client.bearer(token)
        self.batch = has_batch_form()
        self.name = (
            f"RememberBatch ({BATCH} a call, {BATCH_THREADS} concurrent calls)"
            if self.batch
            else f"Remember ({SINGLE_THREADS} client threads; no RememberBatch in this build)"
        )
        self.pool = ThreadPoolExecutor(BATCH_THREADS if self.batch else SINGLE_THREADS)

    def close(self) -> None:
        self.pool.shutdown()

    def write(self, first: int, batch: list[corpus.Row]) -> list[str]:
        """Remembers rows ``first..first+len(batch)``; SystemExit when any row fails."""
        requests = [remember_request(r, f"bench-{first + n}") for n, r in enumerate(batch)]
        if self.batch:

            def call(part: list[g.RememberRequest]) -> list[str]:
                resp = self.gw.memory.RememberBatch(
                    g.RememberBatchRequest(requests=part), metadata=self.md, timeout=300
                )
                for r in resp.results:
                    # ALREADY_EXISTS: the row's request id was used by an interrupted build before the
                    # store kept request fingerprints (migration 0006); the row is there, its id unknown.
                    if not r.HasField("memory") and r.error.code != code_pb2.ALREADY_EXISTS:
                        raise SystemExit(f"a bench row was not remembered: {r.error.code} {r.error.message}")
                return [r.memory.id if r.HasField("memory") else None for r in resp.results]

            parts = [requests[i : i + BATCH] for i in range(0, len(requests), BATCH)]
            ids = [i for part_ids in self.pool.map(call, parts) for i in part_ids]
        else:
            ids = list(
                self.pool.map(lambda r: self.gw.memory.Remember(r, metadata=self.md, timeout=120).memory.id, requests)
            )
        failed = sum(1 for i in ids if i == "")
        if failed or len(ids) != len(batch):
            raise SystemExit(f"{failed} of {len(batch)} bench rows were not remembered (rows {first}..)")
        return ids


def backlog(gw: client.Gateway) -> int:
    """The embedding backlog over all workspaces (AdminService.GetStatus)."""
    return gw.admin.GetStatus(g.GetStatusRequest(), metadata=gw.metadata, timeout=60).embedding_backlog


def drain(gw: client.Gateway, label: str = "embedding backlog") -> dict:
    """Waits until the backlog is empty; returns its start size, the time, and the drain rate.

    The rate is measured from the first poll that shows the backlog shrinking to the poll that
    shows it empty, so the worker's back-off after a pause is not counted against it."""
    t0, b0 = time.monotonic(), backlog(gw)
    first, shown = None, t0
    now, b = t0, b0
    while b > 0:
        if time.monotonic() - t0 > DRAIN_TIMEOUT:
            raise SystemExit(f"{label}: still {b} after {DRAIN_TIMEOUT}s; is the embed service up?")
        time.sleep(0.5 if b < 20_000 else 2.0)  # each poll counts the queue: rarer while it is long
        b, now = backlog(gw), time.monotonic()
        if first is None and b < b0:
            first = (now, b)
        if now - shown >= 30:
            print(f"  {label}: {b} left", file=sys.stderr, flush=True)
            shown = now
    seconds = now - t0
    if first is not None and now > first[0]:
        rate = first[1] / (now - first[0])
    else:
        rate = b0 / seconds if seconds else 0.0
    return {"rows": b0, "seconds": round(seconds, 1), "rate": round(rate, 1)}


def unhashed_vectors(conninfo: str, input_version: str) -> bool:
    """Whether the workspace holds vectors at the current stamp without an input hash (written before
    migration 0005, or by a build without it), which the store's worker cannot reuse."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        try:
            return conn.execute(
                "SELECT EXISTS (SELECT 1 FROM memory_embedding WHERE input_version = %s AND input_sha256 IS NULL)",
                (input_version,),
            ).fetchone()[0]
        except psycopg.errors.UndefinedColumn:
            return True


_COMPOSE = "CASE WHEN m.title = '' THEN m.body ELSE m.title || E'\\n' || m.body END"
# One vector per distinct embedding input (md5 of the composed text) at a stamp, live rows only.
_TWINS = f"""SELECT DISTINCT ON (md5({_COMPOSE})) md5({_COMPOSE}), e.model_id, e.input_version, e.embedding::text
               FROM memory m JOIN memory_embedding e ON e.memory_id = m.id AND e.memory_revision = m.revision
              WHERE e.input_version = %s AND m.forgotten_at IS NULL
              ORDER BY md5({_COMPOSE}), m.id"""


# The HNSW index exactly as migration 0001 creates it (pgvector defaults m = 16, ef_construction = 64).
_HNSW = "CREATE INDEX memory_embedding_hnsw ON memory_embedding USING hnsw (embedding vector_cosine_ops)"


def reuse_vectors(conninfo: str, input_version: str, donor: str | None = None, rebuild_index: bool = False) -> dict:
    """Writes the vector of an identical embedded text for every queued job that has one (see the
    module docstring); returns how many rows got a vector and how long it took. ``donor``: the
    conninfo of another workspace database of the same stack whose vectors (same model, same
    input-version stamp) are the twins instead of the workspace's own. ``rebuild_index``: drop the
    HNSW index first and build it again at the end (one bulk build instead of one graph insert per
    row, which ran at 150 to 400 rows/s here; the index is the migration's own definition)."""
    compose = _COMPOSE
    t0 = time.monotonic()
    done = 0
    with psycopg.connect(conninfo, autocommit=True) as conn:
        if rebuild_index:
            conn.execute("DROP INDEX IF EXISTS memory_embedding_hnsw")
        conn.execute(
            "CREATE TEMP TABLE twin (h text PRIMARY KEY, model_id text, input_version text, embedding vector(384))"
        )
        if donor is None:
            conn.execute(
                f"INSERT INTO twin SELECT h, model_id, input_version, embedding::vector FROM ({_TWINS}) t"
                "(h, model_id, input_version, embedding)",
                (input_version,),
            )
        else:
            with (
                psycopg.connect(donor) as src,
                src.cursor().copy(f"COPY ({_TWINS}) TO STDOUT", (input_version,)) as out,
                conn.cursor().copy("COPY twin FROM STDIN") as into,
            ):
                for block in out:
                    into.write(block)
        ids = [r[0] for r in conn.execute("SELECT memory_id FROM embedding_job ORDER BY memory_id")]
        for i in range(0, len(ids), REUSE_CHUNK):
            with conn.transaction():
                rows = conn.execute(
                    f"""WITH job AS (
                            SELECT j.memory_id, j.memory_revision FROM embedding_job j
                             WHERE j.memory_id = ANY(%(ids)s)
                               AND (j.claimed_until IS NULL OR j.claimed_until < now())
                             ORDER BY j.memory_id FOR UPDATE SKIP LOCKED),
                        live AS (
                            SELECT m.id, m.revision, md5({compose}) AS h
                              FROM memory m JOIN job ON job.memory_id = m.id AND job.memory_revision = m.revision
                             WHERE m.forgotten_at IS NULL AND m.retired_at IS NULL
                             ORDER BY m.id FOR SHARE OF m),
                        written AS (
                            INSERT INTO memory_embedding
                                   (memory_id, memory_revision, model_id, input_version, embedding)
                            SELECT l.id, l.revision, t.model_id, t.input_version, t.embedding
                              FROM live l JOIN twin t ON t.h = l.h
                            ON CONFLICT (memory_id) DO UPDATE SET memory_revision = EXCLUDED.memory_revision,
                                model_id = EXCLUDED.model_id, input_version = EXCLUDED.input_version,
                                embedding = EXCLUDED.embedding, created_at = now()
                            RETURNING memory_id, memory_revision)
                        DELETE FROM embedding_job j USING written w
                         WHERE j.memory_id = w.memory_id AND j.memory_revision = w.memory_revision
                        RETURNING j.memory_id""",
                    {"ids": ids[i : i + REUSE_CHUNK]},
                ).fetchall()
            done += len(rows)
            print(f"  vector reuse: {done}/{len(ids)}", file=sys.stderr, flush=True)
        if rebuild_index:
            print("  vector reuse: building the HNSW index", file=sys.stderr, flush=True)
            conn.execute("SET maintenance_work_mem = '8GB'")
            conn.execute(_HNSW)
    return {"rows": done, "seconds": round(time.monotonic() - t0, 1), "index_rebuilt": rebuild_index}


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=corpus.ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get("BENCH_COMMIT", "unknown")


def migrations() -> list[str]:
    """The workspace migrations of this checkout (recorded with a build)."""
    return sorted(p.name for p in MIGRATIONS.iterdir() if p.suffix in (".sql", ".py"))


class Manifest:
    """``<home>/bench-workspaces.json``: built workspaces by "<size>/<recipe>"."""

    def __init__(self, home: Path) -> None:
        self.path = home / MANIFEST
        self.data = json.loads(self.path.read_text()) if self.path.exists() else {}

    def get(self, key: str) -> dict | None:
        return self.data.get(key)

    def entries(self) -> list[dict]:
        return list(self.data.values())

    def put(self, key: str, entry: dict) -> None:
        self.data[key] = entry
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        tmp.replace(self.path)


def workspace_counts(stack: Stack, workspace_id: str) -> dict:
    """Live rows, vectors and queued jobs of a workspace database (direct SQL, read-only)."""
    conninfo = stack.pg_conninfo(new_db_name(uuid.UUID(workspace_id)))
    with psycopg.connect(conninfo, autocommit=True) as conn:
        rows = conn.execute("SELECT count(*) FROM memory WHERE forgotten_at IS NULL").fetchone()[0]
        vectors = conn.execute("SELECT count(*) FROM memory_embedding").fetchone()[0]
        jobs = conn.execute("SELECT count(*) FROM embedding_job").fetchone()[0]
    return {"rows": rows, "vectors": vectors, "jobs": jobs}


def vacuum(stack: Stack, workspace_id: str) -> float:
    """``VACUUM (ANALYZE)`` of a workspace database before it is measured; returns the seconds it took.

    After a bulk build autovacuum works through the new rows for many minutes (at 1,000,000: the
    memory rows, 1,000,000 vectors and 15 million postings), competing with the measurement for the
    two cores, and the keyword arm's index-only scans visit the heap for every posting on a page
    not yet marked all-visible. A workspace that has lived for a while has had that done by
    autovacuum; this puts a freshly built one in the same state. On a vacuumed workspace it returns
    in seconds."""
    conninfo = stack.pg_conninfo(new_db_name(uuid.UUID(workspace_id)))
    start = time.monotonic()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE)")
    return round(time.monotonic() - start, 1)


def _donor(stack: Stack, manifest: Manifest, size: int) -> str | None:
    """The conninfo of the largest complete workspace of this recipe smaller than ``size`` (its rows
    are the first rows of this one), or None."""
    done = [
        e
        for e in manifest.entries()
        if e.get("recipe") == corpus.RECIPE and e.get("complete") and e["size"] < size and "/max" not in e["key"]
    ]
    if not done:
        return None
    best = max(done, key=lambda e: e["size"])
    return stack.pg_conninfo(new_db_name(uuid.UUID(best["workspace_id"])))


def ensure(
    stack: Stack,
    gw: client.Gateway,
    size: int,
    *,
    rebuild: bool = False,
    eval_dir: Path = corpus.EVAL,
    max_unique: int | None = None,
    input_version: str = "",
    bulk_reuse: bool = False,
) -> dict:
    """The manifest entry of a complete workspace of ``size`` rows: reused when recorded and
    intact, otherwise built (or resumed) now. ``entry["built_now"]`` says which.

    ``bulk_reuse`` (``bench.run --bulk-reuse``, a bench-only shortcut that RESULTS.md names when a
    build used it): before the unique rows' embedding drains, the vectors of the rows a smaller
    complete workspace of the same stack and recipe already holds (the same texts: a workspace of N
    is a prefix of every larger one) are copied from it (``reuse_vectors(donor=...)``); and the
    copies past the unique texts get their twins' vectors by ``reuse_vectors(rebuild_index=True)``
    (one HNSW build instead of one graph insert per copy) instead of the store's worker."""
    manifest = Manifest(stack.home)
    key = f"{size}/{corpus.RECIPE}" + (f"/max{max_unique}" if max_unique else "")
    entry = manifest.get(key)
    if entry and rebuild:
        entry = None
    if entry and entry.get("complete"):
        counts = workspace_counts(stack, entry["workspace_id"])
        if counts["rows"] == size and counts["vectors"] == size and counts["jobs"] == 0:
            entry["built_now"] = False
            return entry
        print(
            f"workspace {key}: found {counts}, expected {size} rows all embedded; completing it",
            file=sys.stderr,
            flush=True,
        )
        entry["complete"] = False
    if entry is None:
        ws = gw.admin.CreateWorkspace(g.CreateWorkspaceRequest(name=f"bench {key}"), metadata=gw.metadata)
        member = gw.admin.AddMember(
            g.AddMemberRequest(workspace_id=ws.workspace_id, display_name="bench"), metadata=gw.metadata
        )
        entry = {
            "key": key,
            "size": size,
            "recipe": corpus.RECIPE,
            "workspace_id": ws.workspace_id,
            "member_id": member.member_id,
            "token": member.token,
            "done": 0,
            "complete": False,
            "core_ids": {},
            "commit": _commit(),
            "migrations": migrations(),
            "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }
        manifest.put(key, entry)
    build_started = time.monotonic()
    unique_end = corpus.repeats_from(size, eval_dir, max_unique)
    writer = Writer(gw, entry["token"])
    entry["ingest_form"] = writer.name
    ingest = entry.setdefault("ingest", {"rows": 0, "seconds": 0.0})
    try:
        # Phase 1: the unique rows, embed paused; phase 2: drain; phase 3 (only past the unique
        # rows): the copies, embed paused, vectors reused; phase 4: drain whatever is left.
        for phase_end in (unique_end, size):
            if entry["done"] >= phase_end:
                continue
            stack.pause_embed()
            try:
                while entry["done"] < phase_end:
                    first = entry["done"]
                    end = min(phase_end, first + CHUNK)
                    batch = [corpus.row(i, eval_dir, max_unique) for i in range(first, end)]
                    t0 = time.monotonic()
                    ids = writer.write(first, batch)
                    ingest["seconds"] = round(ingest["seconds"] + time.monotonic() - t0, 3)
                    ingest["rows"] += len(batch)
                    for r, mid in zip(batch, ids, strict=True):
                        if r.key:
                            entry["core_ids"][r.key] = mid
                    entry["done"] = end
                    manifest.put(key, entry)
                    print(
                        f"  {key}: {end}/{size} remembered ({ingest['rows'] / max(ingest['seconds'], 1e-9):.0f}/s)",
                        file=sys.stderr,
                        flush=True,
                    )
                conninfo = stack.pg_conninfo(new_db_name(uuid.UUID(entry["workspace_id"])))
                if phase_end <= unique_end and bulk_reuse:
                    donor = _donor(stack, manifest, size)
                    if donor is not None:
                        entry.setdefault("donor_reuse", []).append(reuse_vectors(conninfo, input_version, donor=donor))
                if phase_end > unique_end:
                    if bulk_reuse or unhashed_vectors(conninfo, input_version):  # fallback: vectors from before 0005
                        entry["reuse"] = reuse_vectors(conninfo, input_version, rebuild_index=True)
                    else:  # the product path: the store's worker copies vectors of identical inputs
                        entry["reuse_path"] = "worker"
            finally:
                stack.resume_embed()
            result = drain(gw, f"{key} embedding backlog")
            entry.setdefault("drains", []).append(result)
            manifest.put(key, entry)
        if workspace_counts(stack, entry["workspace_id"])["jobs"]:  # resumed after its drain was cut short
            entry.setdefault("drains", []).append(drain(gw, f"{key} embedding backlog"))
    finally:
        writer.close()
    counts = workspace_counts(stack, entry["workspace_id"])
    if counts["rows"] != size or counts["vectors"] != size or counts["jobs"]:
        raise SystemExit(f"workspace {key} is incomplete after the build: {counts}")
    entry.update(
        complete=True,
        built_now=True,
        build_seconds=round(time.monotonic() - build_started, 1),
        finished=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    )
    manifest.put(key, entry)
    return entry
