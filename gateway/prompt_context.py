"""PromptContext: what to put in front of a model before it answers one user turn (docs/agents.md,
"Per-turn recall").

1. the turn's text is recalled for the caller by Recall's own path (``Recaller.recall``: hybrid,
   ``TOP_K`` items), so every item is readable exactly as Recall's are;
2. the relevance gate (``servicekit.relevance_gate.passes``, at the workspace's ``inject_gate`` as a
   minimum cosine) keeps the items a recall's own signals say are about the turn; with the embedder
   down the cosines are 0 and the keyword signals alone decide;
3. with a session key, the store answers which of those were already shown in the session at their
   current revision (``ShownInSession``: it keeps only a SHA-256 of the key, per member, 24 hours);
   they are left out;
4. the rest are rendered best first within the budget (``gateway.context.prompt_block``), and the
   ones the block holds are recorded for the session (``RecordShown``).
"""

from __future__ import annotations

import datetime
import hashlib

from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s
from recallatron.store.v1 import store_pb2_grpc

from gateway import context as bundle
from gateway.recall import Recaller, in_time, window_fields
from servicekit.caller import check_purpose_granted
from servicekit.errors import InvalidArgument
from servicekit.limits import MAX_QUERY_CHARS
from servicekit.relevance_gate import Signals, passes
from servicekit.render import tokens

# Recall's items a turn's gate reads: a few more than a block of the default budget holds.
TOP_K = 10
MAX_SESSION_KEY_CHARS = 200


def _check(req: g.PromptContextRequest, caller: m.Caller) -> tuple[int, int, datetime.datetime | None]:
    """The purpose, budget and reference time of a request; INVALID_ARGUMENT for a bad text, budget,
    session key, reference time or purpose, PERMISSION_DENIED for an ungranted purpose."""
    if not req.text.strip():
        raise InvalidArgument("text must not be blank", field="text")
    if "\x00" in req.text:
        raise InvalidArgument("text must not contain NUL characters", field="text")
    if len(req.text) > MAX_QUERY_CHARS:
        raise InvalidArgument(f"text is longer than {MAX_QUERY_CHARS} characters", field="text", limit=MAX_QUERY_CHARS)
    budget = bundle.check_prompt_budget(req.token_budget)
    key = req.session_key
    if len(key) > MAX_SESSION_KEY_CHARS or not key.isprintable():
        raise InvalidArgument(
            f"session_key must be 1..{MAX_SESSION_KEY_CHARS} printable characters (or empty for none)",
            field="session_key",
            limit=MAX_SESSION_KEY_CHARS,
        )
    purpose = req.purpose or m.PURPOSE_CONVERSATION
    check_purpose_granted(caller, purpose)
    at = None
    if req.HasField("reference_time"):
        try:
            at = req.reference_time.ToDatetime(tzinfo=datetime.UTC)
        except (ValueError, OverflowError):
            raise InvalidArgument(
                "reference_time must be a valid timestamp between years 1 and 9999", field="reference_time"
            ) from None
    return purpose, budget, at


class PromptContexter:
    """Answers PromptContext for an authenticated caller (module docstring)."""

    def __init__(self, store: store_pb2_grpc.StoreServiceStub, recaller: Recaller) -> None:
        self.store, self.recaller = store, recaller

    def answer(
        self, req: g.PromptContextRequest, caller: m.Caller, settings: s.WorkspaceSettings
    ) -> g.PromptContextResponse:
        purpose, budget, at = _check(req, caller)
        recall = self.recaller.recall(
            g.RecallRequest(
                query=req.text,
                purpose=purpose,
                mode=m.RECALL_MODE_HYBRID,
                top_k=TOP_K,
                reference_time=req.reference_time if at is not None else None,
                skip_time_words=req.skip_time_words,
                **window_fields(req),
            ),
            caller,
            settings,
        )
        gate = settings.inject_min_cosine
        # In a read in time the meaning arm compares only memories current today (retired ones have
        # no vectors): a memory it did not rank is judged on keyword evidence alone, as when the
        # embedder is down (docs/time.md).
        timed = in_time(req)
        passed = [
            item
            for item in recall.items
            if passes(
                Signals(
                    item.lexical_rank,
                    item.cosine,
                    item.identifier_matches,
                    item.all_terms,
                    recall.dense_available and not (timed and not item.dense_rank),
                ),
                gate,
            )
        ]
        session = hashlib.sha256(req.session_key.encode("utf-8")).digest() if req.session_key else b""
        shown: set[str] = set()
        if session and passed:
            shown = set(
                self.store.ShownInSession(
                    s.ShownInSessionRequest(caller=caller, session_key_sha256=session, memories=_pairs(passed))
                ).shown_ids
            )
        fresh = [item for item in passed if item.memory.id not in shown]
        kept, costs, text = bundle.prompt_block([item.memory for item in fresh], budget, at)
        items = [_item(fresh[i], cost) for i, cost in zip(kept, costs, strict=True)]
        if session and items:
            self.store.RecordShown(
                s.RecordShownRequest(
                    caller=caller, session_key_sha256=session, memories=_pairs([fresh[i] for i in kept])
                )
            )
        keep = set(kept)
        return g.PromptContextResponse(
            items=items,
            text=text,
            tokens=tokens(text),
            token_budget=budget,
            already_shown=len(passed) - len(fresh),
            cut_ids=[item.memory.id for i, item in enumerate(fresh) if i not in keep],
            dense_available=recall.dense_available,
            min_cosine=gate,
            time_window=recall.time_window if recall.HasField("time_window") else None,
        )


def _pairs(items) -> list[s.SessionMemory]:
    return [s.SessionMemory(memory_id=item.memory.id, revision=item.memory.revision) for item in items]


def _item(item: g.RecallItem, cost: int) -> g.PromptItem:
    return g.PromptItem(
        memory=item.memory,
        rank=item.rank,
        lexical_rank=item.lexical_rank,
        dense_rank=item.dense_rank,
        cosine=item.cosine,
        identifier_matches=item.identifier_matches,
        all_terms=item.all_terms,
        tokens=cost,
    )
