"""A miniature eval set in the bench's layout (bench/corpus.py), built from the repository's demo
conversation, so tests of the bench's building blocks never need the public eval data."""

from __future__ import annotations

import json
from pathlib import Path

DEMO = Path(__file__).resolve().parent.parent / "demo"


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def tiny_eval(dest: Path) -> Path:
    """The demo conversation in the bench's layout: sessions 1-2 and 3-4 as two dialogs of 30 turns
    (with the questions wholly about each), and as the document corpus each whole session one
    document (``S1``..``S4``, turns joined), every demo question a claim citing the sessions of its
    answers."""
    turns, questions = _lines(DEMO / "memories.jsonl"), _lines(DEMO / "queries.jsonl")
    assert (len(turns), len(questions)) == (60, 31)
    for conv, sessions in (("demo-a", ("D1", "D2")), ("demo-b", ("D3", "D4"))):
        mems = [r for r in turns if r["id"].split(":")[0] in sessions]
        ids = {r["id"] for r in mems}
        write_jsonl(dest / "locomo" / conv / "memories.jsonl", mems)
        write_jsonl(dest / "locomo" / conv / "queries.jsonl", [q for q in questions if set(q["relevant_ids"]) <= ids])
    docs = [
        {
            "id": f"S{n}",
            "title": f"Session {n}",
            "body": " ".join(r["body"] for r in turns if r["id"].startswith(f"D{n}:")),
            "occurred_at": None,
        }
        for n in range(1, 5)
    ]
    claims = [
        {"id": q["id"], "question": q["question"], "relevant_ids": sorted({"S" + r[1] for r in q["relevant_ids"]})}
        for q in questions
    ]
    write_jsonl(dest / "scifact" / "memories.jsonl", docs)
    write_jsonl(dest / "scifact" / "queries.jsonl", claims)
    return dest
