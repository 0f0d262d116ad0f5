"""``recallatron load`` and ``recallatron eval``: real data through the running gateway.

For each corpus (a folder with memories.jsonl and queries.jsonl): a fresh workspace and member,
memories loaded through RememberBatch, a wait until the embedding backlog is empty, every query asked
through Recall, metrics as ../shared/eval/README.md defines them (cli.retrieval_metrics).
"""

from __future__ import annotations

import datetime
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from google.rpc import code_pb2
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from cli import client
from cli.retrieval_metrics import KEYS, average, score_query

MIN_RESULTS = 50
BACKLOG_TIMEOUT_SECONDS = 1800
LOAD_THREADS = 4
BATCH_ROWS = 500  # RememberBatch's limit
BATCH_BYTES = 8 * 1024 * 1024  # and a bound on a request's size (bodies may be 64 KiB each)
SHOWN_ERRORS = 5


def read_jsonl(path: Path) -> list[dict]:
    """Rows of a JSON Lines file; SystemExit naming the line when one is not JSON."""
    rows = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise SystemExit(f"{path}:{n}: not JSON ({exc.msg})") from None
    return rows


def corpora(dataset: Path) -> list[Path]:
    """The corpus folders of a dataset: itself, or its sub-folders holding memories.jsonl."""
    if (dataset / "memories.jsonl").is_file():
        return [dataset]
    found = sorted(p for p in dataset.iterdir() if (p / "memories.jsonl").is_file()) if dataset.is_dir() else []
    if not found:
        raise SystemExit(f"{dataset}: no memories.jsonl here or in its sub-folders")
    return found


def progress(label: str, done: int, total: int) -> None:
    """Shows ``label: done/total`` on stderr (every 500 rows and at the end when not a terminal)."""
    if sys.stderr.isatty() or done == total or done % 500 == 0:
        print(f"\r{label}: {done}/{total}", end="\n" if done == total else "", file=sys.stderr, flush=True)


def _occurred(value) -> "datetime.datetime | None":
    if not value:
        return None
    dt = datetime.datetime.fromisoformat(value)
    return dt if dt.tzinfo else dt.replace(tzinfo=datetime.timezone.utc)


def _request(row: dict, purpose: int) -> g.RememberRequest:
    """The Remember of one dataset row (workspace audience, request id ``load:<row id>``)."""
    req = g.RememberRequest(purpose=purpose, kind=m.KIND_NOTE, title=row.get("title") or "",
                            body=row.get("body") or "", audience=m.AUDIENCE_WORKSPACE, request_id=f"load:{row['id']}")
    when = _occurred(row.get("occurred_at"))
    if when is not None:
        req.occurred_at.FromDatetime(when)
    return req


def _batches(rows: list[dict]) -> list[list[dict]]:
    """Consecutive rows in batches of at most ``BATCH_ROWS`` rows and about ``BATCH_BYTES`` of text."""
    batches: list[list[dict]] = []
    size = 0
    for row in rows:
        row_size = len((row.get("body") or "").encode()) + len((row.get("title") or "").encode())
        if not batches or len(batches[-1]) >= BATCH_ROWS or (size + row_size > BATCH_BYTES and batches[-1]):
            batches.append([])
            size = 0
        batches[-1].append(row)
        size += row_size
    return batches


def remember_rows(gw: client.Gateway, token: str, rows: list[dict], purpose: int,
                  label: str = "load") -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """Remembers every row as the member of ``token`` through RememberBatch (``LOAD_THREADS``
    concurrent batches). Returns dataset id -> memory id of the rows stored, and (dataset id, status
    code name, message) of each row that failed, in file order."""
    md = (("authorization", f"Bearer {token}"),)

    def send(batch: list[dict]) -> list[tuple[dict, g.RememberBatchResult]]:
        resp = gw.memory.RememberBatch(g.RememberBatchRequest(requests=[_request(r, purpose) for r in batch]),
                                       metadata=md, timeout=300)
        return list(zip(batch, resp.results))

    ids: dict[str, str] = {}
    errors: list[tuple[str, str, str]] = []
    done = 0
    with ThreadPoolExecutor(LOAD_THREADS) as pool:
        for results in pool.map(send, _batches(rows)):
            for row, result in results:
                if result.HasField("memory"):
                    ids[row["id"]] = result.memory.id
                else:
                    errors.append((str(row["id"]), code_pb2.Code.Name(result.error.code), result.error.message))
            done += len(results)
            progress(label, done, len(rows))
    return ids, errors


def report_row_errors(errors: list[tuple[str, str, str]], total: int) -> None:
    """Prints how many rows failed and the first few, with their status code and message, to stderr."""
    print(f"{len(errors)} of {total} rows failed", file=sys.stderr)
    for row_id, code, message in errors[:SHOWN_ERRORS]:
        print(f"  row {row_id}: {code}: {message}", file=sys.stderr)
    if len(errors) > SHOWN_ERRORS:
        print(f"  ... and {len(errors) - SHOWN_ERRORS} more", file=sys.stderr)


def load_rows(gw: client.Gateway, token: str, rows: list[dict], purpose: int, label: str = "load") -> dict[str, str]:
    """Remembers every row (workspace audience) as the member of ``token``; returns dataset id -> memory id.

    Exits (status 1) after reporting them when any row fails: an evaluation needs every row."""
    ids, errors = remember_rows(gw, token, rows, purpose, label)
    if errors:
        report_row_errors(errors, len(rows))
        raise SystemExit(1)
    return ids


def load_file(gw: client.Gateway, workspace_id: str, path: str, purpose: int) -> tuple[int, list[tuple[str, str, str]]]:
    """``recallatron load``: adds a member to the workspace and remembers every row of ``path``.

    Returns how many rows are stored, and the rows that failed (see ``remember_rows``)."""
    rows = read_jsonl(Path(path))
    member = gw.admin.AddMember(g.AddMemberRequest(workspace_id=workspace_id, display_name="loader"),
                                metadata=gw.metadata)
    ids, errors = remember_rows(gw, member.token, rows, purpose)
    return len(ids), errors


def wait_for_backlog(gw: client.Gateway) -> None:
    """Blocks until the embedding backlog is empty, showing it while it drains."""
    deadline = time.monotonic() + BACKLOG_TIMEOUT_SECONDS
    tty, shown = sys.stderr.isatty(), 0.0
    while time.monotonic() < deadline:
        backlog = gw.admin.GetStatus(g.GetStatusRequest(), metadata=gw.metadata).embedding_backlog
        if backlog == 0:
            if tty:
                print(file=sys.stderr)
            return
        if tty or time.monotonic() - shown >= 10:
            print(f"\rembedding backlog: {backlog}   ", end="" if tty else "\n", file=sys.stderr, flush=True)
            shown = time.monotonic()
        time.sleep(1.0)
    raise SystemExit("the embedding backlog did not drain; is the embed service up? (`recallatron status`)")


def evaluate_corpus(gw: client.Gateway, folder: Path, variants: dict[str, tuple[int, bool]], top_k: int) -> dict:
    """Loads one corpus into a fresh workspace once, then asks every query under each variant
    (name -> (mode, skip_rerank)); returns per-variant scores, the member token and the id map."""
    ws = gw.admin.CreateWorkspace(g.CreateWorkspaceRequest(name=f"eval {folder.name}"), metadata=gw.metadata)
    member = gw.admin.AddMember(g.AddMemberRequest(workspace_id=ws.workspace_id, display_name="eval"),
                                metadata=gw.metadata)
    ids = load_rows(gw, member.token, read_jsonl(folder / "memories.jsonl"), m.PURPOSE_CONVERSATION,
                    f"{folder.name} memories")
    back = {v: k for k, v in ids.items()}
    wait_for_backlog(gw)
    queries = read_jsonl(folder / "queries.jsonl")
    md = (("authorization", f"Bearer {member.token}"),)
    runs = {}
    for name, (mode, skip_rerank) in variants.items():
        per_query, per_category, dense_down, reranked = [], {}, 0, 0
        for n, q in enumerate(queries, start=1):
            resp = gw.memory.Recall(g.RecallRequest(query=q["question"], purpose=m.PURPOSE_CONVERSATION, mode=mode,
                                                    top_k=top_k, skip_rerank=skip_rerank), metadata=md, timeout=60)
            dense_down += not resp.dense_available
            reranked += resp.reranked
            scores = score_query([back.get(it.memory.id, "") for it in resp.items], set(q["relevant_ids"]))
            per_query.append(scores)
            per_category.setdefault(str(q.get("category_name") or q.get("category", "")), []).append(scores)
            progress(f"{folder.name} queries ({name})", n, len(queries))
        runs[name] = {"per_query": per_query, "per_category": per_category, "dense_unavailable": dense_down,
                      "reranked": reranked}
    return {"runs": runs, "token": member.token, "ids": ids, "workspace_id": ws.workspace_id}


def _table(rows: dict[str, dict]) -> str:
    head = f"{'corpus':<16}" + "".join(f"{k:>11}" for k in KEYS) + f"{'queries':>9}"
    lines = [head, "-" * len(head)]
    for name, res in rows.items():
        lines.append(f"{name:<16}" + "".join(f"{res[k]:>11.3f}" for k in KEYS) + f"{res['queries']:>9}")
    return "\n".join(lines)


def evaluate(gw: client.Gateway, dataset: Path, variants: dict[str, tuple[int, bool]],
             top_k: int) -> tuple[dict[str, dict], dict]:
    """Evaluates every corpus of ``dataset`` under each variant; returns a report per variant and
    the raw per-corpus results."""
    results = {f.name: evaluate_corpus(gw, f, variants, top_k) for f in corpora(dataset)}
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
            "reranked_queries": sum(run["reranked"] for run in runs.values())}
    return reports, results


def print_report(report: dict, mode_name: str) -> None:
    """The human-readable form of an evaluation report."""
    print(f"mode: {mode_name}")
    print(_table({**report["per_corpus"], "overall": report["overall"]}))
    if len(report["per_category"]) > 1:
        print(_table({f"cat {c}": v for c, v in report["per_category"].items()}))
    if report["dense_unavailable_queries"]:
        print(f"warning: the dense arm was unavailable for {report['dense_unavailable_queries']} queries")


def _side_by_side(reports: dict[str, dict], key: str) -> str:
    """One metric, variants as columns, overall and per-category rows."""
    names = list(reports)
    rows = ["overall"] + [f"cat {c}" for c in next(iter(reports.values()))["per_category"]]
    head = f"{key:<22}" + "".join(f"{n:>16}" for n in names)
    lines = [head, "-" * len(head)]
    for row in rows:
        cells = [r["overall"] if row == "overall" else r["per_category"][row[4:]] for r in reports.values()]
        lines.append(f"{row:<22}" + "".join(f"{c[key]:>16.3f}" for c in cells))
    return "\n".join(lines)


def reranker_state(gw: client.Gateway) -> tuple[bool, str]:
    """Whether the gateway's re-ranker is loaded, and why not."""
    deps = gw.admin.GetStatus(g.GetStatusRequest(), metadata=gw.metadata).dependencies
    rr = next((d for d in deps if d.name == "reranker"), None)
    return (rr is not None and rr.serving), (rr.detail if rr else "unknown")


def run_eval(gw: client.Gateway, args) -> int:
    """``recallatron eval``: prints a table, or with --json one object with ``overall`` and ``per_corpus``.

    With ``--ablate``: lexical, dense, hybrid and hybrid + re-rank on the same corpora in one run,
    side by side (the re-rank column only when a cross-encoder is loaded; otherwise it says why).
    """
    from cli.main import MODES
    if args.top_k < 1:
        raise SystemExit("--top-k must be at least 1")
    top_k = max(MIN_RESULTS, args.top_k)
    if not args.ablate:
        reports, _ = evaluate(gw, Path(args.dataset), {args.mode: (MODES[args.mode], args.no_rerank)}, top_k)
        report = reports[args.mode]
        if args.json:
            print(client.dump({"mode": args.mode, **report}))
        else:
            print_report(report, args.mode)
        return 0
    variants = {"lexical": (MODES["lexical"], True), "dense": (MODES["dense"], True),
                "hybrid": (MODES["hybrid"], True)}
    available, why = reranker_state(gw)
    if available:
        variants["hybrid+rerank"] = (MODES["hybrid"], False)
    reports, _ = evaluate(gw, Path(args.dataset), variants, top_k)
    rerank_note = "" if available else f"hybrid+rerank: not run, the re-ranker is unavailable ({why})"
    if args.json:
        print(client.dump({"ablation": reports, "rerank": rerank_note or "run"}))
        return 0
    for key in ("recall@10", "ndcg@10", "mrr"):
        print(_side_by_side(reports, key))
        print()
    if rerank_note:
        print(rerank_note)
    return 0
