"""The expiry gate (issue 9, item 4): a workspace setting, off by default (migration control/0010).

When it is on with N days, a memory whose ``updated_at`` is at or before the time of the call minus
N days is *hidden*: it leaves the read paths that put memories in front of an agent unasked or by
search, and nothing else changes. It is never erased and stays readable.

Hidden from: Recall, both arms, every mode, history recall included (``store_service.search.candidates``
filters the candidate rows: the dense arm in its SQL, the keyword arm as described there), and the
context bundle, every part, pinned memories and the entity mention counts included
(``store_service.records.context``). Still shown by: Read, GetMemories (by id), ListMemories, export,
FindEntities, and Capture's "already known" test, because the memory is still readable, and a
person must be able to find it to review it. ``ListExpiringMemories`` lists exactly the hidden ones
the caller can read (``store_service.records.expiring``). KeepMemory (``lifecycle.keep``) counts as
an update (``updated_at = now()``), so the memory is back for another N days; Forget forgets it as
any other.

The keyword arm's statistics (document frequencies, row count, average length) still count hidden
memories: they are the statistics of the rows the caller can read, and a hidden memory is readable.
They are maintained at write time, while a memory expires with time alone, with no write to update
them. So a hidden memory shapes idf like any readable one, but never appears.

"Now" is PostgreSQL's ``now()`` (the transaction's start), the same clock ``updated_at`` is written
with. Tests move a memory back in time by setting ``updated_at`` in the database: no sleeping.
"""

from __future__ import annotations

import datetime

from servicekit.errors import InvalidArgument

# The longest gate, in days: ten years. Longer is INVALID_ARGUMENT, as is 0 or less (the gate is
# turned off by its own switch, so a mistyped 0 cannot turn it off).
MAX_EXPIRY_DAYS = 3650

# A memory ``m`` the gate hides; parameter ``%(expiry_days)s`` (int, 1..MAX_EXPIRY_DAYS). A day is 24
# hours (not a calendar day, which a time zone's daylight saving change makes 23 or 25).
HIDDEN = "m.updated_at <= now() - make_interval(hours => 24 * %(expiry_days)s)"


def hidden_test(expiry_days: int) -> str:
    """The SQL condition true of a memory ``m`` the gate of ``expiry_days`` days (0: off) hides:
    ``HIDDEN``, or FALSE with the gate off."""
    return HIDDEN if expiry_days else "FALSE"


def shown_clause(expiry_days: int) -> str:
    """A clause to append to a WHERE condition over memories ``m`` that leaves out the ones the gate
    of ``expiry_days`` days (0: off) hides; empty with the gate off."""
    return f" AND NOT ({HIDDEN})" if expiry_days else ""


def hidden_before(now: datetime.datetime, expiry_days: int) -> datetime.datetime:
    """The instant at or before which an ``updated_at`` is hidden at ``now`` (``HIDDEN`` in Python)."""
    return now - datetime.timedelta(hours=24 * expiry_days)


def gate_setting(req) -> int | None:
    """The gate an UpdateWorkspaceSettingsRequest asks for: None to keep it, 0 to turn it off, N to
    turn it on with N days. INVALID_ARGUMENT for days outside 1..MAX_EXPIRY_DAYS or ``expiry_off``
    sent false."""
    which = req.WhichOneof("expiry")
    if which is None:
        return None
    if which == "expiry_off":
        if not req.expiry_off:
            raise InvalidArgument("expiry_off must be true to turn the gate off", field="expiry_off")
        return 0
    if not 1 <= req.expiry_days <= MAX_EXPIRY_DAYS:
        raise InvalidArgument(
            f"expiry_days must be 1..{MAX_EXPIRY_DAYS} (ten years); to turn the gate off send expiry_off",
            field="expiry_days",
            limit=MAX_EXPIRY_DAYS,
        )
    return req.expiry_days


def check_days(days: int) -> int:
    """The gate a store request carries (``expiry_days``: 0 off, else 1..MAX_EXPIRY_DAYS, as the
    workspace setting stores it); INVALID_ARGUMENT for anything else."""
    if not 0 <= days <= MAX_EXPIRY_DAYS:
        raise InvalidArgument(f"expiry_days must be 0 (off) or 1..{MAX_EXPIRY_DAYS}", field="expiry_days")
    return days
