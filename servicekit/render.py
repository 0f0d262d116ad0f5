"""Text that agents read: memories with provenance and dates before the text, stored text quoted, sizes
counted and bounded. The MCP tools (mcp_server/render.py) and the context bundle (gateway/context.py,
``recallatron context``) render with this module and nothing else.

The format (docs/agents.md, "How a memory reads"). Each memory is a header line that only this code
writes (``[id] revision N | kind, origin by member M | created T[, changed T] [| happened T] |
audience | purpose | confidence C``), then indented lines: the provenance (when it has links, a
successor or capture evidence), earlier revisions (when read), the title, the body. Every string an
author controls (title, body, entity names, the evidence span, earlier revisions' titles and bodies,
a forgetting's reason) is ``quote``d: one JSON string literal on the line our code starts, every line
break, control, format and separator character escaped visibly, so no stored text can end its line,
close its quotes or begin a line of its own, and whatever it holds it cannot read as a header, an id,
an author or a date. A memory whose text imitates our lines (``imitates``; fullwidth brackets and
other look-alikes included) says so in its provenance.

Sizes are counted by ``tokens``, a conservative, model-agnostic estimate of what a model's tokenizer
counts (no tokenizer of an answering model is at hand), and bounded by ``Bound`` (tokens and characters).
"""

from __future__ import annotations

import datetime
import functools
import json
import re
import unicodedata
from dataclasses import dataclass

from confusable_homoglyphs.utils import load as _load_confusables
from google.protobuf import timestamp_pb2
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.vocabulary import name_of

# --- Quoting --------------------------------------------------------------------------------------


def _escape(char: str) -> str:
    code = ord(char)
    if code > 0xFFFF:  # JSON spells an astral character as its UTF-16 surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def quote(text: str) -> str:
    """``text`` as one JSON string literal in which only printing characters stand for themselves:
    ``"`` and ``\\`` are escaped, line breaks read ``\\n`` and ``\\r``, and every other character
    that does not print as itself reads ``\\uXXXX``: controls, format characters (bidi overrides and
    isolates, zero-width ones, tags), surrogates, private use and unassigned code points, line and
    paragraph separators and every space but U+0020 (what ``str.isprintable`` calls not printable).
    ``json.loads`` gives ``text`` back; letters of every script stay as they are."""
    out = json.dumps(text, ensure_ascii=False)
    return out if out.isprintable() else "".join(c if c.isprintable() else _escape(c) for c in out)


def for_terminal(text: str) -> str:
    """``text`` for a person's terminal (the command line's text output): as it is when every
    character prints as itself, else ``quote``d, so that no stored line break, control sequence or
    bidi control can start a line of its own, pass for our output or rewrite the screen."""
    return text if text.isprintable() else quote(text)


# Shapes of our own lines (a bracketed id, "revision N |", "by member <id>", "| created", our cut and
# rank lines, the field labels), looked for in stored text after NFKC and case folding so that
# fullwidth brackets, digits and letters count as the characters they imitate; narrow enough that
# prose ("in revision 2, ...", "[2024]") is not taken for them.
_OURS = re.compile(
    r"\[\s*[0-9a-f]{8}-[0-9a-f-]*\s*\]|revision\s*\d+\s*\||revision\s*\d+\s+by\s+(?:member\b|\")|earlier\s+revision\s*\d+\s*\(replaced|"
    r"\|\s*revision|by\s+member\s+[0-9a-f]{8}|\|\s*(?:created|changed|happened|written|confidence)\s+\d|"
    r"\|\s*valid\s+(?:from\s+)?\d|invalidated\s*:\s*\"|"
    r"\[\s*[0-9a-f]{8}\s*\]|"
    r"forgotten\s+on\s+\d{4}-|\[\s*cut\s*:|#\s*\d+\s+lexical_rank|"
    r"(?:private\s+to|by)\s+member\b|private\s+to\s+its\s+author|superseded\s+by\s+[0-9a-f]{8}|from\s+[0-9a-f]{8}-|captured\s+from|"
    r"written\s+\d{4}-\d\d-\d\d|#\s*\d+\s+more\s+did\s+not\s+fit|#\s*memories\s+recalled|#\s*cut\s+to\s+fit|"
    r"(?:^|\s)(?:title|body)\s*(?:from\s+character\s+\d+\s*)?:\s*\"|"
    # The entity page's and lookup's lines (mcp_server/render.py) and what a memory states.
    r"\(\s*memory\s+[0-9a-f]{8}|entity\s+[0-9a-f]{8}[0-9a-f-]*\s*:\s*name|memories\s+about\s+it\s+you\s+can\s+read|"
    r"<-\s*[a-z][a-z0-9_]*\s+\"|(?:^|;)\s*states\s+\"|valid\s+from\s+\d{4}-|"
    # A member shown by name: by "Name" (member <id>) or by "Name" | ...
    r"by\s+\"[^\"\n]{0,200}\"\s*(?:\(\s*member|\|)"
)


CAUTION = "caution: its quoted text imitates Recallatron's own lines (an id, author, date or revision)"


@functools.cache
def _look_alikes() -> dict[int, str]:
    """Each character Unicode's confusables data (TR39, through confusable_homoglyphs) lists as
    looking like printable ASCII, directly or through an NFKC form (``│`` looks like ``｜``, which
    NFKC reads as ``|``), mapped to that ASCII; curly and doubled quotes read as ``"``."""
    table: dict[int, str] = {}
    for char, alikes in _load_confusables("confusables.json").items():
        if len(char) != 1 or char.isascii():
            continue
        for alike in alikes:
            ascii_form = unicodedata.normalize("NFKC", alike["c"])
            if ascii_form.isascii() and ascii_form.isprintable():
                table[ord(char)] = '"' if ascii_form in ("''", "``") else ascii_form
                break
    return table


def imitates(text: str) -> bool:
    """Whether ``text`` holds something shaped like a line of ours (a header, an id in brackets, an
    author, a revision, a cut note, a field label), read through NFKC with invisible spaces and
    line breaks as a space and other invisible characters dropped, and with look-alikes from other
    scripts (Cyrillic letters, box-drawing bars, curly quotes) read as the ASCII they imitate: only to
    warn the reader, the text itself is shown unchanged."""
    folded = unicodedata.normalize("NFKC", text)
    if not folded.isprintable():
        folded = "".join(c if c.isprintable() else " " if c.isspace() else "" for c in folded)
    if not folded.isascii():
        folded = unicodedata.normalize("NFKC", folded.translate(_look_alikes()))
    return _OURS.search(folded.casefold()) is not None


# --- Counting and bounding ------------------------------------------------------------------------

_LETTERS = re.compile(r"[A-Za-z]{1,3}")
_SPACES = re.compile(r"\s{2,4}|[^\S ]")
# ASCII characters that are not letters or whitespace: digits, punctuation, symbols and controls.
_SINGLES = "".join(chr(c) for c in range(128) if not chr(c).isalpha() and not chr(c).isspace())
_KEEP_OTHERS = str.maketrans("", "", _SINGLES)


def tokens(text: str) -> int:
    """A conservative estimate of the tokens a language model's tokenizer makes of ``text``.

    Every ASCII letter run counts one token per 3 letters (English averages about 4 letters a token
    in byte-pair tokenizers; a run with no known pieces, such as a 50,000-letter word, still counts
    as its length over 3, where a word-piece tokenizer makes it one unknown token); each digit,
    punctuation mark, symbol or control one (some tokenizers split every digit; ids, times and
    punctuation-heavy text are where a bytes-over-3 rule undercounts); a whitespace run one per 4
    characters (a line break at least one, a single space between words none, as it joins the next
    word's token); each non-ASCII character its UTF-8 bytes less one (so 1 for Latin accents and
    Cyrillic, 2 for most CJK, 3 for emoji), since byte-level tokenizers never use more tokens than
    bytes and rarely more than one a character for common scripts. Meant to count at least what
    they count; not measured against one (none can be fetched here), and random letters may make
    more tokens than this counts: the bounds in force leave room for that (docs/agents.md)."""
    letters = _LETTERS.subn("", text)[1]
    spaces = _SPACES.subn("", text)[1]
    singles = len(text) - len(text.translate(_KEEP_OTHERS))
    wide = len(text.encode("utf-8", "surrogatepass")) - len(text)
    return letters + spaces + singles + wide


# Characters a token of a budget may take: about the most ``tokens`` lets one token stand for ("abc "
# is one token, four characters), so a budget in tokens is also a bound in characters.
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Bound:
    """At most ``tokens`` tokens (``tokens``' estimate) and ``chars`` characters."""

    tokens: int
    chars: int

    def holds(self, text: str) -> bool:
        return len(text) <= self.chars and tokens(text) <= self.tokens


# --- Memories -------------------------------------------------------------------------------------


def when(ts: timestamp_pb2.Timestamp) -> str:
    """A timestamp as ISO 8601 UTC to the second, e.g. ``2026-12-01T04:39:41+00:00``."""
    return ts.ToDatetime(tzinfo=datetime.UTC).isoformat(timespec="seconds")


# What a cut says: ``cuts`` map a field path of the memory ("body", "title", "history[0].body",
# "links[2].target_entity_name", "evidence.span", "history", "links", ...) to what was left out of it:
# {"chars_left_out": N} for text (with "body_offset": K when the body shown starts at character K),
# {"items_left_out": N} for a list. ``shorten`` makes them; the structured content carries them as
# the memory's "cut" field, and ``memory`` writes each after the field it concerns.
Cuts = dict[str, dict[str, int]]


def shorten(mem: m.Memory, chars: int | None, entries: int | None, body_offset: int = 0) -> tuple[m.Memory, Cuts]:
    """A copy of ``mem`` with each stored string at most ``chars`` characters (None: whole) and each
    list (links, earlier revisions) at most ``entries`` long (None: whole), the body shown from
    character ``body_offset``; and the cuts made."""
    out = m.Memory()
    out.CopyFrom(mem)
    cuts: Cuts = {}

    def cut_text(holder, name: str, path: str, offset: int = 0) -> None:
        text = getattr(holder, name)
        offset = min(max(offset, 0), len(text))
        end = len(text) if chars is None else min(len(text), offset + chars)
        if offset or end < len(text):
            setattr(holder, name, text[offset:end])
            cuts[path] = {"chars_left_out": len(text) - end, **({"body_offset": offset} if offset else {})}

    def cut_list(field, path: str) -> None:
        if entries is not None and len(field) > entries:
            cuts[path] = {"items_left_out": len(field) - entries}
            del field[entries:]

    cut_list(out.links, "links")
    cut_list(out.history, "history")
    cut_list(out.relations, "relations")
    cut_list(out.attributes, "attributes")
    for name in ("title", "invalidation_reason", "reason"):
        cut_text(out, name, name)
    cut_text(out, "body", "body", body_offset)
    cut_text(out.evidence, "span", "evidence.span")
    cut_text(out.evidence, "turn", "evidence.turn")
    for i, link in enumerate(out.links):
        cut_text(link, "target_entity_name", f"links[{i}].target_entity_name")
    for i, rev in enumerate(out.history):
        cut_text(rev, "title", f"history[{i}].title")
        cut_text(rev, "body", f"history[{i}].body")
    for i, rel in enumerate(out.relations):
        cut_text(rel, "subject_name", f"relations[{i}].subject_name")
        cut_text(rel, "object_name", f"relations[{i}].object_name")
    for i, att in enumerate(out.attributes):
        cut_text(att, "subject_name", f"attributes[{i}].subject_name")
        cut_text(att, "value", f"attributes[{i}].value")
    return out, cuts


def _field(mem: m.Memory, cuts: Cuts, path: str, value: str) -> str:
    """A stored string quoted, followed by what was cut of it, if anything."""
    cut = cuts.get(path)
    if not cut or not cut["chars_left_out"]:
        return quote(value)
    more = f"[cut: {cut['chars_left_out']} more characters"
    if path == "body":
        rest = cut.get("body_offset", 0) + len(value)
        more += f"; recallatron_read id {mem.id} body_offset {rest} for the rest"
    return f"{quote(value)} {more}]"


def member(member_id: str, name: str, short: bool = False) -> str:
    """A member as our lines name it: ``"Name" (member <id>)``, or ``member <id>`` when it has no
    display name; with ``short``, ``"Name"`` alone or ``member <short id>`` (the per-turn block and
    the context bundle, paid for on every turn). The name is quoted: it is text an operator typed,
    and must not pass for our structure."""
    if not name:
        return f"member {short_id(member_id) if short else member_id}"
    return quote(name) if short else f"{quote(name)} (member {member_id})"


def person(member_id: str, name: str) -> str:
    """A member for a person's terminal (the command line): ``Name (id)``, the name as
    ``for_terminal`` shows stored text, or ``member <id>`` when it has no display name."""
    return f"{for_terminal(name)} ({member_id})" if name else f"member {member_id}"


def _revision_by(mem: m.Memory, short: bool) -> str:
    """`` by <member>`` after "revision N" when someone other than the author made the current
    revision, else "". (Not after "changed": that time also moves when the memory is superseded or
    kept, which nobody revised.)"""
    if mem.revision == 1 or not mem.revised_by or mem.revised_by == mem.created_by:
        return ""
    return f" by {member(mem.revised_by, mem.revised_by_name, short)}"


def memory(mem: m.Memory, cuts: Cuts | None = None) -> str:
    """One memory: header line, provenance line (if any), earlier revisions (if read), title and body;
    ``cuts`` (from ``shorten``) say after each field what was left out of it."""
    cuts = cuts or {}
    if mem.forgotten:
        reason = mem.invalidation_reason
        why = f"reason {_field(mem, cuts, 'invalidation_reason', reason)}" if reason else "no reason kept"
        return f"[{mem.id}] forgotten on {when(mem.updated_at)}: {why}"
    audience = "workspace" if mem.audience == m.AUDIENCE_WORKSPACE else f"private to member {mem.audience_member_id}"
    head = (
        f"[{mem.id}] revision {mem.revision}{_revision_by(mem, short=False)} | {name_of(m.Kind, mem.kind)}, "
        f"{name_of(m.Origin, mem.origin)} "
        f"by {member(mem.created_by, mem.created_by_name)} | created {when(mem.created_at)}"
    )
    if mem.updated_at != mem.created_at:
        head += f", changed {when(mem.updated_at)}"
    if mem.HasField("occurred_at"):
        head += f" | happened {when(mem.occurred_at)}"
    head += validity(mem, when)
    head += f" | {audience} | {name_of(m.Purpose, mem.purpose)} | confidence {mem.confidence:.2f}"
    provenance = _provenance(mem, cuts, "derived from ", "captured from the turn's words ", entity_ids=True)
    lines = [head]
    if provenance:
        lines.append("  " + "; ".join(provenance))
    for i, rev in enumerate(mem.history):
        title = f"title {_field(mem, cuts, f'history[{i}].title', rev.title)} " if rev.title else ""
        body = _field(mem, cuts, f"history[{i}].body", rev.body)
        made = ""
        if rev.revised_by and rev.revised_by != mem.created_by:  # the author's own revisions go unsaid
            made = f", made by {member(rev.revised_by, rev.revised_by_name)}"
        lines.append(f"  earlier revision {rev.revision} (replaced {when(rev.replaced_at)}{made}): {title}body {body}")
    if "history" in cuts:
        lines.append(f"  {cuts['history']['items_left_out']} earlier revisions more left out")
    return "\n".join(lines + _text(mem, cuts))


def validity(mem: m.Memory, shown) -> str:
    """A header's validity part, times written by ``shown``: `` | valid from T`` when the claim's
    start is not when it was said (``occurred_at``, else ``created_at``: the default, left out),
    `` | valid T to T`` once it ended (superseded or invalidated), else nothing."""
    said = mem.occurred_at if mem.HasField("occurred_at") else mem.created_at
    if mem.HasField("valid_until"):
        return f" | valid {shown(mem.valid_from)} to {shown(mem.valid_until)}"
    if mem.HasField("valid_from") and mem.valid_from != said:
        return f" | valid from {shown(mem.valid_from)}"
    return ""


def _provenance(mem: m.Memory, cuts: Cuts, derived: str, captured: str, entity_ids: bool) -> list[str]:
    """The parts of a memory's provenance line: what it was derived from, what it is about, its
    successor, the turn's words it was captured from, and the caution when any text shown of it
    (``history`` too) ``imitates`` our lines; ``derived`` and ``captured`` lead their parts."""
    parts = [f"{derived}{link.target_memory_id}" for link in mem.links if link.target_memory_id]
    for i, link in enumerate(mem.links):
        if link.target_entity_id:
            name = _field(mem, cuts, f"links[{i}].target_entity_name", link.target_entity_name)
            parts.append(f"about {name} ({link.target_entity_id})" if entity_ids else f"about {name}")
    if "links" in cuts:
        parts.append(f"{cuts['links']['items_left_out']} more links left out")
    parts += statements(mem, cuts)
    if mem.superseded_by_id:
        parts.append(f"superseded by {mem.superseded_by_id}")
    if mem.invalidated:
        parts.append(f"invalidated: {_field(mem, cuts, 'invalidation_reason', mem.invalidation_reason)}")
    if mem.evidence.span:
        parts.append(f"{captured}{_field(mem, cuts, 'evidence.span', mem.evidence.span)}")
    stored = [mem.title, mem.body, mem.evidence.span, *(link.target_entity_name for link in mem.links)]
    stored += [text for rel in mem.relations for text in (rel.subject_name, rel.object_name)]
    stored += [text for att in mem.attributes for text in (att.subject_name, att.value)]
    stored += [mem.invalidation_reason] if mem.invalidated else []
    stored += [text for rev in mem.history for text in (rev.title, rev.body)]
    # The names beside member ids are text an operator typed, quoted in the header: checked alike.
    stored += [mem.created_by_name, mem.revised_by_name, *(rev.revised_by_name for rev in mem.history)]
    if any(imitates(text) for text in stored if text):
        parts.append(CAUTION)
    return parts


def statements(mem: m.Memory, cuts: Cuts) -> list[str]:
    """What a memory states, one part each: ``states "S" works_at "O"`` and ``states "S" grade =
    "9"``; names and values quoted (they are stored text), the predicate and key as they are (the
    store admits only snake_case)."""
    parts = []
    for i, rel in enumerate(mem.relations):
        subject = _field(mem, cuts, f"relations[{i}].subject_name", rel.subject_name)
        obj = _field(mem, cuts, f"relations[{i}].object_name", rel.object_name)
        parts.append(f"states {subject} {rel.predicate} {obj}")
    for i, att in enumerate(mem.attributes):
        subject = _field(mem, cuts, f"attributes[{i}].subject_name", att.subject_name)
        parts.append(f"states {subject} {att.key} = {_field(mem, cuts, f'attributes[{i}].value', att.value)}")
    for name in ("relations", "attributes"):
        if name in cuts:
            parts.append(f"{cuts[name]['items_left_out']} more {name} left out")
    return parts


def _text(mem: m.Memory, cuts: Cuts) -> list[str]:
    """The title line (when there is a title) and the body line, each quoted."""
    lines = [f"  title: {_field(mem, cuts, 'title', mem.title)}"] if mem.title else []
    offset = cuts.get("body", {}).get("body_offset", 0)
    label = f"body from character {offset}" if offset else "body"
    return [*lines, f"  {label}: {_field(mem, cuts, 'body', mem.body)}"]


# Leading hex digits of a memory's and a member's id that ``brief``'s header shows: whole ids took
# LoCoMo questions with a relevant memory in the default block from 55% to 51% (docs/agents.md, "The
# relevance gate"). Ids are random (UUID 4), so eight digits tell a block's memories and a
# workspace's members apart; the ids a reader may act on (what a memory was derived from, its
# successor) stay whole, and PromptContext's items carry every id whole.
BRIEF_ID_DIGITS = 8


def short_id(value: str) -> str:
    """An id as ``brief``'s header shows it: its first ``BRIEF_ID_DIGITS`` hex digits."""
    return value[:BRIEF_ID_DIGITS]


def day_and_minute(ts: timestamp_pb2.Timestamp) -> str:
    """A timestamp as UTC to the minute, e.g. ``2023-05-08 13:56``."""
    return ts.ToDatetime(tzinfo=datetime.UTC).strftime("%Y-%m-%d %H:%M")


def minute_utc(ts: timestamp_pb2.Timestamp) -> str:
    """A timestamp as UTC to the minute, saying so, e.g. ``2023-05-08 13:56 UTC``."""
    return day_and_minute(ts) + " UTC"


def day(ts: timestamp_pb2.Timestamp) -> str:
    """A timestamp's UTC day, e.g. ``2026-12-02``."""
    return ts.ToDatetime(tzinfo=datetime.UTC).strftime("%Y-%m-%d")


def brief(mem: m.Memory) -> str:
    """One memory as the per-turn block shows it (gateway/context.py ``prompt_block``): ``memory``'s
    order and quoting in fewer tokens, since each memory there is paid for on every turn. The header
    (``[id] kind by "Name" | happened YYYY-MM-DD HH:MM | written YYYY-MM-DD``, times UTC, a member
    by display name, else ``member M``, ids shortened by ``short_id``) leaves
    out what the block's request fixes (the purpose) and what is the default: revision 1, origin
    told, confidence 1.00, the workspace audience; each appears when it is not (``revision N``,
    ``kind, origin``, ``confidence C``, ``private to its author`` or ``to member M``), a change as
    ``, changed DAY``; ``revision N by "Name"`` when someone other than the author made it.
    Then the provenance line (``from`` the memories it was derived from, ``about`` its entities,
    ``superseded by``, ``captured from`` the turn's words, the caution), the title and the body,
    quoted as ``memory`` quotes them. Earlier revisions are not shown (recall does not return them);
    a forgotten memory reads as ``memory`` writes it."""
    if mem.forgotten:
        return memory(mem)
    kind = name_of(m.Kind, mem.kind)
    if mem.origin != m.ORIGIN_TOLD:
        kind += f", {name_of(m.Origin, mem.origin)}"
    head = f"[{short_id(mem.id)}]"
    if mem.revision != 1:
        head += f" revision {mem.revision}{_revision_by(mem, short=True)} |"
    head += f" {kind} by {member(mem.created_by, mem.created_by_name, short=True)}"
    if mem.HasField("occurred_at"):
        head += f" | happened {day_and_minute(mem.occurred_at)}"
    head += f" | written {day(mem.created_at)}"
    if day(mem.updated_at) != day(mem.created_at):
        head += f", changed {day(mem.updated_at)}"
    head += validity(mem, day)
    if mem.audience != m.AUDIENCE_WORKSPACE:
        mine = mem.audience_member_id == mem.created_by
        head += f" | private to {'its author' if mine else f'member {short_id(mem.audience_member_id)}'}"
    if round(mem.confidence, 2) != 1:
        head += f" | confidence {mem.confidence:.2f}"
    provenance = _provenance(mem, {}, "from ", "captured from ", entity_ids=False)
    lines = [head, "  " + "; ".join(provenance)] if provenance else [head]
    return "\n".join(lines + _text(mem, {}))
