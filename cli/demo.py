"""``make demo``: start the whole system on the embedded database, evaluate recall on the demo conversation,
show a few questions with their top hits, and stop the system.

Usage: ``python -m cli.demo [--data DIR]`` (default ``demo/``, the conversation in the repository).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from cli import command
from cli.dataset import read_jsonl, temporary_workspaces
from cli.evaluate import evaluate, print_report, variant
from servicekit import settings as settings_mod

EXAMPLES = 3
ROOT = Path(__file__).resolve().parent.parent


def start_system(env: dict[str, str]) -> subprocess.Popen:
    """Runs ``recallatron up`` and waits for its ``ready`` line; SystemExit if it never comes."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "up"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    for line in proc.stdout:
        if "RuntimeDirWarning" in line or "user_runtime_dir" in line:
            continue
        print(line.rstrip(), flush=True)
        if "ready" in line:
            return proc
    proc.wait()
    raise SystemExit(f"`recallatron up` exited ({proc.returncode}) before it was ready")


def show_examples(gw: client.Gateway, folder: Path, result: dict) -> None:
    """Prints the first questions of a corpus with their top three hits, marking the relevant ones."""
    md = client.bearer(result["token"])
    for q in read_jsonl(folder / "queries.jsonl")[:EXAMPLES]:
        resp = gw.memory.Recall(
            g.RecallRequest(query=q["question"], purpose=m.PURPOSE_CONVERSATION, top_k=3), metadata=md
        )
        relevant = {result["ids"][i] for i in q["relevant_ids"] if i in result["ids"]}
        print(
            f"\nQ: {q['question']}   (dense_available={str(resp.dense_available).lower()}, "
            f"reranked={str(resp.reranked).lower()})"
        )
        for it in resp.items:
            mark = "*" if it.memory.id in relevant else " "
            print(f" {mark}{it.rank}. [{it.memory.title}] {it.memory.body[:110]}")
    print("\n(* marks a memory the dataset lists as relevant)")


def main() -> int:
    """Runs the demo; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(ROOT / "demo"))
    parser.add_argument("--keep", action="store_true", help="keep the demo's workspace (deleted at the end otherwise)")
    args = parser.parse_args()
    data = Path(args.data)
    if not data.exists():
        raise SystemExit(f"{data}: no such dataset folder")
    settings = settings_mod.load()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    started = time.monotonic()
    proc = start_system(env)
    try:
        print(
            f"system up in {time.monotonic() - started:.1f}s; evaluating {data} (hybrid, 50 results per query)",
            flush=True,
        )
        gw = client.Gateway(settings.gateway_addr, command.operator_token(args, settings.operator_token_path))
        with temporary_workspaces(gw, args.keep):
            t0 = time.monotonic()
            reports, results = evaluate(gw, data, {"hybrid": variant(m.RECALL_MODE_HYBRID, skip_rerank=False)}, 50)
            print()
            print_report(reports["hybrid"], "hybrid")
            print(f"evaluation took {time.monotonic() - t0:.1f}s")
            first = next(iter(results))
            folder = data if (data / "memories.jsonl").exists() else data / first
            show_examples(gw, folder, results[first])
        gw.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    print(f"demo finished in {time.monotonic() - started:.1f}s; the system is stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
