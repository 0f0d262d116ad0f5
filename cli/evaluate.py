"""``recallatron eval``: retrieval measured on real data through the running gateway.

For each corpus of a dataset (see ``cli.dataset``): a fresh workspace and member, memories loaded
through RememberBatch, a wait until the embedding backlog is empty, every query asked through Recall,
metrics as ``cli.retrieval_metrics`` defines them. A question the gateway refuses (any gRPC error) is
counted by status code and the run goes on; the metrics are over the answered questions.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import grpc
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from cli import command, options
from cli.dataset import (
    Failure,
    corpora,
    load_corpus,
    progress,
    read_jsonl,
    report_failures,
    temporary_workspaces,
)
from cli.inject_eval import run_eval_inject
from cli.retrieval_metrics import KEYS, average, score_query
from client import choices

MIN_RESULTS = 50


def _run_variant(
    gw: client.Gateway,
    md: client.Metadata,
    queries: list[dict],
    back: dict[str, str],
    request: g.RecallRequest,
    label: str,
) -> dict:
    """Asks every query with ``request``'s settings (a question's ``reference_time``, when its line has
    one, is what its time words are read against); scores the answered ones.

    A refused question (any gRPC error, e.g. INVALID_ARGUMENT for an over-long query) is counted under
    its status code name in ``refused``, listed on stderr (the first few), and the run goes on."""
    per_query, per_category, dense_down, reranked = [], {}, 0, 0
    refused: list[Failure] = []
    for n, q in enumerate(queries, start=1):
        request.query = q["question"]
        request.ClearField("reference_time")
        try:
            if q.get("reference_time"):
                request.reference_time.FromDatetime(options.iso_instant(q["reference_time"]))
        except (ValueError, TypeError) as exc:
            refused.append((str(q.get("id", n)), "INVALID_ARGUMENT", f"reference_time: {exc}"))
            continue
        try:
            resp = gw.memory.Recall(request, metadata=md, timeout=60)
        except grpc.RpcError as exc:
            refused.append((str(q.get("id", n)), exc.code().name, exc.details() or ""))
        else:
            dense_down += not resp.dense_available
            reranked += resp.reranked
            scores = score_query([back.get(it.memory.id, "") for it in resp.items], set(q["relevant_ids"]))
            per_query.append(scores)
            per_category.setdefault(str(q.get("category_name") or q.get("category", "")), []).append(scores)
        progress(label, n, len(queries))
    if refused:
        report_failures(refused, len(queries), noun="question", verb="refused")
    return {
        "per_query": per_query,
        "per_category": per_category,
        "dense_unavailable": dense_down,
        "reranked": reranked,
        "refused": Counter(code for _, code, _ in refused),
    }


def variant(mode: int, skip_rerank: bool = True, skip_time_words: bool = False) -> g.RecallRequest:
    """The settings of one evaluated variant, as a RecallRequest without its question."""
    return g.RecallRequest(
        purpose=m.PURPOSE_CONVERSATION, mode=mode, skip_rerank=skip_rerank, skip_time_words=skip_time_words
    )


def evaluate_corpus(
    gw: client.Gateway,
    folder: Path,
    variants: dict[str, g.RecallRequest],
    top_k: int,
    memories_from: Path | None = None,
) -> dict:
    """Loads one corpus into a fresh workspace once, then asks every query under each variant
    (name -> ``variant``); returns per-variant scores and refusals, the member token and the id map."""
    workspace_id, token, ids = load_corpus(gw, folder, "eval", memories_from)
    back = {v: k for k, v in ids.items()}
    queries = read_jsonl(folder / "queries.jsonl")
    runs = {
        name: _run_variant(
            gw,
            client.bearer(token),
            queries,
            back,
            _with_top_k(settings, top_k),
            f"{folder.name} queries ({name})",
        )
        for name, settings in variants.items()
    }
    return {"runs": runs, "token": token, "ids": ids, "workspace_id": workspace_id}


def _with_top_k(settings: g.RecallRequest, top_k: int) -> g.RecallRequest:
    request = g.RecallRequest()
    request.CopyFrom(settings)
    request.top_k = top_k
    return request


def _table(rows: dict[str, dict]) -> str:
    head = f"{'corpus':<16}" + "".join(f"{k:>11}" for k in KEYS) + f"{'queries':>9}"
    lines = [head, "-" * len(head)]
    for name, res in rows.items():
        lines.append(f"{name:<16}" + "".join(f"{res[k]:>11.3f}" for k in KEYS) + f"{res['queries']:>9}")
    return "\n".join(lines)


def evaluate(
    gw: client.Gateway,
    dataset: Path,
    variants: dict[str, g.RecallRequest],
    top_k: int,
    memories_from: Path | None = None,
) -> tuple[dict[str, dict], dict]:
    """Evaluates every corpus of ``dataset`` (its memories from ``memories_from`` when given:
    ``dataset.corpora``) under each variant; returns a report per variant and the raw per-corpus
    results."""
    results = {f.name: evaluate_corpus(gw, f, variants, top_k, memories_from) for f in corpora(dataset, memories_from)}
    reports = {}
    for name in variants:
        runs = {corpus: r["runs"][name] for corpus, r in results.items()}
        categories: dict[str, list] = {}
        for run in runs.values():
            for cat, qs in run["per_category"].items():
                categories.setdefault(cat, []).extend(qs)
        reports[name] = {
            "overall": average([q for run in runs.values() for q in run["per_query"]]),
            "per_corpus": {corpus: average(run["per_query"]) for corpus, run in runs.items()},
            "per_category": {c: average(qs) for c, qs in sorted(categories.items())},
            "dense_unavailable_queries": sum(run["dense_unavailable"] for run in runs.values()),
            "reranked_queries": sum(run["reranked"] for run in runs.values()),
            "refused": dict(sorted(sum((run["refused"] for run in runs.values()), Counter()).items())),
        }
    return reports, results


def refused_text(report: dict) -> str:
    """``refused: N of T questions (CODE n, ...); the metrics are over the A answered``, or "" when none
    was refused."""
    refused = sum(report["refused"].values())
    if not refused:
        return ""
    codes = ", ".join(f"{code} {n}" for code, n in report["refused"].items())
    answered = report["overall"]["queries"]
    return (
        f"refused: {refused} of {refused + answered} questions ({codes}); the metrics are over the {answered} answered"
    )


def print_report(report: dict, mode_name: str) -> None:
    """The human-readable form of an evaluation report."""
    print(f"mode: {mode_name}")
    print(_table({**report["per_corpus"], "overall": report["overall"]}))
    if len(report["per_category"]) > 1:
        print(_table({f"cat {c}": v for c, v in report["per_category"].items()}))
    if report["dense_unavailable_queries"]:
        print(f"warning: the dense arm was unavailable for {report['dense_unavailable_queries']} queries")
    if refused_text(report):
        print(refused_text(report))


def _side_by_side(reports: dict[str, dict], key: str) -> str:
    """One metric, variants as columns, overall and per-category rows."""
    names = list(reports)
    # A category can be missing from one variant when all its questions were refused there: "-".
    categories = sorted({c for r in reports.values() for c in r["per_category"]})
    head = f"{key:<22}" + "".join(f"{n:>16}" for n in names)
    lines = [head, "-" * len(head)]
    for row, cells in [("overall", [r["overall"] for r in reports.values()])] + [
        (f"cat {c}", [r["per_category"].get(c) for r in reports.values()]) for c in categories
    ]:
        lines.append(f"{row:<22}" + "".join(f"{c[key]:>16.3f}" if c else f"{'-':>16}" for c in cells))
    return "\n".join(lines)


def reranker_state(gw: client.Gateway) -> tuple[bool, str]:
    """Whether the gateway's re-ranker is loaded, and why not."""
    deps = gw.admin.GetStatus(g.GetStatusRequest(), metadata=gw.metadata).dependencies
    rr = next((d for d in deps if d.name == "reranker"), None)
    if rr is not None and rr.state == g.DEPENDENCY_STATE_NOT_CONFIGURED:
        return False, "not configured"
    return (rr is not None and rr.serving), (rr.detail if rr else "unknown")


def eval_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron eval``."""
    ev = sub.add_parser("eval", help="measure retrieval on a dataset (recall@k, nDCG@10, MRR)")
    ev.add_argument("--dataset", required=True, help="folder with memories.jsonl and queries.jsonl, or of such folders")
    ev.add_argument("--mode", default="hybrid", choices=choices.MODES)
    ev.add_argument("--top-k", type=int, default=50, help="results per query (at least 50 are asked)")
    ev.add_argument("--no-rerank", action="store_true")
    ev.add_argument(
        "--ablate", action="store_true", help="lexical, dense, hybrid and hybrid + re-rank side by side, one load"
    )
    ev.add_argument(
        "--time-words",
        action="store_true",
        help="--mode with the questions' time words read and with none read (skip_time_words), side by side",
    )
    ev.add_argument(
        "--memories-from",
        metavar="DIR",
        help="a dataset of questions only (eval/time-scoped): each corpus's memories are DIR/<corpus>/memories.jsonl",
    )
    ev.add_argument(
        "--inject",
        action="store_true",
        help="ask each question as a user turn through PromptContext and measure the block (docs/agents.md)",
    )
    ev.add_argument("--off-topic", help="with --inject: a dataset whose questions are off-topic for --dataset")
    ev.add_argument("--openers", help="with --inject: a folder with a queries.jsonl of chat openers (eval/openers)")
    ev.add_argument(
        "--budget",
        type=int,
        default=0,
        help="with --inject: the block's token budget (default 0: PromptContext's, 600)",
    )
    options.gateway_options(ev, operator=True)
    ev.add_argument("--keep", action="store_true", help="keep the workspaces it makes (deleted at the end otherwise)")
    ev.set_defaults(handler=run_eval)


@command.gateway_command
def run_eval(gw: client.Gateway, args: argparse.Namespace) -> int:
    with temporary_workspaces(gw, args.keep):
        return _run_eval(gw, args)


def _run_eval(gw: client.Gateway, args: argparse.Namespace) -> int:
    """``recallatron eval``: prints a table, or with --json one object with ``mode``, ``overall``,
    ``per_corpus``, ``per_category``, ``dense_unavailable_queries``, ``reranked_queries`` and ``refused``
    (status code name -> number of questions the gateway refused with it; the metrics are over the
    answered ones).

    With ``--ablate``: lexical, dense, hybrid and hybrid + re-rank on the same corpora in one run,
    side by side (the re-rank column only when a cross-encoder is loaded; otherwise it says why).
    Exit status 1 after the full output when any question was refused (as ``load`` does for rows), else 0.

    With ``--inject``: ``cli.inject_eval.run_eval_inject`` (each question as a user turn through
    PromptContext, and the off-topic prompts of --off-topic and --openers).
    """
    if args.ablate and args.time_words:
        raise SystemExit("--ablate and --time-words do not go together")
    if args.inject:
        if args.ablate or args.memories_from or args.time_words:
            raise SystemExit("--inject goes with none of --ablate, --time-words and --memories-from")
        return run_eval_inject(gw, args)
    if args.off_topic or args.openers or args.budget:
        raise SystemExit("--off-topic, --openers and --budget are for --inject")
    if args.top_k < 1:
        raise SystemExit("--top-k must be at least 1")
    top_k = max(MIN_RESULTS, args.top_k)
    reports = _ablation(gw, args, top_k) if args.ablate else _single(gw, args, top_k)
    return 1 if any(r["refused"] for r in reports.values()) else 0


def _single(gw: client.Gateway, args: argparse.Namespace, top_k: int) -> dict[str, dict]:
    """One variant (--mode, --no-rerank), printed; returns its report by mode name."""
    if args.time_words:
        mode = choices.MODES[args.mode]
        variants = {
            f"{args.mode}": variant(mode, args.no_rerank),
            f"{args.mode}, no time": variant(mode, args.no_rerank, skip_time_words=True),
        }
        return _print_side_by_side(gw, args, variants, top_k)
    settings = {args.mode: variant(choices.MODES[args.mode], args.no_rerank)}
    reports, _ = evaluate(gw, Path(args.dataset), settings, top_k, _memories_from(args))
    if args.json:
        print(command.dump({"mode": args.mode, **reports[args.mode]}))
    else:
        print_report(reports[args.mode], args.mode)
    return reports


def _ablation(gw: client.Gateway, args: argparse.Namespace, top_k: int) -> dict[str, dict]:
    """Every variant side by side, printed; returns the reports by variant name."""
    modes = choices.MODES
    variants = {name: variant(modes[name]) for name in ("lexical", "dense", "hybrid")}
    available, why = reranker_state(gw)
    if available:
        variants["hybrid+rerank"] = variant(modes["hybrid"], skip_rerank=False)
    rerank_note = "" if available else f"hybrid+rerank: not run, the re-ranker is unavailable ({why})"
    return _print_side_by_side(gw, args, variants, top_k, rerank_note)


def _memories_from(args: argparse.Namespace) -> Path | None:
    return Path(args.memories_from) if args.memories_from else None


def _print_side_by_side(
    gw: client.Gateway,
    args: argparse.Namespace,
    variants: dict[str, g.RecallRequest],
    top_k: int,
    rerank_note: str | None = None,
) -> dict[str, dict]:
    """Evaluates the variants on one load, prints them side by side (or the JSON: ``ablation`` and
    ``rerank`` for --ablate, ``time_words`` for --time-words); their reports."""
    reports, _ = evaluate(gw, Path(args.dataset), variants, top_k, _memories_from(args))
    if args.json:
        if rerank_note is None:
            print(command.dump({"time_words": reports}))
        else:
            print(command.dump({"ablation": reports, "rerank": rerank_note or "run"}))
        return reports
    for key in ("recall@10", "ndcg@10", "mrr"):
        print(_side_by_side(reports, key))
        print()
    for name, report in reports.items():
        if refused_text(report):
            print(f"{name}: {refused_text(report)}")
    if rerank_note:
        print(rerank_note)
    return reports
