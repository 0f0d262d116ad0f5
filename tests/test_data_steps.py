"""The data steps migrations leave to live code (store_service/data_steps.py), on real PostgreSQL: a
workspace upgraded from before 0009 gets every live memory's body key, as Capture computes it; a
workspace a store migrated before the steps existed upgrades with nothing due; an unknown step
stops the start rather than being skipped. (The keyword index's step: tests/test_lexical_migration.py
and tests/test_hostile_blocks.py upgrade from 0003 and 0011.)"""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid

import psycopg
import pytest
from conftest import ROOT, scratch_workspace_db

from store_service import data_steps
from store_service.database import migrate
from store_service.records import known

BODIES = ["The deploy of ABC-1234 failed.", "  Maria's PARROT\tis called  Captain. ", "ﬁle ＡＢＣ"]


def _insert(conn, body: str, *, forgotten: bool = False) -> uuid.UUID:
    mid = uuid.uuid4()
    conn.execute(
        """INSERT INTO memory (id, kind, title, body, purpose, origin, created_by, forgotten_at)
           VALUES (%s, 'note', '', %s, 'conversation', 'told', %s, CASE WHEN %s THEN now() END)""",
        (mid, body, uuid.uuid4(), forgotten),
    )
    return mid


def test_upgrade_from_0008_fills_the_body_keys_of_live_memories(pg):
    with scratch_workspace_db(pg, "0008_import_key") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            live = {_insert(conn, body): body for body in BODIES}
            gone = _insert(conn, "", forgotten=True)
        migrate(url, "workspace")
        with psycopg.connect(url, autocommit=True) as conn:
            keys = dict(conn.execute("SELECT id, body_key FROM memory").fetchall())
            assert {mid: keys[mid] for mid in live} == {mid: known.body_key(body) for mid, body in live.items()}
            assert keys[gone] is None
            assert conn.execute("SELECT step FROM data_step_due").fetchall() == []


def test_a_workspace_migrated_before_the_steps_existed_has_nothing_due(pg):
    with scratch_workspace_db(pg) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            mid = _insert(conn, "written by the store before this upgrade")
            # As a store before data steps left it: every other migration applied, no step table.
            conn.execute("DROP TABLE data_step_due")
            conn.execute("DELETE FROM _yoyo_migration WHERE migration_id = '0008_data_steps'")
        migrate(url, "workspace")
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT step FROM data_step_due").fetchall() == []
            # No step ran: the memory written without a body key or postings still has none.
            assert conn.execute("SELECT body_key FROM memory WHERE id = %s", (mid,)).fetchone() == (None,)
            assert conn.execute("SELECT count(*) FROM lexical_document").fetchone() == (0,)


def test_a_due_step_runs_once_and_an_unknown_one_stops_the_start(pg):
    with scratch_workspace_db(pg) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            mid = _insert(conn, "Captain the parrot")
            conn.execute("INSERT INTO data_step_due (step) VALUES ('body_keys')")
        assert data_steps.run_due(url) == ["body_keys"]
        assert data_steps.run_due(url) == []
        with psycopg.connect(url, autocommit=True) as conn:
            key = conn.execute("SELECT body_key FROM memory WHERE id = %s", (mid,)).fetchone()[0]
            assert key == known.body_key("captain THE parrot")
            conn.execute("INSERT INTO data_step_due (step) VALUES ('from_a_newer_store')")
        with pytest.raises(RuntimeError, match="from_a_newer_store"):
            migrate(url, "workspace")


# A migration run in a process of its own whose body-key step, once it has done its work (not yet
# committed), says so and then holds for ``HOLD`` seconds: to be killed there, or raced.
HELD_MIGRATION = """
import sys, time
from store_service import data_steps
from store_service.database import migrate

real = data_steps.STEPS["body_keys"]

def held(conn):
    real(conn)
    print("in the step", flush=True)
    time.sleep(float(sys.argv[2]))

data_steps.STEPS["body_keys"] = held
migrate(sys.argv[1], "workspace")
print("migrated", flush=True)
"""


def _held_migration(url: str, hold: float) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HELD_MIGRATION, url, str(hold)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline() == "in the step\n"
    return proc


def _all_keyed(url: str, live: dict) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        keys = dict(conn.execute("SELECT id, body_key FROM memory").fetchall())
        assert {mid: keys[mid] for mid in live} == {mid: known.body_key(body) for mid, body in live.items()}
        assert conn.execute("SELECT step FROM data_step_due").fetchall() == []


def test_a_store_killed_inside_a_data_step_leaves_it_due_and_the_next_start_runs_it(pg):
    with scratch_workspace_db(pg, "0008_import_key") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            live = {_insert(conn, body): body for body in BODIES}
        proc = _held_migration(url, 600)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        with psycopg.connect(url, autocommit=True) as conn:  # the step's transaction rolled back
            due = {r[0] for r in conn.execute("SELECT step FROM data_step_due")}
            assert due == {"body_keys", "lexical_index", "restore_predecessors", "entity_name_keys"}
            assert conn.execute("SELECT count(*) FROM memory WHERE body_key IS NOT NULL").fetchone() == (0,)
        migrate(url, "workspace")  # no lock left behind by the killed process
        _all_keyed(url, live)


@pytest.mark.slow
def test_a_second_store_waits_for_a_data_step_longer_than_ten_seconds(pg):
    """yoyo's own lock gave up after 10 seconds; the migration lock waits for the step to end."""
    with scratch_workspace_db(pg, "0008_import_key") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            live = {_insert(conn, body): body for body in BODIES}
        proc = _held_migration(url, 12)
        migrate(url, "workspace")  # waits, then finds nothing due
        assert proc.stdout.read() == "migrated\n" and proc.wait(30) == 0
        _all_keyed(url, live)


def test_upgrade_to_0021_ends_narrower_successors_claims_when_superseded_and_puts_back_stranded_ones(pg):
    """Migration 0021_successor_end: a workspace memory superseded by a member-only one ends when it was
    superseded, not at the successor's start; one whose successor had been forgotten is current again."""
    with scratch_workspace_db(pg, "0020_memory_time") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            shared, private, stranded, gone = (_insert(conn, body) for body in [*BODIES[:2], "x", "y"])
            conn.execute("UPDATE memory SET audience_member_id = created_by WHERE id = %s", (private,))
            conn.execute("UPDATE memory SET valid_from_given = '2020-01-01' WHERE id = %s", (shared,))
            conn.execute("UPDATE memory SET valid_from_given = '2021-01-01' WHERE id = %s", (private,))
            conn.execute("UPDATE memory SET forgotten_at = now(), body = '' WHERE id = %s", (gone,))
            for old, new in ((shared, private), (stranded, gone)):  # as 0017 and Supersede left them
                conn.execute(
                    """UPDATE memory m SET superseded_by_id = %s, retired_at = '2024-06-01',
                              valid_until = greatest((SELECT valid_from FROM memory WHERE id = %s), m.valid_from)
                        WHERE id = %s""",
                    (new, new, old),
                )
        migrate(url, "workspace")
        with psycopg.connect(url, autocommit=True) as conn:
            cols = "superseded_by_id, valid_until::text, retired_at IS NULL, end_follows_successor"
            rows = {r[0]: r[1:] for r in conn.execute(f"SELECT id, {cols} FROM memory")}
            assert rows[shared] == (private, "2024-06-01 00:00:00+00", False, False)
            assert rows[stranded] == (None, None, True, False)
            jobs = conn.execute("SELECT count(*) FROM embedding_job WHERE memory_id = %s", (stranded,)).fetchone()
            assert jobs == (1,)
            assert conn.execute("SELECT step FROM data_step_due").fetchall() == []


def test_upgrade_to_0022_keys_every_entity_name_as_resolution_compares_them(pg):
    names = ["Jonas", "  JONAS\u00a0Berg ", "ﬁle Ｃo"]
    with scratch_workspace_db(pg, "0021_successor_end") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            ids = [uuid.uuid4() for _ in names]
            for eid, name in zip(ids, names, strict=True):
                conn.execute("INSERT INTO entity (id, name) VALUES (%s, %s)", (eid, name))
        migrate(url, "workspace")
        with psycopg.connect(url, autocommit=True) as conn:
            keys = dict(conn.execute("SELECT id, name_key FROM entity").fetchall())
            assert [keys[i] for i in ids] == ["jonas", "jonas berg", "file co"]
            assert conn.execute("SELECT step FROM data_step_due").fetchall() == []
