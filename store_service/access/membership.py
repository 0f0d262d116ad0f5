"""Writes of a member and its removal, serialised in the workspace database.

The control plane authenticates every call, but a call authenticated just before a RemoveMember
may still be writing when the removal sweeps; committing after the sweep, it would leave live
member-only memories (or history) of a removed member. So the workspace database keeps its own
record of removed members (``removed_member``, migration 0013), and:

- every write transaction of a member starts with ``hold_caller``: a shared transaction-level
  advisory lock keyed on the member, held to commit, then a check that the member is not removed
  (UNAUTHENTICATED if it is, as its next authentication would be). ``insert_many`` also holds the
  member of every member-only memory it writes (``hold``), whoever writes it (an import);
- the removal (``mark_removed``) takes the same lock exclusively, which waits for every write of the
  member in flight, records the member removed and commits; only then does it sweep.

A write in flight therefore either committed before the mark (and the sweep, which starts after it,
forgets what it wrote) or takes its lock after the mark and fails. Taken first in its transaction,
before any row lock, the lock cannot close a cycle with the row locks of a write waiting behind a
removal. Two members whose keys share a hash only wait for each other's removal.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import psycopg
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.errors import Unauthenticated

# pg_advisory_xact_lock(class, key) class of a member's writes ("mw"); the key is hashtext(member).
_LOCK_CLASS = 0x6D77
REMOVED_MESSAGE = "this member was removed from the workspace"


def hold(conn: psycopg.Connection, members: Iterable[uuid.UUID]) -> set[uuid.UUID]:
    """Takes the shared write lock of each member (in order, until the end of the transaction) and
    returns those that are removed. Must run inside a transaction."""
    wanted = sorted(set(members))
    if not wanted:
        return set()
    conn.execute(
        "SELECT pg_advisory_xact_lock_shared(%s, hashtext(x::text)) FROM unnest(%s::uuid[]) AS u(x)",
        (_LOCK_CLASS, wanted),
    )
    rows = conn.execute("SELECT member_id FROM removed_member WHERE member_id = ANY(%s)", (wanted,)).fetchall()
    return {r[0] for r in rows}


def hold_caller(conn: psycopg.Connection, caller: m.Caller) -> None:
    """The first step of a member's write transaction: ``hold`` of the caller; UNAUTHENTICATED when
    it was removed since the call authenticated."""
    if hold(conn, [uuid.UUID(caller.member_id)]):
        raise Unauthenticated(REMOVED_MESSAGE)


def mark_removed(conn: psycopg.Connection, member: uuid.UUID) -> None:
    """Records ``member`` removed in this workspace database, in a transaction of its own that first
    waits for every write of the member in flight (the exclusive lock). Idempotent."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LOCK_CLASS, str(member)))
        conn.execute("INSERT INTO removed_member (member_id) VALUES (%s) ON CONFLICT DO NOTHING", (member,))
