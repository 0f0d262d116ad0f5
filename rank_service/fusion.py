"""Reciprocal Rank Fusion and the permission walk, as plain arithmetic.

RRF (Cormack, Clarke and Buettcher, "Reciprocal Rank Fusion outperforms Condorcet and individual
Rank Learning Methods", SIGIR 2009): score(d) = sum over arms of 1 / (k + rank_arm(d)), ranks
1-based, k = 60. One entry per memory id. Ties break deterministically and by content, not by
memory id alone (a random UUID per write, so two loads of the same data ranked differently: SciFact
hybrid nDCG@10 moved between 0.7223 and 0.7290 over 20 shuffles of the ids, tools/fusion_ablation):
best single-arm rank first, then the keyword arm's rank (the better arm alone on both shared sets;
LoCoMo 0.5240 / SciFact 0.7256, against 0.5239 / 0.7232 for the dense rank), then memory id.

Precedence (ours, optional): given, per memory, how many of the question's identifiers it contains
(keys, dates, versions, addresses, paths: whole joined tokens) and whether it contains every term
the keyword arm scored, memories with more identifiers come first, then those holding every term,
and RRF orders the rest. A meaning model cannot tell ABC-1234 from ABC-1235 or 2024-03-15 from
2024-03-16, and RRF gives its vote the weight of the keyword arm's, so without this a near miss
the dense arm prefers ties or beats the exact one. Measured on the shared data (docs/retrieval.md):
hybrid nDCG@10 on LoCoMo rises (all-terms precedence), SciFact is unchanged within noise.
"""

from __future__ import annotations

from typing import NamedTuple

from servicekit.errors import InvalidArgument
from servicekit.limits import WALK_LIMIT

RRF_K = 60
ARMS = ("lexical", "dense")
_ABSENT = float("inf")  # the keyword rank of a memory only the dense arm found: after every ranked one


class Fused(NamedTuple):
    """One fused candidate: id, RRF score and its 1-based rank per arm (0 when absent). A NamedTuple,
    not a frozen dataclass: a recall builds about 400 of them, and a frozen dataclass's ``__init__``
    was the largest single cost of FuseAndWalk (1.7 ms for 170 ids, measured with cProfile)."""

    memory_id: str
    score: float
    ranks: dict[str, int]
    identifier_matches: int = 0
    all_terms: bool = False


def _order(memory_id: str, score: float, per_arm: dict[str, int], identifier_matches: int, all_terms: bool) -> tuple:
    """Sort key: more identifier matches, every term held, higher score, best single-arm rank, keyword
    arm rank (absent last), id. ``per_arm`` holds only the arms that ranked the memory."""
    return (
        -identifier_matches,
        not all_terms,
        -score,
        min(per_arm.values()),
        per_arm.get("lexical", _ABSENT),
        memory_id,
    )


def fuse(arms: dict[str, list[str]], k: int = RRF_K, matches: dict[str, tuple[int, bool]] | None = None) -> list[Fused]:
    """Fuses best-first id lists keyed by arm name; returns candidates best first. ``matches``
    (memory id to (identifier count, holds every term); absent is (0, False)) turns on precedence.

    Raises InvalidArgument for k < 1, an unknown arm, an id listed twice in one arm, or a negative
    identifier count.
    """
    if k < 1:
        raise InvalidArgument("k must be at least 1", field="k")
    matches = matches or {}
    if any(v[0] < 0 for v in matches.values()):
        raise InvalidArgument("identifier counts must not be negative", field="identifier_matches")
    ranks: dict[str, dict[str, int]] = {}
    for arm, ids in arms.items():
        if arm not in ARMS:
            raise InvalidArgument(f"unknown arm {arm!r}", field="arm")
        if len(set(ids)) != len(ids):
            raise InvalidArgument(f"arm {arm} lists an id twice", field="memory_ids")
        for position, memory_id in enumerate(ids, start=1):
            ranks.setdefault(memory_id, {})[arm] = position
    keyed = []
    for mid, per_arm in ranks.items():
        identifier_matches, all_terms = matches.get(mid, (0, False))
        score = sum(1.0 / (k + r) for r in per_arm.values())
        fused = Fused(mid, score, {a: per_arm.get(a, 0) for a in ARMS}, identifier_matches, all_terms)
        keyed.append((_order(mid, score, per_arm, identifier_matches, all_terms), fused))
    keyed.sort(key=lambda pair: pair[0])
    return [fused for _, fused in keyed]


def walk(candidates: list[Fused], readable: set[str], limit: int = WALK_LIMIT, k: int = RRF_K) -> list[Fused]:
    """Walks candidates in fused order, at most ``limit``, keeping the readable ones, then recomputes
    per-arm ranks and fused scores over the rows that passed, so nothing reveals a hidden row."""
    if limit < 1:
        raise InvalidArgument("limit must be at least 1", field="limit")
    passed = [c for c in candidates[:limit] if c.memory_id in readable]
    arms = {}
    for arm in ARMS:
        in_arm = sorted((c for c in passed if c.ranks[arm]), key=lambda c: c.ranks[arm])
        if in_arm:
            arms[arm] = [c.memory_id for c in in_arm]
    return fuse(
        arms,
        k,
        {c.memory_id: (c.identifier_matches, c.all_terms) for c in passed if c.identifier_matches or c.all_terms},
    )
