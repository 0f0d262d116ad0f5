"""The differences of two texts, word by word, for the duplicate review's side-by-side view.

``difflib.SequenceMatcher`` (the standard library) over words and the whitespace between them, so a
changed word is marked whole and the text reads as written. Junk heuristics are off: in a short
text a repeated word is content, not noise.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

_TOKENS = re.compile(r"\s+|[^\s]+")


@dataclass(frozen=True)
class Segment:
    """A run of one side's text; ``changed`` when the other side does not have it there."""

    text: str
    changed: bool


def sides(left: str, right: str) -> tuple[list[Segment], list[Segment]]:
    """``left`` and ``right`` cut into segments; joined, each side's segments give its text back."""
    a, b = _TOKENS.findall(left), _TOKENS.findall(right)
    out_a: list[Segment] = []
    out_b: list[Segment] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if i2 > i1:
            out_a.append(Segment("".join(a[i1:i2]), op != "equal"))
        if j2 > j1:
            out_b.append(Segment("".join(b[j1:j2]), op != "equal"))
    return out_a, out_b
