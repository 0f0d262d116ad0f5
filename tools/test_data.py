"""Writes tests/data/eval/ from the shared evaluation data (../shared/eval beside the checkout): the few
rows the tests read, in the same format, so that a clone alone runs every test. Run once by hand
when a test needs other rows; the tests never read ../shared.

    .venv/bin/python -m tools.test_data [--eval DIR]

What each test takes (tests/data/README.md says the same):
- tests/test_keyword_classes.py: LoCoMo conv-26 whole (its memories) and the first 60 SciFact abstracts;
- tests/test_bench.py: conv-26 and conv-30 cut to 25 turns with the questions about them, the first
  12 SciFact claims with the abstracts they cite, and the first 10 abstracts;
- tests/test_onnx_embed.py: ``onnx_texts.jsonl``, about 420 texts spread over all of it (LoCoMo
  turns and questions, SciFact claims and abstracts) as (title, body) pairs or questions.
SciFact abstracts keep the file's order, so the first N of the carried file are the first N of the
shared one.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "eval"
LOCOMO_CUT = {"conv-26": None, "conv-30": 25}  # turns kept per conversation (None: every one)
QUESTIONS_WITHIN = 25  # questions kept: those about the first 25 turns of their conversation
SCIFACT_FIRST, SCIFACT_CLAIMS = 60, 12
ONNX_SPREAD = {"turn": 150, "question": 120, "claim": 100, "abstract": 50}


def lines(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(x) for x in f if x.strip()]


def write(path: Path, rows: list[dict]) -> None:
    """JSON Lines without each row's ``metadata`` (no test reads it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(
            json.dumps({k: v for k, v in r.items() if k != "metadata"}, ensure_ascii=False) + "\n" for r in rows
        )


def spread(items: list, n: int) -> list:
    """``n`` items evenly through ``items`` (tests/test_onnx_embed.py chose its texts so)."""
    step = max(1, len(items) // n)
    return items[::step][:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval", type=Path, default=ROOT.parent / "shared" / "eval")
    src = parser.parse_args().eval
    for conv, cut in LOCOMO_CUT.items():
        mems = lines(src / "locomo" / conv / "memories.jsonl")[:cut]
        ids = {r["id"] for r in mems[:QUESTIONS_WITHIN]}
        queries = [q for q in lines(src / "locomo" / conv / "queries.jsonl") if set(q["relevant_ids"]) <= ids]
        write(OUT / "locomo" / conv / "memories.jsonl", mems)
        write(OUT / "locomo" / conv / "queries.jsonl", queries)
    claims = lines(src / "scifact" / "queries.jsonl")
    docs = lines(src / "scifact" / "memories.jsonl")
    cited = {d for q in claims[:SCIFACT_CLAIMS] for d in q["relevant_ids"]}
    write(OUT / "scifact" / "memories.jsonl", [d for i, d in enumerate(docs) if i < SCIFACT_FIRST or d["id"] in cited])
    write(OUT / "scifact" / "queries.jsonl", claims[:SCIFACT_CLAIMS])

    convs = sorted((src / "locomo").iterdir())
    turns = [m for d in convs for m in lines(d / "memories.jsonl")]
    questions = [q["question"] for d in convs for q in lines(d / "queries.jsonl")]
    rows = [{"kind": "turn", "title": m["title"], "body": m["body"]} for m in spread(turns, ONNX_SPREAD["turn"])]
    rows += [{"kind": "question", "text": q} for q in spread(questions, ONNX_SPREAD["question"])]
    rows += [{"kind": "claim", "text": q["question"]} for q in spread(claims, ONNX_SPREAD["claim"])]
    rows += [
        {"kind": "abstract", "title": m["title"], "body": m["body"]} for m in spread(docs, ONNX_SPREAD["abstract"])
    ]
    write(OUT.parent / "onnx_texts.jsonl", rows)


if __name__ == "__main__":
    main()
