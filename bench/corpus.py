"""The bench workspace recipe: real text from the eval data, split into sentences and combined.

Recipe ``RECIPE`` (change the version whenever anything below changes, so built workspaces are
not reused across recipes):

1. **Core, verbatim** (title, body, occurred_at exactly as in the eval files): every memory of the
   five LoCoMo conversations (2,760 dialog turns; the LoCoMo questions target these), then the
   SciFact abstracts cited by the chosen SciFact claims. These are the memories the questions
   have as answers, so every question has a real answer in every workspace.
2. **Filler units** from every memory of both datasets (LoCoMo turns in file order, then SciFact
   abstracts in file order): the body is split into sentences with ``SENTENCE_SPLIT`` (a break
   after ``.``, ``!`` or ``?`` followed by white space and an upper-case letter, digit, quote or
   bracket); LoCoMo's ``"Speaker: "`` prefix is taken off before splitting and put back on every
   unit. A unit is a run of 1, 2 or 3 consecutive sentences of the same source memory, with the
   source's title and occurred_at; units of fewer than ``MIN_WORDS`` words are dropped, and a unit
   whose body equals an earlier unit's or a core memory's body is dropped (unique bodies).
   Order: all single sentences, then all pairs, then all triples, each level shuffled with
   ``random.Random(SEED)``.
3. **The sequence** is core + filler; a workspace of N memories holds its first N rows (so a
   smaller workspace is a prefix of a larger one). Past the unique rows (about 140,000) the
   filler repeats from its start: row i >= U is a copy (same title and body) of filler unit
   ``(i - U) mod len(filler)``. Core memories are never repeated, so a question's answers stay
   unique.

Questions (``questions()``): every 6th question of each LoCoMo conversation (index 0, 6, 12, ...;
129 questions) and every 3rd SciFact claim of ``scifact/queries.jsonl`` (50 claims): 179 in all.
"""

from __future__ import annotations

import json
import os
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

RECIPE = "sentences-v1"
ROOT = Path(__file__).resolve().parent.parent
# The eval data (LoCoMo and SciFact in the format of demo/; public, not in this repository: README.md,
# "Retrieval quality"): $BENCH_EVAL_DIR, else the shared folder beside the checkout. Every bench
# script and tools/ takes it from here.
EVAL = Path(os.environ.get("BENCH_EVAL_DIR") or ROOT.parent / "shared" / "eval")
LOCOMO_EVERY, SCIFACT_EVERY = 6, 3
SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
SPEAKER = re.compile(r"^([A-Z][\w .'-]{0,40}): ")
MIN_WORDS = 3
MAX_SPAN = 3
SEED = 7


@dataclass(frozen=True)
class Row:
    """One memory of a bench workspace; ``key`` names core memories (``conv-26/D1:3``, ``scifact/4983``)."""

    title: str
    body: str
    occurred_at: str | None
    key: str = ""


@dataclass(frozen=True)
class Question:
    """One question of the recall mix and the keys of its relevant core memories."""

    id: str
    text: str
    relevant: tuple[str, ...]
    source: str  # "locomo" or "scifact"


def _jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _conversations(eval_dir: Path) -> list[Path]:
    return sorted(p for p in (eval_dir / "locomo").iterdir() if (p / "memories.jsonl").is_file())


@lru_cache(maxsize=4)
def questions(eval_dir: Path = EVAL) -> tuple[Question, ...]:
    """The recall mix: LoCoMo questions then SciFact claims (module docstring)."""
    out = []
    for conv in _conversations(eval_dir):
        for n, q in enumerate(_jsonl(conv / "queries.jsonl")):
            if n % LOCOMO_EVERY == 0:
                out.append(
                    Question(q["id"], q["question"], tuple(f"{conv.name}/{r}" for r in q["relevant_ids"]), "locomo")
                )
    for n, q in enumerate(_jsonl(eval_dir / "scifact" / "queries.jsonl")):
        if n % SCIFACT_EVERY == 0:
            out.append(
                Question(
                    f"scifact/{q['id']}", q["question"], tuple(f"scifact/{r}" for r in q["relevant_ids"]), "scifact"
                )
            )
    return tuple(out)


def split_sentences(text: str) -> list[str]:
    """Sentences of a text by ``SENTENCE_SPLIT``, stripped, empty ones dropped."""
    return [s.strip() for s in SENTENCE_SPLIT.split(text.strip()) if s.strip()]


def _units(title: str, body: str, occurred_at: str | None, speaker_prefix: bool) -> list[list[Row]]:
    """Spans of 1..MAX_SPAN consecutive sentences of one source memory, by span length."""
    prefix = ""
    if speaker_prefix:
        match = SPEAKER.match(body)
        if match:
            prefix, body = match.group(0), body[match.end() :]
    sentences = split_sentences(body)
    levels: list[list[Row]] = [[] for _ in range(MAX_SPAN)]
    for span in range(1, MAX_SPAN + 1):
        for start in range(len(sentences) - span + 1):
            text = " ".join(sentences[start : start + span])
            if len(text.split()) >= MIN_WORDS:
                levels[span - 1].append(Row(title, prefix + text, occurred_at))
    return levels


@lru_cache(maxsize=4)
def core_and_filler(eval_dir: Path = EVAL) -> tuple[tuple[Row, ...], tuple[Row, ...]]:
    """The verbatim core rows and the unique filler units, in sequence order."""
    cited = {k.split("/", 1)[1] for q in questions(eval_dir) if q.source == "scifact" for k in q.relevant}
    core: list[Row] = []
    levels: list[list[Row]] = [[] for _ in range(MAX_SPAN)]
    for conv in _conversations(eval_dir):
        for r in _jsonl(conv / "memories.jsonl"):
            core.append(Row(r.get("title") or "", r["body"], r.get("occurred_at"), f"{conv.name}/{r['id']}"))
            for level, units in zip(
                levels, _units(r.get("title") or "", r["body"], r.get("occurred_at"), True), strict=True
            ):
                level.extend(units)
    for r in _jsonl(eval_dir / "scifact" / "memories.jsonl"):
        if r["id"] in cited:
            core.append(Row(r.get("title") or "", r["body"], r.get("occurred_at"), f"scifact/{r['id']}"))
        for level, units in zip(
            levels, _units(r.get("title") or "", r["body"], r.get("occurred_at"), False), strict=True
        ):
            level.extend(units)
    seen = {row.body for row in core}
    filler: list[Row] = []
    rng = random.Random(SEED)
    for level in levels:
        rng.shuffle(level)
        for row in level:
            if row.body not in seen:
                seen.add(row.body)
                filler.append(row)
    return tuple(core), tuple(filler)


def unique_count(eval_dir: Path = EVAL) -> int:
    """How many rows the recipe has before texts repeat."""
    core, filler = core_and_filler(eval_dir)
    return len(core) + len(filler)


def row(i: int, eval_dir: Path = EVAL, max_unique: int | None = None) -> Row:
    """Row ``i`` of the sequence. ``max_unique`` caps the unique rows (tests use it to reach repeats
    at a tiny size); it never cuts into the core."""
    core, filler = core_and_filler(eval_dir)
    n_filler = len(filler) if max_unique is None else max(1, min(len(filler), max_unique - len(core)))
    if i < len(core):
        return core[i]
    return filler[(i - len(core)) % n_filler]


def rows(n: int, eval_dir: Path = EVAL, max_unique: int | None = None) -> list[Row]:
    """The first ``n`` rows of the sequence."""
    return [row(i, eval_dir, max_unique) for i in range(n)]


def repeats_from(n: int, eval_dir: Path = EVAL, max_unique: int | None = None) -> int:
    """Index of the first repeated row in a workspace of ``n`` (``n`` when nothing repeats)."""
    core, filler = core_and_filler(eval_dir)
    n_filler = len(filler) if max_unique is None else max(1, min(len(filler), max_unique - len(core)))
    return min(n, len(core) + n_filler)
