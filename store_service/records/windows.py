"""Time windows (issue 23): the memories said in ``[occurred_after, occurred_before)``, and the
two instants of a read in time, ``as_of`` (valid time) and ``known_at`` (write time).

When a memory was said is its ``said_at``: its ``occurred_at``, or when it was written
(``created_at``) when it has none (a note taken now about now). Migration 0016 stores it as a
generated column with an index, so a window is a range over one column.

A window narrows what a read considers, and is applied inside each read the way the expiry gate is
(``store_service.access.expiry``): the dense arm and every listing test it in their SQL; the
keyword arm, which reads packed postings alone, either keeps only the document numbers of the
window's memories (a narrow window: at most ``NARROW_ROWS`` memories, read from the index) or reads
its exact top and goes deeper while rows outside the window leave it short (a wide one), counting
the window again at each read deeper than ``NARROW_ROWS`` and keeping only its documents once it
holds no more than that read would; its top k is the exact top k within the window on every path.
The keyword statistics are not narrowed, as the gate's are not: they are the statistics of what the
caller may read, maintained at write time, and a window changes which rows are candidates, not how
rare a word is.

``as_of`` and ``known_at`` (docs/time.md, "As of a day") widen a read to retired memories
(superseded or invalidated) and then keep only those the instants hold, by the same machinery:

- ``as_of`` A: valid at A, ``valid_from <= A < valid_until`` (an open end never passes).
- ``known_at`` K: written by K (``created_at <= K``) and current then (not retired by K); with
  ``as_of``, the validity tested is the one that stood at K: its start as the revision current at K
  had it, its end only if it had been recorded by K.

Forgotten memories fail every read (the readability rule), at any instant.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass

import psycopg

from servicekit.checks import check_not_ahead, check_timestamp, time_range

# A window holding at most this many live memories is narrow: the keyword arm keeps only their
# document numbers and the dense arm compares the query with each of their vectors exactly, instead
# of reading the top and testing its rows. The narrow path costs per memory in the window, the wide
# one per row read before ``limit`` pass: at 10,000 memories (limit 100) windows of 3,700 and 5,000
# memories read narrow took 2 to 5 times as long as read wide (p50, both arms; bench/RESULTS.md,
# "Reads in time", has the figures through the gateway).
NARROW_ROWS = 1000


_START_THEN = """coalesce((SELECT r.valid_from FROM memory_revision r
     WHERE r.memory_id = {id} AND r.replaced_at > %(known_at)s ORDER BY r.revision LIMIT 1), {now})"""


def start_then(a: str = "m") -> str:
    """SQL: the start of validity memory ``a`` had at ``%(known_at)s``: the one of its revision
    current then (memory_revision.valid_from, kept from validity's arrival on), else its own."""
    return _START_THEN.format(id=f"{a}.id", now=f"{a}.valid_from")


def end_then(a: str = "m") -> str:
    """SQL: the end of validity memory ``a`` had at ``%(known_at)s``: none unless it was retired by
    then; an invalidated memory's end (which nothing changes after), and so a superseded one's set
    when it was superseded (``lifecycle_rules.COVERS``); else its successor's start as that stood
    then (a Correct may have moved it since), never before its own."""
    successor = _START_THEN.format(
        id=f"{a}.superseded_by_id", now=f"(SELECT s.valid_from FROM memory s WHERE s.id = {a}.superseded_by_id)"
    )
    return (
        f"(CASE WHEN {a}.retired_at <= %(known_at)s THEN CASE WHEN NOT {a}.end_follows_successor THEN {a}.valid_until"
        f" ELSE greatest({successor}, {a}.valid_from) END END)"
    )


@dataclass(frozen=True)
class Window:
    """``[after, before)`` over ``said_at``, an unset bound open, and the read's ``as_of`` and
    ``known_at`` instants (None: now). Falsy when all are unset."""

    after: datetime.datetime | None = None
    before: datetime.datetime | None = None
    as_of: datetime.datetime | None = None
    known_at: datetime.datetime | None = None

    def __bool__(self) -> bool:
        return self.said or self.in_time

    @property
    def said(self) -> bool:
        """Whether a bound on when memories were said is set (the part an index narrows)."""
        return self.after is not None or self.before is not None

    @property
    def in_time(self) -> bool:
        """Whether ``as_of`` or ``known_at`` is set: retired memories are candidates too, and this
        window's condition says which."""
        return self.as_of is not None or self.known_at is not None

    def condition(self, alias: str = "m") -> str:
        """The SQL condition true of a memory ``alias`` the window holds (``TRUE`` when open); its
        parameters are ``params()``."""
        a = alias
        parts = []
        if self.after is not None:
            parts.append(f"{a}.said_at >= %(said_after)s")
        if self.before is not None:
            parts.append(f"{a}.said_at < %(said_before)s")
        if self.known_at is not None:
            parts.append(f"{a}.created_at <= %(known_at)s")
            if self.as_of is None:
                parts.append(f"({a}.retired_at IS NULL OR {a}.retired_at > %(known_at)s)")
            else:
                parts.append(f"{start_then(a)} <= %(as_of)s")
                parts.append(f"coalesce(%(as_of)s < {end_then(a)}, TRUE)")
        elif self.as_of is not None:
            parts.append(f"{a}.valid_from <= %(as_of)s AND ({a}.valid_until IS NULL OR %(as_of)s < {a}.valid_until)")
        return " AND ".join(parts) or "TRUE"

    def clause(self, alias: str = "m") -> str:
        """``condition`` as a clause to append to a WHERE condition: empty when the window is open."""
        return f" AND {self.condition(alias)}" if self else ""

    def params(self) -> dict:
        return {"said_after": self.after, "said_before": self.before, "as_of": self.as_of, "known_at": self.known_at}

    def bound(self) -> list[str | None]:
        """The window as a page token binds it (ISO instants, None when unset)."""
        return [x.isoformat() if x else None for x in (self.after, self.before, self.as_of, self.known_at)]


OPEN = Window()


def of(req) -> Window:
    """The window a request's ``occurred_after`` and ``occurred_before`` give, with its ``as_of`` and
    ``known_at`` when it has them; INVALID_ARGUMENT naming the field for an instant outside years
    1..9999, a ``before`` not later than ``after``, or an ``as_of`` or ``known_at`` in the future
    (more than ``MAX_FUTURE_SKEW`` ahead of the clock)."""
    after, before = time_range(req, "occurred_after", "occurred_before")
    return Window(after, before, instant(req, "as_of"), instant(req, "known_at"))


def instant(req, name: str) -> datetime.datetime | None:
    """A request's ``as_of`` or ``known_at`` (None when unset or not a field of it); INVALID_ARGUMENT
    naming it outside years 1..9999 or more than ``MAX_FUTURE_SKEW`` ahead of the clock."""
    if name not in req.DESCRIPTOR.fields_by_name or not req.HasField(name):
        return None
    return check_not_ahead(check_timestamp(getattr(req, name), name), name)


def dense_narrow_rows(conn: psycopg.Connection, limit: int) -> int:
    """The meaning arm's narrow threshold for ``limit`` rows: ``NARROW_ROWS``, or half the square root
    of ``limit`` times the workspace's vectors when that is more (1,581 at 100,000 and a limit of 100).
    A filtered HNSW scan visits about ``limit`` times the inverse of the window's share of the memories
    near the question, the exact order one row per memory of the window, at about the same cost a
    row: with the share taken over the whole workspace the two would meet at the root. Measured at
    100,000 memories (179 bench questions, each window read both ways, docs/time.md): months of 1,600
    to 3,200 memories cost the same either way (medians 10.6 and 11.6 ms through the index, 10.7 and
    12.1 ms exact), while an as of of 2,200 to 3,200 took 4.2 ms through the index and 16.0 ms exact,
    its memories lying near the question; so the index from half the root on. The count of vectors
    is the planner's estimate (``pg_class.reltuples``, -1 before one exists)."""
    vectors = conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'memory_embedding'::regclass").fetchone()[0]
    return max(NARROW_ROWS, math.isqrt(max(limit, 1) * max(int(vectors), 0)) // 2)


def _narrow_statement(window: Window, select: str, join: str) -> str:
    """The statement reading ``select`` of the live memories ``window`` holds (joined with ``join``),
    at most ``%(cap)s`` rows, from an index alone (``memory_said_at``, or for ``as_of`` and ``known_at``
    alone ``memory_valid_from`` and ``memory_created_at``, which hold the columns their tests read:
    migrations 0016, 0018 and 0019)."""
    # Ordered by the indexed column, so the plan walks that index: unordered, the planner could scan
    # the table when many memories pass, reading rows until the cap did (40 ms at 100,000).
    order = "said_at" if window.said else "valid_from" if window.as_of is not None else "created_at"
    return (
        f"SELECT {select} FROM memory m {join} WHERE m.forgotten_at IS NULL AND {window.condition()}"
        f" ORDER BY m.{order} LIMIT %(cap)s"
    )


def narrow_rows(conn: psycopg.Connection, window: Window, most: int | None, select: str, join: str) -> list | None:
    """``select`` (one column) of each live memory ``window`` holds, joined with ``join`` (the keyword
    arm reads its document numbers so), when they are at most ``most`` (None: ``NARROW_ROWS``), else
    None: the window is wide."""
    most = NARROW_ROWS if most is None else most
    rows = conn.execute(_narrow_statement(window, select, join), {**window.params(), "cap": most + 1}).fetchall()
    return None if len(rows) > most else [r[0] for r in rows]


def is_narrow(conn: psycopg.Connection, window: Window, most: int | None = None) -> bool:
    """Whether ``window`` holds at most ``most`` (default ``NARROW_ROWS``) live memories: counted in the
    database, so a caller that reads the window again by its condition is sent no ids."""
    most = NARROW_ROWS if most is None else most
    counted = f"SELECT count(*) FROM ({_narrow_statement(window, '1', '')}) w"
    return conn.execute(counted, {**window.params(), "cap": most + 1}).fetchone()[0] <= most
