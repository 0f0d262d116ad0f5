"""The embedding job: turns queued memories into vectors through the embed service.

Work is queued in ``embedding_job`` in the same transaction as the memory write. The worker claims
a batch under a lease with ``FOR UPDATE SKIP LOCKED`` (so several store processes can share the
work), embeds it through the embed service holding no locks, and writes each vector only if the
memory still has the revision that was queued and is neither forgotten nor superseded. Each cycle
it asks the embed service for its input-version stamp and re-queues vectors of any other stamp, so
a model or composition change rebuilds the index on its own. If the embed service is down the jobs
stay queued (their lease is given back), and the worker backs off exponentially (0.5 s doubling to
5 s); the backlog drains by itself once the service is back.

Identical texts are embedded once: every vector is stored with the sha256 of its exact embed input
(``servicekit.embedding_input.compose(title, body)``), and a claimed memory whose input hash already has
a vector at the current stamp gets a copy of it, written under the same rules as a computed one
(the same model on the same input gives the same vector). Only the other texts, each distinct text
once, go to ``EmbedDocuments``.

While a backlog lasts in a single workspace, its batches run as a pipeline: the next batch is
claimed while the current one is being embedded, and the current one is written while the next is
embedded. With several workspaces waiting, each gets one batch in turn.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
from dataclasses import dataclass, field

import grpc
import numpy as np
import psycopg
from prometheus_client import Counter, Gauge
from recallatron.embed.v1 import embed_pb2, embed_pb2_grpc

from servicekit.embedding_input import compose
from servicekit.errors import NotFound
from servicekit.limits import EMBED_BATCH_SIZE
from store_service.control.plane import ControlPlane
from store_service.database import Databases, DroppedDatabase, MissingDatabase, WorkspaceHandle, named, session_lost

log = logging.getLogger(__name__)
BACKLOG = Gauge("recallatron_embedding_backlog", "Embedding jobs waiting, over all workspaces.")
OLDEST = Gauge(
    "recallatron_embedding_oldest_job_age_seconds",
    "Seconds the oldest waiting embedding job has waited, over all workspaces (0 when none waits).",
)
EMBEDDED = Counter("recallatron_embedding_vectors_written", "Vectors written by the embedding job.")
REUSED = Counter(
    "recallatron_embedding_vectors_reused",
    "Vectors written by the embedding job as copies of the vector of an identical text.",
)
FAILURES = Counter("recallatron_embedding_batch_failures", "Embedding batches that failed and were retried.")
BACKOFF_START, BACKOFF_MAX, IDLE_POLL = 0.5, 5.0, 0.5
SWEEP_SECONDS = 60.0
# What a workspace's move (store_service/control/moves.py) makes its database answer for a while:
# read-only, then gone from the old server. Not a failure of the job; the copy keeps the jobs.
MOVED = (psycopg.errors.ReadOnlySqlTransaction, MissingDatabase, DroppedDatabase)
# A sweep that had to skip a database server that was down runs again this soon.
RESWEEP_SECONDS = 5.0
BACKLOG_SECONDS = 1.0  # the backlog gauge is recounted at most this often
LEASE_SECONDS = 120  # a claimed batch not finished by then is claimed again (at once when its claimant is gone)
EMBED_TIMEOUT_SECONDS = 60.0
PIPELINE_BATCHES = 8  # pipelined batches per visit while only one workspace has work


LIVE = "m.forgotten_at IS NULL AND m.retired_at IS NULL"


def input_sha256(title: str, body: str) -> bytes:
    """The sha256 of a memory's exact embed input (``compose(title, body)``, UTF-8)."""
    return hashlib.sha256(compose(title, body).encode("utf-8")).digest()


def requeue(conn, input_version: str, everything: bool = False) -> int:
    """Queues live memories whose vector is missing, of another input version or of an older
    revision (or every live memory with ``everything``); returns how many jobs were added."""
    stale = (
        "TRUE" if everything else "e.memory_id IS NULL OR e.input_version <> %(v)s OR e.memory_revision <> m.revision"
    )
    cur = conn.execute(
        f"""INSERT INTO embedding_job (memory_id, memory_revision)
            SELECT m.id, m.revision FROM memory m LEFT JOIN memory_embedding e ON e.memory_id = m.id
             WHERE {LIVE} AND ({stale})
            ON CONFLICT (memory_id) DO NOTHING""",
        {"v": input_version},
    )
    return cur.rowcount


def requeue_other_versions(conn, input_version: str) -> int:
    """Queues memories whose vector has another input version (index-assisted; empty almost always)."""
    cur = conn.execute(
        f"""INSERT INTO embedding_job (memory_id, memory_revision)
            SELECT m.id, m.revision FROM memory_embedding e JOIN memory m ON m.id = e.memory_id
             WHERE e.input_version <> %s AND {LIVE}
            ON CONFLICT (memory_id) DO NOTHING""",
        (input_version,),
    )
    return cur.rowcount


def queued(dbs: Databases, db_name: str, server: str = "") -> tuple[int, float]:
    """Jobs waiting in one workspace database, and the seconds the oldest has waited (0.0 when none)."""
    with dbs.workspace(db_name, server).connection() as conn:
        row = (
            named(conn)
            .execute(
                "SELECT count(*) AS jobs, COALESCE(EXTRACT(EPOCH FROM now() - min(enqueued_at)), 0)::float8 AS age "
                "FROM embedding_job"
            )
            .fetchone()
        )
        return row.jobs, max(row.age, 0.0)


def _any_job(conn: psycopg.Connection) -> bool:
    """Whether the workspace database of ``conn`` has any job queued (without counting them)."""
    return named(conn).execute("SELECT EXISTS (SELECT 1 FROM embedding_job) AS found").fetchone().found


def has_jobs(dbs: Databases, db_name: str, server: str = "") -> bool:
    """Whether one workspace database has any job queued (without counting them)."""
    with dbs.workspace(db_name, server).connection() as conn:
        return _any_job(conn)


@dataclass
class _Batch:
    """One claimed batch: the jobs, the memories still at the queued revision with their input
    hashes, the vectors found for some hashes, and the distinct texts still to embed."""

    version: str
    jobs: list  # named rows (memory_id, memory_revision)
    items: list[tuple[object, int, bytes]] = field(default_factory=list)
    found: dict[bytes, tuple[str, np.ndarray]] = field(default_factory=dict)  # hash -> (model_id, vector)
    todo: dict[bytes, tuple[str, str]] = field(default_factory=dict)  # hash -> (title, body), to embed
    written: bool = False


class EmbeddingWorker:
    """A background thread that drains the embedding queues of the workspaces that have work.

    Writes mark their workspace as having work (``wake``), so an idle workspace costs nothing; a
    sweep over every workspace runs at start, when the input-version stamp changes, and every
    ``SWEEP_SECONDS`` as a safety net (jobs left by another store process, say).
    """

    def __init__(
        self,
        dbs: Databases,
        control: ControlPlane,
        embed: embed_pb2_grpc.EmbedServiceStub,
        batch_size: int = EMBED_BATCH_SIZE,
    ) -> None:
        self.dbs, self.control, self.embed, self.batch_size = dbs, control, embed, batch_size
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._active: set[str] = set()  # db names that may have queued jobs
        # Wakes per db name: the worker drops a workspace from ``_active`` only when no wake came
        # since it started looking (a write committing between its "no jobs left" check and the drop
        # would otherwise wait for the next sweep, up to SWEEP_SECONDS, and GetStatus would say 0).
        self._wakes: dict[str, int] = {}
        # The database server of each db name seen (the workspace rows say; "": the control plane's).
        self._servers: dict[str, str] = {}
        self._waiting_for_move: set[str] = set()  # db names whose wait for a move was logged
        self._version = ""
        self._next_sweep = 0.0
        self._next_gauge = 0.0
        self._thread = threading.Thread(target=self._run, name="embedding-worker", daemon=True)

    def start(self) -> None:
        """Starts the worker thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stops the worker after its current batch."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=EMBED_TIMEOUT_SECONDS)

    def forget_db(self, db_name: str) -> None:
        """Drops a workspace database from the worker's view (it was deleted: nothing left to embed)."""
        with self._lock:
            self._active.discard(db_name)
            self._wakes.pop(db_name, None)
            self._servers.pop(db_name, None)

    def _gone(self, db_name: str) -> bool:
        """Whether ``db_name`` is no longer a workspace's (deleted, here or by another store process);
        then it is forgotten."""
        if db_name in {ws.db_name for ws in self.control.workspaces()}:
            return False
        self.forget_db(db_name)
        return True

    def _by_move(self, exc: BaseException, db_name: str, server: str | None = None) -> bool:
        """Whether ``exc`` is what a move of ``db_name`` makes its database answer for a while, a
        routine of the move rather than a failure of the job. ``server``: where the failed call went,
        when known; a workspace now placed elsewhere was moved (its move may have ended since)."""
        if isinstance(exc, MOVED):
            return True
        if not session_lost(exc):  # a move ends the source's sessions; so does a server shutting down
            return False
        if server is not None and self._server(db_name) != server:
            return True
        try:
            return self.control.in_move(db_name)
        except psycopg.Error:  # the control plane unreachable: say it as a failure, the safe side
            return False

    def _placed(self) -> list:
        """Every workspace row, noting the server of each database."""
        found = self.control.workspaces()
        with self._lock:
            self._servers.update((ws.db_name, ws.server) for ws in found)
        return found

    def _server(self, db_name: str) -> str:
        with self._lock:
            known = self._servers.get(db_name)
        if known is None:
            self._placed()
            with self._lock:
                known = self._servers.get(db_name, "")
        return known

    def wake(self, db_name: str | None = None, server: str = "") -> None:
        """Notes that ``db_name`` on ``server`` has new work (None: look everywhere) and nudges the
        worker."""
        with self._lock:
            if db_name is None:
                self._next_sweep = 0.0
            else:
                self._servers[db_name] = server
                self._active.add(db_name)
                self._wakes[db_name] = self._wakes.get(db_name, 0) + 1
        self._wake.set()

    def backlog(self) -> int:
        """Jobs waiting: counted in every workspace that may have work (the others have none)."""
        return self.queue()[0]

    def queue(self) -> tuple[int, float]:
        """Jobs waiting and the seconds the oldest has waited (0.0 when none), over every workspace
        that may have work (the others have none)."""
        with self._lock:
            active = set(self._active)
        if self._next_sweep == 0.0:  # not swept yet: nothing is known, count everywhere
            active = {ws.db_name for ws in self._placed()}
        each = []
        for db in sorted(active):
            server = self._server(db)
            if not self.dbs.serving(server):  # counted again once its server answers
                continue
            try:
                each.append(queued(self.dbs, db, server))
            except (NotFound, psycopg.OperationalError) as exc:
                # A deleted workspace has no backlog; one being moved is counted again in a moment
                # (BACKLOG_SECONDS); any other trouble is real.
                if not (self._gone(db) or self._by_move(exc, db, server)):
                    raise
        return sum(jobs for jobs, _ in each), max((age for _, age in each), default=0.0)

    def current_version(self) -> str:
        """The embed service's input-version stamp; raises grpc.RpcError when it is down."""
        return self.embed.GetModelInfo(embed_pb2.GetModelInfoRequest(), timeout=5.0).input_version

    def _sweep(self, version: str) -> None:
        """Re-queues vectors of another stamp and marks every workspace with queued jobs active."""
        found, skipped = set(), False
        for ws in self._placed():
            if not self.dbs.serving(ws.server):  # swept again soon, for when its server answers
                skipped = True
                continue
            try:
                with self.dbs.workspace(ws.db_name, ws.server).connection() as conn:
                    requeue_other_versions(conn, version)  # a model change re-queues on its own
                    if _any_job(conn):
                        found.add(ws.db_name)
            except (NotFound, psycopg.Error) as exc:  # one workspace's trouble is not the others'
                if self._gone(ws.db_name):  # deleted since it was listed: nothing to sweep
                    continue
                skipped = True  # swept again within RESWEEP_SECONDS
                if self._by_move(exc, ws.db_name):  # read-only while it is copied, or just moved
                    log.info("embedding sweep passes over a workspace being moved: %s", exc)
                else:
                    log.warning("embedding sweep could not look at one workspace (%s); it will again", exc)
        with self._lock:
            self._active |= found
            self._next_sweep = time.monotonic() + (RESWEEP_SECONDS if skipped else SWEEP_SECONDS)
            self._version = version

    def _publish_backlog(self, force: bool = False) -> None:
        """Sets the backlog gauges, recounting at most every ``BACKLOG_SECONDS`` (a count of a long
        queue after every batch cost as much as the batch's own writes)."""
        now = time.monotonic()
        if force or now >= self._next_gauge:
            jobs, age = self.queue()
            BACKLOG.set(jobs)
            OLDEST.set(age)
            self._next_gauge = now + BACKLOG_SECONDS

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
                # A long pipeline only while one workspace has work: with several, one batch each in turn.
                pipeline = PIPELINE_BATCHES if len(active) == 1 else 1
                for db_name in active:
                    server = self._server(db_name)
                    if not self.dbs.serving(server):  # its jobs wait for their server
                        continue
                    with self._lock:
                        wakes = self._wakes.get(db_name, 0)
                    try:
                        n = self.run_once(db_name, max_batches=pipeline)
                        drained = n < self.batch_size and not has_jobs(self.dbs, db_name, server)
                    except (psycopg.Error, NotFound) as exc:  # one workspace's trouble must not stall the others
                        if self._gone(db_name):  # deleted: its jobs went with its database
                            continue
                        self._placed()  # moved to another server, perhaps: look where it is now
                        if self._by_move(exc, db_name, server):  # a move's routine: its jobs go with the copy
                            if db_name not in self._waiting_for_move:  # said once per move, not per cycle
                                self._waiting_for_move.add(db_name)
                                log.info("embedding in a workspace being moved waits for the move: %s", exc)
                            continue
                        log.exception("embedding batch failed in one workspace; it will be retried")
                        FAILURES.inc()
                        continue
                    done += n
                    self._waiting_for_move.discard(db_name)
                    if drained:
                        with self._lock:
                            if self._wakes.get(db_name, 0) == wakes:  # else a write came meanwhile
                                self._active.discard(db_name)
                self._publish_backlog(force=done == 0)
                delay = BACKOFF_START
                if done == 0:
                    self._wake.wait(IDLE_POLL)
                    self._wake.clear()
            except grpc.RpcError as exc:
                FAILURES.inc()
                log.warning("embed service unavailable (%s); retrying in %.1fs", exc.code(), delay)
                with contextlib.suppress(psycopg.Error, NotFound):  # the gauges move on while it is down (alerts.yml)
                    self._publish_backlog()
                self._stop.wait(delay)
                delay = min(delay * 2, BACKOFF_MAX)
            except Exception:  # the worker must survive a bad cycle (database restart, ...)
                FAILURES.inc()
                log.exception("embedding cycle failed; retrying in %.1fs", delay)
                self._stop.wait(delay)
                delay = min(delay * 2, BACKOFF_MAX)

    def run_once(self, db_name: str, max_batches: int = 1) -> int:
        """Embeds up to ``max_batches`` batches of one workspace; returns how many jobs it completed.

        Three steps per batch, so no lock is held across the embed call: claim a batch under a
        lease (``FOR UPDATE SKIP LOCKED``, committed at once) and, in the same short transaction,
        read its texts and look up the vectors of identical inputs at the current stamp; embed the
        remaining distinct texts; then, in one transaction, lock the memories (``FOR SHARE``, in id
        order, so a concurrent correct, supersede or forget either finishes first and is seen, or
        waits for this write and then deletes what it wrote), write each vector (computed or copied)
        only for a memory still live at the queued revision, and delete the batch's jobs. While
        batches come full, the next one is claimed while the current one is embedded, and the
        current one is written while the next one is embedded (one embed call in flight at most).
        Raises grpc.RpcError when the embed service fails; the unwritten batches' leases are then
        given back at once and they are retried.
        """
        pool = WorkspaceHandle(self.dbs, db_name, self._server(db_name))
        version = self._version or self.current_version()
        cur = self._claim(pool, version)
        if cur is None:
            return 0
        batches, done = 1, 0
        fut = self._embed_async(cur)
        nxt = nfut = None
        try:
            while cur is not None:
                nxt = nfut = None
                if batches < max_batches and len(cur.jobs) == self.batch_size and not self._stop.is_set():
                    nxt = self._claim(pool, version)  # overlaps the current embed call
                    batches += nxt is not None
                resp = self._result(cur, fut)
                fut = None
                if nxt is not None:
                    nfut = self._embed_async(nxt)  # the next embed call runs while this batch is written
                if resp is not None and resp.input_version != cur.version:
                    # The model changed under us: give the batch back, and sweep (re-queue) first.
                    log.info("embed service stamp changed (%s); re-sweeping", resp.input_version)
                    with self._lock:
                        self._next_sweep = 0.0
                    self._release(pool, cur)
                    cur.written = True
                else:
                    done += self._write(pool, cur, resp)
                cur, fut = nxt, nfut
            return done
        except BaseException:
            for f in (fut, nfut):
                if f is not None:
                    f.cancel()
            for b in (cur, nxt):
                if b is not None and not b.written:
                    try:
                        self._release(pool, b)
                    except psycopg.Error as exc:
                        if not self._by_move(exc, db_name):
                            log.exception("could not give back an embedding lease (it runs out by itself)")
            raise

    def _claim(self, pool, version: str) -> _Batch | None:
        """Claims a batch under a lease, reads its texts and finds the vectors of identical inputs.

        A job is free when it was never claimed, its lease ran out, or the backend that claimed it
        no longer exists (``claimed_by`` is not in ``pg_stat_activity``): its store died, so its
        jobs are taken over at once instead of after ``LEASE_SECONDS``."""
        with pool.connection() as conn:
            jobs = (
                named(conn)
                .execute(
                    """UPDATE embedding_job
                    SET claimed_until = now() + %s * interval '1 second', claimed_by = pg_backend_pid()
                    WHERE memory_id IN (
                        SELECT j.memory_id FROM embedding_job j
                         WHERE j.claimed_until IS NULL OR j.claimed_until < now()
                            OR NOT (j.claimed_by = ANY (ARRAY(SELECT a.pid FROM pg_stat_activity a)))
                         ORDER BY j.enqueued_at, j.memory_id LIMIT %s FOR UPDATE SKIP LOCKED)
                RETURNING memory_id, memory_revision""",
                    (LEASE_SECONDS, self.batch_size),
                )
                .fetchall()
            )
            if not jobs:
                return None
            batch = _Batch(version, jobs)
            texts = {
                r.id: r
                for r in named(conn).execute(
                    "SELECT id, revision, title, body FROM memory WHERE id = ANY(%s)", ([j.memory_id for j in jobs],)
                )
            }
            inputs: dict[bytes, tuple[str, str]] = {}
            for job in jobs:
                text = texts.get(job.memory_id)
                if text is not None and text.revision == job.memory_revision:
                    h = input_sha256(text.title, text.body)
                    batch.items.append((job.memory_id, job.memory_revision, h))
                    inputs.setdefault(h, (text.title, text.body))
            if inputs:
                for known in named(conn).execute(
                    """SELECT DISTINCT ON (input_sha256) input_sha256, model_id, embedding FROM memory_embedding
                            WHERE input_version = %s AND input_sha256 = ANY(%s)
                            ORDER BY input_sha256""",
                    (version, list(inputs)),
                ):
                    batch.found[bytes(known.input_sha256)] = (known.model_id, known.embedding)
            batch.todo = {h: t for h, t in inputs.items() if h not in batch.found}
        return batch

    def _embed_async(self, batch: _Batch):
        """Starts the embed call of a batch's distinct unknown texts (None when there are none)."""
        if not batch.todo:
            return None
        return self.embed.EmbedDocuments.future(
            embed_pb2.EmbedDocumentsRequest(
                documents=[embed_pb2.Document(title=t, body=b) for t, b in batch.todo.values()]
            ),
            timeout=EMBED_TIMEOUT_SECONDS,
        )

    def _result(self, batch: _Batch, fut):
        """The embed call's response (None when nothing was sent); raises on failure."""
        if fut is None:
            return None
        resp = fut.result()
        if len(resp.vectors) != len(batch.todo):
            raise RuntimeError(f"embed service returned {len(resp.vectors)} vectors for {len(batch.todo)} texts")
        return resp

    def _release(self, pool, batch: _Batch) -> None:
        """Gives a batch's leases back at once rather than at lease end."""
        with pool.connection() as conn:
            conn.execute(
                "UPDATE embedding_job SET claimed_until = NULL WHERE memory_id = ANY(%s)",
                ([j.memory_id for j in batch.jobs],),
            )

    def _write(self, pool, batch: _Batch, resp) -> int:
        """Writes a batch's vectors for the memories still live at the queued revision, and deletes
        its jobs, in one transaction; returns how many jobs it completed."""
        vectors: dict[bytes, tuple[str, str, object, bool]] = {
            h: (model_id, batch.version, vec, True) for h, (model_id, vec) in batch.found.items()
        }
        if resp is not None:
            for h, vec in zip(batch.todo, resp.vectors, strict=True):
                vectors[h] = (resp.model_id, resp.input_version, np.asarray(vec.values, dtype=np.float32), False)
        with pool.connection() as conn, conn.transaction():
            ids = sorted(mid for mid, _, _ in batch.items)
            live = (
                {
                    r.id: r.revision
                    for r in named(conn).execute(
                        f"SELECT m.id, m.revision FROM memory m WHERE m.id = ANY(%s) AND {LIVE} "
                        "ORDER BY m.id FOR SHARE",
                        (ids,),
                    )
                }
                if ids
                else {}
            )
            params, reused = [], 0
            for mid, rev, h in batch.items:
                if live.get(mid) != rev:
                    continue  # corrected, superseded or forgotten meanwhile: its own job (if any) follows
                model_id, version, vec, copied = vectors[h]
                params.append((mid, rev, model_id, version, vec, h))
                reused += copied
            if params:
                with conn.cursor() as cur:
                    cur.executemany(
                        """INSERT INTO memory_embedding
                               (memory_id, memory_revision, model_id, input_version, embedding, input_sha256)
                           VALUES (%s, %s, %s, %s, %s, %s)
                           ON CONFLICT (memory_id) DO UPDATE SET memory_revision = EXCLUDED.memory_revision,
                               model_id = EXCLUDED.model_id, input_version = EXCLUDED.input_version,
                               embedding = EXCLUDED.embedding, input_sha256 = EXCLUDED.input_sha256,
                               created_at = now()""",
                        params,
                    )
            conn.execute(
                "DELETE FROM embedding_job j USING unnest(%s::uuid[], %s::bigint[]) AS d(id, rev) "
                "WHERE j.memory_id = d.id AND j.memory_revision = d.rev",
                ([j.memory_id for j in batch.jobs], [j.memory_revision for j in batch.jobs]),
            )
        batch.written = True
        EMBEDDED.inc(len(params))
        REUSED.inc(reused)
        return len(batch.jobs)
