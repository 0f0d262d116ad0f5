"""A reference BM25 for history tests, written from the formula, independent of the store's SQL."""

import math

from store_service.search import analysis

K1, B = 1.2, 0.75  # Okapi BM25's constants (Robertson and Zaragoza, 2009), as the keyword arm uses


def bm25(texts: dict[str, str], query: str) -> dict[str, float]:
    """Reference BM25 over ``texts``; from three query terms up, terms in 15% or more of the texts are
    not scored, except the rarest (README.md, "How recall works")."""
    docs = {i: analysis.document_terms("", t) for i, t in texts.items()}
    n = len(docs)
    if not n:
        return {}
    avg = max(sum(len(d) for d in docs.values()) / n, 1.0)
    terms = analysis.query_terms(query)
    df = {term: sum(term in d for d in docs.values()) for term in terms}
    present = [term for term in terms if df[term]]
    if len(terms) >= 3 and present:
        rarest = min(present, key=lambda term: df[term])
        present = [term for term in present if term == rarest or df[term] / n < 0.15]
    scores: dict[str, float] = {}
    for term in present:
        idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
        for i, d in docs.items():
            if term in d:
                tf = d[term]
                scores[i] = scores.get(i, 0.0) + idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(d) / avg))
    return scores
