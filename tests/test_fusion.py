"""Reciprocal Rank Fusion and the walk: exact arithmetic, tie-breaks, recomputation, bad input."""

import grpc
import pytest
from recallatron.rank.v1 import rank_pb2 as r
from recallatron.rank.v1 import rank_pb2_grpc

from rank_service.fusion import WALK_LIMIT, fuse, walk
from rank_service.server import start as start_rank
from servicekit import clients
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


def test_ties_break_by_best_single_arm_rank_then_keyword_rank_then_id():
    # x and y have the same score (1/61 + 1/62) and best rank 1: y is first in the keyword arm, so it
    # leads (an id order would put x first). z (dense 3) and w (lexical 3) tie on score and best rank:
    # w has a keyword rank, z none.
    fused = fuse({"lexical": ["y", "x", "w"], "dense": ["x", "y", "z"]})
    assert [f.memory_id for f in fused] == ["y", "x", "w", "z"]
    assert fuse({"lexical": ["y", "x", "w"], "dense": ["x", "y", "z"]}) == fused
    # the same data under other ids ranks the same way: the order follows the content, not the ids
    renamed = fuse({"lexical": ["b", "a", "d"], "dense": ["a", "b", "c"]})
    assert [f.memory_id for f in renamed] == ["b", "a", "d", "c"]


def test_identifier_precedence_orders_by_matches_then_rrf():
    # d is the dense arm's favourite and second lexically (a near miss: ABC-1235); e holds the typed
    # identifier, first lexically, under the dense floor. With precedence e comes first, then RRF.
    arms = {"lexical": ["e", "d", "f"], "dense": ["d", "g", "f"]}
    assert [f.memory_id for f in fuse(arms)] == ["d", "f", "e", "g"]
    fused = fuse(arms, matches={"e": (2, False), "d": (1, False)})
    assert [f.memory_id for f in fused] == ["e", "d", "f", "g"]
    assert [f.identifier_matches for f in fused] == [2, 1, 0, 0]
    # Holding every scored term comes after identifiers, before RRF.
    assert [f.memory_id for f in fuse(arms, matches={"g": (0, True), "e": (1, False)})] == ["e", "g", "d", "f"]
    assert fused[0].score == pytest.approx(1 / 61)  # scores are RRF's, untouched
    # The walk keeps the precedence over the rows that passed.
    passed = walk(fused, {"d", "e", "g"})
    assert [f.memory_id for f in passed] == ["e", "d", "g"]
    with pytest.raises(InvalidArgument):
        fuse(arms, matches={"e": (-1, False)})


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


def test_fuse_and_walk_over_grpc_equals_walk_of_fuse():
    running = start_rank("127.0.0.1:0")
    channel = clients.channel(f"127.0.0.1:{running.port}")
    try:
        rank = rank_pb2_grpc.RankServiceStub(channel)
        lists = {"lexical": ["hidden", "a", "b", "c"], "dense": ["b", "hidden", "d"]}
        arms = [
            r.ArmRanking(arm=r.ARM_LEXICAL, memory_ids=lists["lexical"]),
            r.ArmRanking(arm=r.ARM_DENSE, memory_ids=lists["dense"]),
        ]
        readable = ["a", "b", "d", "not-a-candidate"]
        results = {}
        for limit in (0, 2):
            one_call = rank.FuseAndWalk(r.FuseAndWalkRequest(arms=arms, readable_ids=readable, limit=limit)).candidates
            expected = walk(fuse(lists), set(readable), limit or WALK_LIMIT)
            assert [(c.memory_id, c.fused_score, c.lexical_rank, c.dense_rank) for c in one_call] == [
                (f.memory_id, f.score, f.ranks["lexical"], f.ranks["dense"]) for f in expected
            ]
            results[limit] = one_call
        assert [c.memory_id for c in results[0]] == ["b", "a", "d"]
        assert (results[0][0].lexical_rank, results[0][0].dense_rank) == (2, 1)  # recomputed without "hidden"
        assert len(results[2]) < len(results[0])
        precedence = rank.FuseAndWalk(
            r.FuseAndWalkRequest(
                arms=arms,
                readable_ids=readable,
                precedence={"d": r.Precedence(identifier_matches=1), "a": r.Precedence(all_terms=True)},
            )
        ).candidates
        assert [(c.memory_id, c.identifier_matches, c.all_terms) for c in precedence] == [
            ("d", 1, False),
            ("a", 0, True),
            ("b", 0, False),
        ]
        for bad in (
            r.FuseAndWalkRequest(arms=arms, limit=-1),
            r.FuseAndWalkRequest(arms=arms, k=-1),
            r.FuseAndWalkRequest(arms=arms, precedence={"a": r.Precedence(identifier_matches=-1)}),
            r.FuseAndWalkRequest(arms=[arms[0], arms[0]]),
            r.FuseAndWalkRequest(arms=[r.ArmRanking()]),
            r.FuseAndWalkRequest(arms=[r.ArmRanking(arm=r.ARM_LEXICAL, memory_ids=["a", "a"])]),
        ):
            with pytest.raises(grpc.RpcError) as err:
                rank.FuseAndWalk(bad)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        channel.close()
        running.stop()
