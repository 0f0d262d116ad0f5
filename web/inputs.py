"""What a form sends, turned into request fields: enum short names, dates, whole and decimal numbers.

Only the shape of a value is judged here (is it one of the names, a date, a number); what the value
may be (a granted purpose, a page size's range, a well-formed entity id, a time range's order) is
the gateway's to judge, and its answer is what the page shows. A value of the wrong shape becomes a
``FormError`` naming the field, shown on the page instead of calling the gateway.
"""

from __future__ import annotations

import datetime

from google.protobuf import timestamp_pb2

from servicekit import vocabulary


class FormError(ValueError):
    """A form value of the wrong shape; the message names the field and what it takes."""


def choice(values: dict[str, int], field: str, text: str | None) -> int:
    """The enum value of short name ``text`` (``vocabulary.values(...)``), 0 (unspecified) when empty."""
    text = (text or "").strip()
    if not text:
        return 0
    if text not in values:
        raise FormError(f"{field}: unknown value {text!r}; choose from {', '.join(values)}")
    return values[text]


def enum_choices(enum) -> dict[str, int]:
    """Short name -> value of a generated enum, in declaration order (``servicekit.vocabulary``)."""
    return vocabulary.values(enum)


def timestamp(field: str, text: str | None) -> timestamp_pb2.Timestamp | None:
    """A date (``YYYY-MM-DD``: its midnight, UTC) or an ISO 8601 time (UTC unless it names an
    offset) as a Timestamp; None when empty."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise FormError(f"{field}: not a date (YYYY-MM-DD) or an ISO 8601 time: {text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    ts = timestamp_pb2.Timestamp()
    try:
        ts.FromDatetime(when)
    except (OverflowError, ValueError):  # an offset that moves the instant outside years 1..9999 in UTC
        raise FormError(f"{field}: {text!r} is outside years 1..9999 in UTC") from None
    return ts


def number(field: str, text: str | None) -> float | None:
    """A decimal number (None when empty); the gateway judges its range."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise FormError(f"{field}: not a number: {text!r}") from None


def whole(field: str, text: str | None, default: int = 0) -> int:
    """A whole number (``default`` when empty); the gateway judges its range."""
    text = (text or "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise FormError(f"{field}: not a whole number: {text!r}") from None
    if not -(2**31) <= value < 2**31:  # an int32 field: the gateway could not even be asked
        raise FormError(f"{field}: out of range: {text}")
    return value
