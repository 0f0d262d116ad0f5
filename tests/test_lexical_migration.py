"""Migration 0004 re-indexes an existing workspace: a database at 0003 (the generated tsvector) with
live, superseded, member-only and forgotten memories comes out with postings for every live memory,
statistics equal to a recount, nothing forgotten indexed, every row and its text intact, and the
keyword arm finding what it found before."""

from __future__ import annotations

import uuid

import psycopg
from conftest import migrate_until
from psycopg import sql
from psycopg.conninfo import make_conninfo
from recallatron.memory.v1 import memory_pb2 as m

from store_service.database import migrate
from store_service.search import candidates, lexical_index


def test_migration_reindexes_existing_memories(pg):
    db_name = f"migration_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db_name)))
    url = make_conninfo(pg, dbname=db_name)
    migrate_until(url, "0003_embedding_job_lease")
    alice, bob = uuid.uuid4(), uuid.uuid4()
    rows = {  # id -> (audience, purpose, body)
        uuid.uuid4(): (None, "conversation", "The deploy of ABC-1234 failed on 2024-03-15."),
        uuid.uuid4(): (None, "conversation", "Maria's parrot is called Captain."),
        uuid.uuid4(): (alice, "conversation", "Alice keeps her locker code in config/locker.yaml."),
        uuid.uuid4(): (bob, "tasks", "Bob owes the team a review of v1.2.3."),
    }
    ids = list(rows)
    with psycopg.connect(url, autocommit=True) as conn:
        for mid, (audience, purpose, body) in rows.items():
            conn.execute(
                """INSERT INTO memory (id, kind, title, body, audience_member_id, purpose, origin, created_by)
                            VALUES (%s, 'note', 'Old', %s, %s, %s, 'told', %s)""",
                (mid, body, audience, purpose, audience or alice),
            )
        successor = uuid.uuid4()
        conn.execute(
            """INSERT INTO memory (id, kind, body, purpose, origin, created_by)
                        VALUES (%s, 'fact', 'Maria gave the parrot to her sister.', 'conversation', 'told', %s)""",
            (successor, alice),
        )
        conn.execute("UPDATE memory SET superseded_by_id = %s WHERE id = %s", (successor, ids[1]))
        forgotten = uuid.uuid4()
        conn.execute(
            """INSERT INTO memory (id, kind, body, purpose, origin, created_by, forgotten_at)
                        VALUES (%s, 'note', '', 'conversation', 'told', %s, now())""",
            (forgotten, alice),
        )
        before = conn.execute("SELECT id, title, body FROM memory ORDER BY id").fetchall()

    migrate(url, "workspace")

    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT id, title, body FROM memory ORDER BY id").fetchall() == before
        columns = {
            r[0] for r in conn.execute("SELECT column_name FROM information_schema.columns WHERE table_name = 'memory'")
        }
        assert "tsv" not in columns
        indexed = {
            r[0]: r[1:]
            for r in conn.execute(
                """SELECT d.memory_id, p.audience, p.purpose, p.superseded
                 FROM lexical_document d JOIN lexical_partition p ON p.id = d.partition_id"""
            )
        }
        assert set(indexed) == set(ids) | {successor}  # every live memory, the forgotten one not
        assert indexed[ids[1]] == (lexical_index.WORKSPACE, "conversation", True)
        assert indexed[ids[2]] == (alice, "conversation", False)
        assert lexical_index.block_problems(conn) == []
        df, parts = lexical_index.maintained(conn)
        assert (df, parts) == lexical_index.recount(conn)
        assert parts[(lexical_index.WORKSPACE, "conversation", False)][0] == 2
        caller = m.Caller(member_id=str(alice), granted_purposes=[m.PURPOSE_CONVERSATION])
        hits = [r[0] for r in candidates.lexical(conn, caller, "conversation", "1234", 10, False)]
        assert hits == [ids[0]]
        hits = [r[0] for r in candidates.lexical(conn, caller, "conversation", "locker.yaml", 10, False)]
        assert hits == [ids[2]]
        history = [r[0] for r in candidates.lexical(conn, caller, "conversation", "parrot", 10, True)]
        assert set(history) == {ids[1], successor}
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(db_name)))
