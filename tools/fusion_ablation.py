"""Hybrid fusion rules side by side on the shared eval data, in process, by nDCG@10.

The keyword arm is the product's: its analyzer, its kept terms (15% rule) and BM25 weights from
``store_service.search.candidates``. The dense arm is exact MiniLM kNN, with the 0.30 floor and 100 rows
per arm. Compared: plain RRF, and the precedence rules ``rank_service.fusion`` can apply ("shipped"
is what the product does: identifiers for lookups, then every scored term).

    .venv/bin/python -m tools.fusion_ablation [--data DIR]   (default: bench.corpus.EVAL, $BENCH_EVAL_DIR)

Embeddings are cached in /tmp/recallatron-fusion-ablation/ (minutes to compute on a CPU).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from bench.corpus import EVAL, require_eval
from cli.retrieval_metrics import ndcg_at
from store_service.search import analysis, bm25, candidates

CACHE = Path("/tmp/recallatron-fusion-ablation")
FLOOR, PER_ARM, RRF_K = 0.30, 100, 60


def _jsonl(path: Path) -> list[dict]:
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


def _encode(texts: list[str], key: str, encoder: list) -> np.ndarray:
    """Unit vectors of ``texts``, cached by ``key``; the encoder loads on first need."""
    CACHE.mkdir(exist_ok=True)
    path = CACHE / f"{key}.npy"
    if path.exists():
        return np.load(path)
    if not encoder:
        from embed_service.models import BiEncoder

        encoder.append(BiEncoder())
    vectors = encoder[0].encode(texts)
    np.save(path, vectors)
    return vectors


def _rules(kept: list[str], docs: list[dict], lexical: list[int]) -> dict:
    """Precedence key functions (lower sorts first) by rule name, for one question."""
    on_list = set(lexical)
    identifiers = analysis.identifier_terms(kept)
    lookup = candidates._question_size(kept, identifiers) <= candidates.IDENTIFIER_LOOKUP_MAX_TERMS

    def held(i: int, terms: list[str]) -> int:
        return sum(1 for t in terms if t in docs[i]) if i in on_list else 0

    def every(i: int) -> bool:
        return len(kept) >= 2 and held(i, kept) == len(kept)

    return {
        "rrf": lambda i: 0,
        "identifiers first (every question)": lambda i: -held(i, identifiers),
        "all scored terms first": lambda i: not every(i),
        "identifiers (every question), then all terms": lambda i: (-held(i, identifiers), not every(i)),
        "shipped: identifiers (lookups), then all terms": lambda i: (
            -held(i, identifiers) if lookup else 0,
            not every(i),
        ),
    }


# Tie-breaks after (precedence, RRF score, best single-arm rank), for the shipped rule: the product
# broke the remaining ties by memory id, a random UUID per load, so a figure moved between two loads
# of the same data; "random ids" gives the spread over TIE_SEEDS shuffles of the ids.
TIE_SEEDS = 20
TIE_BREAKS = ("random ids", "lexical rank, then id", "dense rank, then id")


def _fuse(lexical: list[int], dense: list[int], key, ids: list[str], tie=None) -> list[str]:
    """Fused order of corpus indexes; ``tie`` (index, per-arm ranks) sorts equals, else the id."""
    ranks: dict[int, dict[int, int]] = {}
    for arm, rows in enumerate((lexical, dense)):
        for rank, i in enumerate(rows, 1):
            ranks.setdefault(i, {})[arm] = rank
    both = bool(lexical and dense)
    tie = tie or (lambda i, r: ids[i])
    order = sorted(
        ranks,
        key=lambda i: (
            key(i) if both else 0,
            -sum(1 / (RRF_K + r) for r in ranks[i].values()),
            min(ranks[i].values()),
            tie(i, ranks[i]),
        ),
    )
    return [ids[i] for i in order]


def _ties(n: int) -> dict[str, list]:
    """Tie-break functions by name (each a list: one per seed for the random ids)."""
    rng = np.random.default_rng(0)
    shuffles = [rng.permutation(n) for _ in range(TIE_SEEDS)]
    absent = 10**9
    return {
        "random ids": [lambda i, r, p=p: p[i] for p in shuffles],
        "lexical rank, then id": [lambda i, r: (r.get(0, absent), i)],
        "dense rank, then id": [lambda i, r: (r.get(1, absent), i)],
    }


def corpus_scores(folder: Path, key: str, encoder: list) -> tuple[dict[str, float], int]:
    """Mean nDCG@10 per rule over one corpus, and its question count."""
    mems, queries = _jsonl(folder / "memories.jsonl"), _jsonl(folder / "queries.jsonl")
    ids = [m["id"] for m in mems]
    docs = [analysis.document_terms(m.get("title") or "", m["body"]) for m in mems]
    n, avg = len(docs), max(sum(len(d) for d in docs) / len(docs), 1.0)
    df: dict[str, int] = {}
    for d in docs:
        for t in d:
            df[t] = df.get(t, 0) + 1
    doc_vectors = _encode(
        [f"{m['title']}\n{m['body']}" if m.get("title") else m["body"] for m in mems], f"{key}-memories", encoder
    )
    query_vectors = _encode([q["question"] for q in queries], f"{key}-queries", encoder)
    totals: dict[str, float] = {}
    ties = _ties(len(mems))
    for q, qv in zip(queries, query_vectors, strict=True):
        kept = bm25.kept_terms(analysis.query_terms(q["question"]), df, n)
        idf = {t: bm25.idf(n, df[t]) for t in kept}
        scores = {
            i: sum(bm25.weight(idf[t], d[t], len(d), avg) for t in kept if t in d)
            for i, d in enumerate(docs)
            if any(t in d for t in kept)
        }
        lexical = sorted(scores, key=lambda i: (-bm25.tie_key(scores[i]), ids[i]))[:PER_ARM]
        cosine = doc_vectors @ qv
        dense = [int(i) for i in np.argsort(-cosine)[:PER_ARM] if cosine[i] >= FLOOR]
        relevant = set(q["relevant_ids"])
        rules = _rules(kept, docs, lexical)
        for name, rule in rules.items():
            totals[name] = totals.get(name, 0.0) + ndcg_at(_fuse(lexical, dense, rule, ids), relevant, 10)
        shipped = rules["shipped: identifiers (lookups), then all terms"]
        for name, variants in ties.items():
            for seed, tie in enumerate(variants):
                got = ndcg_at(_fuse(lexical, dense, shipped, ids, tie), relevant, 10)
                totals[f"ties: {name}#{seed}"] = totals.get(f"ties: {name}#{seed}", 0.0) + got
    return {k: v / len(queries) for k, v in totals.items()}, len(queries)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=EVAL, help="eval data folder (default: bench.corpus.EVAL)")
    data = require_eval(ap.parse_args().data)
    encoder: list = []
    pooled: dict[str, float] = {}
    count = 0
    for conv in sorted((data / "locomo").iterdir()):
        scores, n = corpus_scores(conv, conv.name, encoder)
        count += n
        for k, v in scores.items():
            pooled[k] = pooled.get(k, 0.0) + v * n
    scifact, _ = corpus_scores(data / "scifact", "scifact", encoder)
    print("| fusion | LoCoMo nDCG@10 | SciFact nDCG@10 |\n|---|---|---|")
    for name in scifact:
        if not name.startswith("ties: "):
            print(f"| {name} | {pooled[name] / count:.4f} | {scifact[name]:.4f} |")
    print("\n| shipped rule, remaining ties by | LoCoMo nDCG@10 | SciFact nDCG@10 |\n|---|---|---|")
    for tie in TIE_BREAKS:
        keys = [k for k in scifact if k.startswith(f"ties: {tie}#")]
        locomo = np.array([pooled[k] / count for k in keys])
        sci = np.array([scifact[k] for k in keys])
        if len(keys) == 1:
            print(f"| {tie} | {locomo[0]:.4f} | {sci[0]:.4f} |")
        else:
            print(
                f"| {tie} ({len(keys)} shuffles: mean, min to max) | {locomo.mean():.4f}, {locomo.min():.4f} to "
                f"{locomo.max():.4f} | {sci.mean():.4f}, {sci.min():.4f} to {sci.max():.4f} |"
            )


if __name__ == "__main__":
    main()
