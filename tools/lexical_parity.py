"""Keyword-arm parity: BM25 over ``store_service.search.analysis`` lexemes versus PostgreSQL ``to_tsvector``.

In-process, no running stack. For each corpus (each LoCoMo conversation separately, SciFact as one)
it ranks every query's memories with the keyword arm's BM25 (k1 1.2, b 0.75, idf
log(1 + (N - df + 0.5) / (df + 0.5)), document length = distinct lexemes, tf = occurrences in title
and body, OR over the query terms; with three or more query terms, terms in 15% or more of the
documents are dropped except the rarest, which is always kept) and prints recall@10, nDCG@10 and
MRR over the top 50, pooled as ``cli/retrieval_metrics.py`` computes them, once per analyzer:

- ``analysis``: ``document_terms`` / ``query_terms`` of ``store_service.search.analysis``;
- ``pg``: ``to_tsvector('english', ...)`` lexemes and position counts from an embedded PostgreSQL
  (started in a temporary folder; the lexemes are cached in ``--cache`` so reruns need no server).

    .venv/bin/python -m tools.lexical_parity [--data DIR] [--cache /tmp/pg-lexemes.json]

``--data`` is a folder holding LoCoMo and SciFact in the format of ``demo/`` (README.md, "Retrieval
quality"); by default the bench's (``bench.corpus.EVAL``: ``$BENCH_EVAL_DIR``, else the shared eval
data beside the checkout).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from bench.corpus import EVAL, require_eval
from store_service.search import analysis

K1, B, COMMON_SHARE, COMMON_MIN_TERMS, TOP = 1.2, 0.75, 0.15, 3, 50


def load(folder: Path) -> tuple[list[dict], list[dict]]:
    def rows(name: str) -> list[dict]:
        with open(folder / name, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    return rows("memories.jsonl"), rows("queries.jsonl")


def corpora(data: Path) -> dict[str, list[tuple[list[dict], list[dict]]]]:
    locomo = sorted(p for p in (data / "locomo").iterdir() if p.is_dir())
    return {"locomo": [load(p) for p in locomo], "scifact": [load(data / "scifact")]}


def pg_lexemes(texts: list[str], cache: Path) -> dict[str, list[tuple[str, int, int]]]:
    """text -> [(lexeme, occurrences, first position)] from to_tsvector('english', text)."""
    known: dict[str, list] = json.loads(cache.read_text()) if cache.exists() else {}
    missing = sorted({t for t in texts if t not in known})
    if missing:
        import psycopg

        from servicekit.embedded_pg import EmbeddedPostgres

        with tempfile.TemporaryDirectory() as tmp:
            server = EmbeddedPostgres(Path(tmp) / "pg")
            try:
                with psycopg.connect(server.control_url) as conn:
                    for i in range(0, len(missing), 500):
                        batch = missing[i : i + 500]
                        got: dict[int, list] = defaultdict(list)
                        for idx, lexeme, n, first in conn.execute(
                            """SELECT t.i, v.lexeme, coalesce(array_length(v.positions, 1), 1), v.positions[1]
                                     FROM unnest(%s::text[]) WITH ORDINALITY AS t(txt, i),
                                          unnest(to_tsvector('english', t.txt)) AS v""",
                            (batch,),
                        ):
                            got[idx - 1].append((lexeme, n, first or 0))
                        for j, text in enumerate(batch):
                            known[text] = sorted(got.get(j, []), key=lambda r: r[2])
            finally:
                server.stop()
        cache.write_text(json.dumps(known))
    return known


class Analyzer:
    def doc(self, title: str, body: str) -> dict[str, int]:
        raise NotImplementedError

    def query(self, text: str) -> list[str]:
        raise NotImplementedError


class Ours(Analyzer):
    def doc(self, title, body):
        return analysis.document_terms(title, body)

    def query(self, text):
        return analysis.query_terms(text)


class Postgres(Analyzer):
    def __init__(self, lexemes):
        self.lexemes = lexemes

    def doc(self, title, body):
        tf: dict[str, int] = defaultdict(int)
        for text in (title, body):
            for lexeme, n, _ in self.lexemes[text]:
                tf[lexeme] += n
        return dict(tf)

    def query(self, text):
        return [r[0] for r in self.lexemes[text]][: analysis.MAX_QUERY_TERMS]


def rank(docs: list[tuple[str, dict[str, int]]], queries: list[list[str]], keep_rarest: bool) -> list[list[str]]:
    n = len(docs)
    postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for i, (_, tf) in enumerate(docs):
        for term, count in tf.items():
            postings[term].append((i, count))
    lengths = [len(tf) for _, tf in docs]
    avg = max(sum(lengths) / n, 1) if n else 1
    out = []
    for terms in queries:
        df = {t: len(postings[t]) for t in terms if postings.get(t)}
        if len(terms) >= COMMON_MIN_TERMS and df:
            rarest = min(df, key=lambda t: df[t])  # first rarest in query order
            df = {t: c for t, c in df.items() if c / n < COMMON_SHARE or (keep_rarest and t == rarest)}
        scores: dict[int, float] = defaultdict(float)
        for t, c in df.items():
            idf = math.log(1 + (n - c + 0.5) / (c + 0.5))
            for i, tf in postings[t]:
                scores[i] += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * lengths[i] / avg))
        ranked = sorted(scores, key=lambda i: (-scores[i], docs[i][0]))[:TOP]
        out.append([docs[i][0] for i in ranked])
    return out


def metrics(ranked: list[str], relevant: set[str]) -> tuple[float, float, float]:
    recall = len(relevant & set(ranked[:10])) / len(relevant)
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in relevant)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
    mrr = next((1 / (i + 1) for i, d in enumerate(ranked) if d in relevant), 0.0)
    return recall, dcg / idcg, mrr


def evaluate(parts, analyzer: Analyzer, keep_rarest: bool) -> tuple[float, float, float, int]:
    totals, count = [0.0, 0.0, 0.0], 0
    for memories, queries in parts:
        docs = [(m["id"], analyzer.doc(m.get("title") or "", m.get("body") or "")) for m in memories]
        results = rank(docs, [analyzer.query(q["question"]) for q in queries], keep_rarest)
        for q, ranked in zip(queries, results, strict=True):
            for k, v in enumerate(metrics(ranked, set(q["relevant_ids"]))):
                totals[k] += v
            count += 1
    return totals[0] / count, totals[1] / count, totals[2] / count, count


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=EVAL, help="eval data folder (default: bench.corpus.EVAL)")
    p.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "recallatron-pg-lexemes.json")
    p.add_argument("--no-keep-rarest", action="store_true", help="the old 15%% rule (may drop every term)")
    args = p.parse_args(argv)
    data = corpora(require_eval(args.data))
    texts = [
        t
        for parts in data.values()
        for memories, queries in parts
        for t in [m.get("title") or "" for m in memories]
        + [m.get("body") or "" for m in memories]
        + [q["question"] for q in queries]
    ]
    pg = Postgres(pg_lexemes(texts, args.cache))
    print(f"{'dataset':8} {'analyzer':9} {'queries':>7} {'recall@10':>9} {'nDCG@10':>8} {'MRR':>6}  seconds")
    for name, parts in data.items():
        for label, analyzer in (("pg", pg), ("analysis", Ours())):
            start = time.perf_counter()
            r, ndcg, mrr, n = evaluate(parts, analyzer, not args.no_keep_rarest)
            print(f"{name:8} {label:9} {n:7d} {r:9.3f} {ndcg:8.3f} {mrr:6.3f}  {time.perf_counter() - start:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
