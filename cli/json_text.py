"""JSON that holds text: what both file readers (``recallatron import``'s export files and
``import-legacy``'s graph and JSON cells) need beyond ``json.loads``.

JSON may escape a lone UTF-16 surrogate (``"\\ud800"``); ``json.loads`` gives a Python string that
no UTF-8 encoder, protobuf included, accepts, so a value holding one failed far from the file with a
UnicodeEncodeError. RFC 8259 section 8.2 calls such text unpredictable: the readers refuse it where
they read it.
"""

from __future__ import annotations

import json


def lone_surrogate(value) -> bool:
    """Whether a parsed JSON value holds a string (or object key) with a lone surrogate."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(lone_surrogate(k) or lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(lone_surrogate(v) for v in value)
    return False


def may_hold_surrogate(text: str | bytes) -> bool:
    """A cheap first test: a surrogate can only come from a ``\\uD800``..``\\uDFFF`` escape."""
    low = text.lower()
    return (b"\\ud" if isinstance(low, bytes) else "\\ud") in low


def last_line_cut_short(data: bytes) -> int | None:
    """The number of the last line of JSON Lines ``data`` when it was cut short, else None.

    Cut short means an interrupted copy or write: the data does not end with a line break and its
    last line is not whole JSON (not UTF-8 JSON at all). A last line that is whole JSON without a
    newline is only a missing final newline. Both file readers (``recallatron import`` and
    ``import-legacy``'s graph) refuse a file cut short before they write anything."""
    if not data or data.endswith((b"\n", b"\r")):
        return None
    lines = data.splitlines()
    if not lines[-1].strip():
        return None
    try:
        json.loads(lines[-1])
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return len(lines)
    return None
