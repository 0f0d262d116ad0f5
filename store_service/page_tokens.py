"""AIP-158 page tokens, bound to the caller and the query they were issued for.

A token is url-safe base64 (unpadded) of JSON ``{"v": 1, "f": fingerprint, "k": position}``. The
fingerprint is a hash of who asks and of every request field but the page size and token, so a token
fits only the same query by the same member: replayed by another member, or with other filters, it is
INVALID_ARGUMENT. The position is the last entry's sort key, and the next page starts after it
(keyset pagination: every page costs the same however deep it is). A token is not secret: a member
who forges one can only move their own position within their own query, and each page is read with
the readability rule in force at that call, so a token can never show anything the caller cannot read.

Since a token can be forged (the fingerprint is computed from what the member knows), its position
is untrusted input: ``decode_position`` parses every part to the shape its list issues
(``instant``, ``identifier``, ``number``, ``sequence``) and anything else is INVALID_ARGUMENT, never
an error further down (a float overflow, a boolean compared with a bigint in SQL).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import json
import math
import uuid
from collections.abc import Callable

from servicekit.errors import InvalidArgument

_TOKEN_VERSION = 1


def page_size(value: int, default: int, most: int) -> int:
    """The page size in force: 0 means ``default``, more than ``most`` means ``most`` (AIP-158);
    INVALID_ARGUMENT when negative."""
    if value < 0:
        raise InvalidArgument("page_size must not be negative", field="page_size")
    return min(value or default, most)


def fingerprint(fields: list) -> str:
    """A hash of who asks and what (JSON-encodable ``fields``): tokens of another query do not fit."""
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:24]


def encode(fingerprint: str, position: list) -> str:
    """The page token of the page after ``position`` (the last entry's sort key, JSON-encodable)."""
    raw = json.dumps({"v": _TOKEN_VERSION, "f": fingerprint, "k": position}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def invalid(what: str) -> InvalidArgument:
    """The error of a token that is not one of this ``what`` (e.g. "search", "listing")."""
    return InvalidArgument(
        f"page_token is not a token of this {what}: pass the next_page_token of the previous page, "
        "with the other fields unchanged",
        field="page_token",
    )


def decode(token: str, fingerprint: str, what: str) -> list | None:
    """The position a page token holds (the list ``encode`` was given); None for the empty token.
    INVALID_ARGUMENT (``invalid(what)``) for anything that is not a token issued for ``fingerprint``."""
    if not token:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if data["v"] != _TOKEN_VERSION or data["f"] != fingerprint or not isinstance(data["k"], list):
            raise ValueError("another query")
        return data["k"]
    except (ValueError, TypeError, KeyError, binascii.Error, UnicodeDecodeError, AttributeError, RecursionError):
        raise invalid(what) from None


def instant(value) -> datetime.datetime:
    """A position's instant: an ISO 8601 string with its offset (as ``datetime.isoformat`` of a
    timestamptz writes it), in UTC."""
    if not isinstance(value, str):
        raise TypeError("instant")
    when = datetime.datetime.fromisoformat(value)
    if when.tzinfo is None:
        raise ValueError("no offset")
    return when.astimezone(datetime.UTC)  # OverflowError past year 1 or 9999 in UTC


def identifier(value) -> uuid.UUID:
    """A position's id: a UUID string."""
    if not isinstance(value, str):
        raise TypeError("id")
    return uuid.UUID(value)


def number(value) -> float:
    """A position's score or cosine: a finite JSON number (a boolean is not one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("number")
    out = float(value)  # OverflowError for an integer beyond a double
    if not math.isfinite(out):
        raise ValueError("not finite")
    return out


def sequence(value) -> int:
    """A position's sequence number: an integer of PostgreSQL's bigint (a boolean is not one)."""
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**63) <= value < 2**63:
        raise ValueError("sequence")
    return value


def decode_position(token: str, fingerprint: str, what: str, *shape: Callable) -> tuple | None:
    """The position a page token of ``what`` holds, one part per parser of ``shape`` (``instant``,
    ``identifier``, ``number``, ``sequence``), as a tuple; None for the empty token. INVALID_ARGUMENT
    (``invalid(what)``) for a token not issued for ``fingerprint`` or a position of another shape."""
    position = decode(token, fingerprint, what)
    if position is None:
        return None
    if len(position) != len(shape):
        raise invalid(what)
    try:
        return tuple(parse(part) for parse, part in zip(shape, position, strict=True))
    except (ValueError, TypeError, OverflowError):
        raise invalid(what) from None
