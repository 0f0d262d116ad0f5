"""The relevance gate of per-turn recall (PromptContext, the harness hooks): which recalled memories
are put in front of a model before it answers a turn. Dense search always returns its nearest rows,
relevant or not, so a memory passes only on evidence a recall already computed that it is about the
turn: an identifier typed in the turn that it contains, every scored term of the turn, or a cosine
at or above the gate's minimum. The gate reads a recall's signals and nothing else, so the gateway
(which applies it) and the calibration (which fits its presets, ``recallatron calibrate-inject``)
judge alike. docs/agents.md, "The relevance gate", has the fit and the curve.
"""

from __future__ import annotations

from dataclasses import dataclass

# The workspace setting inject_gate by name, as a minimum cosine. Fitted on the LoCoMo fit half
# against off-topic prompts (docs/agents.md, "The relevance gate").
PRESETS = {"strict": 0.50, "default": 0.45, "loose": 0.35}
DEFAULT = "default"


@dataclass(frozen=True)
class Signals:
    """What a recall computed about one memory (RecallItem's fields of the same names)."""

    lexical_rank: int
    cosine: float
    identifier_matches: int
    all_terms: bool


def passes(signals: Signals, min_cosine: float) -> bool:
    """Whether a memory recalled with these signals is about the turn, under a gate of ``min_cosine``."""
    if signals.identifier_matches > 0:
        return True
    if signals.all_terms and signals.lexical_rank > 0:
        return True
    return signals.cosine >= min_cosine
