"""AIP-158 page tokens, bound to the caller and the query they were issued for.

A token is url-safe base64 (unpadded) of JSON ``{"v": 1, "f": fingerprint, "k": position}``. The
fingerprint is a hash of who asks and of every request field but the page size and token, so a token
fits only the same query by the same member: replayed by another member, or with other filters, it is
INVALID_ARGUMENT. The position is the last entry's sort key, and the next page starts after it
(keyset pagination: every page costs the same however deep it is). A token is not secret: a member
who forges one can only move their own position within their own query, and each page is read with
the readability rule in force at that call, so a token can never show anything the caller cannot read.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json

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
