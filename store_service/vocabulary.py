"""The store's enum mappings (proto value <-> the string stored in PostgreSQL), and input checks.

The names come from ``servicekit.vocabulary`` (the generated descriptors); the migrations' CHECK
constraints list the same strings and stay the database's own guard."""

from __future__ import annotations

import datetime
import uuid

from recallatron.memory.v1 import memory_pb2 as m

from servicekit import vocabulary
from servicekit.checks import check_not_ahead as check_not_ahead
from servicekit.errors import InvalidArgument, NotFound

# The input limits (servicekit.limits) and the future-skew check (servicekit.checks, above) are the
# clients' too; the store's modules take them from here.
from servicekit.limits import MAX_BODY_BYTES, MAX_TITLE_CHARS
from servicekit.limits import MAX_FUTURE_SKEW as MAX_FUTURE_SKEW
from servicekit.limits import MAX_REQUEST_ID_CHARS as MAX_REQUEST_ID_CHARS
from store_service.search import analysis

KINDS = vocabulary.names(m.Kind)
PURPOSES = vocabulary.names(m.Purpose)
ORIGINS = vocabulary.names(m.Origin)
ROLES = vocabulary.names(m.Role)
MODES = vocabulary.names(m.RecallMode)

KIND_OF = vocabulary.values(m.Kind)
PURPOSE_OF = vocabulary.values(m.Purpose)
ORIGIN_OF = vocabulary.values(m.Origin)
ROLE_OF = vocabulary.values(m.Role)
MODE_OF = vocabulary.values(m.RecallMode)


def enum_value(mapping: dict[int, str], value: int, field: str) -> str:
    """The stored string of an enum value; INVALID_ARGUMENT for unspecified or unknown values."""
    try:
        return mapping[value]
    except KeyError:
        allowed = ", ".join(sorted(mapping.values()))
        raise InvalidArgument(f"{field} must be one of: {allowed}", field=field) from None


def parse_uuid(value: str, field: str = "id", *, missing_is_not_found: bool = False) -> uuid.UUID:
    """Parses a UUID; a malformed one is INVALID_ARGUMENT (or NOT_FOUND where asked)."""
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        if missing_is_not_found:
            raise NotFound(f"{field} not found") from None
        raise InvalidArgument(f"{field} must be a UUID", field=field) from None


def check_text(title: str, body: str) -> None:
    """Validates a memory's title and body; INVALID_ARGUMENT naming the limit when off."""
    if not body or analysis.is_blank(body):
        raise InvalidArgument("body must not be empty or blank (invisible characters count as blank)", field="body")
    size = len(body.encode("utf-8"))
    if size > MAX_BODY_BYTES:
        raise InvalidArgument(
            f"body is {size} bytes; the limit is {MAX_BODY_BYTES} bytes of UTF-8", field="body", limit=MAX_BODY_BYTES
        )
    if len(title) > MAX_TITLE_CHARS:
        raise InvalidArgument(
            f"title is longer than {MAX_TITLE_CHARS} characters", field="title", limit=MAX_TITLE_CHARS
        )
    if "\x00" in body or "\x00" in title:
        raise InvalidArgument("title and body must not contain NUL characters", field="body")


def check_timestamp(ts, field: str) -> datetime.datetime:
    """A protobuf Timestamp as an aware UTC datetime; INVALID_ARGUMENT naming ``field`` outside years
    1..9999 or with nanoseconds outside 0..999,999,999."""
    try:
        return ts.ToDatetime(tzinfo=datetime.UTC)
    except (ValueError, OverflowError):
        raise InvalidArgument(f"{field} must be a valid timestamp between years 1 and 9999", field=field) from None


def check_confidence(value: float) -> float:
    """Validates a confidence in 0..1 (NaN refused); returns it with -0.0 read as 0.0 (IEEE: -0.0 + 0.0
    is +0.0), so a stored confidence never prints as ``-0``."""
    if not (0.0 <= value <= 1.0):
        raise InvalidArgument("confidence must be between 0 and 1", field="confidence")
    return value + 0.0
