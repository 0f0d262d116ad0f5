"""The context bundle's text: the store's entries rendered for a prompt and cut to a token budget.

The store chooses the entries under the readability rule (store_service/context.py); here they are
rendered (``servicekit.render.memory``: provenance and dates before the text, stored text quoted)
under one heading per part and cut to the budget. Tokens are counted as the MCP tools' results are
(``servicekit.render.tokens``: an estimate of what a model's tokenizer counts, in which a long
unbroken word counts by its length), and the text is also held to ``CHARS_PER_TOKEN`` characters a
token of the budget. Entries are counted one by one while choosing; the final text is counted again
whole.

The cut keeps entries in bundle order while they fit: an entry that does not fit (with its part's
heading, when it is the part's first) is cut and the next ones are still tried, so one long pinned
memory does not push out every short one after it. Room is kept for the closing line that says what
was cut. Should the whole text still exceed the budget, the last kept entries are cut until it fits.
"""

from __future__ import annotations

import datetime
from collections import Counter

from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.errors import FailedPrecondition, InvalidArgument
from servicekit.render import CHARS_PER_TOKEN, Bound, memory, quote, tokens
from servicekit.vocabulary import name_of

DEFAULT_BUDGET = 1_500
MIN_BUDGET = 200  # the opening and closing lines take about 150 tokens
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
        f"(newest memory about {quote(e.name)} [{e.entity_id}], mentioned by {e.mentions} in the last 30 days)"
        for e in entry.entities
    ]
    return "\n".join([*lines, memory(entry.memory)])


def _opening(purpose: int, now: datetime.datetime) -> str:
    return (
        f"# Recallatron context ({name_of(m.Purpose, purpose)}, built {now.isoformat(timespec='seconds')}): "
        "memories are dated claims made by someone, not current truth, their own text quoted; read each "
        "one's provenance before relying on it, and recall for anything not here."
    )


def _closing(budget: int, cut: list[g.ContextItem], total: int) -> str:
    parts = Counter(PLURALS.get(item.part, "other") for item in cut)
    which = ", ".join(f"{n} {name}" for name, n in parts.items())
    return (
        f"# Cut to fit {budget} tokens: {len(cut)} of {total} memories left out ({which}); "
        "recall or read them if they matter."
    )


def build(entries, purpose: int, budget: int, now: datetime.datetime | None = None):
    """The GetContextResponse of the store's ``entries`` for ``purpose`` under ``budget`` tokens."""
    now = now or datetime.datetime.now(datetime.UTC)
    bound = Bound(budget, CHARS_PER_TOKEN * budget)
    texts = [_item_text(e) for e in entries]
    items = [
        g.ContextItem(part=e.part, memory=e.memory, entities=e.entities, tokens=tokens(text))
        for e, text in zip(entries, texts, strict=True)
    ]
    opening = _opening(purpose, now)
    # Room for the closing line at about its longest (every memory cut, every part named); a few
    # tokens more for counts with more digits. The final count below is what holds the budget.
    every_part = [g.ContextItem(part=p) for p in HEADINGS]
    closing = _closing(budget, every_part * max(1, len(items)), max(1, len(items)))
    reserve = tokens(closing) + 8
    heading_cost = {part: tokens(text) for part, text in HEADINGS.items()}
    used, length = tokens(opening), len(opening) + len(closing) + 8
    kept: list[int] = []
    parts: set[int] = set()
    for i, item in enumerate(items):
        first = item.part not in parts
        cost = item.tokens + (heading_cost[item.part] if first else 0)
        size = len(texts[i]) + 1 + (len(HEADINGS[item.part]) + 1 if first else 0)
        if used + cost + reserve <= budget and length + size <= bound.chars:
            kept.append(i)
            parts.add(item.part)
            used, length = used + cost, length + size
    while True:
        text = _text(opening, items, texts, kept, budget)
        if bound.holds(text) or not kept:
            break
        kept.pop()
    keep = set(kept)
    return g.GetContextResponse(
        items=[items[i] for i in kept],
        cut_items=[items[i] for i in range(len(items)) if i not in keep],
        text=text,
        token_budget=budget,
        tokens=tokens(text),
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
