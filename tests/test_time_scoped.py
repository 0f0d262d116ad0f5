"""tools/time_scoped.py on a small conversation of its own (the shared LoCoMo data is not read by
tests): which questions are kept, the three forms in turn, their reference times, and that every
question it writes is read as the period it names (gateway/time_words.py)."""

from __future__ import annotations

import datetime
import json

from gateway.time_words import understand
from tools.time_scoped import scoped


def test_questions_named_by_their_sessions_period(tmp_path):
    sessions = {1: "2023-05-08T13:56:00", 2: "2023-06-20T09:00:00", 3: "2023-08-02T18:30:00"}
    memories = [
        {"id": f"D{s}:{t}", "title": "", "body": f"turn {t} of session {s}", "occurred_at": when}
        for s, when in sessions.items()
        for t in range(1, 4)
    ]
    (tmp_path / "memories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in memories))
    queries = [
        {
            "id": f"c/q{i}",
            "question": f"What did Ana say about topic {i}?",
            "relevant_ids": [f"D{1 + i % 3}:1"],
            "category_name": "single-hop",
        }
        for i in range(12)
    ] + [
        {"id": "c/t", "question": "When did Ana move?", "relevant_ids": ["D1:2"], "category_name": "temporal"},
        {"id": "c/x", "question": "What did Ana say?", "relevant_ids": ["D1:2", "D2:1"], "category_name": "multi-hop"},
        {"id": "c/y", "question": "What did Ana say in June?", "relevant_ids": ["D2:2"], "category_name": "single-hop"},
        {"id": "c/z", "question": "What did Ana say?", "relevant_ids": ["D9:9"], "category_name": "single-hop"},
    ]
    (tmp_path / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    rows = scoped(tmp_path)
    # Every second of the 12 eligible ones; the temporal, two-session, already-timed and unknown-turn ones never.
    assert [r["source_id"] for r in rows] == [f"c/q{i}" for i in range(1, 12, 2)]
    assert [r["form"] for r in rows] == ["last-month", "day", "month"] * 2
    said = {m["id"]: datetime.datetime.fromisoformat(m["occurred_at"]).replace(tzinfo=datetime.UTC) for m in memories}
    for row in rows:
        when = said[row["relevant_ids"][0]]
        reference = datetime.datetime.fromisoformat(row["reference_time"])
        read = understand(row["question"], reference)
        assert read is not None and read.start <= when < read.end, row
        if row["form"] == "last-month":
            assert row["question"].endswith(" last month?") and reference.day == 15
        else:
            assert reference == datetime.datetime(2023, 8, 3, 18, 30, tzinfo=datetime.UTC)  # after the last session
        assert row["category_name"] == row["form"] and row["id"] == f"{row['source_id']}/{row['form']}"
