"""Unicode text rules that the store and a client both apply: the normalisation the store's text
analysis starts from (store_service/search/analysis.py, rule 1), and the blank-text predicate by which
the store refuses a body, title or turn and the legacy import skips a row before it sends one.

Pure Python, no database. The character classes are read from this Python's Unicode database once,
at import.
"""

from __future__ import annotations

import itertools
import re
import unicodedata

__all__ = ["CURRENCY", "FORMAT", "MARKS", "TO_SPACE", "accent_key", "is_blank", "name_key", "normalise"]


def _scan_unicode() -> tuple[str, str, str]:
    """Character classes (regex class bodies) of format characters, combining marks and currency
    symbols, from this Python's Unicode database."""
    groups: dict[str, list[int]] = {"Cf": [], "M": [], "Sc": []}
    for cp in itertools.chain(range(0x20000), range(0xE0000, 0xE1000)):
        cat = unicodedata.category(chr(cp))
        if cat == "Cf":
            groups["Cf"].append(cp)
        elif cat[0] == "M":
            groups["M"].append(cp)
        elif cat == "Sc":
            groups["Sc"].append(cp)

    def ranges(cps: list[int]) -> str:
        out = []
        for _, run in itertools.groupby(enumerate(cps), lambda p: p[1] - p[0]):
            run = [cp for _, cp in run]
            lo, hi = run[0], run[-1]
            out.append(re.escape(chr(lo)) if lo == hi else f"{re.escape(chr(lo))}-{re.escape(chr(hi))}")
        return "".join(out)

    return ranges(groups["Cf"]), ranges(groups["M"]), ranges(groups["Sc"])


# Regex class bodies: format characters (category Cf), combining marks (M*), currency symbols (Sc).
# One scan gives all three; the analysis builds its token rules on MARKS and CURRENCY.
FORMAT, MARKS, CURRENCY = _scan_unicode()

# Removed before anything else: format characters (invisible). Replaced by a space: lone surrogates
# (cannot be stored as UTF-8) and C0/C1 controls, NUL included.
_INVISIBLE = re.compile(f"[{FORMAT}]")
TO_SPACE = re.compile(r"[\ud800-\udfff\x00-\x08\x0e-\x1f\x7f-\x9f]")
# After NFKC: the hyphen (U+2010, which NFKC makes of the non-breaking hyphen U+2011) and the minus
# sign (U+2212, also made of super- and subscript minus) are the ASCII hyphen-minus, so a key, date or
# signed number written with them (typeset text, LLM output) keeps its whole: QA\u20103141 = QA-3141.
_HYPHENS = str.maketrans({"\u2010": "-", "\u2212": "-"})


def normalise(text: str) -> str:
    """The analysis's rule 1 (store_service/search/analysis.py): Unicode normalisation of ``text``,
    before any cutting or case folding: controls and lone surrogates to spaces, format characters
    removed, NFKC, the hyphen and minus sign to ``-``. Also what Capture matches spans with
    (store_service/records/known.py)."""
    text = TO_SPACE.sub(" ", text)
    text = _INVISIBLE.sub("", text)
    text = unicodedata.normalize("NFKC", text).translate(_HYPHENS)
    return _INVISIBLE.sub("", text)


def name_key(name: str) -> str:
    """What two entity names are compared by (docs/entities.md): ``normalise``, case folded, white
    space collapsed ("  JONAS\u00a0 Berg" and "jonas berg" are one name)."""
    return " ".join(normalise(name).casefold().split())


def accent_key(name: str) -> str:
    """``name_key`` without accents: what an entity duplicate "but for accents" is found by ("Zoë
    Hart" and "zoe hart" are one)."""
    decomposed = unicodedata.normalize("NFKD", name_key(name))
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))


def is_blank(text: str) -> bool:
    """Whether ``text`` holds nothing but white space and invisible characters once normalised (a
    zero-width space alone is as empty as a space: it would be stored, found by nothing, and match
    every other invisible-only body)."""
    return not normalise(text).strip()
