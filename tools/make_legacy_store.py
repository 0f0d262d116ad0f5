#!/usr/bin/env python3
"""Writes a synthetic store in the format of the old single-file assistant memory (one SQLite
file plus a JSONL graph beside it), with the rough faults that real old data has, and an
expected.json saying what a correct import yields.

    python -m tools.make_legacy_store OUT_DIR [--seed N] [--turns 4000] [--items 523] [--into-the-past]

OUT_DIR gets legacy.sqlite, graph.jsonl and expected.json. docs/legacy_format.md gives the format
and the rules that expected.json assumes. Same seed, same files.

Written by the project's owner, first outside the repository, as the
oracle of ``recallatron import-legacy``: its counts are worked out here, apart from the importer,
so a wrong rule in either shows as a difference. Moved into the repository (so a clone alone has
it) and styled to the project's lint rules; the rows it writes and its expected.json are those of
the original, byte for byte, for every seed and size. What the project added: ``SCHEMA`` as a
constant (the tests' own maker, tests/legacy_maker.py, writes the same tables) and
``--into-the-past`` (``into_the_past``): its rows are dated from 2026-03-02 on, a row every few
hours, so a large store runs past today, and the import skips a time ahead of the clock.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import re
import sqlite3
from pathlib import Path

PEOPLE = [
    "Arlo Vance",
    "Mira Okafor",
    "Tomas Reyes",
    "Ines Halvorsen",
    "Dev Patel",
    "Lena Brandt",
    "Kofi Mensah",
    "Yuki Tanaka",
    "Sana Qureshi",
    "Jonah Weiss",
    "Priya Raman",
    "Eitan Cole",
]
ORGS = [
    "Nordhaven Clinic",
    "Brightwell School",
    "Quarry Labs",
    "Tallis Bank",
    "Orchid Logistics",
    "Harbor Dental",
    "Kestrel Insurance",
    "Fernhill Library",
]
PROJECTS = [
    "invoice reconciliation",
    "garden shed rebuild",
    "tax filing",
    "school enrolment",
    "car lease renewal",
    "kitchen renovation",
    "server migration",
    "newsletter relaunch",
]
TOPICS = ["deadline", "budget", "appointment", "password reset", "delivery", "meeting", "payment"]
USER_LINES = [
    "Can you remind me when the {p} is due?",
    "I talked to {n} about the {p} today.",
    "{n} from {o} called about the {t}.",
    "Let's move the {t} for the {p} to next week.",
    "What did we decide about the {p}?",
    "My appointment at {o} is on {d}.",
    "Please note that {n} prefers email over phone.",
    "The {p} budget is now {a} euros.",
    "ok",
    "thanks!",
    "Did {n} ever reply about the {t}?",
    "Remind me to call {o} on {d}.",
]
BOT_LINES = [
    "Noted: the {p} is due on {d}.",
    "You decided to postpone the {p} until {d}.",
    "{n} is listed as your contact at {o}.",
    "I have the {t} for the {p} on {d}.",
    "I could not find anything about that yet.",
    "Done. Anything else?",
    "The last budget I have for the {p} is {a} euros.",
]
TYPES = {"fact": 0.45, "preference": 0.15, "procedural": 0.12, "decision": 0.13, "deadline": 0.1, "relationship": 0.05}
EDGE_TYPES = ["works_at", "parent_of", "knows", "client_of"]
# The old store's three tables, as the original wrote them (the text SQLite keeps in the file).
SCHEMA = """
    CREATE TABLE conversation (
      id INTEGER PRIMARY KEY AUTOINCREMENT, chat_id TEXT NOT NULL, role TEXT NOT NULL,
      content TEXT NOT NULL, ts TEXT NOT NULL, session_id TEXT);
    CREATE TABLE digest (
      id INTEGER PRIMARY KEY AUTOINCREMENT, chat_id TEXT NOT NULL, session_id TEXT,
      created_at TEXT NOT NULL, body TEXT NOT NULL);
    CREATE TABLE memory_item (
      id INTEGER PRIMARY KEY AUTOINCREMENT, type TEXT NOT NULL, content TEXT NOT NULL,
      confidence REAL, reason TEXT, source_turn_id INTEGER, status TEXT NOT NULL,
      created_at TEXT NOT NULL, superseded_by INTEGER, embedding BLOB);
    """
SUMMARY_KEYS = ("history", "memories", "digests", "mentions", "supersede_links")


def write_store(out: Path, seed: int = 7, turns: int = 4000, items: int = 523) -> dict:
    """Writes ``out``/legacy.sqlite, graph.jsonl and expected.json; returns what expected.json holds."""
    rnd = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    db_path = out / "legacy.sqlite"
    if db_path.exists():
        db_path.unlink()
    db = sqlite3.connect(db_path)
    db.executescript(SCHEMA)
    exp = {
        "history": {"imported": 0, "skipped": {}},
        "memories": {"imported": 0, "skipped": {}},
        "digests": {"imported": 0, "skipped": {}},
        "supersede_links": 0,
        "mentions": 0,
        "entities": 0,
        "entity_edges_not_imported": 0,
        "graph_lines_skipped": {},
    }

    def skip(section, why):
        exp[section]["skipped"][why] = exp[section]["skipped"].get(why, 0) + 1

    chats = ["tg:100200300", "tg:100200301", "tg:555000999"]  # the last one is in no member map
    weights = [0.8, 0.17, 0.03]
    t = dt.datetime(2026, 3, 2, 8, 0, 0)
    last_ts, sess_no = {}, {}
    turns_by_chat = {c: [] for c in chats}

    def fill(s):
        return s.format(
            n=rnd.choice(PEOPLE),
            o=rnd.choice(ORGS),
            p=rnd.choice(PROJECTS),
            t=rnd.choice(TOPICS),
            d=(t + dt.timedelta(days=rnd.randint(1, 60))).strftime("%Y-%m-%d"),
            a=rnd.randint(2, 90) * 50,
        )

    for i in range(turns):
        t += dt.timedelta(minutes=rnd.choice([1, 1, 2, 3, 5, 8, 20, 45, 150, 200, 600, 1400]))
        chat = rnd.choices(chats, weights)[0]
        gap = chat in last_ts and (t - last_ts[chat]) > dt.timedelta(hours=2)
        if chat not in last_ts or gap:
            sess_no[chat] = sess_no.get(chat, 0) + 1
        last_ts[chat] = t
        role = "user" if i % 2 == 0 else "rheo"
        content = fill(rnd.choice(USER_LINES if role == "user" else BOT_LINES))
        if rnd.random() < 0.004:
            content += "\u0000"  # a stray NUL from a client: the text is kept, the NUL dropped
        if rnd.random() < 0.002:
            content = "log paste: " + "x" * 70000  # over the body limit
        # timestamps as the old code wrote them over the months: naive local, Z, offsets
        form = rnd.random()
        if form < 0.6:
            ts = t.strftime("%Y-%m-%d %H:%M:%S")
        elif form < 0.85:
            ts = t.strftime("%Y-%m-%dT%H:%M:%SZ")
        else:
            ts = t.strftime("%Y-%m-%dT%H:%M:%S+00:00")
        sid = f"{chat}:{sess_no[chat]}" if rnd.random() > 0.25 else None  # early rows have no session id
        cur = db.execute(
            "INSERT INTO conversation (chat_id, role, content, ts, session_id) VALUES (?,?,?,?,?)",
            (chat, role, content, ts, sid),
        )
        turns_by_chat[chat].append(cur.lastrowid)
        if chat == chats[2]:
            skip("history", "chat_not_mapped")
        elif len(content.encode()) > 65536:
            skip("history", "too_long")
        else:
            exp["history"]["imported"] += 1
    # a few rows with an unknown role or an unparseable time
    for bad_role, bad_ts, why in [
        ("system", "2026-05-01 10:00:00", "bad_role"),
        ("user", "yesterday", "bad_timestamp"),
        ("user", "", "bad_timestamp"),
    ]:
        db.execute(
            "INSERT INTO conversation (chat_id, role, content, ts, session_id) VALUES (?,?,?,?,?)",
            (chats[0], bad_role, "stray row", bad_ts, None),
        )
        skip("history", why)

    # digests, one per closed session of the mapped chats
    for chat in chats[:2]:
        for s in range(1, sess_no.get(chat, 0) + 1, 3):
            body = {
                "narrative": fill("Discussed the {p} with {n}."),
                "candidate_facts": [fill("{n} works at {o}.")],
                "procedural_notes": [fill("Call {o} before noon.")],
                "decisions": [fill("Postpone the {p} until {d}.")],
            }
            raw = json.dumps(body)
            if rnd.random() < 0.03:
                raw = raw[:-7]  # truncated JSON
                skip("digests", "bad_json")
            else:
                exp["digests"]["imported"] += 1
            db.execute(
                "INSERT INTO digest (chat_id, session_id, created_at, body) VALUES (?,?,?,?)",
                (chat, f"{chat}:{s}", t.strftime("%Y-%m-%dT%H:%M:%SZ"), raw),
            )

    # memory items
    entities = [{"id": f"ent-{i}", "name": n, "type": "person"} for i, n in enumerate(PEOPLE)] + [
        {"id": f"ent-{len(PEOPLE) + i}", "name": o, "type": "organisation"} for i, o in enumerate(ORGS)
    ]
    entities.append({"id": "ent-dup", "name": PEOPLE[0].upper(), "type": "person"})  # same person, other case
    item_rows, confirmed = [], 0
    n_items = items + items // 5  # plus unconfirmed candidates
    for i in range(n_items):
        typ = rnd.choices(list(TYPES), list(TYPES.values()))[0]
        who, org, proj = rnd.choice(PEOPLE), rnd.choice(ORGS), rnd.choice(PROJECTS)
        label = {
            "fact": f"{who} employer",
            "preference": f"{who} contact preference",
            "procedural": f"How to reach {org}",
            "decision": f"{proj} plan",
            "deadline": f"{proj} deadline",
            "relationship": f"{who} and {org}",
        }[typ]
        props = {
            "fact": {"employer": org},
            "preference": {"channel": rnd.choice(["email", "phone", "text"])},
            "procedural": {"steps": f"call {org} before noon, ask for the front desk"},
            "decision": {"decision": f"postpone {proj}", "until": "2026-07-01"},
            "deadline": {"due": (t + dt.timedelta(days=rnd.randint(1, 90))).strftime("%Y-%m-%d")},
            "relationship": {"relation": "client_of"},
        }[typ]
        content = json.dumps({"label": label, "properties": props})
        status = "confirmed" if confirmed < items and rnd.random() > 0.15 else "candidate"
        chat = rnd.choices(chats[:2], [0.85, 0.15])[0]
        src = rnd.choice(turns_by_chat[chat]) if turns_by_chat[chat] else None
        conf = round(rnd.uniform(0.5, 1.0), 2)
        why = None
        r = rnd.random()
        if r < 0.01:
            content = '{"label": "broken'  # invalid JSON
            why = "bad_json"
        elif r < 0.02:
            content = json.dumps({"label": "", "properties": {}})
            why = "empty"
        elif r < 0.03:
            typ = "mood"
            why = "unknown_type"
        elif r < 0.04:
            src = 99_000_000 + i  # turn never existed: no owner can be derived
            why = "no_owner"
        elif r < 0.045:
            chat = chats[2]
            src = rnd.choice(turns_by_chat[chat]) if turns_by_chat[chat] else 99_100_000 + i
            why = "chat_not_mapped" if turns_by_chat[chat] else "no_owner"
        elif r < 0.05:
            conf = None  # unknown confidence: imported with no confidence
        if status == "candidate":
            why = why or "unconfirmed"
        cur = db.execute(
            """INSERT INTO memory_item (type, content, confidence, reason, source_turn_id, status, created_at)
                            VALUES (?,?,?,?,?,?,?)""",
            (
                typ,
                content,
                conf,
                rnd.choice(["Explicit user statement", "Stated twice", "From a digest"]),
                src,
                status,
                t.strftime("%Y-%m-%d %H:%M:%S"),
            ),
        )
        item_rows.append((cur.lastrowid, why, chat, label))
        if why:
            skip("memories", why)
        else:
            exp["memories"]["imported"] += 1
            if status == "confirmed":
                confirmed += 1
    good = [r for r in item_rows if r[1] is None]
    # supersede chains among importable items of the same owner: older -> newer
    by_owner = {}
    for r in good[:-3]:  # the last three are kept for the chain faults below
        by_owner.setdefault(r[2], []).append(r[0])
    for ids in by_owner.values():
        ids = sorted(ids)
        for k in range(0, len(ids) - 2, 17):
            a_, b_, c_ = ids[k], ids[k + 1], ids[k + 2]
            db.execute("UPDATE memory_item SET superseded_by=? WHERE id=?", (b_, a_))
            db.execute("UPDATE memory_item SET superseded_by=? WHERE id=?", (c_, b_))
            exp["supersede_links"] += 2
    # faults in chains: a pointer to a missing item, and a two-item cycle (kept as separate memories, reported)
    if len(good) > 40:
        db.execute("UPDATE memory_item SET superseded_by=? WHERE id=?", (88_000_000, good[-1][0]))
        x, y = good[-3][0], good[-2][0]
        db.execute("UPDATE memory_item SET superseded_by=? WHERE id=?", (y, x))
        db.execute("UPDATE memory_item SET superseded_by=? WHERE id=?", (x, y))
        exp["chain_faults_reported"] = 2
    db.commit()
    db.close()

    # graph beside it: entities, memory->entity edges (mentions), entity->entity edges (not imported)
    lines = []
    for e in entities:
        lines.append(json.dumps({"kind": "entity", **e}))
    exp["entities"] = len(entities)
    good_ids = {r[0] for r in good}
    for mid, _why, _chat, label in item_rows:
        for e in entities:
            if e["name"].split()[0].lower() in label.lower() or e["name"].lower() in label.lower():
                lines.append(
                    json.dumps(
                        {"kind": "edge", "source": f"memory:{mid}", "target": f"entity:{e['id']}", "type": "about"}
                    )
                )
                if mid in good_ids:
                    exp["mentions"] += 1
    for _ in range(40):
        x, y = rnd.sample(entities, 2)
        lines.append(
            json.dumps(
                {
                    "kind": "edge",
                    "source": f"entity:{x['id']}",
                    "target": f"entity:{y['id']}",
                    "type": rnd.choice(EDGE_TYPES),
                }
            )
        )
        exp["entity_edges_not_imported"] += 1
    lines.append('{"kind": "edge", "source": "memory:1"')  # truncated line
    lines.append(json.dumps({"kind": "edge", "source": "memory:2", "target": "entity:ent-missing", "type": "about"}))
    exp["graph_lines_skipped"] = {"bad_json": 1, "unknown_entity": 1}
    rnd.shuffle(lines)
    (out / "graph.jsonl").write_text("\n".join(lines) + "\n")
    exp["member_map"] = {chats[0]: "owner", chats[1]: "second member"}
    (out / "expected.json").write_text(json.dumps(exp, indent=2, sort_keys=True) + "\n")
    return exp


def counts_of(counts: dict) -> dict:
    """An expected.json, or the counts ``recallatron import-legacy --json`` printed, on the keys both
    hold: without the member map (its values differ: labels, member ids) and what the store answered
    (a run's own), with the counts this generator leaves out at their value for its stores (no chain
    fault in a tiny store; no relation, as its edges name no memory)."""
    out = {k: v for k, v in counts.items() if k not in ("member_map", "answered")}
    out.setdefault("chain_faults_reported", 0)
    out.setdefault("relations", 0)
    return out


TIME = re.compile(r"(\d{4}-\d{2}-\d{2})([ T]\d{2}:\d{2}:\d{2})?(.*)", re.DOTALL)
TIME_COLUMNS = {"conversation": "ts", "digest": "created_at", "memory_item": "created_at"}


def into_the_past(sqlite: Path, now: dt.datetime) -> int:
    """Moves every readable time of an old store back by whole days, so that the newest lies two days
    before ``now``, each kept in its written form (separator, ``Z`` or offset); returns the days.

    ``write_store`` dates its rows from 2026-03-02 on, a row every few hours, so a large store
    reaches past today, and the import refuses a time ahead of the clock; moved back, every gap
    between two rows, so every session and count, is as generated (expected.json holds)."""
    db = sqlite3.connect(sqlite)
    found = []  # (table, column, id, naive time, separator and time text, rest)
    for table, column in TIME_COLUMNS.items():
        for rid, value in db.execute(f"SELECT id, {column} FROM {table}"):
            parts = TIME.fullmatch(value) if isinstance(value, str) else None
            try:
                when = dt.datetime.fromisoformat(parts[1] + (parts[2] or "").replace(" ", "T")) if parts else None
            except ValueError:  # an unreadable time stays as it is
                when = None
            if when is not None:
                found.append((table, column, rid, when, parts[2], parts[3]))
    days = max(0, (max(f[3] for f in found).date() - (now - dt.timedelta(days=2)).date()).days)
    for table, column, rid, when, clock, rest in found:
        moved = when - dt.timedelta(days=days)
        text = moved.strftime("%Y-%m-%d") + (clock[0] + moved.strftime("%H:%M:%S") if clock else "") + rest
        db.execute(f"UPDATE {table} SET {column} = ? WHERE id = ?", (text, rid))
    db.commit()
    db.close()
    return days


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--turns", type=int, default=4000)
    ap.add_argument("--items", type=int, default=523)
    ap.add_argument(
        "--into-the-past",
        action="store_true",
        help="move every time back by whole days, the newest two days before now (an import of today reads them all)",
    )
    a = ap.parse_args(argv)
    exp = write_store(a.out, a.seed, a.turns, a.items)
    if a.into_the_past:
        into_the_past(a.out / "legacy.sqlite", dt.datetime.now(dt.UTC))
    print(json.dumps({k: exp[k] for k in SUMMARY_KEYS}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
