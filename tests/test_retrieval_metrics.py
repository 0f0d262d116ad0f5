"""The evaluation metrics, checked by hand against their definitions (docs/retrieval.md, "Metrics")."""

import math

import pytest

from cli.retrieval_metrics import average, ndcg_at, recall_at, reciprocal_rank, score_query


def test_recall_at_k_counts_relevant_in_the_first_k():
    ranked = ["a", "x", "b", "y"]
    assert recall_at(ranked, {"a", "b", "c"}, 1) == pytest.approx(1 / 3)
    assert recall_at(ranked, {"a", "b", "c"}, 3) == pytest.approx(2 / 3)
    assert recall_at([], {"a"}, 10) == 0.0


def test_ndcg_uses_log2_discount_and_ideal_over_min_r_10():
    # Relevant at ranks 2 and 3 of R = {a, b}: DCG = 1/log2(3) + 1/log2(4); IDCG = 1 + 1/log2(3).
    got = ndcg_at(["x", "a", "b"], {"a", "b"})
    assert got == pytest.approx((1 / math.log2(3) + 0.5) / (1 + 1 / math.log2(3)))
    assert ndcg_at(["a", "b"], {"a", "b"}) == pytest.approx(1.0)
    # 12 relevant: IDCG counts 10 of them.
    rel = {f"r{i}" for i in range(12)}
    assert ndcg_at(sorted(rel)[:10], rel) == pytest.approx(1.0)


def test_mrr_is_first_relevant_in_full_list():
    assert reciprocal_rank(["x"] * 60 + ["a"], {"a"}) == pytest.approx(1 / 61)
    assert reciprocal_rank(["x", "y"], {"a"}) == 0.0


def test_average_over_queries():
    out = average([score_query(["a"], {"a"}), score_query(["b"], {"a"})])
    assert out["recall@10"] == pytest.approx(0.5) and out["mrr"] == pytest.approx(0.5) and out["queries"] == 2
