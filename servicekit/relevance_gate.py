"""The relevance gate of per-turn recall (PromptContext, the harness hooks): which recalled memories
are put in front of a model before it answers a turn. Dense search always returns its nearest rows,
relevant or not, so a memory passes only on evidence a recall already computed that it is about the
turn: an identifier typed in the turn that it contains, every scored term of the turn in a memory
that is also near the turn's meaning (a cosine at most ``ALL_TERMS_MARGIN`` below the gate's
minimum, or any when the meaning arm is down), or a cosine at or above the gate's minimum. All terms
alone is weak evidence for a short turn: every term of "good evening" or "thank you so much" is in
many turns of small talk. The gate reads a recall's signals and nothing else, so the gateway
(which applies it) and the calibration (which fits its presets, ``recallatron calibrate-inject``)
judge alike. docs/agents.md, "The relevance gate", has the fit and the curve.
"""

from __future__ import annotations

from dataclasses import dataclass

# The workspace setting inject_gate by name, as a minimum cosine: for each, the gate with the best
# share of LoCoMo fit-half questions whose relevant memory is in the block (at the default budget,
# 600 tokens) among those where enough off-topic prompts (SciFact claims and eval/openers, asked of
# each conversation) add nothing: strict 97%, default 90%, loose 80% (`recallatron calibrate-inject`,
# docs/calibration-inject-locomo.json; docs/agents.md, "The relevance gate"). Fit half: default 0.35
# finds 0.456 of the questions' memories and keeps 0.920 of off-topic prompts quiet (held out: 0.382,
# 0.905); strict 0.45: 0.436, 0.984 (held out 0.377, 0.980); loose 0.20: 0.456, 0.835 (held out
# 0.384, 0.834). Below 0.35 the budget, not the gate, bounds the evidence: loose only finds more
# with a larger budget.
PRESETS = {"strict": 0.45, "default": 0.35, "loose": 0.20}
DEFAULT = "default"
# How far below the gate's cosine a memory holding every scored term of the turn may be. Measured
# through PromptContext (calibrate-inject, LoCoMo against SciFact claims and eval/openers, held-out
# half) at gates 0.35 / 0.40 / 0.45: off-topic prompts adding something 9.5% / 5.2% / 2.0% with it,
# 10.0% / 6.7% / 5.5% with all terms passing alone; the evidence in the block moved within the
# run-to-run spread (fit half 0.456 / 0.448 / 0.436 with, 0.442 / 0.436 / 0.423 without; held out
# 0.382 / 0.382 / 0.377 with, 0.399 / 0.399 / 0.392 without).
ALL_TERMS_MARGIN = 0.10


@dataclass(frozen=True)
class Signals:
    """What a recall computed about one memory (RecallItem's fields of the same names)."""

    lexical_rank: int
    cosine: float
    identifier_matches: int
    all_terms: bool
    # False when the recall's meaning arm could not answer (every cosine is then 0). No default: a
    # caller that left it out would judge a recall without the meaning arm by cosines of 0.
    dense_available: bool


def passes(signals: Signals, min_cosine: float) -> bool:
    """Whether a memory recalled with these signals is about the turn, under a gate of ``min_cosine``."""
    if signals.identifier_matches > 0:
        return True
    if signals.all_terms and signals.lexical_rank > 0:
        if not signals.dense_available or signals.cosine >= min_cosine - ALL_TERMS_MARGIN:
            return True
    return signals.cosine >= min_cosine
