"""Data steps: the work on existing rows that a workspace migration needs from live code.

A migration is frozen: it imports nothing of the project (tests/test_migrations_frozen.py), so
changing live code never changes an old migration. When its data needs live code (a column filled
from a Python function, the keyword index rebuilt by ``store_service.search.analysis``), the
migration records the step as due in ``data_step_due`` (migration 0008_data_steps) in its own
transaction, and ``run_due`` runs it right after the migrations, before the store serves the
database (``store_service.database.migrate``). Each step runs in one transaction that also deletes
its row, so a step interrupted is run again at the next start, and a database already done has
nothing due. A step computes with today's code what today's code reads: the keys and postings it
writes are the ones the running store looks up.

Steps run with the memory table locked ``SHARE``: readers go on, writers wait until the step
commits, so no memory written meanwhile is missed.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg

from servicekit.text import name_key
from store_service.records import known, lifecycle_rules
from store_service.search import lexical_index

# Rows whose computed column one statement fills.
FILL_BATCH = 1_000


def _fill(conn: psycopg.Connection, table: str, source: str, column: str, kind: str, compute, where: str = "TRUE"):
    """Sets ``column`` (of SQL type ``kind``) of every row of ``table`` that ``where`` holds to
    ``compute`` of its ``source`` column, in id order, ``FILL_BATCH`` rows a statement."""
    last = None
    while True:
        rows = conn.execute(
            f"SELECT id, {source} FROM {table} WHERE {where} AND (%s::uuid IS NULL OR id > %s) ORDER BY id LIMIT %s",
            (last, last, FILL_BATCH),
        ).fetchall()
        if not rows:
            return
        conn.execute(
            f"UPDATE {table} t SET {column} = u.k FROM unnest(%s::uuid[], %s::{kind}[]) AS u(i, k) WHERE t.id = u.i",
            ([r[0] for r in rows], [compute(r[1]) for r in rows]),
        )
        last = rows[-1][0]


def _body_keys(conn: psycopg.Connection) -> None:
    """Fills ``memory.body_key`` of every live memory (migration 0009_pins_capture)."""
    _fill(conn, "memory", "body", "body_key", "bytea", known.body_key, "forgotten_at IS NULL")


def _restore_predecessors(conn: psycopg.Connection) -> None:
    """Memories whose successor was forgotten before a forget restored them (migration
    0021_successor_end) take its place (``lifecycle_rules.restore_predecessors``)."""
    gone = [
        r[0]
        for r in conn.execute(
            """SELECT DISTINCT s.id FROM memory m JOIN memory s ON s.id = m.superseded_by_id
                WHERE m.forgotten_at IS NULL AND s.forgotten_at IS NOT NULL"""
        ).fetchall()
    ]
    lifecycle_rules.restore_predecessors(conn, gone)


def _entity_name_keys(conn: psycopg.Connection) -> None:
    """Fills ``entity.name_key`` of every entity without one (migration 0022_entity_name_key, and
    0024 for entities imported before imports wrote it)."""
    _fill(conn, "entity", "name", "name_key", "text", name_key, "name_key IS NULL")


# The steps by the name a migration records, in the order they run.
STEPS: dict[str, Callable[[psycopg.Connection], None]] = {
    "body_keys": _body_keys,
    # Migration 0012_lexical_blocks: the packed posting blocks, built from the memory rows.
    "lexical_index": lexical_index.reindex_all,
    "restore_predecessors": _restore_predecessors,
    "entity_name_keys": _entity_name_keys,
}


def run_due(conninfo: str) -> list[str]:
    """Runs the steps due in the workspace database at ``conninfo``, each in its own transaction;
    returns their names. Call it with the database's migrations applied and their lock held."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        due = {r[0] for r in conn.execute("SELECT step FROM data_step_due").fetchall()}
        unknown = due - set(STEPS)
        if unknown:
            raise RuntimeError(f"data steps due that this store does not know: {sorted(unknown)}")
        ran = []
        for name, run in STEPS.items():
            if name in due:
                with conn.transaction():
                    conn.execute("LOCK TABLE memory IN SHARE MODE")
                    run(conn)
                    conn.execute("DELETE FROM data_step_due WHERE step = %s", (name,))
                ran.append(name)
    return ran
