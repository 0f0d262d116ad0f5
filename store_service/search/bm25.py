"""Okapi BM25, the one scoring rule of every keyword search: memories (both modes of the keyword arm,
``store_service.search.candidates``) and history turns (``store_service.history.turn_search``).

Robertson and Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009, with
k1 = 1.2 and b = 0.75; the idf in the form that is never negative (Lucene's). A term's weight in a
document is ``idf tf (k1 + 1) / (tf + k1 (1 - b + b len / avg))``: ``weight`` computes it in Python
(floats or NumPy arrays alike), ``sql_weight`` writes it into a statement, both with the same
operations in the same order, so a score is the same to the last bit wherever it is summed. With
three or more query terms, terms present in 15% or more of the rows are dropped, the rarest kept
(``kept_terms``). Scores equal to ``TIE_DIGITS`` decimals tie (``tie_key``), and ties go by id.
"""

from __future__ import annotations

import math

K1 = 1.2
B = 0.75
COMMON_TERM_SHARE = 0.15
COMMON_TERM_MIN_TERMS = 3
# Scores equal to this many decimals are ties, broken by id: sums of the same terms in another
# order differ in the last bits, and identical texts must rank the same way on every path. The key
# is ``floor(score * 10**TIE_DIGITS + 0.5)`` in float8 arithmetic, the same IEEE operations in SQL
# and in Python (``tie_key``); a numeric round() in SQL cost about 40% of the aggregate statement
# (every group converted to numeric) at 100,000 memories.
TIE_DIGITS = 9
TIE_SCALE = float(10**TIE_DIGITS)
# ``sql_weight``'s constants, passed as float8 parameters: a literal would be numeric in SQL, and
# numeric arithmetic rounds otherwise than Python's floats.
SQL_PARAMS = {"bm25_k1": K1, "bm25_b": B}


def idf(n: int, df: int) -> float:
    """The inverse document frequency of a term in ``df`` of ``n`` rows:
    ``ln(1 + (n - df + 0.5) / (df + 0.5))``."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def weight(idf, tf, length, avg):
    """A term's BM25 weight in a document of ``length`` lexemes where it occurs ``tf`` times, ``avg``
    the mean length; ``tf`` and ``length`` may be NumPy arrays (one weight per posting)."""
    return idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avg))


def sql_weight(idf: str, tf: str, length: str, avg: str) -> str:
    """``weight`` as a float8 SQL expression over the given SQL expressions; the statement's
    parameters must include ``SQL_PARAMS`` (named style)."""
    return f"{idf} * {tf} * (%(bm25_k1)s + 1) / ({tf} + %(bm25_k1)s * (1 - %(bm25_b)s + %(bm25_b)s * {length} / {avg}))"


def kept_terms(terms: list[str], df: dict[str, int], n: int) -> list[str]:
    """The query terms BM25 scores: those present at all; from three terms up, those in fewer than
    15% of the ``n`` rows, plus the rarest term (first asked among equals) always."""
    present = [t for t in terms if df.get(t, 0) > 0]
    if len(terms) < COMMON_TERM_MIN_TERMS or not present:
        return present
    rarest = min(present, key=lambda t: df[t])
    return [t for t in present if t == rarest or df[t] / n < COMMON_TERM_SHARE]


def tie_key(score: float) -> float:
    """The score rounded half up to ``TIE_DIGITS`` decimals, in units of ``10**-TIE_DIGITS`` (as the SQL orders)."""
    return math.floor(score * TIE_SCALE + 0.5)
