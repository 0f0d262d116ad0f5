"""The rank service: RRF and the permission walk over gRPC (stateless)."""

from __future__ import annotations

from recallatron.rank.v1 import rank_pb2 as r
from recallatron.rank.v1 import rank_pb2_grpc

from rank_service.fusion import RRF_K, WALK_LIMIT, Fused, fuse, walk
from servicekit import vocabulary
from servicekit.errors import InvalidArgument
from servicekit.server import Running, start_server

_ARM_NAMES = vocabulary.names(r.Arm)


def _to_proto(f: Fused) -> r.FusedCandidate:
    return r.FusedCandidate(
        memory_id=f.memory_id,
        fused_score=f.score,
        lexical_rank=f.ranks["lexical"],
        dense_rank=f.ranks["dense"],
        identifier_matches=f.identifier_matches,
        all_terms=f.all_terms,
    )


def _k(value: int) -> int:
    if value < 0:
        raise InvalidArgument("k must not be negative", field="k")
    return value or RRF_K


def _limit(value: int) -> int:
    if value < 0:
        raise InvalidArgument("limit must not be negative", field="limit")
    return value or WALK_LIMIT


def _arms(arms) -> dict[str, list[str]]:
    """The arms' lists keyed by name; INVALID_ARGUMENT for an unknown arm or one given twice."""
    out = {}
    for arm in arms:
        name = _ARM_NAMES.get(arm.arm)
        if name is None or name in out:
            raise InvalidArgument("each arm must be lexical or dense, at most once", field="arms")
        out[name] = list(arm.memory_ids)
    return out


class RankServicer(rank_pb2_grpc.RankServiceServicer):
    """Implements recallatron.rank.v1.RankService."""

    def FuseAndWalk(self, request, context):
        k, limit = _k(request.k), _limit(request.limit)
        matches = {mid: (p.identifier_matches, p.all_terms) for mid, p in request.precedence.items()}
        passed = walk(fuse(_arms(request.arms), k, matches), set(request.readable_ids), limit, k)
        return r.FuseAndWalkResponse(candidates=[_to_proto(f) for f in passed])


def start(bind: str) -> Running:
    """Starts the rank service on ``bind``."""
    return start_server(
        bind,
        [
            (
                rank_pb2_grpc.add_RankServiceServicer_to_server,
                RankServicer(),
                r.DESCRIPTOR.services_by_name["RankService"].full_name,
            )
        ],
    )
