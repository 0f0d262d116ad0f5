"""Compact text of the gateway's answers, for a model to read: provenance and dates before the text.

Memories are rendered by ``servicekit.render.memory`` (one header line of provenance and dates, a
provenance line, then title and body). The structured result of a tool carries every field; this
text is what a model reads first, so what it needs to judge a claim comes before the claim.
"""

from __future__ import annotations

from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.render import memory, when
from servicekit.vocabulary import name_of

__all__ = ["capture", "context", "forgotten", "memory", "recall", "when"]


def recall(resp: g.RecallResponse) -> str:
    """A Recall answer: a summary line, then each item's rank and scores above its memory."""
    lines = [
        f"{resp.counts.returned} recalled (mode {name_of(m.RecallMode, resp.mode)}, "
        f"dense_available {str(resp.dense_available).lower()}, reranked {str(resp.reranked).lower()}); "
        "nearest is not necessarily relevant: judge each one."
    ]
    for item in resp.items:
        lines.append(
            f"#{item.rank} lexical_rank {item.lexical_rank or '-'} dense_rank {item.dense_rank or '-'} "
            f"cosine {item.cosine:.3f} rerank {item.rerank_score:.3f}"
        )
        lines.append(memory(item.memory))
    return "\n".join(lines)


def forgotten(resp: g.ForgetResponse) -> str:
    """A Forget answer: the ids forgotten, the target first."""
    return "forgot " + ", ".join(resp.forgotten_ids)


def context(resp: g.GetContextResponse) -> str:
    """A GetContext answer: the bundle's own rendered text, as a prompt would carry it."""
    return resp.text


def capture(resp: g.CaptureResponse) -> str:
    """A Capture answer: one line per proposal (stored, or skipped and why), stored memories in full."""
    lines = ["replayed: the first answer to this request_id, nothing written"] if resp.replayed else []
    for i, result in enumerate(resp.results):
        if result.HasField("memory"):
            lines.append(f"proposal {i}: stored")
            lines.append(memory(result.memory))
        else:
            skip = result.skipped
            known = f" (memory {skip.known_memory_id})" if skip.known_memory_id else ""
            lines.append(f"proposal {i}: skipped, {name_of(m.CaptureSkipReason, skip.reason)}: {skip.message}{known}")
    return "\n".join(lines) if lines else "no proposals"
