"""Crash safety: ``kill -9`` of the store service, the gateway, the embed service and PostgreSQL under
a write load from 8 clients (tools/chaos: a `recallatron up` of its own, a few seconds of load per
kill), then every acknowledged write is there, nothing half-written is visible, what was forgotten
stays forgotten and the embeddings catch up. Also, on their own: the store's pools answer
UNAVAILABLE while PostgreSQL is down and work again once it is back, and the embedding jobs claimed
by a store that died are taken over at once. No timing assertions: every wait polls, generously."""

from __future__ import annotations

import os
import signal
from collections import Counter
from contextlib import contextmanager

import grpc
import psycopg
import pytest

from servicekit.embedded_pg import EmbeddedPostgres
from servicekit.errors import status_proto_for
from store_service.database import Databases
from store_service.embedding.job import EmbeddingWorker
from tools import chaos
from tools.chaos.stack import TARGETS, wait_for


def _select_one(dbs: Databases, db_name: str | None = None):
    pool = dbs.control if db_name is None else dbs.workspace(db_name)
    with pool.connection() as conn:
        return conn.execute("SELECT 1").fetchone()[0]


def _error(call):
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the test looks at what it is
        return exc
    return None


@pytest.mark.cluster
def test_pools_answer_unavailable_while_postgres_is_down_and_recover(tmp_path):
    pg = EmbeddedPostgres(tmp_path / "pg")
    dbs = Databases(pg.control_url)
    try:
        dbs.open()
        dbs.create_workspace_db("recallatron_ws_chaos_pool")
        assert _select_one(dbs) == 1 and _select_one(dbs, "recallatron_ws_chaos_pool") == 1
        # A refusal that was not the server going away (a missing database, say) is corrected by the probe.
        dbs.health.refused()
        dbs.probe()
        assert not dbs.health.down
        os.kill(pg.pid(), signal.SIGKILL)
        wait_for(lambda: not pg.running(), 60, "the postmaster gone")
        for db_name in (None, "recallatron_ws_chaos_pool", None):
            exc = _error(lambda db=db_name: _select_one(dbs, db))
            assert isinstance(exc, psycopg.OperationalError), exc
            assert status_proto_for(exc).code == grpc.StatusCode.UNAVAILABLE.value[0]
            assert status_proto_for(exc).message == "the database is unavailable; retry later"
        assert dbs.health.down
        assert "the database server refused or did not answer" in str(_error(lambda: _select_one(dbs)))
        assert isinstance(_error(dbs.probe), psycopg.OperationalError)
        pg.restart()
        assert pg.running()
        wait_for(lambda: _error(lambda: _select_one(dbs)) is None, 120, "the control pool back")
        wait_for(lambda: _error(lambda: _select_one(dbs, "recallatron_ws_chaos_pool")) is None, 120, "workspace pool")
        assert not dbs.health.down and _error(dbs.probe) is None
    finally:
        dbs.close()
        pg.stop()


class _OnePool:
    """A pool of one given connection, to claim jobs on a connection the test can close."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    @contextmanager
    def connection(self):
        yield self.conn


def test_jobs_claimed_by_a_dead_store_are_taken_at_once(stack):
    ws = stack.workspace("dead claimant")
    alice = stack.member(ws)
    worker: EmbeddingWorker = stack.store.worker
    with stack.db(ws) as conn:
        url = conn.info.dsn
    with stack.embed_down():  # the running worker claims nothing while the embed service is down
        ids = {alice.remember(f"Claimed before the crash, note {i}.").id for i in range(3)}
        dead = psycopg.connect(url, autocommit=True)
        first = worker._claim(_OnePool(dead), "v")
        assert {str(j.memory_id) for j in first.jobs} == ids
        with psycopg.connect(url, autocommit=True) as other:
            # The claimant lives: its lease holds.
            assert worker._claim(_OnePool(other), "v") is None
            dead.close()  # its store died: the backend goes, and with it the claim
            wait_for(lambda: worker._claim(_OnePool(other), "v") is not None, 60, "the jobs free again")
            claimed = other.execute(
                "SELECT count(*) FROM embedding_job WHERE claimed_by = pg_backend_pid() AND claimed_until > now()"
            ).fetchone()[0]
            assert claimed == 3
            other.execute("UPDATE embedding_job SET claimed_until = NULL")  # give them back to the worker
    stack.wait_backlog_empty()
    with stack.db(ws) as conn:
        assert conn.execute("SELECT count(*) FROM memory_embedding").fetchone()[0] == 3


@pytest.fixture(scope="module")
def chaos_run(tmp_path_factory):
    """The bounded chaos run: 8 clients, 3 s of load before and after each kill."""
    lines: list[str] = []
    phases = chaos.run(3.0, clients=8, home=tmp_path_factory.mktemp("chaos"), report=lines.append)
    print("\n".join(lines))
    print(chaos.table(phases))
    return phases


@pytest.mark.system
@pytest.mark.parametrize("target", TARGETS)
def test_kill_9_loses_no_acknowledged_write(chaos_run, target):
    (phase,) = [p for p in chaos_run if p.target == target]
    report = chaos.line(phase)
    assert sum(phase.acknowledged.values()) > 0, report
    assert phase.found == sum(phase.acknowledged.values()), report
    assert phase.unknown_rows == 0, report  # no write done twice, none unaccounted for
    assert phase.half_written == dict.fromkeys(phase.half_written, 0), report
    assert phase.forgotten == phase.still_forgotten, report
    assert phase.vectors_missing == 0, report
    assert not phase.unexpected, report


@pytest.mark.system
def test_the_load_ran_every_write_operation(chaos_run):
    total = Counter()
    for phase in chaos_run:
        total.update(phase.acknowledged)
    assert sorted(op for op in total if total[op] > 0) == ["correct", "forget", "remember", "supersede"], total
    assert [p.target for p in chaos_run] == list(TARGETS)
    assert chaos_run[-1].forgotten > 0


def test_phase_figures_are_json():
    # dataclasses.asdict turned the Counters into Counters of (key, value) tuples: --json crashed.
    import json

    phase = chaos.Phase(
        "store",
        Counter(remember=3, forget=1),
        4,
        1,
        1,
        {"revision_without_memory": 0},
        0,
        0,
        2.0,
        3.1,
        5.2,
        retried=Counter(UNAVAILABLE=2),
    )
    got = json.loads(json.dumps(phase.as_json()))
    assert got["acknowledged"] == {"remember": 3, "forget": 1} and got["retried"] == {"UNAVAILABLE": 2}
    assert got["ok"] is True and got["found"] == 4
