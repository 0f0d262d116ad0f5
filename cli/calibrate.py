"""``recallatron calibrate-floor``: choose the dense-arm cosine floor from data, not habit.

The rule (issue "Retrieval quality"): the lowest whole-percent floor that blocks at least 95% of
off-topic queries while keeping every on-topic (query, relevant memory) pair. An off-topic query is
blocked at floor f when no memory reaches f; an on-topic pair is kept when the relevant memory's
cosine is at least f. Queries are split deterministically (by a hash of their id) into a fit half,
on which the floor is chosen, and a held-out half, on which the chosen floor's rates are reported.
Off-topic queries are another dataset's questions asked against these corpora; LoCoMo's
``adversarial.jsonl`` questions (on-topic, false premise) are reported separately.

Everything goes through the running gateway: each corpus is loaded into a fresh workspace whose
floor is set to 0, and cosines are read from dense-mode Recall items (top 200). A relevant memory
outside the top 200 has an unknown cosine and counts as lost at every floor.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from cli import command, options
from cli.dataset import corpora, fit_half, load_corpus, progress, read_jsonl, temporary_workspaces

BLOCK_SHARE = 0.95
TOP = 200
FLOORS = [f / 100 for f in range(101)]


def _dense(gw: client.Gateway, md: client.Metadata, text: str) -> list[tuple[str, float]]:
    resp = gw.memory.Recall(
        g.RecallRequest(
            query=text, purpose=m.PURPOSE_CONVERSATION, mode=m.RECALL_MODE_DENSE, top_k=TOP, skip_rerank=True
        ),
        metadata=md,
        timeout=60,
    )
    if not resp.dense_available:
        raise SystemExit("the dense arm is unavailable; is the embed service up? (`recallatron status`)")
    return [(it.memory.id, it.cosine) for it in resp.items]


def measure(gw: client.Gateway, dataset: Path, off_topic: Path) -> dict:
    """Cosine observations: on-topic pair cosines, off-topic and adversarial top cosines, by split."""
    off_queries = [q for folder in corpora(off_topic) for q in read_jsonl(folder / "queries.jsonl")]
    obs = {"on": {True: [], False: []}, "off": {True: [], False: []}, "adversarial": [], "lost_pairs": 0}
    for folder in corpora(dataset):
        ws, token, ids = load_corpus(gw, folder, "calibrate")
        gw.admin.UpdateWorkspaceSettings(
            g.UpdateWorkspaceSettingsRequest(workspace_id=ws, dense_floor=0.0), metadata=gw.metadata
        )
        md = client.bearer(token)
        queries = read_jsonl(folder / "queries.jsonl")
        for n, q in enumerate(queries, start=1):
            cos = dict(_dense(gw, md, q["question"]))
            for rel in q["relevant_ids"]:
                value = cos.get(ids.get(rel, ""))
                obs["lost_pairs"] += value is None
                obs["on"][fit_half(q["id"])].append(-1.0 if value is None else value)
            progress(f"{folder.name} on-topic", n, len(queries))
        for n, q in enumerate(off_queries, start=1):
            hits = _dense(gw, md, q["question"])
            obs["off"][fit_half(q["id"])].append(hits[0][1] if hits else -1.0)
            progress(f"{folder.name} off-topic", n, len(off_queries))
        adversarial = folder / "adversarial.jsonl"
        if adversarial.is_file():
            for q in read_jsonl(adversarial):
                hits = _dense(gw, md, q["question"])
                obs["adversarial"].append(hits[0][1] if hits else -1.0)
    return obs


def curve(obs: dict) -> list[dict]:
    """Per whole-percent floor: off-topic blocked and on-topic kept, fit and held-out, adversarial passing."""

    def share(values, pred):
        return sum(1 for v in values if pred(v)) / len(values) if values else 0.0

    rows = []
    for f in FLOORS:
        rows.append(
            {
                "floor": f,
                "fit_off_topic_blocked": share(obs["off"][True], lambda v, f=f: v < f),
                "fit_on_topic_kept": share(obs["on"][True], lambda v, f=f: v >= f),
                "held_out_off_topic_blocked": share(obs["off"][False], lambda v, f=f: v < f),
                "held_out_on_topic_kept": share(obs["on"][False], lambda v, f=f: v >= f),
                "adversarial_passing": share(obs["adversarial"], lambda v, f=f: v >= f),
            }
        )
    return rows


def choose(rows: list[dict]) -> dict | None:
    """The lowest floor meeting the rule on the fit half, or None."""
    return next((r for r in rows if r["fit_off_topic_blocked"] >= BLOCK_SHARE and r["fit_on_topic_kept"] >= 1.0), None)


def calibrate_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron calibrate-floor``."""
    cf = sub.add_parser("calibrate-floor", help="choose the dense cosine floor from on- and off-topic queries")
    cf.add_argument("--dataset", required=True, help="corpora whose own queries are on-topic")
    cf.add_argument("--off-topic", required=True, help="a dataset whose queries are off-topic for --dataset")
    options.gateway_options(cf, operator=True)
    cf.add_argument("--keep", action="store_true", help="keep the workspaces it makes (deleted at the end otherwise)")
    cf.set_defaults(handler=run_calibrate)


@command.gateway_command
def run_calibrate(gw: client.Gateway, args: argparse.Namespace) -> int:
    with temporary_workspaces(gw, args.keep):
        return _run_calibrate(gw, args)


def _run_calibrate(gw: client.Gateway, args: argparse.Namespace) -> int:
    """Prints the chosen floor (or that none exists), its held-out rates and the curve."""
    obs = measure(gw, Path(args.dataset), Path(args.off_topic))
    rows = curve(obs)
    chosen = choose(rows)
    counts = {
        "on_topic_pairs": len(obs["on"][True]) + len(obs["on"][False]),
        "lost_pairs": obs["lost_pairs"],
        "off_topic_queries": len(obs["off"][True]) + len(obs["off"][False]),
        "adversarial_queries": len(obs["adversarial"]),
    }
    # The best compromise when the rule cannot be met: the lowest floor blocking 95% off-topic.
    blocking = next((r for r in rows if r["fit_off_topic_blocked"] >= BLOCK_SHARE), None)
    if args.json:
        print(
            command.dump(
                {
                    "chosen": chosen,
                    "rule_satisfiable": chosen is not None,
                    "lowest_floor_blocking_95": blocking,
                    "counts": counts,
                    "curve": rows,
                }
            )
        )
        return 0
    print(
        f"pairs: {counts['on_topic_pairs']} on-topic ({counts['lost_pairs']} outside the top {TOP}), "
        f"{counts['off_topic_queries']} off-topic, {counts['adversarial_queries']} adversarial"
    )
    if chosen:
        print(
            f"chosen floor {chosen['floor']:.2f}: held-out off-topic blocked "
            f"{chosen['held_out_off_topic_blocked']:.3f}, on-topic kept {chosen['held_out_on_topic_kept']:.3f}"
        )
    else:
        print("no floor satisfies the rule (block >= 95% of off-topic and keep every on-topic pair) on the fit half")
        if blocking:
            print(
                f"lowest floor blocking 95% off-topic on the fit half: {blocking['floor']:.2f}; held-out: "
                f"off-topic blocked {blocking['held_out_off_topic_blocked']:.3f}, "
                f"on-topic kept {blocking['held_out_on_topic_kept']:.3f}"
            )
    print(
        f"{'floor':>6} {'fit off blk':>12} {'fit on kept':>12} {'held off blk':>13} {'held on kept':>13} "
        f"{'advers. pass':>13}"
    )
    for r in rows:
        if round(r["floor"] * 100) % 5 == 0:
            print(
                f"{r['floor']:>6.2f} {r['fit_off_topic_blocked']:>12.3f} {r['fit_on_topic_kept']:>12.3f} "
                f"{r['held_out_off_topic_blocked']:>13.3f} {r['held_out_on_topic_kept']:>13.3f} "
                f"{r['adversarial_passing']:>13.3f}"
            )
    sys.stdout.flush()
    return 0
