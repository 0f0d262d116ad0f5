"""Retrieval metrics with binary relevance, as the evaluation sets define them (docs/retrieval.md, "Metrics").

- recall@k = |R ∩ top k| / |R|
- nDCG@10 = DCG@10 / IDCG@10 with DCG = Σ_{i=1..10} rel_i / log2(i + 1) and IDCG over min(|R|, 10)
  relevant items (Järvelin and Kekäläinen, 2002)
- MRR = 1 / rank of the first relevant item in the full returned list, 0 if none
Averages are over queries; a list shorter than k counts what it returned.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

KEYS = ("recall@5", "recall@10", "recall@50", "ndcg@10", "mrr")


def recall_at(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    """Share of the relevant ids found in the first ``k`` results (0 when nothing is relevant)."""
    return len(relevant.intersection(ranked[:k])) / len(relevant) if relevant else 0.0


def ndcg_at(ranked: Sequence[str], relevant: set[str], k: int = 10) -> float:
    """Normalised discounted cumulative gain at ``k`` with binary gains."""
    dcg = sum(1.0 / math.log2(i + 1) for i, doc in enumerate(ranked[:k], start=1) if doc in relevant)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(relevant), k) + 1))
    return dcg / ideal if ideal else 0.0


def reciprocal_rank(ranked: Sequence[str], relevant: set[str]) -> float:
    """1 / rank of the first relevant result, 0 when none is returned."""
    return next((1.0 / i for i, doc in enumerate(ranked, start=1) if doc in relevant), 0.0)


def score_query(ranked: Sequence[str], relevant: set[str]) -> dict[str, float]:
    """Every metric of one query."""
    return {
        "recall@5": recall_at(ranked, relevant, 5),
        "recall@10": recall_at(ranked, relevant, 10),
        "recall@50": recall_at(ranked, relevant, 50),
        "ndcg@10": ndcg_at(ranked, relevant, 10),
        "mrr": reciprocal_rank(ranked, relevant),
    }


def average(per_query: list[dict[str, float]]) -> dict[str, float]:
    """Mean of each metric over queries, plus ``queries`` (the count)."""
    n = len(per_query)
    out = {k: (sum(q[k] for q in per_query) / n if n else 0.0) for k in KEYS}
    out["queries"] = n
    return out
