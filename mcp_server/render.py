"""The MCP tools' results, for a model to read: each a compact text and the structured content, both
within a size bound.

Memories are rendered by ``servicekit.render.memory`` (a header line of provenance and dates that only
our code writes, then every stored string quoted on a line of its own). The structured content is the
RPC's response in the protobuf JSON mapping (proto field names, every field), as ``recallatron ...
--json`` prints it.

``result`` keeps both within a ``Bound`` (MCP clients refuse long results: Claude Code, above about
25,000 tokens). When the whole response does not fit, every stored string is cut to the longest
length at which all of it fits (short strings stay whole); only when even ``MIN_CHARS`` characters
each is too much are entries left out from the end of each list (recall items, capture outcomes,
forgotten ids, a memory's links and earlier revisions), after which the strings get what room is
left. Both parts are cut alike: a cut string ends with ``[cut: N more characters...]`` in the text (a
body's says how to read the rest) and its memory's ``cut`` field in the structured content names it
(``{"body": {"chars_left_out": N}}``); a cut list says in the text how many entries were left out,
and the response's ``cut`` field names it (``{"items": {"items_left_out": N}}``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf import json_format
from google.protobuf.message import Message
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.render import Bound, Cuts, memory, shorten
from servicekit.vocabulary import name_of

# The fewest characters of each stored string shown before entries are left out instead.
MIN_CHARS = 200
# The list of a response that entries are left out of, from its end.
LISTS = {g.RecallResponse: "items", g.CaptureResponse: "results", g.ForgetResponse: "forgotten_ids"}


@dataclass
class Shaped:
    """A response cut to size: ``resp`` (a copy), the cuts of each of its memories, keyed by the
    path of the memory's holder in the response ("items", 3) or () for ``resp.memory``, and how many
    entries of its list (``LISTS``) were left out."""

    resp: Message
    cuts: dict[tuple, Cuts]
    left_out: int


def _holders(resp: Message) -> list[tuple[tuple, Message]]:
    """(path, message with a ``memory`` field set) for each memory of ``resp``."""
    name = LISTS.get(type(resp))
    if name in ("items", "results"):
        return [((name, i), e) for i, e in enumerate(getattr(resp, name)) if e.HasField("memory")]
    if "memory" in resp.DESCRIPTOR.fields_by_name and resp.HasField("memory"):
        return [((), resp)]
    return []


def shape(resp: Message, chars: int | None, entries: int | None, body_offset: int = 0) -> Shaped:
    """``resp`` with each stored string at most ``chars`` characters and each list at most ``entries``
    entries (None: whole), bodies shown from character ``body_offset``."""
    out = type(resp)()
    out.CopyFrom(resp)
    left_out = 0
    name = LISTS.get(type(resp))
    if name and entries is not None:
        field = getattr(out, name)
        left_out = max(0, len(field) - entries)
        del field[entries:]
    cuts = {}
    for path, holder in _holders(out):
        short, cut = shorten(holder.memory, chars, entries, body_offset)
        holder.memory.CopyFrom(short)
        cuts[path] = cut
    return Shaped(out, cuts, left_out)


def structured(shaped: Shaped) -> dict:
    """The structured content of a shaped response: its JSON mapping, each cut memory's ``cut`` field,
    and the response's ``cut`` field when entries of its list were left out."""
    data = json_format.MessageToDict(
        shaped.resp, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    for path, cut in shaped.cuts.items():
        if cut:
            holder = data[path[0]][path[1]] if path else data
            holder["memory"]["cut"] = cut
    if shaped.left_out:
        data["cut"] = {LISTS[type(shaped.resp)]: {"items_left_out": shaped.left_out}}
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
    """Every stored string of the memories of ``resp`` (what ``shorten`` cuts)."""
    out = []
    for _, holder in _holders(resp):
        mem = holder.memory
        out += [mem.title, mem.body, mem.invalidation_reason, mem.reason, mem.evidence.span, mem.evidence.turn]
        out += [link.target_entity_name for link in mem.links]
        out += [text for rev in mem.history for text in (rev.title, rev.body)]
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
        lists = [len(getattr(resp, LISTS[type(resp)]))] if type(resp) in LISTS else []
        lists += [n for _, h in _holders(resp) for n in (len(h.memory.links), len(h.memory.history))]
        # With entries left out, the strings get what room is left; 0 entries is the least there is.
        entries = _largest(0, max(lists, default=0), lambda e: attempt(low, e)[2]) or 0
        chars = _largest(low, longest, lambda c: attempt(c, entries)[2]) or low
    rendered, data, _ = attempt(chars, entries)
    return rendered, data


def one(shaped: Shaped) -> str:
    """An answer holding one memory (Read, Remember, Derive, Correct, Supersede)."""
    return memory(shaped.resp.memory, shaped.cuts.get(()))


def recall(shaped: Shaped) -> str:
    """A Recall answer: a summary line, then each item's rank and scores above its memory, then how
    many items were left out to fit, if any."""
    resp = shaped.resp
    lines = [
        f"{resp.counts.returned} recalled (mode {name_of(m.RecallMode, resp.mode)}, "
        f"dense_available {str(resp.dense_available).lower()}, reranked {str(resp.reranked).lower()}); "
        "nearest is not necessarily relevant: judge each one."
    ]
    for i, item in enumerate(resp.items):
        lines.append(
            f"#{item.rank} lexical_rank {item.lexical_rank or '-'} dense_rank {item.dense_rank or '-'} "
            f"cosine {item.cosine:.3f} rerank {item.rerank_score:.3f}"
        )
        lines.append(memory(item.memory, shaped.cuts.get(("items", i))))
    if shaped.left_out:
        lines.append(
            f"# {shaped.left_out} more recalled memories left out to keep this result within its size bound; "
            "recall with a smaller top_k or a narrower question for them"
        )
    return "\n".join(lines)


def forgotten(shaped: Shaped) -> str:
    """A Forget answer: the ids forgotten, the target first."""
    more = f" and {shaped.left_out} more (left out of this result)" if shaped.left_out else ""
    return "forgot " + ", ".join(shaped.resp.forgotten_ids) + more


def capture(shaped: Shaped) -> str:
    """A Capture answer: one line per proposal (stored, or skipped and why), stored memories in full."""
    resp = shaped.resp
    lines = ["replayed: the first answer to this request_id, nothing written"] if resp.replayed else []
    for i, outcome in enumerate(resp.results):
        if outcome.HasField("memory"):
            lines.append(f"proposal {i}: stored")
            lines.append(memory(outcome.memory, shaped.cuts.get(("results", i))))
        else:
            skip = outcome.skipped
            known = f" (memory {skip.known_memory_id})" if skip.known_memory_id else ""
            lines.append(f"proposal {i}: skipped, {name_of(m.CaptureSkipReason, skip.reason)}: {skip.message}{known}")
    if shaped.left_out:
        lines.append(f"# the outcomes of {shaped.left_out} more proposals left out to keep this result short")
    return "\n".join(lines) if lines else "no proposals"


# The text of each response type; any other holds one memory (``one``).
TEXTS: dict[type, Callable[[Shaped], str]] = {
    g.RecallResponse: recall,
    g.CaptureResponse: capture,
    g.ForgetResponse: forgotten,
}
