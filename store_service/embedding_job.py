"""The embedding job: turns queued memories into vectors through the embed service.

Work is queued in ``embedding_job`` in the same transaction as the memory write. The worker claims
a batch under a lease with ``FOR UPDATE SKIP LOCKED`` (so several store processes can share the
work), embeds it through the embed service holding no locks, and writes each vector only if the
memory still has the revision that was queued and is neither forgotten nor superseded. Each cycle it asks the embed service for its
input-version stamp and re-queues vectors of any other stamp, so a model or composition change
rebuilds the index on its own. If the embed service is down the jobs stay
queued (their lease runs out), and the worker backs off exponentially (0.5 s doubling to 5 s);
the backlog drains by itself once the service is back.
"""

from __future__ import annotations

import logging
import threading
import time

import grpc
import numpy as np
import psycopg
from prometheus_client import Counter, Gauge
from recallatron.embed.v1 import embed_pb2, embed_pb2_grpc

from store_service.control import ControlPlane
from store_service.database import Databases

log = logging.getLogger(__name__)
BACKLOG = Gauge("recallatron_embedding_backlog", "Embedding jobs waiting, over all workspaces.")
EMBEDDED = Counter("recallatron_embedding_vectors_written", "Vectors written by the embedding job.")
FAILURES = Counter("recallatron_embedding_batch_failures", "Embedding batches that failed and were retried.")
BACKOFF_START, BACKOFF_MAX, IDLE_POLL = 0.5, 5.0, 0.5
SWEEP_SECONDS = 60.0
LEASE_SECONDS = 120  # a claimed batch not finished by then (worker died) is claimed again
EMBED_TIMEOUT_SECONDS = 60.0


LIVE = "m.forgotten_at IS NULL AND m.superseded_by_id IS NULL"


def requeue(conn, input_version: str, everything: bool = False) -> int:
    """Queues live memories whose vector is missing, of another input version or of an older
    revision (or every live memory with ``everything``); returns how many jobs were added."""
    stale = "TRUE" if everything else "e.memory_id IS NULL OR e.input_version <> %(v)s OR e.memory_revision <> m.revision"
    cur = conn.execute(
        f"""INSERT INTO embedding_job (memory_id, memory_revision)
            SELECT m.id, m.revision FROM memory m LEFT JOIN memory_embedding e ON e.memory_id = m.id
             WHERE {LIVE} AND ({stale})
            ON CONFLICT (memory_id) DO NOTHING""", {"v": input_version})
    return cur.rowcount


def requeue_other_versions(conn, input_version: str) -> int:
    """Queues memories whose vector has another input version (index-assisted; empty almost always)."""
    cur = conn.execute(
        f"""INSERT INTO embedding_job (memory_id, memory_revision)
            SELECT m.id, m.revision FROM memory_embedding e JOIN memory m ON m.id = e.memory_id
             WHERE e.input_version <> %s AND {LIVE}
            ON CONFLICT (memory_id) DO NOTHING""", (input_version,))
    return cur.rowcount


def queued(dbs: Databases, db_name: str) -> int:
    """Jobs waiting in one workspace database."""
    with dbs.workspace(db_name).connection() as conn:
        return conn.execute("SELECT count(*) FROM embedding_job").fetchone()[0]


class EmbeddingWorker:
    """A background thread that drains the embedding queues of the workspaces that have work.

    Writes mark their workspace as having work (``wake``), so an idle workspace costs nothing; a
    sweep over every workspace runs at start, when the input-version stamp changes, and every
    ``SWEEP_SECONDS`` as a safety net (jobs left by another store process, say).
    """

    def __init__(self, dbs: Databases, control: ControlPlane, embed: embed_pb2_grpc.EmbedServiceStub,
                 batch_size: int = 32) -> None:
        self.dbs, self.control, self.embed, self.batch_size = dbs, control, embed, batch_size
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._active: set[str] = set()  # db names that may have queued jobs
        self._version = ""
        self._next_sweep = 0.0
        self._thread = threading.Thread(target=self._run, name="embedding-worker", daemon=True)

    def start(self) -> None:
        """Starts the worker thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stops the worker after its current batch."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=EMBED_TIMEOUT_SECONDS)

    def wake(self, db_name: str | None = None) -> None:
        """Notes that ``db_name`` has new work (None: look everywhere) and nudges the worker."""
        with self._lock:
            if db_name is None:
                self._next_sweep = 0.0
            else:
                self._active.add(db_name)
        self._wake.set()

    def backlog(self) -> int:
        """Jobs waiting: counted in every workspace that may have work (the others have none)."""
        with self._lock:
            active = set(self._active)
        if self._next_sweep == 0.0:  # not swept yet: nothing is known, count everywhere
            active = {ws.db_name for ws in self.control.workspaces()}
        return sum(queued(self.dbs, db) for db in sorted(active))

    def current_version(self) -> str:
        """The embed service's input-version stamp; raises grpc.RpcError when it is down."""
        return self.embed.GetModelInfo(embed_pb2.GetModelInfoRequest(), timeout=5.0).input_version

    def _sweep(self, version: str) -> None:
        """Re-queues vectors of another stamp and marks every workspace with queued jobs active."""
        found = set()
        for ws in self.control.workspaces():
            with self.dbs.workspace(ws.db_name).connection() as conn:
                requeue_other_versions(conn, version)  # a model change re-queues on its own
                if conn.execute("SELECT EXISTS (SELECT 1 FROM embedding_job)").fetchone()[0]:
                    found.add(ws.db_name)
        with self._lock:
            self._active |= found
            self._next_sweep = time.monotonic() + SWEEP_SECONDS
            self._version = version

    def _run(self) -> None:
        delay = BACKOFF_START
        while not self._stop.is_set():
            try:
                version = self.current_version()
                if version != self._version or time.monotonic() >= self._next_sweep:
                    self._sweep(version)
                with self._lock:
                    active = sorted(self._active)
                done = 0
                for db_name in active:
                    try:
                        n = self.run_once(db_name)
                    except psycopg.Error:  # one workspace's trouble must not stall the others
                        log.exception("embedding batch failed in one workspace; it will be retried")
                        FAILURES.inc()
                        continue
                    done += n
                    if n < self.batch_size and queued(self.dbs, db_name) == 0:
                        with self._lock:
                            self._active.discard(db_name)
                BACKLOG.set(self.backlog())
                delay = BACKOFF_START
                if done == 0:
                    self._wake.wait(IDLE_POLL)
                    self._wake.clear()
            except grpc.RpcError as exc:
                FAILURES.inc()
                log.warning("embed service unavailable (%s); retrying in %.1fs", exc.code(), delay)
                self._stop.wait(delay)
                delay = min(delay * 2, BACKOFF_MAX)
            except Exception:  # noqa: BLE001 - the worker must survive a bad cycle (database restart, ...)
                FAILURES.inc()
                log.exception("embedding cycle failed; retrying in %.1fs", delay)
                self._stop.wait(delay)
                delay = min(delay * 2, BACKOFF_MAX)

    def run_once(self, db_name: str) -> int:
        """Embeds one batch of one workspace; returns how many jobs it completed.

        Three steps, so no lock is held across the embed call: claim a batch under a lease
        (``FOR UPDATE SKIP LOCKED``, committed at once); embed it; then, in one transaction, lock the
        memories (``FOR SHARE``, in id order, so a concurrent correct, supersede or forget either
        finishes first and is seen, or waits for this write and then deletes what it wrote) and
        write each vector only for a memory still live at the queued revision. Raises
        grpc.RpcError when the embed service fails; the lease then expires and the batch is retried.
        """
        pool = self.dbs.workspace(db_name)
        with pool.connection() as conn:
            rows = conn.execute(
                """UPDATE embedding_job SET claimed_until = now() + %s * interval '1 second'
                    WHERE memory_id IN (
                        SELECT j.memory_id FROM embedding_job j
                         WHERE j.claimed_until IS NULL OR j.claimed_until < now()
                         ORDER BY j.enqueued_at, j.memory_id LIMIT %s FOR UPDATE SKIP LOCKED)
                RETURNING memory_id, memory_revision""", (LEASE_SECONDS, self.batch_size)).fetchall()
            if not rows:
                return 0
            texts = {r[0]: (r[1], r[2], r[3]) for r in conn.execute(
                "SELECT id, revision, title, body FROM memory WHERE id = ANY(%s)", ([r[0] for r in rows],))}
        batch = [(mid, rev) for mid, rev in rows if mid in texts and texts[mid][0] == rev]
        if batch:
            try:
                resp = self.embed.EmbedDocuments(embed_pb2.EmbedDocumentsRequest(
                    documents=[embed_pb2.Document(title=texts[mid][1], body=texts[mid][2]) for mid, _ in batch]),
                    timeout=EMBED_TIMEOUT_SECONDS)
                if len(resp.vectors) != len(batch):
                    raise RuntimeError(f"embed service returned {len(resp.vectors)} vectors for {len(batch)} texts")
            except BaseException:
                with pool.connection() as conn:  # give the batch back at once rather than at lease end
                    conn.execute("UPDATE embedding_job SET claimed_until = NULL WHERE memory_id = ANY(%s)",
                                 ([r[0] for r in rows],))
                raise
        with pool.connection() as conn, conn.transaction():
            ids = sorted(mid for mid, _ in batch)
            live = {r[0]: r[1] for r in conn.execute(
                f"SELECT m.id, m.revision FROM memory m WHERE m.id = ANY(%s) AND {LIVE} ORDER BY m.id FOR SHARE",
                (ids,))}
            for (mid, rev), vec in zip(batch, resp.vectors if batch else []):
                if live.get(mid) != rev:
                    continue  # corrected, superseded or forgotten meanwhile: its own job (if any) follows
                conn.execute(
                    """INSERT INTO memory_embedding (memory_id, memory_revision, model_id, input_version, embedding)
                       VALUES (%s, %s, %s, %s, %s)
                       ON CONFLICT (memory_id) DO UPDATE SET memory_revision = EXCLUDED.memory_revision,
                           model_id = EXCLUDED.model_id, input_version = EXCLUDED.input_version,
                           embedding = EXCLUDED.embedding, created_at = now()""",
                    (mid, rev, resp.model_id, resp.input_version, np.asarray(vec.values, dtype=np.float32)))
                EMBEDDED.inc()
            conn.execute(
                "DELETE FROM embedding_job j USING unnest(%s::uuid[], %s::bigint[]) AS d(id, rev) "
                "WHERE j.memory_id = d.id AND j.memory_revision = d.rev",
                ([r[0] for r in rows], [r[1] for r in rows]))
        return len(rows)
