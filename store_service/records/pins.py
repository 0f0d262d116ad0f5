"""Pins: memories a member keeps in its own context bundle (store_service/records/context.py).

A member may pin and unpin only memories it can read now (the readability rule with the
derived_from walk, store_service/access/readability.py); anything else is NOT_FOUND, as Read answers. A pin
is never shown without that rule being applied again when the bundle is built, so a pin of a memory
its member may no longer read (forgotten, purpose no longer granted) shows nothing and cannot be
told apart from none.
"""

from __future__ import annotations

import uuid

import psycopg
from google.protobuf import timestamp_pb2
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

from servicekit.errors import FailedPrecondition, NotFound
from store_service.access.readability import READABLE, caller_params
from store_service.database import named
from store_service.records.memories import readable_ids
from store_service.vocabulary import parse_uuid

# Pins of readable memories per member: the pinned part has no cut of its own but the budget, and
# a bundle is built from every pin on every GetContext.
MAX_PINS = 100


def _readable_target(conn: psycopg.Connection, caller: m.Caller, memory_id: str) -> uuid.UUID:
    """The memory's UUID when the caller may read it; NOT_FOUND otherwise (malformed ids included)."""
    mid = parse_uuid(memory_id, "memory_id", missing_is_not_found=True)
    if mid not in readable_ids(conn, caller, [mid]):
        raise NotFound("memory not found")
    return mid


def pin(conn: psycopg.Connection, caller: m.Caller, memory_id: str) -> s.PinMemoryResponse:
    """Pins a readable memory for the caller; again is a no-op answering the first pin's time.

    NOT_FOUND when not readable; FAILED_PRECONDITION (reason PIN_LIMIT) when the caller already has
    ``MAX_PINS`` pins of memories it can read."""
    with conn.transaction():
        mid = _readable_target(conn, caller, memory_id)
        # One member's pins are counted and added one call at a time, so the limit holds.
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('pin:' || %s, 0))", (caller.member_id,))
        row = (
            named(conn)
            .execute(
                "SELECT pinned_at FROM memory_pin WHERE member_id = %s AND memory_id = %s",
                (uuid.UUID(caller.member_id), mid),
            )
            .fetchone()
        )
        already = row is not None
        if not already:
            count = (
                named(conn)
                .execute(
                    f"""SELECT count(*) AS n FROM memory_pin p JOIN memory m ON m.id = p.memory_id
                         WHERE p.member_id = %(member_id)s AND {READABLE}""",
                    caller_params(caller),
                )
                .fetchone()
                .n
            )
            if count >= MAX_PINS:
                err = FailedPrecondition(
                    f"at most {MAX_PINS} pinned memories; unpin one first", field="id", limit=MAX_PINS
                )
                err.reason = "PIN_LIMIT"
                raise err
            row = (
                named(conn)
                .execute(
                    "INSERT INTO memory_pin (member_id, memory_id) VALUES (%s, %s) RETURNING pinned_at",
                    (uuid.UUID(caller.member_id), mid),
                )
                .fetchone()
            )
    at = timestamp_pb2.Timestamp()
    at.FromDatetime(row.pinned_at)
    return s.PinMemoryResponse(memory_id=str(mid), pinned_at=at, already_pinned=already)


def unpin(conn: psycopg.Connection, caller: m.Caller, memory_id: str) -> s.UnpinMemoryResponse:
    """Unpins a readable memory; ``was_pinned`` false when it was not pinned. NOT_FOUND when not readable."""
    with conn.transaction():
        mid = _readable_target(conn, caller, memory_id)
        cur = conn.execute(
            "DELETE FROM memory_pin WHERE member_id = %s AND memory_id = %s", (uuid.UUID(caller.member_id), mid)
        )
        return s.UnpinMemoryResponse(was_pinned=cur.rowcount > 0)
