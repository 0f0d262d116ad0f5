"""The old store's generator (tools/make_legacy_store.py) on its own, no stack: same seed, same files;
its line and expected.json agree; ``into_the_past`` moves every readable time back by the same whole
days, keeping each one's written form. That its stores import with the counts it wrote is
tests/test_import_legacy.py's ``test_the_generators_stores_import_with_the_counts_it_wrote``."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from tools.make_legacy_store import SUMMARY_KEYS, TIME_COLUMNS, into_the_past, write_store

ROOT = Path(__file__).resolve().parent.parent
SIZE = {"turns": 900, "items": 120}  # big enough for every fault the generator writes (its chain faults need 41 items)
UNREADABLE = ("", "yesterday")  # the generator's two unreadable times (bad_timestamp)


def files(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in ("legacy.sqlite", "graph.jsonl", "expected.json")}


def instant(text: str) -> dt.datetime:
    """A readable time of the generator's, in any of its three forms, as a naive UTC time."""
    return dt.datetime.fromisoformat(text.removesuffix("Z").removesuffix("+00:00"))


def times(sqlite: Path) -> dict[tuple[str, int], str]:
    db = sqlite3.connect(sqlite)
    try:
        return {
            (table, rid): value
            for table, column in TIME_COLUMNS.items()
            for rid, value in db.execute(f"SELECT id, {column} FROM {table}")
        }
    finally:
        db.close()


def test_same_seed_same_files_and_another_seed_another_store(tmp_path):
    first = write_store(tmp_path / "a", seed=5, **SIZE)
    again = write_store(tmp_path / "b", seed=5, **SIZE)
    other = write_store(tmp_path / "c", seed=6, **SIZE)
    assert files(tmp_path / "a") == files(tmp_path / "b") and first == again
    assert files(tmp_path / "a")["legacy.sqlite"] != files(tmp_path / "c")["legacy.sqlite"] and first != other
    # Writing into a folder that holds a store replaces it (the SQLite file is not appended to).
    write_store(tmp_path / "c", seed=5, **SIZE)
    assert files(tmp_path / "c") == files(tmp_path / "a")
    assert json.loads((tmp_path / "a" / "expected.json").read_text()) == first
    with sqlite3.connect(tmp_path / "a" / "legacy.sqlite") as db:
        turns = db.execute("SELECT count(*) FROM conversation").fetchone()[0]
    assert turns == SIZE["turns"] + 3  # the ordinary turns and the three stray rows (a bad role, two bad times)
    assert sum(first["history"]["skipped"].values()) + first["history"]["imported"] == turns
    assert first["chain_faults_reported"] == 2 and first["graph_lines_skipped"] == {"bad_json": 1, "unknown_entity": 1}


def moved_by(before: dict, after: dict) -> dt.timedelta:
    """The one shift from ``before``'s times to ``after``'s, each kept in its written form (``Z``, an
    offset, a space or ``T``), the unreadable ones unchanged."""
    assert before.keys() == after.keys()
    shifts, unreadable = set(), 0
    for key, was in before.items():
        now = after[key]
        if was in UNREADABLE:
            assert now == was
            unreadable += 1
            continue
        for suffix in ("Z", "+00:00"):
            assert was.endswith(suffix) == now.endswith(suffix), (was, now)
        assert (" " in was) == (" " in now), (was, now)
        shifts.add(instant(was) - instant(now))
    assert unreadable == 2
    (shift,) = shifts  # one shift for every row: every gap, so every session, is as generated
    assert shift == dt.timedelta(days=shift.days) and shift.days >= 0
    return shift


def newest(found: dict) -> dt.date:
    return max(instant(v) for v in found.values() if v not in UNREADABLE).date()


def test_the_command_prints_expected_jsons_counts_and_moves_the_store_before_today(tmp_path):
    plain = tmp_path / "plain"
    write_store(plain, seed=8, turns=2500, items=120)
    out = tmp_path / "moved"
    argv = [sys.executable, "-m", "tools.make_legacy_store", str(out), "--seed", "8", "--turns", "2500"]
    done = subprocess.run([*argv, "--items", "120", "--into-the-past"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    expected = json.loads((out / "expected.json").read_text())
    assert json.loads(done.stdout) == {k: expected[k] for k in SUMMARY_KEYS}
    # Moving touches only the times: the graph and the counts are the plain run's.
    assert files(out)["graph.jsonl"] == files(plain)["graph.jsonl"]
    assert files(out)["expected.json"] == files(plain)["expected.json"]
    before, after = times(plain / "legacy.sqlite"), times(out / "legacy.sqlite")
    moved_by(before, after)
    # The newest row two days before today, or where it was when that is earlier still.
    two_days_ago = (dt.datetime.now(dt.UTC) - dt.timedelta(days=2)).date()
    assert newest(after) == min(newest(before), two_days_ago)


def test_into_the_past_moves_by_whole_days_to_two_days_before_now_or_not_at_all(tmp_path):
    write_store(tmp_path, seed=2, **SIZE)
    sqlite = tmp_path / "legacy.sqlite"
    before = times(sqlite)
    assert newest(before) > dt.date(2026, 5, 1)  # its 900 turns run from 2026-03-02 past May
    days = into_the_past(sqlite, dt.datetime(2026, 5, 1, 12, tzinfo=dt.UTC))
    after = times(sqlite)
    assert moved_by(before, after) == dt.timedelta(days=days) and days > 0
    assert newest(after) == dt.date(2026, 4, 29)
    # A store already two days in the past stays as it is.
    assert into_the_past(sqlite, dt.datetime(2030, 1, 1, tzinfo=dt.UTC)) == 0
    assert times(sqlite) == after
