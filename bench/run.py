"""``make bench`` / ``python -m bench.run``: recall latency at 10,000 .. 1,000,000 memories through the
real system, beside its floor, plus ingest, backlog drain, resident memory and start-up time.

Steps (details in each module's docstring and bench/RESULTS.md):

1. Ingest probe, on a fresh data folder ``.bench/probe`` (deleted first): ``recallatron up``
   (start-up time on an empty folder), ``--probe`` rows written through the batch form with the
   embed service paused, the backlog drain rate once it resumes, the same texts encoded in this
   process, then the stack is stopped.
2. ``recallatron up`` on ``.bench/home`` (start-up time with the built workspaces present); for each
   ``--sizes`` entry the workspace is reused or built (``bench.workspace``), then measured
   (``bench.measure``): single client interleaved with the floor and the direct service calls,
   then 8 concurrent clients; resident memory of every service afterwards.
3. The figures as markdown on stdout; with ``--write`` also into bench/RESULTS.md (replacing the
   "Latest run" section, keeping everything else), and the raw numbers in ``.bench/last-run.json``.

Usage: ``python -m bench.run [--sizes 10000,100000] [--probe 4000] [--write] [--rebuild] [--build-only]``
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import client
from bench import corpus, measure, workspace
from bench.args import at_least_one
from bench.stack import Stack

BENCH_DIR = corpus.ROOT / ".bench"
RESULTS = corpus.ROOT / "bench" / "RESULTS.md"
LATEST = "## Latest run"


def machine() -> str:
    """One line describing this machine."""
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    load = os.getloadavg()
    return (
        f"{os.cpu_count()} CPUs ({cpu}), {mem:.0f} GiB RAM, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}; load average at start {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}"
    )


def commit() -> str:
    """Short hash of HEAD, with ``+dirty`` when tracked files differ."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], check=False, cwd=corpus.ROOT, capture_output=True, text=True
        ).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or os.environ.get("BENCH_COMMIT", "unknown")
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def floor_encoder(encoder) -> str:
    """Pins PyTorch (when the encoder runs on it) to one intra-op thread, and names what the floor
    embeds with. On 2 shared cores two OpenMP threads stall each other (a one-query encode measured
    463 ms p50 with 2 threads against 14 ms with 1 under load), and the embed service runs ONNX
    Runtime with one thread since f114b17."""
    backend = getattr(encoder, "backend", "sentence-transformers")
    if "torch" in sys.modules:
        import torch

        torch.set_num_threads(1)
    from embed_service import onnx_encoder

    threads = getattr(onnx_encoder, "ONNX_THREADS", "default") if backend == "onnx" else 1
    return f"BiEncoder on {backend}, {threads} intra-op thread(s)"


def _ms(s: dict) -> str:
    return f"{s['p50']:.1f} / {s['p95']:.1f} / {s['max']:.0f}"


def _p(s: dict) -> str:
    return f"{s['p50']:.1f} / {s['p95']:.1f}"


def tables(res: dict) -> str:
    """The markdown tables of one run."""
    out = []
    sizes = res["sizes"]
    out.append("Issue 7's table (hybrid, top 10, re-rank off, single client; ms):\n")
    out.append(
        "| workspace | Recall hybrid p50 / p95 | LexicalCandidates p50 / p95 | DenseCandidates p50 | "
        "EmbedQueries p50 | floor hybrid p50 | recall / floor |"
    )
    out.append("|---|---|---|---|---|---|---|")
    for size, r in sizes.items():
        s = r["single"]
        h, parts = s["modes"]["hybrid"], s["parts"]
        out.append(
            f"| {int(size):,} memories | {_p(h['recall'])} | {_p(parts['LexicalCandidates'])} | "
            f"{parts['DenseCandidates']['p50']:.1f} | {parts['EmbedQueries']['p50']:.1f} | "
            f"{h['floor']['p50']:.1f} | {h['ratio']:.2f} |"
        )
    out.append(
        "\nRecall through the gateway, per mode (ms: p50 / p95 / max; answer@10 = share of questions with "
        "a relevant memory in the top 10):\n"
    )
    out.append(
        "| workspace | mode | 1 client | recalls/s | floor p50 / p95 | recall p50 / floor p50 | "
        f"{measure.CLIENTS} clients | recalls/s | answer@10 |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|")
    for size, r in sizes.items():
        for mode in measure.MODES:
            s = r["single"]["modes"][mode]
            c = r["concurrent"].get(mode)
            conc = f"{_ms(c['recall'])} | {c['per_second']:.1f}" if c else "not run | -"
            note = f" ({s['dense_unavailable']} without dense)" if s["dense_unavailable"] else ""
            out.append(
                f"| {int(size):,} | {mode} | {_ms(s['recall'])} | {s['per_second']:.1f} | {_p(s['floor'])} | "
                f"{s['ratio']:.2f} | {conc} | {s['hit_at_10']:.2f}{note} |"
            )
    out.append(
        "\nReads in time (docs/time.md): each question recalled within the calendar month its first relevant "
        "memory was said in, as of that month's end (as_of), and as known when half the workspace had been "
        "written (known_at: the median created_at), beside the same mode without, interleaved (single client, ms):\n"
    )
    out.append(
        "| workspace | mode, read | plain p50 / p95 | in time p50 / p95 | p95 ratio | answer@10 plain / in time |"
    )
    out.append("|---|---|---|---|---|---|")
    for size, r in sizes.items():
        for mode, w in r["single"].get("windows", {}).items():
            out.append(
                f"| {int(size):,} | {mode} | {_p(w['plain'])} | {_p(w['window'])} | {w['p95_ratio']:.2f} | "
                f"{w['hit_at_10_plain']:.2f} / {w['hit_at_10_window']:.2f} |"
            )
    out.append("\nThe parts (single client, ms, p50 / p95): in this process (floor) and over gRPC to one service:\n")
    names = ["embed", "lexical_sql", "dense_sql", "EmbedQueries", "LexicalCandidates", "DenseCandidates"]
    labels = [
        "BiEncoder.encode (in-process)",
        "candidates.lexical SQL",
        "candidates.dense SQL",
        "EmbedQueries (gRPC)",
        "LexicalCandidates (gRPC)",
        "DenseCandidates (gRPC)",
    ]
    out.append("| workspace | " + " | ".join(labels) + " |")
    out.append("|---|" + "---|" * len(names))
    for size, r in sizes.items():
        parts = r["single"]["parts"]
        out.append(f"| {int(size):,} | " + " | ".join(_p(parts[n]) for n in names) + " |")
    out.append("\nWorkspaces (built now or reused), and the build's own write and drain figures:\n")
    out.append("| workspace | state | built at commit | writes | write rate | embedding drain | vectors reused |")
    out.append("|---|---|---|---|---|---|---|")
    for size, r in sizes.items():
        e = r["workspace"]
        ing = e.get("ingest", {})
        rate = f"{ing['rows'] / ing['seconds']:.0f}/s" if ing.get("seconds") else "-"
        drains = ", ".join(f"{d['rows']:,} in {d['seconds']:.0f} s ({d['rate']:.0f}/s)" for d in e.get("drains", []))
        reuse = e.get("reuse")
        reuse_s = (
            f"copies: {reuse['rows']:,} in {reuse['seconds']:.0f} s (bench-only step)"
            if reuse
            else "copies: by the store's worker (in the drain)"
            if e.get("reuse_path") == "worker"
            else "none"
        )
        donor = sum(d["rows"] for d in e.get("donor_reuse", []))
        if donor:
            reuse_s = f"{donor:,} from the smaller workspace (bench-only step); {reuse_s}"
        state = "built in this run" if e.get("built_now") else f"reused (built {e.get('finished', '?')})"
        out.append(
            f"| {int(size):,} | {state} | {e.get('commit')} | {e.get('ingest_form', '-')} | {rate} | "
            f"{drains or '-'} | {reuse_s} |"
        )
    p = res.get("probe")
    if p:
        out.append("\nIngest probe (fresh data folder, embedding excluded from the write rate):\n")
        out.append("| rows | write path | write rate | backlog drain | in-process BiEncoder.encode | drain / encode |")
        out.append("|---|---|---|---|---|---|")
        out.append(
            f"| {p['rows']:,} | {p['form']} | {p['ingest_rate']:.0f} memories/s | "
            f"{p['drain']['rate']:.1f} memories/s ({p['drain']['rows']:,} in {p['drain']['seconds']:.0f} s) | "
            f"{p['encode_rate']:.1f} texts/s | {p['drain_vs_encode']:.2f} |"
        )
    cpu_rows = [
        (size, mode, c) for size, r in sizes.items() for mode, c in r["concurrent"].items() if "cpu_ms_per_recall" in c
    ]
    if cpu_rows:
        names = list(cpu_rows[0][2]["cpu_ms_per_recall"])
        out.append(
            "\nCPU per recall in the concurrent run (ms of CPU, user + system, per answered recall; "
            "PostgreSQL summed over its processes; the machine has "
            f"{os.cpu_count()} CPUs, so at most {1000 * (os.cpu_count() or 1)} ms of CPU per second):\n"
        )
        out.append("| workspace | mode | " + " | ".join(names) + " | all | recalls/s |")
        out.append("|---|---|" + "---|" * (len(names) + 2))
        for size, mode, c in cpu_rows:
            per = c["cpu_ms_per_recall"]
            out.append(
                f"| {int(size):,} | {mode} | "
                + " | ".join(f"{per[n]:.1f}" for n in names)
                + f" | {sum(per.values()):.1f} | {c['per_second']:.1f} |"
            )
    out.append(
        "\nResident memory after the measurements (MiB; services RSS, PostgreSQL PSS summed over its "
        'processes), and `recallatron up` start-up (start to "recallatron ready"):\n'
    )
    names = ["gateway", "store", "embed", "rank", "postgres (PSS)"]
    out.append("| workspace | " + " | ".join(names) + " |")
    out.append("|---|" + "---|" * len(names))
    for size, r in sizes.items():
        out.append(f"| {int(size):,} | " + " | ".join(f"{r['memory_mib'][n]:.0f}" for n in names) + " |")
    starts = []
    if p:
        starts.append(f"fresh data folder {res['startup']['fresh']:.1f} s")
    if "existing" in res["startup"]:
        starts.append(f"with the bench workspaces present {res['startup']['existing']:.1f} s")
    out.append("\nStart-up: " + "; ".join(starts) + ".")
    vacuums = [f"{int(size):,} in {r['vacuum_seconds']:.1f} s" for size, r in sizes.items() if "vacuum_seconds" in r]
    if vacuums:
        out.append("VACUUM (ANALYZE) of each workspace before it was measured: " + ", ".join(vacuums) + ".")
    return "\n".join(out)


def header(res: dict) -> str:
    return (
        f"Date: {res['date']}. Commit: `{res['commit']}`. Machine: {res['machine']}; "
        f"at the end {res['load_end']}.\n"
        f"Floor embedding: {res['floor_encoder']}.\n"
        f"Command: `{res['command']}`. Questions: {res['questions']} ({res['question_mix']}). "
        f"Took {res['seconds'] / 60:.1f} min.\n"
    )


def write_results(text: str) -> None:
    """Replaces the "Latest run" section of bench/RESULTS.md (everything up to the next "## ")."""
    doc = RESULTS.read_text() if RESULTS.exists() else "# Bench results\n\n"
    start = doc.find(LATEST)
    if start < 0:
        doc = doc.rstrip("\n") + "\n\n" + text + "\n"
    else:
        nxt = doc.find("\n## ", start + len(LATEST))
        doc = doc[:start] + text + "\n" + (doc[nxt:] if nxt >= 0 else "")
    RESULTS.write_text(doc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Recall bench (issue 7).")
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated workspace sizes")
    parser.add_argument("--probe", type=int, default=4000, help="rows of the ingest probe (0: skip it)")
    parser.add_argument("--clients", type=int, default=measure.CLIENTS, help="concurrent clients (1: skip)")
    parser.add_argument(
        "--rounds", type=int, default=measure.CONCURRENT_ROUNDS, help="passes over the questions for the concurrent run"
    )
    parser.add_argument(
        "--passes",
        type=at_least_one,
        default=1,
        help="passes over the questions for the single client (more samples per p95)",
    )
    parser.add_argument("--questions", type=int, default=0, help="ask only the first N questions (0: all)")
    parser.add_argument("--home", default=str(BENCH_DIR / "home"), help="data folder of the measured stack")
    parser.add_argument("--port-base", type=int, default=50150)
    parser.add_argument("--rebuild", action="store_true", help="build the workspaces again instead of reusing them")
    parser.add_argument("--write", action="store_true", help="also write bench/RESULTS.md")
    parser.add_argument(
        "--build-only", action="store_true", help="build (or check) the workspaces and stop: no probe, no measurement"
    )
    parser.add_argument(
        "--bulk-reuse",
        action="store_true",
        help="bench-only build shortcut: vectors of identical texts copied by SQL (bench/RESULTS.md, 1,000,000)",
    )
    parser.add_argument("--label", default="", help="a note for the results heading")
    args = parser.parse_args(argv)
    corpus.require_eval()  # before the model loads: a clone without the data is told where it comes from
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    questions = list(corpus.questions())
    if args.questions:
        questions = questions[: args.questions]
    started = time.monotonic()
    res = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="minutes"),
        "commit": commit(),
        "machine": machine(),
        "command": "python -m bench.run " + " ".join(argv or sys.argv[1:]),
        "questions": len(questions),
        "question_mix": "every 6th LoCoMo question of each conversation, every 3rd SciFact claim",
        "sizes": {},
        "startup": {},
    }
    print(f"bench: loading the BiEncoder in this process ({res['machine']})", file=sys.stderr, flush=True)
    from embed_service.models import BiEncoder

    encoder = BiEncoder()
    res["floor_encoder"] = floor_encoder(encoder)
    BENCH_DIR.mkdir(exist_ok=True)
    if args.build_only:
        args.probe = 0
    if args.probe:
        probe_home = BENCH_DIR / "probe"
        shutil.rmtree(probe_home, ignore_errors=True)
        stack = Stack.start(probe_home, args.port_base)
        res["startup"]["fresh"] = stack.startup_seconds
        print(
            f"bench: probe stack up in {stack.startup_seconds:.1f}s; ingest probe of {args.probe} rows",
            file=sys.stderr,
            flush=True,
        )
        try:
            gw = client.Gateway(stack.addrs["gateway"], stack.operator_token())
            res["probe"] = measure.ingest_probe(stack, gw, encoder, args.probe)
            gw.close()
        finally:
            stack.stop()
    stack = Stack.start(Path(args.home), args.port_base)
    res["startup"]["existing"] = stack.startup_seconds
    print(f"bench: stack up in {stack.startup_seconds:.1f}s", file=sys.stderr, flush=True)
    try:
        gw = client.Gateway(stack.addrs["gateway"], stack.operator_token())
        from recallatron.embed.v1 import embed_pb2, embed_pb2_grpc

        from servicekit import clients

        ch = clients.channel(stack.addrs["embed"])
        version = embed_pb2_grpc.EmbedServiceStub(ch).GetModelInfo(embed_pb2.GetModelInfoRequest()).input_version
        ch.close()
        for size in sizes:
            print(f"bench: workspace of {size:,}", file=sys.stderr, flush=True)
            entry = workspace.ensure(
                stack, gw, size, rebuild=args.rebuild, input_version=version, bulk_reuse=args.bulk_reuse
            )
            if entry.get("migrations") != workspace.migrations():
                print(
                    f"bench: note: workspace {size} was built with migrations {entry.get('migrations')}; "
                    f"this checkout has {workspace.migrations()}",
                    file=sys.stderr,
                    flush=True,
                )
            if args.build_only:
                print(
                    f"bench: workspace of {size:,} ready ({'built now' if entry['built_now'] else 'reused'})",
                    file=sys.stderr,
                    flush=True,
                )
                continue
            print(f"bench: VACUUM (ANALYZE) of the {size:,} workspace", file=sys.stderr, flush=True)
            vacuumed = workspace.vacuum(stack, entry["workspace_id"])
            print(f"bench: measuring {size:,} ({len(questions)} questions)", file=sys.stderr, flush=True)
            r = measure.measure_workspace(stack, entry, encoder, questions, args.clients, args.rounds, args.passes)
            r["vacuum_seconds"] = vacuumed
            r["workspace"] = {k: v for k, v in entry.items() if k not in ("core_ids", "token")}
            res["sizes"][str(size)] = r
        gw.close()
    finally:
        stack.stop()
    if args.build_only:
        return 0
    res["seconds"] = time.monotonic() - started
    res["load_end"] = "load average {:.1f} / {:.1f} / {:.1f}".format(*os.getloadavg())
    title = f"{LATEST}" + (f" ({args.label})" if args.label else "")
    text = f"{title}\n\n{header(res)}\n{tables(res)}\n"
    print(text)
    (BENCH_DIR / "last-run.json").write_text(json.dumps(res, indent=1, default=str))
    if args.write:
        write_results(text)
        print(f"written to {RESULTS.relative_to(corpus.ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
