"""Reciprocal Rank Fusion and the walk: exact arithmetic, tie-breaks, recomputation, bad input."""

import pytest

from rank_service.fusion import fuse, walk
from servicekit.errors import InvalidArgument


def test_rrf_scores_are_sum_of_reciprocal_ranks_with_k_60():
    fused = fuse({"lexical": ["a", "b", "c"], "dense": ["c", "a"]})
    scores = {f.memory_id: f.score for f in fused}
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert scores["b"] == pytest.approx(1 / 62)
    assert [f.memory_id for f in fused] == ["a", "c", "b"]
    assert fused[0].ranks == {"lexical": 1, "dense": 2}
    assert fused[2].ranks == {"lexical": 2, "dense": 0}


def test_ties_break_by_best_single_arm_rank_then_id():
    # x and y have the same score (1/61 + 1/62); z and w tie on score and best rank, so id decides.
    fused = fuse({"lexical": ["y", "x", "w"], "dense": ["x", "y", "z"]})
    assert [f.memory_id for f in fused][:2] == ["x", "y"]
    assert [f.memory_id for f in fused][2:] == ["w", "z"]
    assert fuse({"lexical": ["y", "x", "w"], "dense": ["x", "y", "z"]}) == fused


def test_one_entry_per_memory_and_duplicates_refused():
    assert len(fuse({"lexical": ["a"], "dense": ["a"]})) == 1
    with pytest.raises(InvalidArgument):
        fuse({"lexical": ["a", "a"]})
    with pytest.raises(InvalidArgument):
        fuse({"lexical": ["a"]}, k=0)
    with pytest.raises(InvalidArgument):
        fuse({"sparse": ["a"]})


def test_walk_keeps_readable_in_order_and_recomputes_ranks():
    fused = fuse({"lexical": ["hidden", "a", "b"], "dense": ["b", "hidden"]})
    passed = walk(fused, {"a", "b"})
    assert [p.memory_id for p in passed] == ["b", "a"]
    b, a = passed
    # Ranks are recomputed over the rows that passed: nothing reveals the hidden row above them.
    assert a.ranks == {"lexical": 1, "dense": 0} and a.score == pytest.approx(1 / 61)
    assert b.ranks == {"lexical": 2, "dense": 1} and b.score == pytest.approx(1 / 62 + 1 / 61)


def test_walk_stops_at_its_limit():
    fused = fuse({"lexical": [f"m{i:03d}" for i in range(600)]})
    assert len(walk(fused, {f.memory_id for f in fused})) == 500
    assert len(walk(fused, {f.memory_id for f in fused}, limit=3)) == 3
    with pytest.raises(InvalidArgument):
        walk(fused, set(), limit=0)
