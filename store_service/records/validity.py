"""Validity (issue 23; docs/time.md, "Validity"): when a claim held, and what was known on a day.

A memory is valid from ``valid_from``, as its writer gave it (Remember, Derive, Supersede, Correct)
or else its ``occurred_at``, else when it was written (migration 0017 keeps the rule in a generated
column, so every writer gets it), until ``valid_until``: its successor's ``valid_from`` once
superseded (never before its own start), or the end an Invalidate gave. ``retired_at`` is when it
left current recall, superseded or invalidated; reads ``known_at`` an instant test it
(``store_service.records.windows``), and ``then`` shows each memory as it stood at that instant.
"""

from __future__ import annotations

import datetime
import uuid

import psycopg
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.errors import FailedPrecondition, InvalidArgument
from store_service.database import named
from store_service.records import windows
from store_service.records.idempotency import instant
from store_service.vocabulary import check_not_ahead, check_timestamp


def given_start(req, field: str = "valid_from") -> datetime.datetime | None:
    """A request's optional ``valid_from``; INVALID_ARGUMENT outside years 1..9999, with bad
    nanoseconds, or more than ``MAX_FUTURE_SKEW`` ahead of the clock (a claim recorded as holding
    is already holding)."""
    if not req.HasField(field):
        return None
    return check_not_ahead(check_timestamp(getattr(req, field), field), field)


# How far an Invalidate's end may lie ahead of the store's clock (two machines' clocks disagree by
# seconds); a later one is refused, and one inside it is stored as now: a claim ends in the past.
END_SKEW = datetime.timedelta(minutes=1)


def given_end(req) -> datetime.datetime | None:
    """An Invalidate's optional ``at``; INVALID_ARGUMENT outside years 1..9999, with bad nanoseconds,
    or later than now (beyond ``END_SKEW``): a claim is ended once it stopped holding."""
    if not req.HasField("at"):
        return None
    at = check_timestamp(req.at, "at")
    now = datetime.datetime.now(datetime.UTC)
    if at > now + END_SKEW:
        raise InvalidArgument(
            f"at {at:%Y-%m-%dT%H:%M:%SZ} is in the future: end a claim once it stopped holding "
            f"(now is {now:%Y-%m-%dT%H:%M:%SZ})",
            field="at",
        )
    return at


def start_field(valid_from: datetime.datetime | None) -> dict:
    """The idempotency fields a given ``valid_from`` adds (none when unset, so requests made before
    validity keep their fingerprints)."""
    return {} if valid_from is None else {"valid_from": instant(valid_from)}


def check_successor_start(successor_start: datetime.datetime, row) -> None:
    """INVALID_ARGUMENT unless a successor's validity starts at or after the superseded memory's
    (``row``, selected with ``memories.COLUMNS``): a claim replaces another from some instant on."""
    if successor_start < row.valid_from:
        raise InvalidArgument(
            f"valid_from must not be before the superseded memory's valid_from "
            f"({row.valid_from.astimezone(datetime.UTC):%Y-%m-%dT%H:%M:%SZ}): give --valid-from at or after it",
            field="valid_from",
        )


def check_started(row) -> None:
    """FAILED_PRECONDITION while memory ``row``'s validity has not started (its ``valid_from`` is
    ahead of the clock): a claim that has not held yet cannot stop holding, and ending it now would
    record a validity of length zero."""
    now = datetime.datetime.now(datetime.UTC)
    if row.valid_from > now:
        raise FailedPrecondition(
            f"its validity starts at {row.valid_from.astimezone(datetime.UTC):%Y-%m-%dT%H:%M:%SZ}, after now: "
            "a claim that has not held yet cannot end; correct its valid_from, or forget it"
        )


def check_end(at: datetime.datetime, row, field: str = "at") -> datetime.datetime:
    """An Invalidate's end: INVALID_ARGUMENT when before the memory's ``valid_from``."""
    if at < row.valid_from:
        raise InvalidArgument(
            f"{field} must not be before the memory's valid_from "
            f"({row.valid_from.astimezone(datetime.UTC):%Y-%m-%dT%H:%M:%SZ})",
            field=field,
        )
    return at


def then(conn: psycopg.Connection, memories: list[m.Memory], known_at: datetime.datetime | None) -> None:
    """Rewrites each memory as it stood at ``known_at`` (nothing when None): the title, body,
    confidence, revision, ``valid_from`` and change time of the revision current then, its end as it stood then
    (``windows.end_then``), and no end, successor or invalidation that had not been recorded by
    then. The callers read only memories written by ``known_at`` and not forgotten
    (``Window.condition``): a forget erases every revision, so no erased text can come back."""
    if known_at is None or not memories:
        return
    ids = [uuid.UUID(mem.id) for mem in memories]
    rows = named(conn).execute(
        f"""SELECT m.id, m.retired_at, {windows.end_then()} AS end_then,
                   greatest(m.created_at, (SELECT max(p.replaced_at) FROM memory_revision p
                                            WHERE p.memory_id = m.id AND p.replaced_at <= %(known_at)s)) AS changed,
                   r.revision, r.title, r.body, r.confidence, r.valid_from
             FROM memory m
             LEFT JOIN LATERAL (SELECT * FROM memory_revision r
                                 WHERE r.memory_id = m.id AND r.replaced_at > %(known_at)s
                                 ORDER BY r.revision LIMIT 1) r ON TRUE
            WHERE m.id = ANY(%(ids)s)""",
        {"known_at": known_at, "ids": ids},
    )
    by_id = {str(r.id): r for r in rows}
    for mem in memories:
        r = by_id.get(mem.id)
        if r is None:
            continue
        if r.revision is not None:
            mem.revision, mem.title, mem.body, mem.confidence = r.revision, r.title, r.body, r.confidence
            if r.valid_from is not None:
                mem.valid_from.FromDatetime(r.valid_from)
            earlier = [h for h in mem.history if h.revision < r.revision]
            del mem.history[:]
            mem.history.extend(earlier)
        if mem.updated_at.ToDatetime(tzinfo=datetime.UTC) > known_at:
            mem.updated_at.FromDatetime(r.changed)  # its last correction by then, else its writing
        if r.end_then is not None:
            mem.valid_until.FromDatetime(r.end_then)
        if r.retired_at is None or r.retired_at > known_at:
            mem.ClearField("valid_until")
            mem.superseded_by_id = ""
            mem.invalidated = False
            if not mem.forgotten:
                mem.invalidation_reason = ""
