"""Does recall gain from entities? LoCoMo's questions with entities derived from the speakers (issue
24, item 4: "a recall whose question names a known entity may add memories about directly related
entities as candidates ... keep it only if it helps, and say so").

Each LoCoMo conversation is loaded as the evaluation loads it (``cli.dataset``: a fresh workspace, the
memories through RememberBatch, the backlog drained), each memory about its speaker (the row's
``metadata.speaker``), and one memory stating that the two speakers talk with each other (a relation
``A -[talks_with]-> B``). Then every question is asked three ways through the gateway, hybrid, no
re-ranker, top 10:

- **plain**: Recall as the evaluation asks it;
- **expanded**: when the question names a speaker (by first name), RRF (k = 60) of the plain ranking
  and a Recall restricted to the entities related to the named one (``GetEntity``'s relations: the
  other speaker), i.e. the related entities' memories added as candidates;
- **favoured**: the same with a Recall restricted to the named speaker's own memories.

Metrics as ``cli.retrieval_metrics`` defines them, per category and over all questions; a question
that names no speaker is answered plainly in every variant.

Usage: ``[BENCH_EVAL_DIR=DIR] .venv/bin/python -m bench.entity_expansion [--dataset LOCOMO_DIR] [--json]``
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from bench import corpus
from cli.dataset import _request, fresh_member, read_jsonl, wait_for_backlog
from cli.evaluate import variant
from cli.retrieval_metrics import average, score_query

RRF_K = 60
TOP_K = 10
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def _load(gw: client.Gateway, folder: Path) -> tuple[client.Metadata, dict[str, str], dict[str, str]]:
    """The conversation's memories, each about its speaker, and the speakers' relation; (metadata,
    dataset id -> memory id, speaker -> entity id)."""
    _, token = fresh_member(gw, f"expansion {folder.name}", "expansion")
    md = client.bearer(token)
    rows = read_jsonl(folder / "memories.jsonl")
    ids: dict[str, str] = {}
    speakers: dict[str, str] = {}
    for start in range(0, len(rows), 200):
        reqs = []
        for row in rows[start : start + 200]:
            req = _request(row, m.PURPOSE_CONVERSATION)
            req.entities.append(m.EntityMention(name=row["metadata"]["speaker"]))
            reqs.append(req)
        for row, res in zip(
            rows[start : start + 200],
            gw.memory.RememberBatch(g.RememberBatchRequest(requests=reqs), metadata=md, timeout=300).results,
            strict=True,
        ):
            ids[res.memory.id] = row["id"]
            speakers.setdefault(row["metadata"]["speaker"], res.memory.entity_resolutions[0].entity_id)
    a, b = sorted(speakers)
    gw.memory.Remember(
        g.RememberRequest(
            purpose=m.PURPOSE_CONVERSATION,
            audience=m.AUDIENCE_WORKSPACE,
            body=f"{a} and {b} talk with each other.",
            relations=[
                m.EntityRelation(
                    subject=m.EntityMention(entity_id=speakers[a]),
                    predicate="talks_with",
                    object=m.EntityMention(entity_id=speakers[b]),
                )
            ],
        ),
        metadata=md,
    )
    wait_for_backlog(gw)
    return md, ids, speakers


def _recall(gw: client.Gateway, md, question: str, entity_ids=()) -> list[str]:
    req = variant(m.RECALL_MODE_HYBRID)
    req.query, req.top_k = question, TOP_K
    req.entity_ids.extend(entity_ids)
    return [it.memory.id for it in gw.memory.Recall(req, metadata=md, timeout=60).items]


def _fused(*rankings: list[str]) -> list[str]:
    score: dict[str, float] = {}
    for ranking in rankings:
        for rank, mid in enumerate(ranking, start=1):
            score[mid] = score.get(mid, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(score, key=lambda mid: -score[mid])[:TOP_K]


def run(gw: client.Gateway, dataset: Path) -> dict:
    scores: dict[str, dict[str, list]] = {name: {} for name in ("plain", "expanded", "favoured")}
    named_count = 0
    for folder in sorted(p for p in dataset.iterdir() if (p / "memories.jsonl").is_file()):
        md, ids, speakers = _load(gw, folder)
        related = {}
        for name, eid in speakers.items():
            page = gw.memory.GetEntity(g.GetEntityRequest(entity=eid), metadata=md)
            related[name] = [r.entity_id for r in (*page.relations_out, *page.relations_in)]
        for q in read_jsonl(folder / "queries.jsonl"):
            relevant = set(q["relevant_ids"])
            category = CATEGORIES.get(q.get("category"), str(q.get("category")))
            plain = _recall(gw, md, q["question"])
            named = [s for s in speakers if s.split()[0].casefold() in q["question"].casefold()]
            expanded, favoured = plain, plain
            if named:
                named_count += 1
                near = [e for s in named for e in related[s]]
                expanded = _fused(plain, _recall(gw, md, q["question"], near)) if near else plain
                favoured = _fused(plain, _recall(gw, md, q["question"], [speakers[s] for s in named]))
            for label, ranking in (("plain", plain), ("expanded", expanded), ("favoured", favoured)):
                got = score_query([ids.get(x, "") for x in ranking], relevant)
                scores[label].setdefault(category, []).append(got)
                scores[label].setdefault("all", []).append(got)
    return {
        "questions_naming_a_speaker": named_count,
        "variants": {
            label: {cat: {**average(rows), "queries": len(rows)} for cat, rows in per.items()}
            for label, per in scores.items()
        },
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", type=Path, help="a LoCoMo folder (default: the bench's, bench.corpus.EVAL)")
    p.add_argument("--home", default=str(corpus.ROOT / ".bench" / "expansion"), help="data folder (emptied first)")
    p.add_argument("--port-base", type=int, default=50190)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    from bench.stack import Stack

    dataset = args.dataset or corpus.require_eval() / "locomo"
    if not dataset.is_dir():
        raise SystemExit(f"{dataset}: no LoCoMo folder (set BENCH_EVAL_DIR or --dataset)")
    home = Path(args.home)
    shutil.rmtree(home, ignore_errors=True)
    stack = Stack.start(home, port_base=args.port_base)
    try:
        gw = client.Gateway(stack.addrs["gateway"], stack.operator_token())
        try:
            result = run(gw, dataset)
        finally:
            gw.close()
    finally:
        stack.stop()
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{result['questions_naming_a_speaker']} questions name a speaker")
    print("| variant | category | queries | recall@10 | nDCG@10 | MRR |")
    print("|---|---|---|---|---|---|")
    for label, per in result["variants"].items():
        for cat in ("multi-hop", "all"):
            f = per[cat]
            print(f"| {label} | {cat} | {f['queries']} | {f['recall@10']:.3f} | {f['ndcg@10']:.3f} | {f['mrr']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
