"""Per-turn recall measured: ``recallatron eval --inject`` and ``recallatron calibrate-inject``.

Both ask turns through PromptContext, the call a harness makes before the model answers a turn, and
score what it put in the block. A question's relevant memory is *in the block* when its id is among
the response's items (``any``: at least one of its relevant ids; ``all``: every one); an off-topic
prompt *added nothing* when the block is empty. Tokens added are the response's ``tokens`` (0 for an
empty block): the mean and the 95th percentile by nearest rank over every prompt asked.

Questions come from a dataset (``cli.dataset``: one workspace per corpus, its memories loaded once).
Off-topic prompts come from another dataset's questions (``--off-topic``, e.g. SciFact's claims) and
from a folder holding a ``queries.jsonl`` of everyday chat openers (``--openers``, e.g. the
repository's ``eval/openers``); every off-topic prompt is asked of every corpus. Each prompt is asked
with a fresh session key, so no memory is held back as already shown.

``calibrate-inject`` sets each corpus workspace's gate (inject_min_cosine) to each value of a grid
and asks everything again; questions and off-topic prompts are split into a fit and a held-out half
by a hash of their id (``cli.dataset.fit_half``). The presets are the gates with the best fit-half
evidence rate among those where at least ``QUIET_SHARE[name]`` of the fit half's off-topic prompts
added nothing. docs/agents.md, "The relevance gate", has the published run.

A prompt the gateway refuses (any gRPC error) is counted by status code name and the run goes on;
the rates are over the answered prompts.
"""

from __future__ import annotations

import argparse
import math
import sys
import uuid
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from cli import command, options
from cli.dataset import (
    Failure,
    corpora,
    fit_half,
    load_corpus,
    progress,
    read_jsonl,
    report_failures,
    temporary_workspaces,
)

# Off-topic prompts adding nothing on the fit half, at least: the rule of each preset.
QUIET_SHARE = {"strict": 0.97, "default": 0.90, "loose": 0.80}
DEFAULT_GRID = tuple(round(0.20 + 0.05 * i, 2) for i in range(11))  # 0.20 .. 0.70
ASK_THREADS = 4


@dataclass(frozen=True)
class Turn:
    """One prompt asked through PromptContext: the dataset ids of the memories in its block, the
    tokens the block added, and (for a question) its relevant ids."""

    block: tuple[str, ...]
    tokens: int
    relevant: frozenset[str] = frozenset()


def evidence(turn: Turn) -> tuple[bool, bool]:
    """(any relevant id in the block, every relevant id in the block); both False without relevant ids."""
    if not turn.relevant:
        return False, False
    hits = turn.relevant.intersection(turn.block)
    return bool(hits), hits == turn.relevant


def percentile(values: Sequence[float], share: float = 0.95) -> float:
    """The nearest-rank percentile: the smallest value with at least ``share`` of the values at or
    below it (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[max(0, math.ceil(share * len(ordered)) - 1)])


def question_summary(turns: Sequence[Turn]) -> dict:
    """Over questions: ``questions``, the share with ``any`` / ``all`` of their relevant memories in
    the block, ``mean_tokens`` and ``p95_tokens`` added."""
    n = len(turns)
    found = [evidence(t) for t in turns]
    tokens = [t.tokens for t in turns]
    return {
        "questions": n,
        "any": sum(a for a, _ in found) / n if n else 0.0,
        "all": sum(b for _, b in found) / n if n else 0.0,
        "mean_tokens": sum(tokens) / n if n else 0.0,
        "p95_tokens": percentile(tokens),
    }


def off_topic_summary(turns: Sequence[Turn]) -> dict:
    """Over off-topic prompts: ``prompts``, the share that ``added_nothing`` (an empty block), and the
    ``mean_tokens`` added."""
    n = len(turns)
    return {
        "prompts": n,
        "added_nothing": sum(not t.block for t in turns) / n if n else 0.0,
        "mean_tokens": sum(t.tokens for t in turns) / n if n else 0.0,
    }


def _prompts(path: Path, source: str) -> list[dict]:
    """The rows of a queries.jsonl as prompts (``id``, ``question``, ``source``); SystemExit when the
    file holds none or a row has no question text."""
    rows = read_jsonl(path)
    if not rows:
        raise SystemExit(f"{path}: no prompts (the file is empty)")
    out = []
    for n, row in enumerate(rows, start=1):
        text = row.get("question") if isinstance(row, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise SystemExit(f"{path}: prompt {n} has no question text")
        out.append({"id": str(row.get("id", f"{source}/{n}")), "question": text, "source": source})
    return out


def off_topic_prompts(off_topic: Path | None, openers: Path | None) -> list[dict]:
    """The off-topic prompts: every question of the ``off_topic`` dataset (source: its folder's name)
    and of ``openers``/queries.jsonl (source: "openers")."""
    prompts: list[dict] = []
    if off_topic is not None:
        for folder in corpora(off_topic):
            prompts += _prompts(folder / "queries.jsonl", off_topic.name)
    if openers is not None:
        if not openers.is_dir():
            raise SystemExit(f"{openers}: {'not a folder' if openers.exists() else 'no such folder'}")
        prompts += _prompts(openers / "queries.jsonl", "openers")
    return prompts


@dataclass
class Asked:
    """Every answered prompt of a pass, by kind, with the refused ones."""

    questions: list[tuple[dict, Turn]] = field(default_factory=list)
    off_topic: list[tuple[dict, Turn]] = field(default_factory=list)
    refused: list[Failure] = field(default_factory=list)
    min_cosine: set[float] = field(default_factory=set)


def _ask_all(
    gw: client.Gateway,
    md: client.Metadata,
    back: dict[str, str],
    prompts: list[dict],
    label: str,
    asked: Asked,
    budget: int = 0,
) -> None:
    """Asks each prompt through PromptContext (``ASK_THREADS`` at a time, a fresh session key each);
    adds each answered one to ``asked`` (questions when it has relevant ids), each refused one to
    ``asked.refused``."""

    def one(p: dict) -> Turn | Failure:
        try:
            resp = gw.memory.PromptContext(
                g.PromptContextRequest(
                    text=p["question"],
                    purpose=m.PURPOSE_CONVERSATION,
                    session_key=uuid.uuid4().hex,
                    token_budget=budget,
                ),
                metadata=md,
                timeout=60,
            )
        except grpc.RpcError as exc:
            return (p["id"], exc.code().name, exc.details() or "")
        asked.min_cosine.add(round(resp.min_cosine, 4))
        return Turn(
            tuple(back.get(it.memory.id, "") for it in resp.items),
            resp.tokens,
            frozenset(str(r) for r in p.get("relevant_ids") or ()),
        )

    with ThreadPoolExecutor(ASK_THREADS) as pool:
        for n, (p, result) in enumerate(zip(prompts, pool.map(one, prompts), strict=True), start=1):
            if isinstance(result, Turn):
                (asked.questions if result.relevant else asked.off_topic).append((p, result))
            else:
                asked.refused.append(result)
            progress(label, n, len(prompts))


def _questions(folder: Path) -> list[dict]:
    return [dict(q, source=folder.name) for q in read_jsonl(folder / "queries.jsonl")]


def measure(gw: client.Gateway, dataset: Path, off: list[dict], gates: Sequence[float | None], budget: int = 0) -> dict:
    """For each gate (None: the workspace's own, the default), every question of every corpus of
    ``dataset`` and every off-topic prompt of ``off`` asked of every corpus with a token budget of
    ``budget`` (0: PromptContext's default, 600); returns gate -> Asked."""
    passes = {gate: Asked() for gate in gates}
    for folder in corpora(dataset):
        questions = _questions(folder)
        workspace_id, token, ids = load_corpus(gw, folder, "inject")
        back = {v: k for k, v in ids.items()}
        for gate in gates:
            if gate is not None:
                gw.admin.UpdateWorkspaceSettings(
                    g.UpdateWorkspaceSettingsRequest(workspace_id=workspace_id, inject_min_cosine=gate),
                    metadata=gw.metadata,
                )
            at = "" if gate is None else f" at {gate:.2f}"
            _ask_all(gw, client.bearer(token), back, questions + off, f"{folder.name}{at}", passes[gate], budget)
    return passes


def _refused(asked: Asked) -> dict[str, int]:
    return dict(sorted(Counter(code for _, code, _ in asked.refused).items()))


def report(asked: Asked) -> dict:
    """``questions`` (question_summary, with ``per_corpus``), ``off_topic`` (off_topic_summary by
    source and ``all``), ``min_cosine`` (the gates the gateway applied) and ``refused``."""
    by_corpus: dict[str, list[Turn]] = {}
    for q, t in asked.questions:
        by_corpus.setdefault(q["source"], []).append(t)
    by_source: dict[str, list[Turn]] = {}
    for p, t in asked.off_topic:
        by_source.setdefault(p["source"], []).append(t)
    off = {source: off_topic_summary(ts) for source, ts in by_source.items()}
    if asked.off_topic:
        off["all"] = off_topic_summary([t for _, t in asked.off_topic])
    return {
        "questions": {
            **question_summary([t for _, t in asked.questions]),
            "per_corpus": {c: question_summary(ts) for c, ts in by_corpus.items()},
        },
        "off_topic": off,
        "min_cosine": sorted(asked.min_cosine),
        "refused": _refused(asked),
    }


def print_report(rep: dict) -> None:
    """The human-readable form of ``report``."""
    q = rep["questions"]
    gates = ", ".join(f"{c:.2f}" for c in rep["min_cosine"]) or "-"
    print(f"gate (min cosine): {gates}")
    print(
        f"questions: {q['questions']}; relevant memory in the block: any {q['any']:.3f}, all {q['all']:.3f}; "
        f"tokens added: mean {q['mean_tokens']:.0f}, p95 {q['p95_tokens']:.0f}"
    )
    for corpus, s in q["per_corpus"].items():
        print(
            f"  {corpus:<14} {s['questions']:>5} questions  any {s['any']:.3f}  all {s['all']:.3f}  "
            f"mean {s['mean_tokens']:.0f}  p95 {s['p95_tokens']:.0f}"
        )
    for source, s in rep["off_topic"].items():
        print(
            f"off-topic ({source}): {s['prompts']} prompts; added nothing {s['added_nothing']:.3f}; "
            f"tokens added: mean {s['mean_tokens']:.0f}"
        )
    if rep["refused"]:
        codes = ", ".join(f"{c} {n}" for c, n in rep["refused"].items())
        print(f"refused: {sum(rep['refused'].values())} prompts ({codes}); the rates are over the answered")


def inject_paths(args: argparse.Namespace) -> tuple[Path, Path | None, Path | None]:
    """--dataset, --off-topic and --openers as paths, each checked to exist (SystemExit naming it)."""
    paths = []
    for flag, value in (("--dataset", args.dataset), ("--off-topic", args.off_topic), ("--openers", args.openers)):
        if value is not None and not Path(value).exists():
            raise SystemExit(f"{flag} {value}: no such folder")
        paths.append(Path(value) if value is not None else None)
    return paths[0], paths[1], paths[2]


def run_eval_inject(gw: client.Gateway, args: argparse.Namespace) -> int:
    """``recallatron eval --inject``: prints the report (or --json it) of every prompt asked at the
    workspace's gate and a budget of --budget tokens; exit status 1 when any prompt was refused, else 0."""
    dataset, off_topic, openers = inject_paths(args)
    corpora(dataset)  # a dataset without corpora fails before anything is loaded
    off = off_topic_prompts(off_topic, openers)
    if args.budget != 0 and not 100 <= args.budget <= 2500:
        raise SystemExit("--budget must be 100..2500 tokens (PromptContext's range), or 0 for its default, 600")
    asked = measure(gw, dataset, off, [None], args.budget)[None]
    if asked.refused:
        total = len(asked.refused) + len(asked.questions) + len(asked.off_topic)
        report_failures(asked.refused, total, noun="prompt", verb="refused")
    rep = report(asked)
    if args.json:
        print(command.dump(rep))
    else:
        print_report(rep)
    return 1 if asked.refused else 0


def parse_grid(text: str) -> list[float]:
    """A comma-separated list of minimum cosines in 0..1, each once, sorted; SystemExit naming what is wrong."""
    values = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            raise SystemExit(f"--grid: {part.strip()!r} is not a number (give cosines such as 0.3,0.4,0.5)") from None
        if not 0.0 <= value <= 1.0:
            raise SystemExit(f"--grid: {value} is outside 0..1")
        values.append(round(value, 4))
    return sorted(set(values))


def _split(asked: Asked, fit: bool) -> Asked:
    return Asked(
        [(q, t) for q, t in asked.questions if fit_half(q["id"]) == fit],
        [(p, t) for p, t in asked.off_topic if fit_half(p["id"]) == fit],
    )


def curve(passes: dict[float, Asked]) -> list[dict]:
    """Per gate: the fit and held-out halves' question and off-topic summaries, and the refusals."""
    rows = []
    for gate, asked in sorted(passes.items()):
        row: dict = {"min_cosine": gate, "refused": _refused(asked)}
        for name, fit in (("fit", True), ("held_out", False)):
            half = _split(asked, fit)
            row[name] = {
                "questions": question_summary([t for _, t in half.questions]),
                "off_topic": off_topic_summary([t for _, t in half.off_topic]),
            }
        rows.append(row)
    return rows


def choose(rows: list[dict]) -> dict[str, dict | None]:
    """Each preset's gate: the best fit-half ``any`` rate among the gates where at least
    ``QUIET_SHARE[name]`` of the fit half's off-topic prompts added nothing, or None when no gate of
    the grid meets it. On a tie (the budget, not the gate, bounds what a block holds) strict and
    default take the higher gate, which adds off-topic memories less often for the same evidence,
    and loose the lower, which lets the most through for a larger budget."""
    chosen = {}
    for name, share in QUIET_SHARE.items():
        ok = [r for r in rows if r["fit"]["off_topic"]["added_nothing"] >= share]
        toward = -1 if name == "loose" else 1
        chosen[name] = max(ok, key=lambda r: (r["fit"]["questions"]["any"], toward * r["min_cosine"])) if ok else None
    return chosen


def calibrate_inject_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron calibrate-inject``."""
    ci = sub.add_parser(
        "calibrate-inject", help="fit the relevance gate of per-turn recall: evidence in the block against off-topic"
    )
    ci.add_argument("--dataset", required=True, help="corpora whose own questions are the positives")
    ci.add_argument("--off-topic", help="a dataset whose questions are off-topic for --dataset")
    ci.add_argument("--openers", help="a folder with a queries.jsonl of everyday chat openers (eval/openers)")
    ci.add_argument(
        "--grid",
        default=",".join(f"{v:.2f}" for v in DEFAULT_GRID),
        help="minimum cosines to try, comma-separated (default 0.20..0.70 by 0.05)",
    )
    ci.add_argument("--out", help="also write the curve and the chosen gates to this JSON file")
    options.gateway_options(ci, operator=True)
    ci.add_argument("--keep", action="store_true", help="keep the workspaces it makes (deleted at the end otherwise)")
    ci.set_defaults(handler=run_calibrate_inject)


def _row_text(r: dict) -> str:
    f, h = r["fit"], r["held_out"]
    return (
        f"{r['min_cosine']:>6.2f} {f['questions']['any']:>8.3f} {f['off_topic']['added_nothing']:>9.3f} "
        f"{f['questions']['mean_tokens']:>8.0f} {h['questions']['any']:>8.3f} {h['questions']['all']:>8.3f} "
        f"{h['off_topic']['added_nothing']:>9.3f} {h['questions']['mean_tokens']:>8.0f} "
        f"{h['off_topic']['mean_tokens']:>8.0f}"
    )


@command.gateway_command
def run_calibrate_inject(gw: client.Gateway, args: argparse.Namespace) -> int:
    with temporary_workspaces(gw, args.keep):
        return _run_calibrate_inject(gw, args)


def _run_calibrate_inject(gw: client.Gateway, args: argparse.Namespace) -> int:
    """Prints the curve and each preset's gate with its held-out rates (or --json it); --out writes
    the same JSON to a file. Exit status 1 when any prompt was refused, else 0."""
    grid = parse_grid(args.grid)
    dataset, off_topic, openers = inject_paths(args)
    if off_topic is None and openers is None:
        raise SystemExit("give off-topic prompts: --off-topic DATASET, --openers FOLDER, or both")
    corpora(dataset)
    off = off_topic_prompts(off_topic, openers)
    passes = measure(gw, dataset, off, grid)
    rows = curve(passes)
    chosen = choose(rows)
    refused = sum(len(a.refused) for a in passes.values())
    result = {
        "rule": {
            name: f"the best fit-half any with at least {share:.2f} of off-topic prompts adding nothing"
            for name, share in QUIET_SHARE.items()
        },
        "chosen": {name: (r["min_cosine"] if r else None) for name, r in chosen.items()},
        "counts": {
            "corpora": len(corpora(dataset)),
            "questions": len(passes[grid[0]].questions),
            "off_topic_prompts": len(passes[grid[0]].off_topic),
            "off_topic_sources": dict(Counter(p["source"] for p in off)),
        },
        "curve": rows,
    }
    if args.out:
        Path(args.out).write_text(command.dump(result) + "\n")
    if args.json:
        print(command.dump(result))
        return 1 if refused else 0
    c = result["counts"]
    print(f"{c['corpora']} corpora: {c['questions']} questions, {c['off_topic_prompts']} off-topic prompts asked")
    for name, r in chosen.items():
        if r is None:
            share = QUIET_SHARE[name]
            print(f"{name}: no gate of the grid keeps {share:.0%} of off-topic prompts quiet on the fit half")
        else:
            h = r["held_out"]
            print(
                f"{name}: {r['min_cosine']:.2f}; held out: relevant memory in the block {h['questions']['any']:.3f} "
                f"(all {h['questions']['all']:.3f}), mean {h['questions']['mean_tokens']:.0f} tokens, off-topic "
                f"adding nothing {h['off_topic']['added_nothing']:.3f}"
            )
    print(
        f"{'gate':>6} {'fit any':>8} {'fit quiet':>9} {'fit tok':>8} {'held any':>8} {'held all':>8} "
        f"{'held quiet':>9} {'held tok':>8} {'off tok':>8}"
    )
    for r in rows:
        print(_row_text(r))
    if refused:
        print(f"refused: {refused} prompts over the grid; the rates are over the answered", file=sys.stderr)
    sys.stdout.flush()
    return 1 if refused else 0
