"""Time windows (issue 23): the memories said in ``[occurred_after, occurred_before)``.

When a memory was said is its ``said_at``: its ``occurred_at``, or when it was written
(``created_at``) when it has none (a note taken now about now). Migration 0016 stores it as a
generated column with an index, so a window is a range over one column.

A window narrows what a read considers, and is applied inside each read the way the expiry gate is
(``store_service.access.expiry``): the dense arm and every listing test it in their SQL; the
keyword arm, which reads packed postings alone, either keeps only the document numbers of the
window's memories (a narrow window: at most ``NARROW_ROWS`` memories, read from the index) or reads
its exact top and goes deeper while rows outside the window leave it short (a wide one), so its
top k is the exact top k within the window either way. The keyword statistics are not narrowed,
as the gate's are not: they are the statistics of what the caller may read, maintained at write
time, and a window changes which rows are candidates, not how rare a word is.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass

import psycopg

from servicekit.checks import time_range

# A window holding at most this many live memories is narrow: the keyword arm keeps only their
# document numbers and the dense arm compares the query with each of their vectors exactly, instead
# of reading the whole top and testing rows (measured: bench/RESULTS.md, "Time windows").
NARROW_ROWS = 5000


@dataclass(frozen=True)
class Window:
    """``[after, before)`` over ``said_at``; an unset bound is open. Falsy when both are open."""

    after: datetime.datetime | None = None
    before: datetime.datetime | None = None

    def __bool__(self) -> bool:
        return self.after is not None or self.before is not None

    def condition(self, alias: str = "m") -> str:
        """The SQL condition true of a memory ``alias`` said in the window (``TRUE`` when open); its
        parameters are ``params()``."""
        parts = []
        if self.after is not None:
            parts.append(f"{alias}.said_at >= %(said_after)s")
        if self.before is not None:
            parts.append(f"{alias}.said_at < %(said_before)s")
        return " AND ".join(parts) or "TRUE"

    def clause(self, alias: str = "m") -> str:
        """``condition`` as a clause to append to a WHERE condition: empty when the window is open."""
        return f" AND {self.condition(alias)}" if self else ""

    def params(self) -> dict:
        return {"said_after": self.after, "said_before": self.before}

    def bound(self) -> list[str | None]:
        """The window as a page token binds it (ISO instants, None when open)."""
        return [x.isoformat() if x else None for x in (self.after, self.before)]


OPEN = Window()


def of(req) -> Window:
    """The window a request's ``occurred_after`` and ``occurred_before`` give; INVALID_ARGUMENT naming
    the field for an instant outside years 1..9999 or a ``before`` not later than ``after``."""
    return Window(*time_range(req, "occurred_after", "occurred_before"))


def narrow_ids(conn: psycopg.Connection, window: Window) -> set[uuid.UUID] | None:
    """The live memories said in ``window`` when they are at most ``NARROW_ROWS`` (read from the
    ``memory_said_at`` index), else None: the window is wide."""
    rows = conn.execute(
        f"SELECT m.id FROM memory m WHERE m.forgotten_at IS NULL AND {window.condition()} LIMIT %(cap)s",
        {**window.params(), "cap": NARROW_ROWS + 1},
    ).fetchall()
    return None if len(rows) > NARROW_ROWS else {r[0] for r in rows}
