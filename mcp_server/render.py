"""The MCP tools' results, for a model to read: each a compact text and the structured content, both
within a size bound.

Memories are rendered by ``servicekit.render.memory`` (a header line of provenance and dates that only
our code writes, then every stored string quoted on a line of its own); every other stored string (an
entity's name, a history turn's text, chat and session) is ``quote``d the same way. The structured
content is the RPC's response in the protobuf JSON mapping (proto field names, every field), as
``recallatron ... --json`` prints it.

``result`` keeps both within a ``Bound`` (MCP clients refuse long results: Claude Code, above about
25,000 tokens). When the whole response does not fit, every stored string is cut to the longest
length at which all of it fits (short strings stay whole); only when even ``MIN_CHARS`` characters
each is too much are entries left out from the end of each list (recall items, capture outcomes,
forgotten ids, listed memories, history entries, entities, a bundle's items, a memory's links and
earlier revisions), after which the strings get what room is left. Both parts are cut alike: a cut
string ends with ``[cut: N more characters...]`` in the text (a body's says how to read the rest)
and its holder's ``cut`` field in the structured content names it (``{"body": {"chars_left_out":
N}}`` on a memory, ``{"turn.text": {...}}`` on a history entry); a cut list says in the text how many
entries were left out and how to get them, and the response's ``cut`` field names it (``{"items":
{"items_left_out": N}}``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf import json_format
from google.protobuf.message import Message
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.render import CAUTION, Bound, Cuts, imitates, memory, quote, shorten, when
from servicekit.vocabulary import name_of

# The fewest characters of each stored string shown before entries are left out instead.
MIN_CHARS = 200
# The most aliases an entity shows (FindEntities); the others are counted.
MAX_ALIASES = 10
# The lists of a response that entries are left out of, from their end.
LISTS = {
    g.RecallResponse: ("items",),
    g.CaptureResponse: ("results",),
    g.ForgetResponse: ("forgotten_ids",),
    g.ListMemoriesResponse: ("memories",),
    g.SearchHistoryResponse: ("entries",),
    g.FindEntitiesResponse: ("entities",),
    g.GetEntityResponse: ("timeline", "attributes", "relations_out", "relations_in"),
    # The text is the gateway's bundle, already within its token budget; these bound the structured content.
    g.GetContextResponse: ("cut_items", "items"),
}
# Stored strings outside memories, by the message that holds them: dotted field paths.
STRINGS = {
    g.Entity: ("name",),
    m.EntityAttributeClaim: ("value",),
    m.EntityRelationClaim: ("entity_name",),
    g.HistoryEntry: ("turn.text", "turn.chat_id", "turn.session_id", "turn.request_id"),
}


@dataclass
class Shaped:
    """A response cut to size: ``resp`` (a copy), the cuts of each holder of stored strings, keyed by
    the holder's path in the response (("items", 3, "memory"), ("memory",), ("entries", 0)), and how
    many entries of each list (``LISTS``) were left out."""

    resp: Message
    cuts: dict[tuple, Cuts]
    left_out: dict[str, int]


def _memories(resp: Message) -> list[tuple[tuple, m.Memory]]:
    """(path, memory) for each memory of ``resp``: its ``memory`` field, each entry of a list of
    memories, and the ``memory`` of each entry of a list that holds one."""
    out = []
    for field, value in resp.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.full_name == m.Memory.DESCRIPTOR.full_name:
            if field.is_repeated:
                out += [((field.name, i), mem) for i, mem in enumerate(value)]
            else:
                out.append(((field.name,), value))
        elif field.is_repeated and "memory" in field.message_type.fields_by_name:
            out += [((field.name, i, "memory"), e.memory) for i, e in enumerate(value) if e.HasField("memory")]
    return out


def _get(holder: Message, dotted: str) -> tuple[Message, str]:
    *parents, name = dotted.split(".")
    for parent in parents:
        holder = getattr(holder, parent)
    return holder, name


def _others(resp: Message) -> list[tuple[tuple, Message, tuple[str, ...]]]:
    """(path, holder, dotted fields) for each holder of stored strings in a list of ``resp`` (``STRINGS``)."""
    out = []
    for field, value in resp.ListFields():
        if field.is_repeated and field.message_type is not None and value:
            fields = STRINGS.get(type(value[0]))
            if fields:
                out += [((field.name, i), e, fields) for i, e in enumerate(value)]
    return out


def _cut_strings(holder: Message, fields: tuple[str, ...], chars: int | None) -> Cuts:
    cuts: Cuts = {}
    for dotted in fields:
        parent, name = _get(holder, dotted)
        text = getattr(parent, name)
        if chars is not None and len(text) > chars:
            setattr(parent, name, text[:chars])
            cuts[dotted] = {"chars_left_out": len(text) - chars}
    return cuts


def shape(resp: Message, chars: int | None, entries: int | None, body_offset: int = 0) -> Shaped:
    """``resp`` with each stored string at most ``chars`` characters and each list at most ``entries``
    entries (None: whole), bodies shown from character ``body_offset``."""
    out = type(resp)()
    out.CopyFrom(resp)
    left_out = {}
    for name in LISTS.get(type(resp), ()):
        field = getattr(out, name)
        if entries is not None and len(field) > entries:
            left_out[name] = len(field) - entries
            del field[entries:]
    cuts = {}
    for path, mem in _memories(out):
        short, cut = shorten(mem, chars, entries, body_offset)
        mem.CopyFrom(short)
        cuts[path] = cut
    for path, holder, fields in _others(out):
        cuts[path] = _cut_strings(holder, fields, chars)
    # Merge records are for the people who review them (the CLI, the web screen); a model needs the
    # names. Aliases are at most MAX_ALIASES, each at most 200 characters.
    if isinstance(out, g.FindEntitiesResponse):
        for i, ent in enumerate(out.entities):
            _trim_entity(ent, cuts.setdefault(("entities", i), {}))
    if isinstance(out, g.GetEntityResponse):
        _trim_entity(out.entity, cuts.setdefault(("entity",), {}))
    return Shaped(out, cuts, left_out)


def _trim_entity(ent: g.Entity, cut: dict) -> None:
    del ent.merges[:]
    if len(ent.aliases) > MAX_ALIASES:
        cut["aliases"] = {"items_left_out": len(ent.aliases) - MAX_ALIASES}
        del ent.aliases[MAX_ALIASES:]


def structured(shaped: Shaped) -> dict:
    """The structured content of a shaped response: its JSON mapping, each cut holder's ``cut`` field,
    and the response's ``cut`` field when entries of its lists were left out."""
    data = json_format.MessageToDict(
        shaped.resp, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    for path, cut in shaped.cuts.items():
        if cut:
            holder = data
            for step in path:
                holder = holder[step]
            holder["cut"] = cut
    if shaped.left_out:
        data["cut"] = {name: {"items_left_out": n} for name, n in shaped.left_out.items()}
    return data


def _largest(lo: int, hi: int, fits: Callable[[int], bool]) -> int | None:
    """The largest x in lo..hi that ``fits`` (true up to some x, false above it), or None."""
    if hi < lo or not fits(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _stored(resp: Message) -> list[str]:
    """Every stored string of ``resp`` (what ``shape`` cuts)."""
    out = []
    for _, mem in _memories(resp):
        out += [mem.title, mem.body, mem.invalidation_reason, mem.reason, mem.evidence.span, mem.evidence.turn]
        out += [link.target_entity_name for link in mem.links]
        out += [text for rev in mem.history for text in (rev.title, rev.body)]
        out += [text for rel in mem.relations for text in (rel.subject_name, rel.object_name)]
        out += [text for att in mem.attributes for text in (att.subject_name, att.value)]
    for _, holder, fields in _others(resp):
        out += [getattr(*_get(holder, dotted)) for dotted in fields]
    return out


def result(resp: Message, bound: Bound, body_offset: int = 0) -> tuple[str, dict]:
    """The text and the structured content of a tool's response ``resp``, both within ``bound`` (the
    structured content as ``json.dumps`` writes it, as a client may show it to a model); a body is
    shown from character ``body_offset``. The one function that renders every MCP tool result."""
    text = TEXTS.get(type(resp), one)
    made: dict[tuple, tuple[str, dict, bool]] = {}

    def attempt(chars: int | None, entries: int | None) -> tuple[str, dict, bool]:
        if (chars, entries) not in made:
            shaped = shape(resp, chars, entries, body_offset)
            if sum(map(len, _stored(shaped.resp))) > bound.chars:  # past the bound before any rendering
                made[chars, entries] = ("", {}, False)
            else:
                rendered, data = text(shaped), structured(shaped)
                as_json = json.dumps(data, ensure_ascii=False)
                made[chars, entries] = (rendered, data, bound.holds(rendered) and bound.holds(as_json))
        return made[chars, entries]

    stored = _stored(resp)
    longest = max(map(len, stored), default=0)
    low = min(MIN_CHARS, longest)
    entries = None
    chars = _largest(low, longest, lambda c: attempt(c, None)[2])
    if chars is None:
        lists = [len(getattr(resp, name)) for name in LISTS.get(type(resp), ())]
        lists += [
            n
            for _, mem in _memories(resp)
            for n in (len(mem.links), len(mem.history), len(mem.relations), len(mem.attributes))
        ]
        # With entries left out, the strings get what room is left; 0 entries is the least there is.
        entries = _largest(0, max(lists, default=0), lambda e: attempt(low, e)[2]) or 0
        chars = _largest(low, longest, lambda c: attempt(c, entries)[2]) or low
    rendered, data, _ = attempt(chars, entries)
    return rendered, data


def _string(value: str, cut: dict | None, rest: str = "") -> str:
    """A stored string outside a memory quoted, followed by what was cut of it, if anything."""
    if not cut or not cut.get("chars_left_out"):
        return quote(value)
    return f"{quote(value)} [cut: {cut['chars_left_out']} more characters{rest}]"


def _again(left: int, kept: int, what: str) -> str:
    """What a page cut to fit says: how many entries were left out and how to get them (AIP-158 lets
    the page size change under the same token, so the same page asked for with fewer entries ends
    where this one was cut, and its next_page_token goes on from there)."""
    return (
        f"# {left} more {what} of this page left out to keep this result within its size bound; ask for "
        f"this page again (the same page_token) with page_size {max(kept, 1)} and follow its next_page_token "
        "for them (this result's next_page_token would skip them)"
    )


def one(shaped: Shaped) -> str:
    """An answer holding one memory (Read, Remember, Derive, Correct, Supersede)."""
    return memory(shaped.resp.memory, shaped.cuts.get(("memory",)))


def recall(shaped: Shaped) -> str:
    """A Recall answer: a summary line, then each item's rank and scores above its memory, then how
    many items were left out to fit, if any."""
    resp = shaped.resp
    lines = [
        f"{resp.counts.returned} recalled (mode {name_of(m.RecallMode, resp.mode)}, "
        f"dense_available {str(resp.dense_available).lower()}, reranked {str(resp.reranked).lower()}); "
        "nearest is not necessarily relevant: judge each one."
    ]
    if resp.HasField("time_window"):
        tw = resp.time_window
        bounds = [when(getattr(tw, side)) if tw.HasField(side) else "any time" for side in ("start", "end")]
        how = "in each arm, those said then first" if tw.applied else "not used: the request's own window wins"
        lines.append(f"time words {quote(tw.words)} read as said from {bounds[0]} to before {bounds[1]} ({how})")
    for i, item in enumerate(resp.items):
        lines.append(
            f"#{item.rank} lexical_rank {item.lexical_rank or '-'} dense_rank {item.dense_rank or '-'} "
            # A score of an arm that did not rank the memory (or did not run) is "-", as the CLI says.
            f"cosine {f'{item.cosine:.3f}' if item.dense_rank else '-'} "
            f"rerank {f'{item.rerank_score:.3f}' if resp.reranked else '-'}"
        )
        lines.append(memory(item.memory, shaped.cuts.get(("items", i, "memory"))))
    if left := shaped.left_out.get("items"):
        lines.append(
            f"# {left} more recalled memories left out to keep this result within its size bound; "
            "recall with a smaller top_k or a narrower question for them"
        )
    return "\n".join(lines)


def forgotten(shaped: Shaped) -> str:
    """A Forget answer: the ids forgotten, the target first."""
    left = shaped.left_out.get("forgotten_ids")
    more = f" and {left} more (left out of this result)" if left else ""
    return "forgot " + ", ".join(shaped.resp.forgotten_ids) + more


def capture(shaped: Shaped) -> str:
    """A Capture answer: one line per proposal (stored, or skipped and why), stored memories in full."""
    resp = shaped.resp
    lines = ["replayed: the first answer to this request_id, nothing written"] if resp.replayed else []
    for i, outcome in enumerate(resp.results):
        if outcome.HasField("memory"):
            lines.append(f"proposal {i}: stored")
            lines.append(memory(outcome.memory, shaped.cuts.get(("results", i, "memory"))))
        else:
            skip = outcome.skipped
            known = f" (memory {skip.known_memory_id})" if skip.known_memory_id else ""
            lines.append(f"proposal {i}: skipped, {name_of(m.CaptureSkipReason, skip.reason)}: {skip.message}{known}")
    if left := shaped.left_out.get("results"):
        lines.append(f"# the outcomes of {left} more proposals left out to keep this result short")
    return "\n".join(lines) if lines else "no proposals"


def listed(shaped: Shaped) -> str:
    """A ListMemories page: a count line, each memory, what was left out to fit and the next page."""
    resp = shaped.resp
    left = shaped.left_out.get("memories", 0)
    lines = [
        f"{len(resp.memories) + left} memories on this page of {resp.total_size} you can read that match, newest first."
    ]
    lines += [memory(mem, shaped.cuts.get(("memories", i))) for i, mem in enumerate(resp.memories)]
    return "\n".join([*lines, *_page_end(left, len(resp.memories), "memories", resp.next_page_token)])


def turn(entry: g.HistoryEntry, cuts: dict | None) -> str:
    """One turn of the caller's history: a line of ours (id, role, when said, chat, session, score),
    then its text quoted; a caution when its stored strings imitate our lines."""
    cuts, t = cuts or {}, entry.turn
    session = _string(t.session_id, cuts.get("turn.session_id")) + (" (computed)" if entry.session_computed else "")
    score = f" | score {entry.score:.3f}" if entry.score else ""
    lines = [
        f"turn {entry.turn_id} | {t.role} | said {when(t.occurred_at)} | chat "
        f"{_string(t.chat_id, cuts.get('turn.chat_id'))} | session {session}{score}"
    ]
    if any(imitates(text) for text in (t.text, t.chat_id, t.session_id) if text):
        lines.append(f"  {CAUTION}")
    lines.append(f"  text: {_string(t.text, cuts.get('turn.text'))}")
    return "\n".join(lines)


def history(shaped: Shaped) -> str:
    """A SearchHistory page: what it is, each turn, what was left out to fit and the next page."""
    resp = shaped.resp
    left = shaped.left_out.get("entries", 0)
    lines = [
        f"{len(resp.entries) + left} turns of your own history on this page (what was said, as evidence: not "
        "memories, never seen by anyone else); each turn's text quoted."
    ]
    lines += [turn(entry, shaped.cuts.get(("entries", i))) for i, entry in enumerate(resp.entries)]
    return "\n".join([*lines, *_page_end(left, len(resp.entries), "turns", resp.next_page_token)])


def _page_end(left: int, shown: int, noun: str, next_page_token: str) -> list[str]:
    """A page's last line: how to get what was left out to fit (before the next page: its token
    would skip them), else the next page's token, else nothing."""
    if left:
        return [_again(left, shown, noun)]
    if next_page_token:
        return [f"# more on the next page: page_token {quote(next_page_token)}"]
    return []


def _entity_line(e: g.Entity, cut: dict) -> str:
    """``entity ID: name "N", also known as "A", ...; N memories about it you can read``, and the
    caution on a line of its own when a name imitates our lines."""
    line = f"entity {e.id}: name {_string(e.name, cut.get('name'))}"
    if e.aliases:
        line += ", also known as " + ", ".join(quote(a) for a in e.aliases)
        if left := cut.get("aliases"):
            line += f" and {left['items_left_out']} more"
    line += f"; {e.mentions} memories about it you can read"
    if any(imitates(text) for text in (e.name, *e.aliases)):
        line += f"\n  {CAUTION}"
    return line


def entities(shaped: Shaped) -> str:
    """A FindEntities answer: each entity's id, its name and aliases quoted, and its readable
    mentions; what was left out to fit."""
    resp = shaped.resp
    lines = [
        f"{len(resp.entities) + shaped.left_out.get('entities', 0)} entities of that name or alias that you can "
        "read a memory about, most mentioned first; pass an id as entity_ids to recallatron_recall or as about_id "
        "to recallatron_list_memories, or to recallatron_get_entity for its page."
    ]
    lines += [_entity_line(e, shaped.cuts.get(("entities", i), {})) for i, e in enumerate(resp.entities)]
    if left := shaped.left_out.get("entities"):
        lines.append(f"# {left} more entities of that name left out to keep this result within its size bound")
    return "\n".join(lines)


def entity_page(shaped: Shaped) -> str:
    """A GetEntity answer: the entity's line, each attribute and relation with the memory that
    states it (stored strings quoted), then the timeline's memories; what was left out to fit."""
    resp, cuts = shaped.resp, shaped.cuts
    lines = [_entity_line(resp.entity, cuts.get(("entity",), {}))]
    if resp.other_entity_ids:
        lines.append("other entities of that name: " + ", ".join(resp.other_entity_ids))
    lines.append(f"{len(resp.attributes)} attributes stated by memories you can read:")
    for i, a in enumerate(resp.attributes):
        value = _string(a.value, cuts.get(("attributes", i), {}).get("value"))
        lines.append(f"  {a.key} = {value} (memory {a.memory_id}, valid from {when(a.valid_from)})")
    lines.append(f"{len(resp.relations_out) + len(resp.relations_in)} relations stated by memories you can read:")
    for name, way in (("relations_out", ""), ("relations_in", "<- ")):
        for i, r in enumerate(getattr(resp, name)):
            other = _string(r.entity_name, cuts.get((name, i), {}).get("entity_name"))
            lines.append(f"  {way}{r.predicate} {other} ({r.entity_id}) (memory {r.memory_id})")
    stated = [a.value for a in resp.attributes] + [r.entity_name for r in (*resp.relations_out, *resp.relations_in)]
    if any(imitates(text) for text in stated):
        lines.append(f"  {CAUTION}")
    for name in ("attributes", "relations_out", "relations_in"):
        if left := shaped.left_out.get(name):
            lines.append(f"# {left} more {name} left out to keep this result within its size bound")
    left = shaped.left_out.get("timeline", 0)
    lines.append(
        f"timeline: {len(resp.timeline) + left} of {resp.timeline_size} memories about it, the latest said first"
    )
    lines += [memory(mem, cuts.get(("timeline", i))) for i, mem in enumerate(resp.timeline)]
    return "\n".join([*lines, *_page_end(left, len(resp.timeline), "memories", resp.next_page_token)])


def context(shaped: Shaped) -> str:
    """A GetContext answer: the gateway's bundle text (rendered by servicekit.render, within its budget)."""
    return shaped.resp.text


# The text of each response type; any other holds one memory (``one``).
TEXTS: dict[type, Callable[[Shaped], str]] = {
    g.RecallResponse: recall,
    g.CaptureResponse: capture,
    g.ForgetResponse: forgotten,
    g.ListMemoriesResponse: listed,
    g.SearchHistoryResponse: history,
    g.FindEntitiesResponse: entities,
    g.GetEntityResponse: entity_page,
    g.GetContextResponse: context,
}
