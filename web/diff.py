"""The differences of two texts, word by word, for the side-by-side views (duplicates, conflicts).

The texts are cut into words and the whitespace between them, so a changed word is marked whole and
the text reads as written, and aligned by RapidFuzz's Indel opcodes (a longest common subsequence of
the tokens, bit-parallel: time and memory grow with the product of the two lengths and nothing
more). Only the first ``WORDS_COMPARED`` words of each side are compared, so one pair costs a few
milliseconds whatever its length (two 64 KiB bodies compared whole took over a second and hundreds of
megabytes; difflib, used before, can take minutes on a few thousand repeated words); the rest of a
longer text is shown as it is, as not compared, and the page says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import islice

from rapidfuzz.distance import Indel

# Words of each side compared at most (with the whitespace between them).
WORDS_COMPARED = 2_000

_TOKENS = re.compile(r"\s+|[^\s]+")


@dataclass(frozen=True)
class Segment:
    """A run of one side's text: ``changed`` when the other side does not have it there; not
    ``compared`` when it lies past the words compared (then never ``changed``)."""

    text: str
    changed: bool
    compared: bool = True


@dataclass(frozen=True)
class Sides:
    """Both texts cut into segments (joined, each side's segments give its text back), and whether
    either was longer than the words compared."""

    left: list[Segment]
    right: list[Segment]
    cut: bool


def _head(text: str) -> tuple[list[str], str]:
    """The tokens of ``text``'s first ``WORDS_COMPARED`` words (each with the whitespace before it),
    and the text after them."""
    tokens: list[str] = []
    words = 0
    end = 0
    for match in islice(_TOKENS.finditer(text), 2 * WORDS_COMPARED + 1):
        if not match.group().isspace():
            if words == WORDS_COMPARED:
                break
            words += 1
        tokens.append(match.group())
        end = match.end()
    return tokens, text[end:]


def sides(left: str, right: str) -> Sides:
    """``left`` and ``right`` cut into segments, the words that differ marked."""
    a, rest_a = _head(left)
    b, rest_b = _head(right)
    out_a: list[Segment] = []
    out_b: list[Segment] = []
    for op in Indel.opcodes(a, b):
        if op.src_end > op.src_start:
            out_a.append(Segment("".join(a[op.src_start : op.src_end]), op.tag != "equal"))
        if op.dest_end > op.dest_start:
            out_b.append(Segment("".join(b[op.dest_start : op.dest_end]), op.tag != "equal"))
    if rest_a:
        out_a.append(Segment(rest_a, False, compared=False))
    if rest_b:
        out_b.append(Segment(rest_b, False, compared=False))
    return Sides(out_a, out_b, cut=bool(rest_a or rest_b))
