"""Checks of a request's input that the store makes and a client makes before it sends (an export
file checked before import), written once."""

from __future__ import annotations

import datetime

from servicekit.errors import InvalidArgument
from servicekit.limits import MAX_FUTURE_SKEW


def check_not_ahead(when: datetime.datetime, field: str, now: datetime.datetime | None = None) -> datetime.datetime:
    """``when`` (aware), or INVALID_ARGUMENT naming ``field`` when it lies more than ``MAX_FUTURE_SKEW``
    after ``now`` (default: the clock)."""
    now = now or datetime.datetime.now(datetime.UTC)
    if when > now + MAX_FUTURE_SKEW:
        hours = MAX_FUTURE_SKEW / datetime.timedelta(hours=1)
        raise InvalidArgument(
            f"{field} {when.astimezone(datetime.UTC).isoformat().replace('+00:00', 'Z')} is in the future: more "
            f"than {hours:g} hours after the clock ({now.astimezone(datetime.UTC):%Y-%m-%dT%H:%M:%SZ})",
            field=field,
        )
    return when
