"""Two gateways side by side on one stack: this checkout's and another checkout's code (for
another commit, a worktree: ``git worktree add ../old <commit>``), asked the same questions in
turn, so a change to the recall path is measured against the code before it under the same
machine load (this host's figures drift by 10 to 20% between runs minutes apart, more than most
changes to the path).

    .venv/bin/python -m bench.gateway_ab --other /path/to/other/checkout [--size 100000] [--rounds 2]

Starts ``recallatron up`` (this checkout) on a workspace built by ``bench.run`` in ``--home``,
then a second gateway from ``--other`` (``recallatron serve gateway`` with that checkout's code on
``PYTHONPATH``) on ``--other-port``, pointed at the same store, embed and rank services. The other
checkout's gateway must speak the same store, embed and rank contracts (fields it does not know
are ignored, so a gateway from before an additive proto change works). Each question is recalled
once through each gateway per round, the order alternating per question, after one warm-up round
that is not counted. With ``--store``, each side runs a gateway and a store of its own checkout
(``recallatron serve gateway`` and ``serve store``: B's on ``--other-port`` and the next, A's on the
two after), both on the same databases and the stack's embed and rank services, so a change to the
store's side of recall is measured the same way, and both sides are started alike (a run of this
checkout against itself through ``up``'s gateway and a served one measured 1.035 and 1.089, so
the sides are not mixed). Their embedding workers find nothing to do on a built workspace.

Re-rank off, top 10, purpose conversation. Prints p50 / p95 per mode and the
ratio of the p50s (this checkout over the other); never writes. With ``--clients N`` (N > 1), then
N concurrent clients through each gateway in turn: recalls per second and each process's CPU per
recall, side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from bench import corpus
from bench.args import at_least_one
from bench.stack import Stack
from servicekit import clients
from servicekit.embedded_pg import CONTROL_DB

MODES = {"hybrid": m.RECALL_MODE_HYBRID, "lexical": m.RECALL_MODE_LEXICAL, "dense": m.RECALL_MODE_DENSE}
READY_SECONDS = 60.0


def _other_service(other: Path, stack: Stack, service: str, addr: str, store: str = "") -> subprocess.Popen:
    """``recallatron serve <service>`` from the other checkout, on ``addr``, using the stack's services
    (its store, or ``store``) and databases."""
    env = dict(
        os.environ,
        PYTHONPATH=f"{other}:{other / 'gen'}",
        RECALLATRON_HOME=str(stack.home.resolve()),
        RECALLATRON_GATEWAY_ADDR=stack.addrs["gateway"],
        RECALLATRON_STORE_ADDR=store or stack.addrs["store"],
        RECALLATRON_EMBED_ADDR=stack.addrs["embed"],
        RECALLATRON_RANK_ADDR=stack.addrs["rank"],
        DATABASE_URL=stack.pg_conninfo(CONTROL_DB),
    )
    env[f"RECALLATRON_{service.upper()}_ADDR"] = addr
    env[f"RECALLATRON_{service.upper()}_METRICS_PORT"] = "0"
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", service],
        cwd=other,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _percentile(sorted_ms: list[float], q: float) -> float:
    return sorted_ms[int(q * (len(sorted_ms) - 1))]


def _concurrent(stack: Stack, started: dict[str, int], gateways: dict, md, questions, modes: list[str], args) -> None:
    """``args.clients`` clients share the questions, through A then B (the order alternating per
    round), ``args.rounds`` rounds per mode after one warm-up round each: recalls per second and the
    CPU each process spent per recall in each gateway's phases (the embed and rank services and
    PostgreSQL are the same processes for both; each gateway counts its own, and so does each store
    with ``--store``). ``started``: the processes started here, as "gateway B", "store A" ..."""
    procs = {name: psutil.Process(pid) for name, pid in started.items()}

    def cpu() -> dict[str, float]:
        out = stack.cpu_seconds()
        for name, proc in procs.items():
            t = proc.cpu_times()
            out[name] = t.user + t.system
        return out

    def phase(gw, mode: str) -> tuple[int, float]:
        shares = [questions[k :: args.clients] for k in range(args.clients)]

        def ask(share) -> None:
            for q in share:
                req = g.RecallRequest(
                    query=q.text, purpose=m.PURPOSE_CONVERSATION, mode=MODES[mode], top_k=10, skip_rerank=True
                )
                gw.memory.Recall(req, metadata=md, timeout=120)

        start = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(ask, shares))
        return len(questions), time.perf_counter() - start

    totals: dict[tuple[str, str], dict] = {}
    for mode in modes:
        for rnd in range(args.rounds + 1):
            for name in ("A", "B") if rnd % 2 == 0 else ("B", "A"):
                before = cpu()
                n, seconds = phase(gateways[name], mode)
                after = cpu()
                if rnd:  # round 0 warms both
                    acc = totals.setdefault((mode, name), {"n": 0, "seconds": 0.0, "cpu": {}})
                    acc["n"] += n
                    acc["seconds"] += seconds
                    for proc, value in after.items():
                        acc["cpu"][proc] = acc["cpu"].get(proc, 0.0) + value - before[proc]
    print(f"\n{args.clients} concurrent clients, {args.rounds} rounds per mode, the order alternating per round\n")
    print("| mode | gateway | recalls/s | CPU ms per recall: gateway | store | embed | rank | postgres | all |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (mode, name), acc in totals.items():
        per = {proc: value * 1000 / acc["n"] for proc, value in acc["cpu"].items()}
        own, store = per.get(f"gateway {name}", per["gateway"]), per.get(f"store {name}", per["store"])
        parts = [own, store, per["embed"], per["rank"], per["postgres"]]
        print(
            f"| {mode} | {name} | {acc['n'] / acc['seconds']:.1f} | "
            + " | ".join(f"{v:.1f}" for v in parts)
            + f" | {sum(parts):.1f} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--other", type=Path, required=True, help="the other checkout (its gateway is B)")
    ap.add_argument("--size", type=at_least_one, default=100_000, help="a size bench.run built (default 100000)")
    ap.add_argument("--rounds", type=at_least_one, default=2, help="counted rounds over the questions (default 2)")
    ap.add_argument("--modes", default="hybrid,lexical", help="comma-separated: hybrid, lexical, dense")
    ap.add_argument("--home", type=Path, default=corpus.ROOT / ".bench" / "home")
    ap.add_argument("--other-port", type=int, default=50161, help="B's gateway; its store on the next port")
    ap.add_argument("--store", action="store_true", help="B's gateway asks the other checkout's store")
    ap.add_argument(
        "--clients",
        type=at_least_one,
        default=1,
        help="also run this many concurrent clients through each (default 1: none)",
    )
    args = ap.parse_args()
    modes = [name.strip() for name in args.modes.split(",") if name.strip()]
    unknown = [name for name in modes if name not in MODES]
    if unknown or not modes:
        raise SystemExit(f"--modes takes {', '.join(MODES)}; got {args.modes!r}")
    if not (args.other / "cli" / "main.py").is_file():
        raise SystemExit(f"{args.other} is not a Recallatron checkout (no cli/main.py)")
    manifest = args.home / "bench-workspaces.json"
    key = f"{args.size}/{corpus.RECIPE}"
    entries = json.loads(manifest.read_text()) if manifest.is_file() else {}
    if not entries.get(key, {}).get("complete"):
        raise SystemExit(
            f"no built workspace of {args.size:,} in {args.home}: build it with "
            f"python -m bench.run --sizes {args.size} --build-only"
        )
    entry = entries[key]
    stack = Stack.start(args.home)
    port = args.other_port
    sides = {"B": (args.other.resolve(), port)} | ({"A": (corpus.ROOT, port + 2)} if args.store else {})
    started: dict[str, subprocess.Popen] = {}
    try:
        for side, (checkout, first) in sides.items():
            gateway, store = f"127.0.0.1:{first}", f"127.0.0.1:{first + 1}" if args.store else ""
            if args.store:
                started[f"store {side}"] = _other_service(checkout, stack, "store", store)
                _wait_serving(started[f"store {side}"], store, checkout)
            started[f"gateway {side}"] = _other_service(checkout, stack, "gateway", gateway, store)
            _wait_serving(started[f"gateway {side}"], gateway, checkout)
        a_addr = f"127.0.0.1:{port + 2}" if args.store else stack.addrs["gateway"]
        a, b = client.Gateway(a_addr, None), client.Gateway(f"127.0.0.1:{port}", None)
        md = client.bearer(entry["token"])
        questions = corpus.questions()
        ms: dict[tuple[str, str], list[float]] = {}
        for mode in modes:
            for rnd in range(args.rounds + 1):
                for i, q in enumerate(questions):
                    pair = [("A", a), ("B", b)] if i % 2 == 0 else [("B", b), ("A", a)]
                    for name, gw in pair:
                        req = g.RecallRequest(
                            query=q.text, purpose=m.PURPOSE_CONVERSATION, mode=MODES[mode], top_k=10, skip_rerank=True
                        )
                        start = time.perf_counter()
                        gw.memory.Recall(req, metadata=md, timeout=120)
                        if rnd:  # round 0 warms both
                            ms.setdefault((mode, name), []).append((time.perf_counter() - start) * 1000)
        which = "gateway and store" if args.store else "gateway"
        print(f"## {which.capitalize()} A/B at {args.size:,} memories: A = this checkout, B = {args.other}\n")
        print(f"{len(questions)} questions x {args.rounds} rounds per mode, alternating; ms\n")
        print("| mode | A p50 / p95 | B p50 / p95 | A p50 / B p50 |")
        print("|---|---|---|---|")
        for mode in modes:
            av, bv = sorted(ms[(mode, "A")]), sorted(ms[(mode, "B")])
            a50, b50 = statistics.median(av), statistics.median(bv)
            print(
                f"| {mode} | {a50:.1f} / {_percentile(av, 0.95):.1f} | {b50:.1f} / {_percentile(bv, 0.95):.1f} "
                f"| {a50 / b50:.3f} |"
            )
        if args.clients > 1:
            pids = {name: proc.pid for name, proc in started.items()}
            _concurrent(stack, pids, {"A": a, "B": b}, md, questions, modes, args)
        a.close()
        b.close()
    finally:
        for proc in started.values():
            proc.terminate()
            proc.wait()
        stack.stop()


def _wait_serving(proc: subprocess.Popen, addr: str, other: Path) -> None:
    """Returns once ``proc`` serves on ``addr``; SystemExit when it stops or takes over READY_SECONDS."""
    probe = clients.channel(addr)
    deadline = time.monotonic() + READY_SECONDS
    try:
        while not clients.is_serving(probe):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the service of {other} did not start on {addr}")
            time.sleep(0.5)
    finally:
        probe.close()


if __name__ == "__main__":
    main()
