"""The export file (docs/portability.md): JSON Lines, schema ``recallatron.export``, version 1.

Line 1 is the header (``record: "header"``: schema, schema_version, exported_at, and how many memory
and history-turn lines follow, so a file cut short is told apart from a whole one); every other line
is one ``memory`` or ``history_turn`` record. This module turns messages into records (export) and
reads a file back with every check an import needs before it writes anything (``read_export``):
each problem is an ``ExportFileError`` naming the file, the line and what is wrong.
"""

from __future__ import annotations

import datetime
import heapq
import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import timestamp_pb2
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from cli import user_files
from cli.json_text import last_line_cut_short, lone_surrogate, may_hold_surrogate
from servicekit import vocabulary
from servicekit.checks import check_history_turn, check_imported_memory, check_mentions, check_not_ahead
from servicekit.errors import ServiceError

SCHEMA = "recallatron.export"
SCHEMA_VERSION = 1
KINDS = vocabulary.values(m.Kind)
PURPOSES = vocabulary.values(m.Purpose)
ORIGINS = vocabulary.values(m.Origin)
AUDIENCES = vocabulary.values(m.Audience)


class ExportFileError(Exception):
    """A file that is not a valid export: the message names the file, the line (when one is at
    fault) and the problem."""


# Export: messages -> records.


def iso(ts: timestamp_pb2.Timestamp) -> str:
    """A Timestamp as RFC 3339 in UTC with microseconds, e.g. ``2026-03-02T08:00:00.000000Z``."""
    return _rfc3339(ts.ToDatetime(tzinfo=datetime.UTC))


def _rfc3339(when: datetime.datetime) -> str:
    # isoformat, not strftime("%Y"): glibc's %Y does not pad years below 1000 to four digits, and the
    # import refused the file it was given ("1-01-01T...").
    return when.astimezone(datetime.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def header(exported_at: datetime.datetime, memories: int, history_turns: int, include_history: bool) -> dict:
    """The first line: schema and version, when, and how many records of each kind follow."""
    return {
        "record": "header",
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "exported_at": _rfc3339(exported_at),
        "memories": memories,
        "history_turns": history_turns,
        "include_history": include_history,
    }


def memory_record(mem: m.Memory, superseded: bool, supersedes: str | None) -> dict:
    """One memory as exported (docs/portability.md, "memory"): ``superseded`` says whether it is
    superseded (its successor may be one the exporter cannot read, so ``superseded_by`` can be null),
    ``supersedes`` is the id of the exported memory it replaced."""
    return {
        "record": "memory",
        "id": mem.id,
        "revision": mem.revision,
        "kind": vocabulary.name_of(m.Kind, mem.kind),
        "title": mem.title,
        "body": mem.body,
        "audience": vocabulary.name_of(m.Audience, mem.audience),
        "audience_member_id": mem.audience_member_id or None,
        "purpose": vocabulary.name_of(m.Purpose, mem.purpose),
        "origin": vocabulary.name_of(m.Origin, mem.origin),
        "confidence": mem.confidence,
        "reason": mem.reason,
        "author": mem.created_by,
        "created_at": iso(mem.created_at),
        "updated_at": iso(mem.updated_at),
        "occurred_at": iso(mem.occurred_at) if mem.HasField("occurred_at") else None,
        "superseded": superseded and not mem.invalidated,
        "superseded_by": mem.superseded_by_id or None,
        "supersedes": supersedes,
        "derived_from": [x.target_memory_id for x in mem.links if x.type == m.LINK_TYPE_DERIVED_FROM],
        "entities": [
            {"id": x.target_entity_id, "name": x.target_entity_name} for x in mem.links if x.type == m.LINK_TYPE_ABOUT
        ],
        "revisions": [
            {
                "revision": r.revision,
                "title": r.title,
                "body": r.body,
                "confidence": r.confidence,
                "replaced_at": iso(r.replaced_at),
                "valid_from": iso(r.valid_from) if r.HasField("valid_from") else None,
            }
            for r in sorted(mem.history, key=lambda r: r.revision)
        ],
        "valid_from": iso(mem.valid_from) if mem.HasField("valid_from") else None,
        "valid_until": iso(mem.valid_until) if mem.HasField("valid_until") else None,
        "invalidation_reason": mem.invalidation_reason if mem.invalidated else None,
        "relations": [
            {"subject": r.subject_id, "predicate": r.predicate, "object": r.object_id} for r in mem.relations
        ],
        "attributes": [{"subject": a.subject_id, "key": a.key, "value": a.value} for a in mem.attributes],
    }


def turn_record(entry: g.HistoryEntry) -> dict:
    """One history turn of the exporter's own (docs/portability.md, "history_turn")."""
    turn = entry.turn
    return {
        "record": "history_turn",
        "id": entry.turn_id,
        "chat_id": turn.chat_id,
        "role": turn.role,
        "text": turn.text,
        "occurred_at": iso(turn.occurred_at),
        "session_id": turn.session_id,
        "session_computed": entry.session_computed,
        "request_id": turn.request_id,
        "appended_at": iso(entry.appended_at),
    }


def write_export(path: Path, head: dict, records: Iterable[dict]) -> None:
    """Writes the header and records as JSON Lines to ``path``, whole or not at all, readable by its
    owner alone (``user_files.write_private``: OSError when it cannot)."""
    lines = (json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n" for rec in (head, *records))
    user_files.write_private(path, lines)


# Import: file -> checked records.


@dataclass
class Export:
    """A checked export file: its header, memory records (by id, in file order) and history turns,
    and the line each record came from."""

    path: Path
    header: dict
    memories: dict[str, dict]
    turns: list[dict]
    lines: dict[str, int]


def _lines(path: Path) -> Iterable[tuple[int, dict]]:
    """(line number, object) of every line; ExportFileError for a missing or unreadable file, a line
    that is not a JSON object, and a last line cut short."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ExportFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ExportFileError(f"{path}: is a folder, not a file; --file names an export file") from None
    except OSError as exc:
        raise ExportFileError(f"{path}: cannot read it ({exc.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExportFileError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise ExportFileError(f"{path}: empty file (an export starts with a header line)")
    rows = text.split("\n")
    last = len(rows) if rows[-1] else len(rows) - 1  # the number of the last line holding text
    for n, line in enumerate(rows[:last], start=1):
        if not line.strip():
            raise ExportFileError(f"{path}:{n}: empty line (an export has one record on every line)")
        try:
            obj = json.loads(line)
        except RecursionError:  # nesting deeper than the parser's recursion limit
            raise ExportFileError(f"{path}:{n}: JSON nested too deeply to be an export record") from None
        except json.JSONDecodeError as exc:
            if n == last and last_line_cut_short(data) is not None:
                raise ExportFileError(
                    f"{path}:{n}: the last line is cut short (not JSON and no newline at its end): the file is "
                    "truncated; export it again"
                ) from None
            raise ExportFileError(f"{path}:{n}: not JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise ExportFileError(f"{path}:{n}: not a JSON object")
        try:
            surrogate = may_hold_surrogate(line) and lone_surrogate(obj)
        except RecursionError:
            raise ExportFileError(f"{path}:{n}: JSON nested too deeply to be an export record") from None
        if surrogate:
            raise ExportFileError(f"{path}:{n}: a string escapes a lone surrogate (\\ud800..\\udfff): not Unicode text")
        yield n, obj


def _time(value, where: str) -> datetime.datetime:
    """A time string as an aware UTC datetime; ExportFileError for anything else (no offset, an
    instant outside years 1..9999 in UTC, or one further ahead of the clock than the store accepts:
    ``servicekit.checks.check_not_ahead``, the store's own check, with ``where`` as the field)."""
    if not isinstance(value, str):
        raise ExportFileError(f"{where}: must be an RFC 3339 time string")
    try:
        when = datetime.datetime.fromisoformat(value)
        if when.tzinfo is None:
            raise ExportFileError(f"{where}: {value!r} has no UTC offset")
        when = when.astimezone(datetime.UTC)
    except (ValueError, OverflowError):
        raise ExportFileError(f"{where}: {value!r} is not an RFC 3339 time between years 1 and 9999") from None
    try:
        return check_not_ahead(when, where)
    except ServiceError as exc:
        raise ExportFileError(exc.message) from None


def timestamp(value: str) -> timestamp_pb2.Timestamp:
    """A time string of a checked record as a Timestamp."""
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(_time(value, value))
    return out


def imported_memory(rec: dict, authors: dict[str, str]) -> m.ImportedMemory:
    """The ImportedMemory of a memory record (fields and types checked), its author mapped through
    ``authors`` and its links as import keys (docs/portability.md, "recallatron import")."""
    item = m.ImportedMemory(
        import_key=f"export:{rec['id']}",
        author_member_id=authors[rec["author"]],
        kind=KINDS[rec["kind"]],
        title=rec["title"],
        body=rec["body"],
        audience=AUDIENCES[rec["audience"]],
        purpose=PURPOSES[rec["purpose"]],
        origin=ORIGINS[rec["origin"]],
        confidence=float(rec["confidence"]),
        reason=rec["reason"],
        created_at=timestamp(rec["created_at"]),
        updated_at=timestamp(rec["updated_at"]),
        entity_keys=[f"export:entity:{e['id']}" for e in rec["entities"]],
        revisions=[
            m.ImportedRevision(
                title=r["title"],
                body=r["body"],
                confidence=float(r["confidence"]),
                replaced_at=timestamp(r["replaced_at"]),
                # Optional: files exported before revisions carried their validity have none.
                valid_from=timestamp(r["valid_from"]) if r.get("valid_from") is not None else None,
            )
            for r in rec["revisions"]
        ],
        derived_from_keys=[f"export:{x}" for x in rec["derived_from"]],
        supersedes_key=f"export:{rec['supersedes']}" if rec["supersedes"] else "",
        # Optional: files exported before memories stated relations and attributes have none.
        relations=[
            m.ImportedRelation(
                subject_key=f"export:entity:{r['subject']}",
                predicate=r["predicate"],
                object_key=f"export:entity:{r['object']}",
            )
            for r in rec.get("relations", [])
        ],
        attributes=[
            m.ImportedAttribute(subject_key=f"export:entity:{a['subject']}", key=a["key"], value=a["value"])
            for a in rec.get("attributes", [])
        ],
    )
    if rec["occurred_at"] is not None:
        item.occurred_at.CopyFrom(timestamp(rec["occurred_at"]))
    if rec.get("valid_from") is not None:
        item.valid_from.CopyFrom(timestamp(rec["valid_from"]))
    if rec.get("invalidation_reason") is not None:
        # Only an Invalidate's end travels: a superseded memory's end is its successor's start.
        if rec.get("valid_until") is not None:
            item.valid_until.CopyFrom(timestamp(rec["valid_until"]))
        item.invalidation_reason = rec["invalidation_reason"]
    return item


def history_turn(rec: dict) -> g.HistoryTurn:
    """The HistoryTurn that imports a history_turn record: request id ``export:turn:<old id>`` (so a
    re-run stores it once), and the session only when it was given (a computed one is computed anew
    from the same runs)."""
    return g.HistoryTurn(
        request_id=f"export:turn:{rec['id']}",
        chat_id=rec["chat_id"],
        role=rec["role"],
        text=rec["text"],
        occurred_at=timestamp(rec["occurred_at"]),
        session_id="" if rec["session_computed"] else rec["session_id"],
    )


def _uuid(value, where: str) -> str:
    try:
        return str(uuid.UUID(value))
    except (ValueError, TypeError, AttributeError):
        raise ExportFileError(f"{where}: {value!r} is not a UUID") from None


def _fields(rec: dict, where: str, spec: dict[str, type | tuple]) -> None:
    """ExportFileError naming the first field missing or of the wrong JSON type."""
    for name, kind in spec.items():
        if name not in rec:
            raise ExportFileError(f"{where}: missing field {name!r}")
        value = rec[name]
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise ExportFileError(f"{where}: field {name!r} has the wrong type (bool)")
        if not isinstance(value, kind):
            raise ExportFileError(f"{where}: field {name!r} has the wrong type ({type(value).__name__})")


def _enum(rec: dict, name: str, choices, where: str) -> None:
    if rec[name] not in choices:
        raise ExportFileError(f"{where}: {name} {rec[name]!r} is not one of {', '.join(choices)}")


MEMORY_FIELDS = {
    "id": str,
    "revision": int,
    "kind": str,
    "title": str,
    "body": str,
    "audience": str,
    "audience_member_id": (str, type(None)),
    "purpose": str,
    "origin": str,
    "confidence": (int, float),
    "reason": str,
    "author": str,
    "created_at": str,
    "updated_at": str,
    "occurred_at": (str, type(None)),
    "superseded": bool,
    "superseded_by": (str, type(None)),
    "supersedes": (str, type(None)),
    "derived_from": list,
    "entities": list,
    "revisions": list,
}
# Fields added after version 1 was first written (validity; relations and attributes): optional, so
# older files read.
OPTIONAL_MEMORY_FIELDS = {
    "valid_from": (str, type(None)),
    "valid_until": (str, type(None)),
    "invalidation_reason": (str, type(None)),
    "relations": list,
    "attributes": list,
}
# The fields of each entry of ``relations`` and ``attributes``: entities by their ids in ``entities``.
STATEMENT_FIELDS = {
    "relations": {"subject": str, "predicate": str, "object": str},
    "attributes": {"subject": str, "key": str, "value": str},
}
TURN_FIELDS = {
    "id": str,
    "chat_id": str,
    "role": str,
    "text": str,
    "occurred_at": str,
    "session_id": str,
    "session_computed": bool,
    "request_id": str,
    "appended_at": str,
}


def _check_memory(rec: dict, where: str) -> None:
    _fields(rec, where, MEMORY_FIELDS)
    rec["id"] = _uuid(rec["id"], f"{where}: id")
    rec["author"] = _uuid(rec["author"], f"{where}: author")
    for name, choices in (("kind", KINDS), ("purpose", PURPOSES), ("origin", ORIGINS), ("audience", AUDIENCES)):
        _enum(rec, name, choices, where)
    if rec["audience"] == "member" and rec["audience_member_id"] != rec["author"]:
        raise ExportFileError(f"{where}: a member-only memory's audience_member_id must be its author")
    if rec["audience"] == "workspace" and rec["audience_member_id"] is not None:
        raise ExportFileError(f"{where}: a workspace memory has no audience_member_id")
    _fields(rec, where, {name: kind for name, kind in OPTIONAL_MEMORY_FIELDS.items() if name in rec})
    for name in ("created_at", "updated_at", "occurred_at", "valid_from", "valid_until"):
        if rec.get(name) is not None:
            _time(rec[name], f"{where}: {name}")
    for name in ("superseded_by", "supersedes"):
        if rec[name] is not None:
            rec[name] = _uuid(rec[name], f"{where}: {name}")
    if rec["superseded_by"] is not None and not rec["superseded"]:
        raise ExportFileError(f"{where}: superseded_by is set but superseded is false")
    rec["derived_from"] = [_uuid(x, f"{where}: derived_from") for x in rec["derived_from"]]
    for i, ent in enumerate(rec["entities"]):
        if not isinstance(ent, dict):
            raise ExportFileError(f"{where}: entities[{i}] is not an object")
        _fields(ent, f"{where}: entities[{i}]", {"id": str, "name": str})
        ent["id"] = _uuid(ent["id"], f"{where}: entities[{i}].id")
        _store_check(lambda ent=ent: check_mentions([m.EntityMention(name=ent["name"])]), f"{where}: entities[{i}]")
    for name, fields in STATEMENT_FIELDS.items():
        for i, entry in enumerate(rec.get(name, [])):
            at = f"{where}: {name}[{i}]"
            if not isinstance(entry, dict):
                raise ExportFileError(f"{at} is not an object")
            _fields(entry, at, fields)
            for end in ("subject", "object"):
                if end in entry:
                    entry[end] = _uuid(entry[end], f"{at}.{end}")
    for i, rev in enumerate(rec["revisions"], start=1):
        at = f"{where}: revisions[{i - 1}]"
        if not isinstance(rev, dict):
            raise ExportFileError(f"{at} is not an object")
        _fields(rev, at, {"revision": int, "title": str, "body": str, "confidence": (int, float), "replaced_at": str})
        if rev["revision"] != i:
            raise ExportFileError(f"{at}: revision {rev['revision']}, expected {i} (oldest first, from 1)")
        _time(rev["replaced_at"], f"{at}: replaced_at")
        if rev.get("valid_from") is not None:
            _time(rev["valid_from"], f"{at}: valid_from")
    if rec["revision"] != len(rec["revisions"]) + 1:
        raise ExportFileError(
            f"{where}: revision {rec['revision']} but {len(rec['revisions'])} earlier revisions "
            "(it must be their count + 1)"
        )
    # Everything ImportMemories will check of the item, by its own code: text limits, confidences,
    # reason, times, how many mentions, revisions and sources.
    _store_check(lambda: check_imported_memory(imported_memory(rec, {rec["author"]: rec["author"]})), where)


def _store_check(check, where: str) -> None:
    """Runs a store validation; its ServiceError becomes an ExportFileError naming ``where``."""
    try:
        check()
    except ServiceError as exc:
        raise ExportFileError(f"{where}: {exc.message}") from None


def _check_turn(rec: dict, where: str) -> None:
    _fields(rec, where, TURN_FIELDS)
    rec["id"] = _uuid(rec["id"], f"{where}: id")
    _time(rec["occurred_at"], f"{where}: occurred_at")
    _time(rec["appended_at"], f"{where}: appended_at")
    # What ImportHistory (AppendHistory) will check of the turn, by its own code.
    _store_check(lambda: check_history_turn(history_turn(rec), datetime.datetime.now(datetime.UTC)), where)


def _check_header(head: dict, path: Path) -> None:
    where = f"{path}:1"
    if head.get("record") != "header" or head.get("schema") != SCHEMA:
        raise ExportFileError(f"{where}: not a Recallatron export (the first line must be a {SCHEMA} header)")
    version = head.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ExportFileError(
            f"{where}: schema_version {version!r} is not supported; this recallatron reads version {SCHEMA_VERSION}"
        )
    _fields(head, where, {"exported_at": str, "memories": int, "history_turns": int, "include_history": bool})
    _time(head["exported_at"], f"{where}: exported_at")


def read_export(path: Path) -> Export:
    """Reads and checks a whole export file before anything is written (docs/portability.md):
    the header (schema and version), every record's fields, types, enum names, times, UUIDs and
    content limits (the store's own checks), ids not repeated, one name per entity id, every
    derived_from, supersedes and superseded_by naming a memory of the file, the two supersede
    directions agreeing, and the counts the header promises (a file cut at a line boundary is caught
    there). ExportFileError otherwise."""
    rows = iter(_lines(path))
    _, head = next(rows)
    _check_header(head, path)
    memories: dict[str, dict] = {}
    turns: list[dict] = []
    lines: dict[str, int] = {}
    entity_names: dict[str, tuple[str, int]] = {}  # entity id -> (its name, the line that first named it)
    for n, rec in rows:
        where = f"{path}:{n}"
        kind = rec.get("record")
        if kind == "memory":
            _check_memory(rec, where)
            if rec["id"] in memories:
                raise ExportFileError(f"{where}: memory {rec['id']} also on line {lines[rec['id']]}")
            for ent in rec["entities"]:
                # One id is one entity: a second name would be dropped without a word on import.
                name, first = entity_names.setdefault(ent["id"], (ent["name"], n))
                if name != ent["name"]:
                    raise ExportFileError(
                        f"{where}: entity {ent['id']} is named {ent['name']!r} here and {name!r} on line {first}"
                    )
            memories[rec["id"]] = rec
        elif kind == "history_turn":
            _check_turn(rec, where)
            if rec["id"] in lines:
                raise ExportFileError(f"{where}: history turn {rec['id']} also on line {lines[rec['id']]}")
            turns.append(rec)
        else:
            raise ExportFileError(f"{where}: unknown record {kind!r} (memory or history_turn)")
        lines[rec["id"]] = n
    if (len(memories), len(turns)) != (head["memories"], head["history_turns"]):
        raise ExportFileError(
            f"{path}: the header promises {head['memories']} memories and {head['history_turns']} history turns, "
            f"the file holds {len(memories)} and {len(turns)}: it is truncated or was edited"
        )
    _check_links(path, memories, lines)
    return Export(path, head, memories, turns, lines)


def _check_links(path: Path, memories: dict[str, dict], lines: dict[str, int]) -> None:
    """Every link names a memory of the file, supersede links agree in both directions, and a
    successor keeps its predecessor's purpose and never widens its audience (as Supersede)."""
    for mid, rec in memories.items():
        where = f"{path}:{lines[mid]}"
        for name in ("derived_from", "supersedes", "superseded_by"):
            targets = rec[name] if name == "derived_from" else [rec[name]] if rec[name] else []
            for target in targets:
                if target not in memories:
                    raise ExportFileError(f"{where}: {name} names {target}, which is not in the file")
        if rec["supersedes"] and memories[rec["supersedes"]]["superseded_by"] != mid:
            raise ExportFileError(
                f"{where}: supersedes {rec['supersedes']}, whose superseded_by (line {lines[rec['supersedes']]}) "
                "does not name this memory"
            )
        old = memories[rec["supersedes"]] if rec["supersedes"] else None
        if old is not None and old["purpose"] != rec["purpose"]:
            raise ExportFileError(f"{where}: supersedes {rec['supersedes']}, a memory of another purpose")
        if (
            old is not None
            and old["audience"] == "member"
            and (rec["audience"], rec["author"]) != ("member", old["author"])
        ):
            raise ExportFileError(
                f"{where}: supersedes {rec['supersedes']}, a member-only memory of another reader "
                "(a supersede may narrow the audience, never widen it)"
            )
        if rec["superseded_by"] and memories[rec["superseded_by"]]["supersedes"] != mid:
            raise ExportFileError(
                f"{where}: superseded_by {rec['superseded_by']}, which does not say it supersedes this memory"
            )


def import_order(export: Export) -> list[str]:
    """Memory ids in an order an import can write them: every source (derived_from) and supersede
    target before the memories naming it, otherwise oldest first (created_at, then id). ExportFileError
    naming a memory on a cycle."""
    recs = export.memories
    deps = {
        mid: set(rec["derived_from"]) | ({rec["supersedes"]} if rec["supersedes"] else set())
        for mid, rec in recs.items()
    }
    waiting = {mid: len(d) for mid, d in deps.items()}
    users: dict[str, list[str]] = {}
    for mid, d in deps.items():
        for dep in d:
            users.setdefault(dep, []).append(mid)

    def key(mid: str) -> tuple:
        return (_time(recs[mid]["created_at"], mid), mid)

    ready = [key(mid) for mid, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, mid = heapq.heappop(ready)
        order.append(mid)
        for user in users.get(mid, ()):
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, key(user))
    if len(order) != len(recs):
        stuck = min((mid for mid in recs if waiting[mid]), key=lambda mid: export.lines[mid])
        raise ExportFileError(
            f"{export.path}:{export.lines[stuck]}: memory {stuck} is on a cycle of derived_from/supersedes links"
        )
    return order
