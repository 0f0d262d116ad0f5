"""Command-line argument types shared by the bench entries."""

from __future__ import annotations

import argparse


def at_least_one(text: str) -> int:
    """An argparse type: a whole number of 1 or more (0 passes, rows or clients would measure nothing)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value
