"""Reading the old store (one SQLite file and a JSONL graph beside it) under the rules of a correct
import (docs/portability.md, "Importing the old store"), without the network: what ``recallatron import-legacy`` would
import, and every row it skips with its reason.

The format, in short: ``conversation`` (turns), ``digest`` (session summaries, JSON bodies),
``memory_item`` (durable items, JSON content, ``superseded_by`` chains) and ``graph.jsonl``
(entities, ``memory -> entity`` and ``entity -> entity`` edges). ``read_store`` applies the rules
and returns a ``Plan``: the counts by section and reason (the keys and nesting of the generator's
``expected.json``), the skipped rows and chain faults for the report, and what to send.

Skip reasons, checked in this order (the first that applies is the one counted):
- history turns: ``chat_not_mapped``, ``bad_encoding`` (text or session id that is not UTF-8),
  ``bad_role`` (not ``user`` or ``rheo``), ``bad_timestamp``, ``future_timestamp``, ``too_long`` (over
  65,536 bytes of UTF-8 once NUL characters are dropped), ``empty`` (nothing but white space and
  invisible characters);
- digests: ``chat_not_mapped``, ``bad_encoding``, ``bad_json`` (not a JSON object), ``bad_timestamp``,
  ``future_timestamp``, ``empty``, ``too_long``;
- memory items: ``bad_encoding`` (content or reason not UTF-8, or JSON escaping a lone surrogate),
  ``bad_json``, ``empty`` (a blank
  label and no properties), ``unknown_type``,
  ``no_owner`` (the source turn does not exist), ``chat_not_mapped``, ``unconfirmed``,
  ``bad_confidence`` (outside 0..1), ``bad_timestamp``, ``future_timestamp``, ``too_long``;
``bad_timestamp`` is a time that cannot be read; ``future_timestamp`` one more than
``servicekit.limits.MAX_FUTURE_SKEW`` after the clock (the store's own check, which would refuse it).
- graph lines: ``bad_json``, ``bad_entity`` (no id or a name that is not 1..200 characters),
  ``duplicate_entity``, ``unknown_entity``, ``unknown_memory``, ``unknown_kind``, ``unsupported_edge``,
  ``duplicate_edge``, ``too_many_mentions`` (over 32 for one memory).
NUL characters are dropped from every text sent (bodies, titles, reasons, session ids), as the rules
say of turns: PostgreSQL text holds none, and the store refuses them.
Chain faults (reported; the items are imported without the link): ``missing_target``,
``target_not_imported``, ``cycle`` (one fault per cycle; every link of it dropped), ``cross_owner``,
``merge`` (a second older item pointing at the same newer one: the lowest id keeps the link).
"""

from __future__ import annotations

import datetime
import json
import re
import sqlite3
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from cli.json_text import last_line_cut_short, lone_surrogate, may_hold_surrogate
from servicekit.checks import MAX_SNAKE_CHARS, MAX_STATEMENTS, SNAKE, check_not_ahead
from servicekit.errors import InvalidArgument
from servicekit.limits import (
    MAX_BODY_BYTES,
    MAX_KEY_CHARS,
    MAX_MENTIONS,
    MAX_NAME_CHARS,
    MAX_REASON_CHARS,
    MAX_TITLE_CHARS,
)
from servicekit.text import is_blank

ROLES = {"user", "rheo"}
# A graph file more than this share of whose non-blank lines are not JSON objects is refused as not
# JSON Lines (a wrong file), rather than imported with every line skipped as ``bad_json``. Real old
# graphs hold a few bad lines among thousands (the generator's: one or two); half is far from both.
NOT_JSON_LINES_SHARE = 0.5
# Legacy item types -> memory kinds (Kind names of servicekit.vocabulary). The type itself is kept
# at the head of the body, so nothing of it is lost.
KIND_OF_TYPE = {
    "fact": "fact",
    "preference": "note",
    "procedural": "note",
    "decision": "decision",
    "deadline": "fact",
    "relationship": "fact",
}
SECTIONS = ("history", "memories", "digests")
# How long reading the SQLite file may take in all (``--read-timeout``): the old store generator's
# default store (4,000 turns, 1 MB) reads in 0.07 s here, so the bound leaves room for stores
# thousands of times its size while a file that would read without end stops with an error
# (sqlite3's progress handler, called every PROGRESS_STEPS virtual machine instructions, ends the
# statement running past it).
READ_TIMEOUT_SECONDS = 600.0
PROGRESS_STEPS = 1_000
OLD_STORE = "is this the old store's legacy.sqlite?"
TABLES = {
    "conversation": ("id", "chat_id", "role", "content", "ts", "session_id"),
    "digest": ("id", "chat_id", "session_id", "created_at", "body"),
    "memory_item": (
        "id",
        "type",
        "content",
        "confidence",
        "reason",
        "source_turn_id",
        "status",
        "created_at",
        "superseded_by",
    ),
}


class Undecodable:
    """A SQLite text value that is not UTF-8 (the connection's text factory gives it instead of
    failing the whole read), so that the row holding it is skipped as ``bad_encoding``."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    def __str__(self) -> str:
        return self.raw[:40].decode("utf-8", "backslashreplace")


def _decode(raw: bytes) -> str | Undecodable:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return Undecodable(raw)


def _text(value) -> str | None:
    """A cell as text without NUL characters: a string, a BLOB that is UTF-8 (old clients wrote
    some), a number as written; None for NULL or bytes that are not UTF-8."""
    if isinstance(value, bytes):
        value = _decode(value)
    if value is None or isinstance(value, Undecodable):
        return None
    return str(value).replace("\x00", "")


def _undecodable(*values) -> bool:
    return any(
        isinstance(v, Undecodable) or (isinstance(v, bytes) and isinstance(_decode(v), Undecodable)) for v in values
    )


class LegacyStoreError(Exception):
    """The old store cannot be read at all (a missing file, not SQLite, a missing table or column, a
    view or virtual table where a table belongs, a trigger, a read past its time bound); the message
    names the file and the problem."""


@dataclass
class Turn:
    """One history turn to send, of the member its chat maps to."""

    member_id: str
    legacy_id: int
    chat_id: str
    role: str
    text: str
    occurred_at: datetime.datetime
    session_id: str


@dataclass
class Item:
    """One memory to send: a digest (``legacy:digest:<id>``) or an item (``legacy:item:<id>``)."""

    key: str
    member_id: str
    kind: str
    title: str
    body: str
    created_at: datetime.datetime
    confidence: float | None = None
    reason: str = ""
    entity_keys: list[str] = field(default_factory=list)
    supersedes_key: str = ""
    # Relations it states, from the graph's entity -> entity edges that name it: (subject key,
    # predicate, object key).
    relations: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass
class Plan:
    """What an import of one old store does under one member map."""

    counts: dict
    report: list[dict]
    turns: list[Turn]
    items: list[Item]  # in an order where an item comes after the one it supersedes
    entities: list[tuple[str, str]]  # (import key, name)


def _new_counts(member_map: dict[str, str]) -> dict:
    """The report's counts before the first row: the keys and nesting of the old store's expected.json."""
    sections = {section: {"imported": 0, "skipped": {}} for section in ("history", "memories", "digests")}
    tallies = (
        "supersede_links",
        "chain_faults_reported",
        "mentions",
        "entities",
        "relations",
        "entity_edges_not_imported",
    )
    return {**sections, **dict.fromkeys(tallies, 0), "graph_lines_skipped": {}, "member_map": dict(member_map)}


class _Skips:
    """Counts skips into ``counts`` and records each for the report."""

    def __init__(self, counts: dict, report: list[dict]) -> None:
        self.counts, self.report = counts, report

    def __call__(self, section: str, source: str, source_id, reason: str, detail: str = "") -> None:
        bucket = self.counts["graph_lines_skipped"] if section == "graph" else self.counts[section]["skipped"]
        bucket[reason] = bucket.get(reason, 0) + 1
        row = {"kind": "skipped", "section": section, "source": source, "source_id": source_id, "reason": reason}
        if detail:
            row["detail"] = detail
        self.report.append(row)


def _ahead(when: datetime.datetime, column: str, now: datetime.datetime) -> str | None:
    """Why a readable time is refused (the store's ``check_not_ahead``, naming the column), or None."""
    try:
        check_not_ahead(when, column, now)
    except InvalidArgument as exc:
        return exc.message
    return None


def parse_time(text) -> datetime.datetime | None:
    """A legacy timestamp as an aware UTC datetime: ``YYYY-MM-DD HH:MM:SS`` (naive, meaning UTC),
    with ``T``, with ``Z`` or an offset; None when it cannot be read."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        when = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        return when.replace(tzinfo=datetime.UTC)
    try:
        return when.astimezone(datetime.UTC)
    except OverflowError:  # an offset that moves year 1 or year 9999 out of datetime's range
        return None


def _too_long(text: str) -> bool:
    return len(text.encode("utf-8")) > MAX_BODY_BYTES


def _read_error(path: Path, exc: sqlite3.DatabaseError, limit: float, what: str) -> LegacyStoreError:
    """The LegacyStoreError of a failed statement: the time bound when the progress handler stopped
    it (nothing else interrupts one), else ``what`` went wrong."""
    if str(exc) == "interrupted":
        return LegacyStoreError(f"{path}: the legacy file took over {limit:g} s to read (--read-timeout); {OLD_STORE}")
    return LegacyStoreError(f"{path}: {what} ({exc})")


def open_sqlite(path: Path, limit: float = READ_TIMEOUT_SECONDS) -> sqlite3.Connection:
    """The old store opened read-only, every statement on it bounded to ``limit`` seconds from now in
    all, its schema checked (``_check_schema``); LegacyStoreError otherwise."""
    if path.is_dir():
        raise LegacyStoreError(f"{path}: is a folder, not a file; --sqlite names the old store's legacy.sqlite")
    if not path.is_file():
        raise LegacyStoreError(f"{path}: no such file")
    deadline = time.monotonic() + limit
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.DatabaseError as exc:
        raise LegacyStoreError(f"{path}: not a SQLite database, or a damaged one ({exc})") from None
    try:
        db.set_progress_handler(lambda: time.monotonic() > deadline, PROGRESS_STEPS)
        # Nothing in the file runs as trusted: functions a schema names (in a view, a trigger, a
        # default) are limited to harmless ones, and the connection writes nothing.
        db.execute("PRAGMA trusted_schema = OFF")
        db.execute("PRAGMA query_only = ON")
        schema = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
        pages = db.execute("PRAGMA page_count").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        db.close()
        raise _read_error(path, exc, limit, "not a SQLite database, or a damaged one") from None
    try:
        # SQLite writes whole pages, and its header counts them: a file cut short (an interrupted
        # copy) is caught here, before rows at its end go missing without a word. (Pages still in a
        # write-ahead log beside the file are counted but not in it.)
        size = path.stat().st_size
        in_wal = path.with_name(path.name + "-wal").exists()
        if size % page_size or (size < pages * page_size and not in_wal):
            raise LegacyStoreError(
                f"{path}: truncated: {size} bytes is not the {pages} pages of {page_size} bytes its header names"
            )
        _check_schema(db, path, schema, limit)
    except BaseException:
        db.close()
        raise
    db.text_factory = _decode
    return db


def _check_schema(db: sqlite3.Connection, path: Path, schema: list[tuple], limit: float) -> None:
    """Each table the import reads is a plain table of the file (``sqlite_master`` type ``table``,
    not a view, not a virtual table), no trigger is attached to it, it has every column the import
    reads, none of them generated, and unique integer ids. Only such a table is read: a view (a
    recursive one runs without end) or a virtual table runs code of the file's choosing on every
    read. LegacyStoreError naming the object otherwise."""
    by_name = {str(name).lower(): (kind, str(sql or "")) for kind, name, _, sql in schema}
    for table, wanted in TABLES.items():
        if table not in by_name:
            raise LegacyStoreError(f"{path}: no table {table!r}; {OLD_STORE}")
        kind, sql = by_name[table]
        if kind != "table":
            article = "an" if kind[:1] in "aeiou" else "a"
            raise LegacyStoreError(f"{path}: {table!r} is {article} {kind}, not a table; {OLD_STORE}")
        if re.match(r"\s*create\s+virtual\b", sql, re.IGNORECASE):
            raise LegacyStoreError(f"{path}: {table!r} is a virtual table, not a plain one; {OLD_STORE}")
        triggers = sorted(str(name) for kind, name, on, _ in schema if kind == "trigger" and str(on).lower() == table)
        if triggers:
            raise LegacyStoreError(
                f"{path}: table {table!r} has trigger(s) {', '.join(map(repr, triggers))}; the old store had none"
            )
        try:
            cols = dict(db.execute("SELECT name, hidden FROM pragma_table_xinfo(?)", (table,)).fetchall())
            missing = [c for c in wanted if c not in cols]
            if missing:
                raise LegacyStoreError(f"{path}: table {table!r} lacks column(s) {', '.join(missing)}")
            generated = [c for c in wanted if cols[c]]
            if generated:
                raise LegacyStoreError(
                    f"{path}: table {table!r}: column(s) {', '.join(generated)} are generated, not stored values"
                )
            # Row ids are the report's source ids and the import keys, so they must be unique
            # integers (the format's INTEGER PRIMARY KEY); checked here rather than found out half way.
            bad = db.execute(
                f"SELECT count(*) - count(DISTINCT id) + sum(typeof(id) != 'integer') FROM {table}"
            ).fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise _read_error(path, exc, limit, "cannot be read") from None
        if bad:
            raise LegacyStoreError(f"{path}: table {table!r}: its ids are not unique integers")


def read_graph_lines(path: Path) -> list[bytes]:
    """The graph file's lines (bytes; each decoded on its own, so one bad line fails alone).

    LegacyStoreError, before anything is written, for a missing or unreadable file, a folder, a
    truncated file (its last line cut short: ``cli.json_text.last_line_cut_short``, the check
    ``recallatron import`` makes of its files), and, checked first, a file that is not JSON Lines at
    all: more than half of its non-blank lines are not JSON objects (``NOT_JSON_LINES_SHARE``; a
    SQLite file or a text file named by mistake). A bad line among good ones is a skipped line
    (``bad_json``), as the rules count it."""
    if path.is_dir():
        raise LegacyStoreError(f"{path}: is a folder, not a file; --graph names the old store's graph.jsonl")
    if not path.is_file():
        raise LegacyStoreError(f"{path}: no such file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LegacyStoreError(f"{path}: cannot be read ({exc.strerror})") from None
    lines = data.splitlines()
    filled = [raw for raw in lines if raw.strip()]
    bad = sum(1 for raw in filled if not isinstance(_loads(raw), dict))
    if filled and bad > len(filled) * NOT_JSON_LINES_SHARE:
        raise LegacyStoreError(
            f"{path}: not a JSON Lines graph: {bad} of its {len(filled)} lines are not JSON objects; "
            "--graph names the old store's graph.jsonl"
        )
    if (cut := last_line_cut_short(data)) is not None:
        raise LegacyStoreError(
            f"{path}: line {cut} is cut short (no newline at the end, not a whole JSON object): "
            "the file looks truncated"
        )
    return lines


def _loads(raw):
    """A graph line or JSON cell parsed: None when it is not UTF-8 JSON, an ``Undecodable`` when a
    string in it holds a lone surrogate escape (no UTF-8 text, so no memory or entity, can hold it)."""
    try:
        value = json.loads(raw)
        if may_hold_surrogate(raw) and lone_surrogate(value):
            return Undecodable(raw.encode("utf-8") if isinstance(raw, str) else raw)
        return value
    except (TypeError, ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None


def read_store(
    sqlite_path: Path, graph_path: Path, member_map: dict[str, str], limit: float = READ_TIMEOUT_SECONDS
) -> Plan:
    """Reads the old store and applies the rules; ``member_map`` maps chat ids to member ids; the
    SQLite file is read in at most ``limit`` seconds. LegacyStoreError when a file cannot be read
    at all; every bad row is a skip, never an error."""
    db = open_sqlite(sqlite_path, limit)
    try:
        lines = read_graph_lines(graph_path)
    except LegacyStoreError:
        db.close()
        raise
    counts, report = _new_counts(member_map), []
    skip = _Skips(counts, report)
    now = datetime.datetime.now(datetime.UTC)
    try:
        turns, turn_chat = _history(db, member_map, counts, skip, now)
        digests = _digests(db, member_map, counts, skip, now)
        items, superseded_by, all_item_ids = _items(db, member_map, turn_chat, counts, skip, now)
    except sqlite3.DatabaseError as exc:
        raise _read_error(sqlite_path, exc, limit, "cannot be read") from None
    finally:
        db.close()
    ordered = _chains(items, superseded_by, all_item_ids, counts, report)
    entities = _graph(lines, items, all_item_ids, counts, skip)
    return Plan(counts, report, turns, digests + ordered, entities)


def _history(db, member_map, counts, skip, now) -> tuple[list[Turn], dict[int, str]]:
    turns, turn_chat = [], {}
    for tid, chat, role, content, ts, session in db.execute(
        "SELECT id, chat_id, role, content, ts, session_id FROM conversation ORDER BY id"
    ):
        turn_chat[tid] = chat
        when = parse_time(ts)
        text = _text(content) or ""
        if chat not in member_map:
            skip("history", "conversation", tid, "chat_not_mapped", str(chat)[:40])
        elif _undecodable(content, session):
            skip("history", "conversation", tid, "bad_encoding", "content or session_id is not UTF-8")
        elif role not in ROLES:
            skip("history", "conversation", tid, "bad_role", str(role)[:40])
        elif when is None:
            skip("history", "conversation", tid, "bad_timestamp", str(ts)[:40])
        elif ahead := _ahead(when, "ts", now):
            skip("history", "conversation", tid, "future_timestamp", ahead)
        elif _too_long(text):
            skip("history", "conversation", tid, "too_long", f"{len(text.encode('utf-8'))} bytes")
        elif is_blank(text):
            skip("history", "conversation", tid, "empty")
        else:
            session_id = _text(session) or ""
            session_id = session_id if len(session_id) <= 200 else ""
            turns.append(Turn(member_map[chat], tid, chat, role, text, when, session_id))
            counts["history"]["imported"] += 1
    return turns, turn_chat


def _digest_body(body: dict) -> str:
    """A digest as text: the narrative, then each list under its heading."""
    parts = [str(body.get("narrative") or "").strip()]
    for name, heading in (
        ("candidate_facts", "Candidate facts"),
        ("procedural_notes", "Procedural notes"),
        ("decisions", "Decisions"),
    ):
        values = body.get(name)
        entries = [str(v).strip() for v in values if str(v).strip()] if isinstance(values, list) else []
        if entries:
            parts.append(heading + ":\n" + "\n".join(f"- {v}" for v in entries))
    return "\n\n".join(p for p in parts if p).replace("\x00", "")


def _digests(db, member_map, counts, skip, now) -> list[Item]:
    out = []
    for did, chat, session, created, raw in db.execute(
        "SELECT id, chat_id, session_id, created_at, body FROM digest ORDER BY id"
    ):
        body = _loads(raw)
        when = parse_time(created)
        if chat not in member_map:
            skip("digests", "digest", did, "chat_not_mapped", str(chat)[:40])
        elif _undecodable(raw, session, body):
            skip("digests", "digest", did, "bad_encoding", "body or session_id is not UTF-8 text")
        elif not isinstance(body, dict):
            skip("digests", "digest", did, "bad_json")
        elif when is None:
            skip("digests", "digest", did, "bad_timestamp", str(created)[:40])
        elif ahead := _ahead(when, "created_at", now):
            skip("digests", "digest", did, "future_timestamp", ahead)
        elif is_blank(text := _digest_body(body)):
            skip("digests", "digest", did, "empty")
        elif _too_long(text):
            skip("digests", "digest", did, "too_long")
        else:
            title = f"Session digest {_text(session)}" if _text(session) else "Session digest"
            out.append(Item(f"legacy:digest:{did}", member_map[chat], "summary", title[:MAX_TITLE_CHARS], text, when))
            counts["digests"]["imported"] += 1
    return out


def _item_body(typ: str, label: str, props: dict) -> str:
    lines = [f"{typ}: {label}" if label else typ]
    for k, v in props.items():
        lines.append(f"{k}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}")
    return "\n".join(lines).replace("\x00", "")


def _items(db, member_map, turn_chat, counts, skip, now):
    """The importable items by legacy id (in id order), their superseded_by pointers, and every id."""
    items: dict[int, Item] = {}
    superseded_by: dict[int, int] = {}
    all_ids: set[int] = set()
    rows = db.execute(
        """SELECT id, type, content, confidence, reason, source_turn_id, status, created_at, superseded_by
             FROM memory_item ORDER BY id"""
    )
    for iid, typ, raw, conf, reason, src, status, created, sup in rows:
        all_ids.add(iid)
        content = _loads(raw)
        label = content.get("label") if isinstance(content, dict) else None
        props = content.get("properties") if isinstance(content, dict) else None
        chat = turn_chat.get(src) if isinstance(src, int) else None
        when = parse_time(created)
        reason_text = _text(reason) or ""
        why, detail = None, ""
        if _undecodable(raw, reason, content):
            why = "bad_encoding"
        elif not isinstance(content, dict) or not isinstance(label or "", str) or not isinstance(props or {}, dict):
            why = "bad_json"
        elif is_blank(label or "") and not props:
            why = "empty"
        elif typ not in KIND_OF_TYPE:
            why = "unknown_type"
        elif chat is None:
            why = "no_owner"
        elif chat not in member_map:
            why = "chat_not_mapped"
        elif status != "confirmed":
            why = "unconfirmed"
        elif conf is not None and not (isinstance(conf, (int, float)) and 0.0 <= conf <= 1.0):
            why = "bad_confidence"
        elif when is None:
            why = "bad_timestamp"
        elif detail := _ahead(when, "created_at", now):
            why = "future_timestamp"
        body = _item_body(typ, (label or "").strip(), props or {}) if why is None else ""
        if why is None and _too_long(body):
            why = "too_long"
        if why:
            skip("memories", "memory_item", iid, why, detail)
            continue
        items[iid] = Item(
            f"legacy:item:{iid}",
            member_map[chat],
            KIND_OF_TYPE[typ],
            (label or "").replace("\x00", "").strip()[:MAX_TITLE_CHARS],
            body,
            when,
            float(conf) if conf is not None else None,
            reason_text[:MAX_REASON_CHARS],
        )
        if isinstance(sup, int):
            superseded_by[iid] = sup
        counts["memories"]["imported"] += 1
    return items, superseded_by, all_ids


def _chains(items: dict[int, Item], superseded_by: dict[int, int], all_ids: set[int], counts, report) -> list[Item]:
    """Keeps the supersede links between imported items (older -> newer), reports the faults, and
    orders the items so that each comes after the one it supersedes."""

    def fault(reason: str, ids: list[int], detail: str) -> None:
        counts["chain_faults_reported"] += 1
        report.append({"kind": "chain_fault", "source": "memory_item", "source_id": ids[0], "ids": ids,
                       "reason": reason, "detail": detail})  # fmt: skip

    links: dict[int, int] = {}
    for old, new in sorted(superseded_by.items()):
        if new not in all_ids:
            fault("missing_target", [old], f"superseded_by {new} does not exist")
        elif new not in items:
            fault("target_not_imported", [old], f"superseded_by {new} was skipped")
        else:
            links[old] = new
    # Cycles: follow each pointer; a walk that comes back to a node on its own path closed a cycle.
    state: dict[int, int] = {}  # 1 on the current path, 2 done
    for start in sorted(links):
        path, at = [], start
        while at in links and state.get(at) is None:
            state[at] = 1
            path.append(at)
            at = links[at]
        if state.get(at) == 1:
            cycle = path[path.index(at) :]
            fault("cycle", sorted(cycle), "superseded_by pointers form a cycle: " + " -> ".join(map(str, cycle + [at])))
            for node in cycle:
                del links[node]
        for node in path:
            state[node] = 2
    successor_of: dict[int, int] = {}
    for old, new in sorted(links.items()):
        if items[old].member_id != items[new].member_id:
            fault("cross_owner", [old], f"superseded_by {new} belongs to another member")
        elif new in successor_of.values():
            fault("merge", [old], f"superseded_by {new}, which a lower id already points at")
        else:
            successor_of[old] = new
            items[new].supersedes_key = items[old].key
    counts["supersede_links"] = len(successor_of)
    # Chains are paths now: emit each from its oldest item.
    has_pred = set(successor_of.values())
    ordered = []
    for iid in items:
        if iid in has_pred:
            continue
        at = iid
        while at is not None:
            ordered.append(items[at])
            at = successor_of.get(at)
    return ordered


def _graph(lines: list[bytes], items: dict[int, Item], all_ids: set[int], counts, skip) -> list[tuple[str, str]]:
    """Entities (every good entity line) and mentions (memory -> entity edges of imported items)."""
    entities: dict[str, str] = {}
    edges = []
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        obj = _loads(raw)
        if not isinstance(obj, dict):
            skip("graph", "graph.jsonl", n, "bad_json")
        elif obj.get("kind") == "entity":
            eid, name = obj.get("id"), obj.get("name")
            if not isinstance(eid, str) or not eid or not isinstance(name, str) or not name.strip():
                skip("graph", "graph.jsonl", n, "bad_entity")
            elif (
                len(name.strip()) > MAX_NAME_CHARS
                or "\x00" in name + eid
                or len(f"legacy:entity:{eid}") > MAX_KEY_CHARS
            ):
                skip("graph", "graph.jsonl", n, "bad_entity", "name or id too long, or holding NUL")
            elif eid in entities:
                skip("graph", "graph.jsonl", n, "duplicate_entity", eid)
            else:
                entities[eid] = name.strip()
        elif obj.get("kind") == "edge":
            edges.append((n, obj.get("source"), obj.get("target"), obj.get("type"), obj.get("memory")))
        else:
            skip("graph", "graph.jsonl", n, "unknown_kind", str(obj.get("kind"))[:40])
    seen = set()
    for n, source, target, edge_type, stated_by in edges:
        ends = []
        for end in (source, target):
            kind, _, ref = end.partition(":") if isinstance(end, str) else ("", "", "")
            ends.append((kind, ref))
        (skind, sref), (tkind, tref) = ends
        if any(k == "entity" and r not in entities for k, r in ends):
            skip("graph", "graph.jsonl", n, "unknown_entity")
        elif skind == "entity" and tkind == "entity":
            _relation(n, sref, edge_type, tref, stated_by, items, all_ids, counts, skip)
        elif skind == "memory" and tkind == "entity":
            mid = _item_id(sref)
            if mid not in all_ids:
                skip("graph", "graph.jsonl", n, "unknown_memory", str(sref)[:40])
            elif mid in items:
                item = items[mid]
                key = f"legacy:entity:{tref}"
                if (mid, tref) in seen:
                    skip("graph", "graph.jsonl", n, "duplicate_edge")
                elif len(item.entity_keys) >= MAX_MENTIONS:
                    skip("graph", "graph.jsonl", n, "too_many_mentions")
                else:
                    seen.add((mid, tref))
                    item.entity_keys.append(key)
                    counts["mentions"] += 1
        else:
            skip("graph", "graph.jsonl", n, "unsupported_edge", f"{skind or '?'} -> {tkind or '?'}")
    counts["entities"] = len(entities)
    return [(f"legacy:entity:{eid}", name) for eid, name in entities.items()]


def _item_id(ref: str) -> int | None:
    """A memory item's id from ``memory:<id>``'s ref: ASCII digits only (str.isdigit() also takes '²',
    which int() then refuses, and Arabic-Indic digits)."""
    return int(ref) if re.fullmatch(r"[0-9]{1,18}", ref) else None


def _relation(n: int, subject: str, edge_type, obj: str, stated_by, items, all_ids, counts, skip) -> None:
    """An ``entity -> entity`` edge: a relation stated by the memory item its ``memory`` names
    (``memory:<item id>``), its predicate the edge's type in snake_case; without a ``memory`` the old
    store gives no source, so it is counted as not imported (nothing states it)."""
    if stated_by is None:
        counts["entity_edges_not_imported"] += 1
        return
    kind, _, ref = stated_by.partition(":") if isinstance(stated_by, str) else ("", "", "")
    mid = _item_id(ref) if kind == "memory" else None
    if mid not in all_ids:
        skip("graph", "graph.jsonl", n, "unknown_memory", str(stated_by)[:40])
        return
    if mid not in items:  # its memory was skipped: nothing states it
        counts["entity_edges_not_imported"] += 1
        return
    # Spaces, hyphens and case are a type's spelling ("Works At" is works_at); any letter but a..z
    # ("Über") would be dropped, not spelled, so such a type gives no predicate.
    words = edge_type.casefold() if isinstance(edge_type, str) else ""
    predicate = re.sub(r"[^a-z0-9]+", "_", words).strip("_")
    if re.search(r"[^\W\d_a-z]", words) or not SNAKE.fullmatch(predicate) or len(predicate) > MAX_SNAKE_CHARS:
        skip("graph", "graph.jsonl", n, "bad_predicate", str(edge_type)[:40])
        return
    item = items[mid]
    keys = [f"legacy:entity:{subject}", f"legacy:entity:{obj}"]
    new_keys = [k for k in dict.fromkeys(keys) if k not in item.entity_keys]
    if len(item.relations) >= MAX_STATEMENTS or len(item.entity_keys) + len(new_keys) > MAX_MENTIONS:
        skip("graph", "graph.jsonl", n, "too_many_relations")
        return
    item.entity_keys.extend(new_keys)
    item.relations.append((keys[0], predicate, keys[1]))
    counts["relations"] += 1


def totals(counts: dict) -> Counter:
    """Imported and skipped totals over the three sections (for the one-line summary)."""
    out = Counter()
    for section in SECTIONS:
        out["imported"] += counts[section]["imported"]
        out["skipped"] += sum(counts[section]["skipped"].values())
    return out
