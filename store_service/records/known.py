"""What a caller already knows: text compared the way Capture compares it.

Capture stores a proposal only when its span occurs in the turn and no memory the caller can read
has the same body, both compared in ``match_form``: the keyword arm's Unicode normalisation
(``analysis.normalise``: NFKC, invisible characters removed, controls as spaces, hyphen and minus as
``-``), then runs of whitespace as one space (the arm cuts at whitespace) and case folding (the arm
folds every lexeme). Every live memory keeps ``body_key``, the sha256 of its body's match form, so
"same body" is one indexed lookup; a forget erases it with the text (a hash of a forgotten body
would let anyone holding the database confirm a guess of it).
"""

from __future__ import annotations

import hashlib

from store_service.search.analysis import normalise


def match_form(text: str) -> str:
    """``text`` normalised as the keyword arm does, whitespace runs as one space, trimmed, case-folded."""
    return " ".join(normalise(text).split()).casefold()


def body_key(body: str) -> bytes:
    """The sha256 (32 bytes) of a body's ``match_form`` encoded as UTF-8."""
    return hashlib.sha256(match_form(body).encode("utf-8")).digest()


def span_in_turn(span: str, turn: str) -> bool:
    """Whether a non-blank ``span`` occurs in ``turn``, both in ``match_form``."""
    needle = match_form(span)
    return bool(needle) and needle in match_form(turn)
