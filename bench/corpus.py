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
# "Retrieval quality"): $BENCH_EVAL_DIR, else .bench/eval in this checkout (git-ignored: a copy or a
# link put there). Every bench script and tools/ takes it from here; ``require_eval`` says where it
# comes from and how to name it when it is missing.
EVAL = Path(os.environ.get("BENCH_EVAL_DIR") or ROOT / ".bench" / "eval")
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


def missing_eval(eval_dir: Path = EVAL) -> str | None:
    """What of the eval data the bench reads is missing in ``eval_dir`` (None when nothing is): at
    least one LoCoMo conversation, each with its memories and queries, and SciFact's."""
    if not eval_dir.is_dir():
        return "the folder does not exist"
    locomo = eval_dir / "locomo"
    conversations = sorted(p for p in locomo.iterdir() if p.is_dir()) if locomo.is_dir() else []
    if not conversations:
        return "no conversation folder in locomo/"
    wanted = [c / name for c in conversations for name in ("memories.jsonl", "queries.jsonl")]
    wanted += [eval_dir / "scifact" / name for name in ("memories.jsonl", "queries.jsonl")]
    absent = [str(p.relative_to(eval_dir)) for p in wanted if not p.is_file()]
    return f"no {', '.join(absent)}" if absent else None


def require_eval(eval_dir: Path = EVAL) -> Path:
    """``eval_dir`` when it holds the eval data; otherwise exits (status 1) saying what is missing,
    where the data comes from and how to name its folder. The data sets are public but not carried
    here (LoCoMo's licence is non-commercial), so a clone without them is told what to fetch instead
    of shown a traceback."""
    missing = missing_eval(eval_dir)
    if missing is None:
        return eval_dir
    raise SystemExit(
        f"bench: no eval data in {eval_dir}: {missing}.\n"
        "The bench builds its workspaces and questions from two public data sets, in the format of demo/\n"
        "(demo/README.md), that this repository does not carry:\n"
        "  locomo/<conversation>/memories.jsonl, queries.jsonl  LoCoMo, github.com/snap-research/LoCoMo\n"
        "      (data/locomo10.json; CC BY-NC 4.0): a folder per conversation, a memory per dialog turn\n"
        "  scifact/memories.jsonl, queries.jsonl                SciFact, github.com/allenai/scifact (as in\n"
        "      BEIR; claims CC BY 4.0, abstracts ODC-By 1.0): the abstracts, the claims as questions\n"
        "The folder is $BENCH_EVAL_DIR, else .bench/eval in this checkout (git-ignored). Write them in\n"
        "that layout, then name the folder or link it there:\n"
        "  BENCH_EVAL_DIR=/path/to/eval make bench\n"
        "  ln -s /path/to/eval .bench/eval\n"
        '(README.md, "Retrieval quality (measured)", describes the data.)'
    )


def _jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _conversations(eval_dir: Path) -> list[Path]:
    """The LoCoMo conversation folders; every reader of the eval data starts here, so a bench entry
    that comes to read it without the data stops with ``require_eval``'s message, not a traceback."""
    require_eval(eval_dir)
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
