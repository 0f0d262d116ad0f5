"""Keyword-arm postings and statistics, maintained in the write transaction (issue 7, item 2).

Stub: the write paths already call ``add_memories`` for every memory they insert; the postings
and per-partition statistics are filled in here.
"""

from __future__ import annotations

import uuid

import psycopg


def add_memories(conn: psycopg.Connection,
                 rows: list[tuple[uuid.UUID, uuid.UUID | None, str, str, str]]) -> None:
    """Records newly inserted memories in the keyword-arm postings and statistics.

    Called once per insert statement, inside the transaction that inserted them, with one
    ``(memory_id, audience_member_id, purpose, title, body)`` per memory (``audience_member_id``
    None means the workspace audience; ``purpose`` is the stored name). Currently a no-op.
    """
    del conn, rows
