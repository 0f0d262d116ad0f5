"""The embedding worker's wake-up bookkeeping, without a database: a write that commits while the
worker is deciding that a workspace has no jobs left must keep that workspace active (the lost
wake-up left jobs unembedded until the next sweep, 60 s later, while GetStatus said the backlog was
0; the trust property's curation test once found a memory without a vector after "backlog 0")."""

from __future__ import annotations

import threading

from store_service.embedding import job
from store_service.embedding.job import EmbeddingWorker


class _EveryServerServes:
    """Stands in for the databases (none here): every server answers."""

    def serving(self, server: str) -> bool:
        return True


def _worker(monkeypatch, during_check) -> EmbeddingWorker:
    """A worker whose one workspace ``ws`` runs an empty batch and whose "any job left?" check runs
    ``during_check(worker)`` before answering no; it stops after that cycle."""
    worker = EmbeddingWorker(dbs=_EveryServerServes(), control=None, embed=None, batch_size=8)
    worker._active, worker._servers = {"ws"}, {"ws": ""}
    worker._next_sweep = float("inf")
    worker._version = "v1"
    monkeypatch.setattr(worker, "current_version", lambda: "v1")
    monkeypatch.setattr(worker, "run_once", lambda db_name, max_batches: 0)
    monkeypatch.setattr(worker, "queue", lambda: (0, 0.0))

    def has_jobs(dbs, db_name, server=""):
        during_check(worker)
        worker._stop.set()
        return False

    monkeypatch.setattr(job, "has_jobs", has_jobs)
    return worker


def _one_cycle(worker: EmbeddingWorker) -> None:
    thread = threading.Thread(target=worker._run)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive()


def test_a_wake_during_the_last_check_keeps_the_workspace_active(monkeypatch):
    worker = _worker(monkeypatch, lambda w: w.wake("ws"))
    _one_cycle(worker)
    assert worker._active == {"ws"}


def test_without_a_wake_an_idle_workspace_is_dropped(monkeypatch):
    worker = _worker(monkeypatch, lambda w: None)
    _one_cycle(worker)
    assert worker._active == set()
