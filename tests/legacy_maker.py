"""The project's own maker of old stores (legacy.sqlite + graph.jsonl), written from the format in
docs/legacy_format.md, beside the old store's generator (tools/make_legacy_store.py, the import's
oracle, whose tables it writes too): this one writes faults that one does not, and
hands back the rows the tests look up.

``make_store(folder, seed, turns, items)`` writes a store with every fault the rules name (three
timestamp forms, missing session ids, stray NULs, over-long turns, unknown roles, unreadable times,
an unmapped chat, truncated digests, unconfirmed, broken, empty, unknown-type and ownerless items,
items of an unmapped chat, unknown confidences, supersede chains with a missing target, a cycle and
a merge, entities that share a name in another case, entity-to-entity edges and bad graph lines) and
returns a ``Made``: the counts a correct import yields, worked out as the rows are written (the keys
and nesting of the generator's expected.json), and a few rows the tests look up.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from tools.make_legacy_store import SCHEMA

OWNER_CHAT, SECOND_CHAT, STRAY_CHAT = "tg:1001", "tg:1002", "tg:9999"  # the stray chat is in no map
TYPES = ["fact", "preference", "procedural", "decision", "deadline", "relationship"]
NAMES = ["Ada Quist", "Bram Oyelaran", "Cleo Marsh", "Quarry Labs", "Fernhill Library"]
WORDS = ["ledger", "kettle", "orchard", "lantern", "harbour", "meadow", "pylon", "quince", "saffron", "tundra"]


@dataclass
class Made:
    """A written store: its files, the counts a correct import yields, and rows the tests look up."""

    sqlite: Path
    graph: Path
    expected: dict
    chain: list[int] = field(default_factory=list)  # a three-item supersede chain of the owner, oldest first
    owner_item: int = 0  # a confirmed item of the owner whose label holds UNIQUE_WORD
    second_item: int = 0  # a confirmed item of the second member
    skipped_item: int = 0  # an unconfirmed item (not imported)
    owner_turn_word: str = "zeppelin"  # a word only the owner's turns hold


UNIQUE_WORD = "heliotrope"


def _stamp(when: dt.datetime, form: int) -> str:
    return [
        when.strftime("%Y-%m-%d %H:%M:%S"),
        when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        when.strftime("%Y-%m-%dT%H:%M:%S+00:00"),
    ][form % 3]


def make_store(folder: Path, seed: int = 1, turns: int = 120, items: int = 40) -> Made:
    """Writes ``folder``/legacy.sqlite and graph.jsonl; ``turns`` and ``items`` are the ordinary rows
    (the faults come on top). Same arguments, same files."""
    if items < 20:
        raise ValueError("items must be at least 20: the chains and their faults need that many")
    rnd = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    path, graph = folder / "legacy.sqlite", folder / "graph.jsonl"
    path.unlink(missing_ok=True)
    exp = {
        "history": {"imported": 0, "skipped": {}},
        "memories": {"imported": 0, "skipped": {}},
        "digests": {"imported": 0, "skipped": {}},
        "supersede_links": 0,
        "chain_faults_reported": 0,
        "mentions": 0,
        "entities": 0,
        "entity_edges_not_imported": 0,
        "graph_lines_skipped": {},
    }

    def skip(section: str, why: str) -> None:
        bucket = exp["graph_lines_skipped"] if section == "graph" else exp[section]["skipped"]
        bucket[why] = bucket.get(why, 0) + 1

    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    made = Made(path, graph, exp)
    when = dt.datetime(2025, 11, 3, 7, 0, 0)
    chat_turns: dict[str, list[int]] = {OWNER_CHAT: [], SECOND_CHAT: [], STRAY_CHAT: []}

    def turn(chat: str, role: str, text: str, ts: str, session: str | None) -> int:
        cur = db.execute(
            "INSERT INTO conversation (chat_id, role, content, ts, session_id) VALUES (?, ?, ?, ?, ?)",
            (chat, role, text, ts, session),
        )
        chat_turns[chat].append(cur.lastrowid)
        return cur.lastrowid

    for i in range(turns):
        when += dt.timedelta(minutes=rnd.choice([2, 5, 30, 150, 600]))
        chat = [OWNER_CHAT, OWNER_CHAT, SECOND_CHAT, STRAY_CHAT][i % 4]
        words = " ".join(rnd.choice(WORDS) for _ in range(6))
        text = f"{words} {made.owner_turn_word}" if chat == OWNER_CHAT and i % 8 == 0 else words
        if i % 37 == 5:
            text += "\x00"  # kept, the NUL dropped
        if i % 53 == 7:
            text = "paste " + "y" * 66_000  # over the body limit
        session = None if i % 3 == 0 else f"{chat}/s{i // 10}"
        turn(chat, "user" if i % 2 == 0 else "rheo", text, _stamp(when, i), session)
        if chat == STRAY_CHAT:
            skip("history", "chat_not_mapped")
        elif len(text.replace("\x00", "").encode()) > 65_536:
            skip("history", "too_long")
        else:
            exp["history"]["imported"] += 1
    for role, ts, why in [
        ("system", "2025-12-01 10:00:00", "bad_role"),
        ("tool", "2025-12-01 10:00:00", "bad_role"),
        ("user", "last tuesday", "bad_timestamp"),
        ("user", "", "bad_timestamp"),
        ("rheo", "2025-13-45 99:00:00", "bad_timestamp"),
    ]:
        turn(OWNER_CHAT, role, "stray row", ts, None)
        skip("history", why)
    # A turn of the owner holding only NULs and blanks: nothing is left to keep.
    turn(OWNER_CHAT, "user", "\x00 \x00", "2025-12-01 11:00:00", None)
    skip("history", "empty")

    for n, chat in enumerate([OWNER_CHAT, SECOND_CHAT, OWNER_CHAT, STRAY_CHAT, OWNER_CHAT, SECOND_CHAT]):
        body = json.dumps(
            {
                "narrative": f"Talked about the {rnd.choice(WORDS)} with {rnd.choice(NAMES)}.",
                "candidate_facts": [f"{rnd.choice(NAMES)} likes {rnd.choice(WORDS)}."],
                "procedural_notes": [],
                "decisions": ["Meet again on Friday."],
            }
        )
        if n == 2:
            body = body[:-9]  # truncated
        db.execute(
            "INSERT INTO digest (chat_id, session_id, created_at, body) VALUES (?, ?, ?, ?)",
            (chat, f"{chat}/s{n}", _stamp(when, n), body),
        )
        if chat == STRAY_CHAT:
            skip("digests", "chat_not_mapped")
        elif n == 2:
            skip("digests", "bad_json")
        else:
            exp["digests"]["imported"] += 1

    entities = [(f"e{i}", name) for i, name in enumerate(NAMES)] + [("e-dup", NAMES[0].upper())]
    good: list[tuple[int, str]] = []  # (id, chat) of the imported items
    labels: dict[int, str] = {}
    all_items: list[int] = []

    def item(typ, content, chat, status="confirmed", conf=0.8, src=None) -> int:
        src = src if src is not None else (rnd.choice(chat_turns[chat]) if chat_turns[chat] else None)
        cur = db.execute(
            """INSERT INTO memory_item (type, content, confidence, reason, source_turn_id, status, created_at,
                                        embedding) VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
            (typ, content, conf, rnd.choice(["Explicit user statement", "Said twice"]), src, status,
             _stamp(when, len(all_items)), b"\x00\x01old-vector"),
        )  # fmt: skip
        all_items.append(cur.lastrowid)
        return cur.lastrowid

    for i in range(items):
        chat = OWNER_CHAT if i % 3 else SECOND_CHAT
        who = NAMES[i % len(NAMES)]
        label = f"{who} {rnd.choice(WORDS)} {i}"
        iid = item(TYPES[i % len(TYPES)], json.dumps({"label": label, "properties": {"note": "x", "n": i}}), chat,
                   conf=None if i % 11 == 4 else round(rnd.uniform(0.4, 1.0), 2))  # fmt: skip
        good.append((iid, chat))
        labels[iid] = label
        exp["memories"]["imported"] += 1
    made.owner_item = item(
        "fact",
        json.dumps({"label": f"{NAMES[3]} gate code", "properties": {"code": f"{UNIQUE_WORD} 4471"}}),
        OWNER_CHAT,
    )
    labels[made.owner_item] = f"{NAMES[3]} gate code"
    made.second_item = item(
        "preference", json.dumps({"label": f"{NAMES[1]} channel", "properties": {"channel": "pigeon"}}), SECOND_CHAT
    )
    labels[made.second_item] = f"{NAMES[1]} channel"
    good += [(made.owner_item, OWNER_CHAT), (made.second_item, SECOND_CHAT)]
    exp["memories"]["imported"] += 2
    bad = [
        ("fact", '{"label": "cut', OWNER_CHAT, "confirmed", None, "bad_json"),
        ("fact", "[1, 2]", OWNER_CHAT, "confirmed", None, "bad_json"),
        ("fact", json.dumps({"label": "", "properties": {}}), OWNER_CHAT, "confirmed", None, "empty"),
        ("mood", json.dumps({"label": "grumpy", "properties": {}}), OWNER_CHAT, "confirmed", None, "unknown_type"),
        ("fact", json.dumps({"label": "orphan", "properties": {}}), OWNER_CHAT, "confirmed", 77_000_001, "no_owner"),
        ("fact", json.dumps({"label": "stray", "properties": {}}), STRAY_CHAT, "confirmed", None, "chat_not_mapped"),
        ("fact", json.dumps({"label": "maybe", "properties": {}}), OWNER_CHAT, "candidate", None, "unconfirmed"),
        ("fact", '{"label": "cut', OWNER_CHAT, "candidate", None, "bad_json"),  # the fault counts, not the status
        ("decision", json.dumps({"label": "later", "properties": {}}), SECOND_CHAT, "candidate", None, "unconfirmed"),
    ]
    for typ, content, chat, status, src, why in bad:
        iid = item(typ, content, chat, status, src=src)
        skip("memories", why)
        labels[iid] = "skipped"
        if why == "unconfirmed":
            made.skipped_item = iid
    # Chains among imported items of one owner (older -> newer), and the faults.
    owner_good = sorted(i for i, c in good if c == OWNER_CHAT and i not in (made.owner_item,))
    second_good = sorted(i for i, c in good if c == SECOND_CHAT and i != made.second_item)

    def link(old: int, new: int) -> None:
        db.execute("UPDATE memory_item SET superseded_by = ? WHERE id = ?", (new, old))

    made.chain = owner_good[0:3]
    link(made.chain[0], made.chain[1])
    link(made.chain[1], made.chain[2])
    link(second_good[0], second_good[1])
    exp["supersede_links"] += 3
    link(owner_good[3], 66_000_000)  # missing target
    link(owner_good[4], owner_good[5])  # a two-item cycle
    link(owner_good[5], owner_good[4])
    link(owner_good[6], made.skipped_item)  # points at an item that is not imported
    link(owner_good[7], owner_good[9])  # a merge: both point at the same newer item; the lower id keeps it
    link(owner_good[8], owner_good[9])
    link(owner_good[10], second_good[2])  # another member's item
    exp["supersede_links"] += 1
    exp["chain_faults_reported"] += 5
    db.commit()
    db.close()

    lines = [json.dumps({"kind": "entity", "id": eid, "name": name, "type": "thing"}) for eid, name in entities]
    exp["entities"] = len(entities)
    imported = {i for i, _ in good}
    for iid in all_items:
        for eid, name in entities:
            if name.split()[0].lower() in labels[iid].lower():
                lines.append(json.dumps({"kind": "edge", "source": f"memory:{iid}", "target": f"entity:{eid}"}))
                if iid in imported:
                    exp["mentions"] += 1
    for k in range(7):
        a, b = entities[k % len(entities)], entities[(k + 2) % len(entities)]
        lines.append(json.dumps({"kind": "edge", "source": f"entity:{a[0]}", "target": f"entity:{b[0]}"}))
        exp["entity_edges_not_imported"] += 1
    for raw, why in [
        ('{"kind": "edge", "source": "memory:1"', "bad_json"),
        ("not json at all", "bad_json"),
        (json.dumps({"kind": "edge", "source": f"memory:{all_items[0]}", "target": "entity:nope"}), "unknown_entity"),
        (json.dumps({"kind": "edge", "source": "memory:55000000", "target": "entity:e1"}), "unknown_memory"),
        (json.dumps({"kind": "photo", "id": "p1"}), "unknown_kind"),
        (json.dumps({"kind": "entity", "id": "e-noname", "name": ""}), "bad_entity"),
    ]:
        lines.append(raw)
        skip("graph", why)
    rnd.shuffle(lines)
    lines.insert(len(lines) // 2, "")  # a blank line is no line
    graph.write_text("\n".join(lines) + "\n")
    return made
