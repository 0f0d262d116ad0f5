"""Query and document embedding, ONNX Runtime against PyTorch (sentence-transformers), side by side
in one process (issue 7, item 4: query embedding p50 <= 4 ms).

Loads both backends of ``embed_service.models.BiEncoder`` (the ONNX export must exist: ``make
setup`` makes it, or ``python -m embed_service.export_onnx``), then:

- **single queries**: ``--queries`` real questions (LoCoMo questions of all conversations and
  SciFact claims from the eval data, ``bench.corpus.EVAL``, spread evenly), each encoded alone, interleaved between
  the backends (ONNX first on even questions, PyTorch first on odd ones) so both see the same
  machine load; p50 / p95 / mean / max wall milliseconds, and the p50 of the CPU time the process
  spent (all threads), which other work on a shared machine does not inflate. ``--onnx-threads 1,2``
  adds one ONNX column per intra-op thread count (the service uses ``onnx_encoder.ONNX_THREADS``).
- **document batches**: ``--docs`` memories composed as the service composes them (``title\\nbody``;
  LoCoMo turns and SciFact abstracts, half each), sent in requests of ``--batch`` (default 32; the
  store's embedding job sends 128, the bench's in-process comparison 256); texts per second of wall
  time and of CPU time for each backend, best of ``--rounds`` passes (the backends take turns each
  round), and the minimum cosine to the first backend's vectors.
- ``--compare-export FILE`` (repeatable) adds an ONNX column for another export, for example the
  ``model.onnx`` of an older ``EXPORT_FORMAT``, loaded with the same session options: a before and
  after of the graph in one run. ``--no-pytorch`` leaves PyTorch out.
- ``--grpc TREE`` (repeatable) adds **EmbedQueries over gRPC**: one embed service per checkout
  ``TREE`` (its own code, ``PYTHONPATH=TREE:TREE/gen``, this Python) on a free local port, every
  question sent to each in turn (alternating order); p50 / p95 wall milliseconds of the call.

Usage: ``.venv/bin/python -m bench.embed_bench [--queries 300] [--docs 1000] [--batch 32]
[--rounds 2] [--onnx-threads 1,2] [--compare-export FILE] [--no-pytorch] [--grpc TREE] [--json]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

from bench.corpus import EVAL, require_eval
from embed_service.models import BiEncoder
from embed_service.onnx_encoder import ONNX_THREADS, OnnxEncoder
from servicekit.embedding_input import compose


def _jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _spread(items: list, n: int) -> list:
    """``n`` items taken evenly across ``items`` (all of them when n >= len)."""
    if n >= len(items):
        return list(items)
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]


def questions(n: int) -> list[str]:
    """Real questions: LoCoMo (every conversation) and SciFact claims, ``n`` in all, spread evenly."""
    locomo = [q["question"] for d in sorted((EVAL / "locomo").iterdir()) for q in _jsonl(d / "queries.jsonl")]
    scifact = [q["question"] for q in _jsonl(EVAL / "scifact" / "queries.jsonl")]
    return _spread(locomo + scifact, n)


def documents(n: int) -> list[str]:
    """Memories as the embed service composes them: half LoCoMo turns, half SciFact abstracts."""
    locomo = [
        compose(m["title"], m["body"])
        for d in sorted((EVAL / "locomo").iterdir())
        for m in _jsonl(d / "memories.jsonl")
    ]
    scifact = [compose(m["title"], m["body"]) for m in _jsonl(EVAL / "scifact" / "memories.jsonl")]
    return _spread(locomo, n - n // 2) + _spread(scifact, n // 2)


def _latency(t: list[float]) -> dict:
    """p50, p95, mean and max of per-call milliseconds, and how many calls."""
    return {"p50_ms": _pct(t, 50), "p95_ms": _pct(t, 95), "mean_ms": statistics.fmean(t), "max_ms": max(t), "n": len(t)}


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def bench_queries(encoders: dict[str, object], qs: list[str], warmup: int = 20) -> dict[str, dict]:
    """Per-encoder single-query latency in ms (p50, p95, mean, max), interleaved per question."""
    names = list(encoders)
    for q in qs[:warmup]:
        for name in names:
            encoders[name].encode([q])
    times: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for i, q in enumerate(qs):
        for name in names if i % 2 == 0 else names[::-1]:
            started, cpu_started = time.perf_counter(), time.process_time()
            encoders[name].encode([q])
            times[name].append((time.perf_counter() - started) * 1000)
            cpu[name].append((time.process_time() - cpu_started) * 1000)
    return {name: {**_latency(t), "cpu_p50_ms": _pct(cpu[name], 50)} for name, t in times.items()}


def bench_documents(encoders: dict[str, object], docs: list[str], batch: int, rounds: int) -> dict[str, dict]:
    """Per-encoder documents/s over ``docs`` sent ``batch`` at a time; best of ``rounds``, the encoders
    taking turns each round (alternating order) so they see the same machine load."""
    names = list(encoders)
    for name in names:
        encoders[name].encode(docs[:batch])  # warm-up
    best = {name: float("inf") for name in names}
    best_cpu = dict(best)
    vectors: dict[str, np.ndarray] = {}
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            started, cpu_started = time.perf_counter(), time.process_time()
            out = [encoders[name].encode(docs[i : i + batch]) for i in range(0, len(docs), batch)]
            best[name] = min(best[name], time.perf_counter() - started)
            best_cpu[name] = min(best_cpu[name], time.process_time() - cpu_started)
            vectors[name] = np.concatenate(out)
    first = vectors[names[0]]
    return {
        name: {
            "texts_per_s": len(docs) / best[name],
            "seconds": best[name],
            "texts_per_cpu_s": len(docs) / best_cpu[name],
            "n": len(docs),
            "min_cosine_to_first": float(np.min(np.sum(first * vectors[name], axis=1))),
        }
        for name in names
    }


# The embed service of one checkout: started on a free port, prints the port once the model is loaded.
_SERVE = (
    "import sys, time\nfrom embed_service.server import EmbedService\n"
    "service = EmbedService('127.0.0.1:0', '')\nprint(service.port, flush=True)\nsys.stdin.read()\n"
)


@contextlib.contextmanager
def embed_services(trees: list[Path]):
    """One embed service per checkout, ``{tree: port}``; stopped (stdin closed, then killed) on exit."""
    procs: list[subprocess.Popen] = []
    try:
        ports = {}
        for tree in trees:
            env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{tree / 'gen'}")
            proc = subprocess.Popen(
                [sys.executable, "-c", _SERVE],
                cwd=tree,
                env=env,
                text=True,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            procs.append(proc)
            line = proc.stdout.readline().strip()
            if not line.isdigit():
                raise RuntimeError(f"the embed service of {tree} did not start (exit status {proc.poll()})")
            ports[tree] = int(line)
        yield ports
    finally:
        for proc in procs:
            with contextlib.suppress(OSError):
                proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def bench_grpc(trees: list[Path], qs: list[str], warmup: int = 20) -> dict[str, dict]:
    """EmbedQueries of one question, wall ms (p50, p95, mean, max), per checkout, interleaved per question."""
    import grpc
    from recallatron.embed.v1 import embed_pb2, embed_pb2_grpc

    with embed_services(trees) as ports:
        channels = {str(tree): grpc.insecure_channel(f"127.0.0.1:{port}") for tree, port in ports.items()}
        try:
            stubs = {name: embed_pb2_grpc.EmbedServiceStub(ch) for name, ch in channels.items()}
            names = list(stubs)
            for q in qs[:warmup]:
                for name in names:
                    stubs[name].EmbedQueries(embed_pb2.EmbedQueriesRequest(queries=[q]), timeout=60)
            times: dict[str, list[float]] = {name: [] for name in names}
            for i, q in enumerate(qs):
                for name in names if i % 2 == 0 else names[::-1]:
                    started = time.perf_counter()
                    stubs[name].EmbedQueries(embed_pb2.EmbedQueriesRequest(queries=[q]), timeout=60)
                    times[name].append((time.perf_counter() - started) * 1000)
        finally:
            for ch in channels.values():
                ch.close()
    return {name: _latency(t) for name, t in times.items()}


# (heading, key, format) of the printed tables.
QUERY_COLUMNS = (
    ("p50", "p50_ms", "7.2f"),
    ("p95", "p95_ms", "7.2f"),
    ("mean", "mean_ms", "7.2f"),
    ("max", "max_ms", "7.2f"),
    ("CPU p50", "cpu_p50_ms", "8.2f"),
)
DOC_COLUMNS = (
    ("texts/s", "texts_per_s", "8.1f"),
    ("seconds", "seconds", "8.2f"),
    ("per CPU-s", "texts_per_cpu_s", "10.1f"),
    ("min cos", "min_cosine_to_first", "9.6f"),
)


def _table(title: str, label: str, figures: dict[str, dict], columns, note: str) -> None:
    """Prints one row per name of ``figures`` with the ``columns`` (heading, key, format)."""
    width = max([len(label), *map(len, figures)])
    print(f"\n{title}")
    print(f"  {label:<{width}} " + " ".join(f"{head:>{fmt.split('.')[0]}}" for head, _, fmt in columns))
    for name, f in figures.items():
        print(f"  {name:<{width}} " + " ".join(f"{f[key]:{fmt}}" for _, key, fmt in columns))
    if note:
        print(f"  ({note})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=300, help="single real questions timed (default 300)")
    parser.add_argument("--docs", type=int, default=1000, help="memories encoded for throughput (default 1000)")
    parser.add_argument("--batch", type=int, default=32, help="documents per encode call (default 32)")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the documents; best counts (default 2)")
    parser.add_argument("--onnx-threads", default="", help="extra ONNX intra-op thread counts to compare, e.g. 1,2")
    for flag, metavar, what in (
        ("--compare-export", "FILE", "another ONNX export timed beside the current one"),
        ("--grpc", "TREE", "time EmbedQueries against an embed service of this checkout"),
    ):
        parser.add_argument(flag, action="append", default=[], type=Path, metavar=metavar, help=f"{what} (repeatable)")
    parser.add_argument("--no-pytorch", action="store_true", help="leave the PyTorch backend out")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    require_eval()

    started = time.perf_counter()
    onnx = BiEncoder(backend="onnx")
    load = {"onnx": time.perf_counter() - started}
    encoders: dict[str, object] = {f"onnx ({ONNX_THREADS} thr)": onnx}
    for threads in sorted({int(t) for t in args.onnx_threads.split(",") if t.strip()} - {ONNX_THREADS}):
        encoders[f"onnx ({threads} thr)"] = OnnxEncoder(onnx.impl.path, threads=threads)
    for i, path in enumerate(args.compare_export, 1):
        encoders[f"onnx export {i} ({ONNX_THREADS} thr)"] = OnnxEncoder(path)
    if not args.no_pytorch:
        import torch

        started = time.perf_counter()
        encoders[f"pytorch ({torch.get_num_threads()} thr)"] = BiEncoder(backend="sentence-transformers")
        load["pytorch"] = time.perf_counter() - started

    qs = questions(args.queries)
    docs = documents(args.docs) if args.docs else []
    query_figures = bench_queries(encoders, qs)
    doc_encoders = {
        name: enc
        for name, enc in encoders.items()
        if name.startswith((f"onnx ({ONNX_THREADS} ", "onnx export", "pytorch"))
    }
    doc_figures = bench_documents(doc_encoders, docs, args.batch, args.rounds) if args.docs else {}
    grpc_figures = bench_grpc([tree.resolve() for tree in args.grpc], qs) if args.grpc else {}
    machine = {
        "cpus": os.cpu_count(),
        "load_avg_1m": os.getloadavg()[0],
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
    }
    report = {
        "queries": query_figures,
        "documents": doc_figures,
        "grpc": grpc_figures,
        "load_seconds": load,
        "exports": {
            "onnx": str(onnx.impl.path),
            **{f"export {i}": str(p) for i, p in enumerate(args.compare_export, 1)},
        },
        "machine": machine,
        "batch": args.batch,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"machine: {machine['cpus']} CPUs, load average {machine['load_avg_1m']:.2f} at the end, "
        f"Python {machine['python']}; model load " + ", ".join(f"{k} {v:.1f} s" for k, v in load.items())
    )
    for name, path in report["exports"].items():
        print(f"  {name}: {path}")
    _table(
        f"single-query embedding, {len(qs)} real questions, in-process (ms):",
        "backend",
        query_figures,
        QUERY_COLUMNS,
        "CPU p50: CPU time this process spent per query, all its threads; wall time is what a caller waits",
    )
    if doc_figures:
        _table(
            f"document embedding, {len(docs)} memories in batches of {args.batch} (best of {args.rounds}):",
            "backend",
            doc_figures,
            DOC_COLUMNS,
            "per CPU-s: texts per second of CPU time this process spent, all its threads",
        )
    if grpc_figures:
        _table(
            f"EmbedQueries over gRPC, one question per call, {len(qs)} questions (ms):",
            "embed service of",
            grpc_figures,
            QUERY_COLUMNS[:4],
            "",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
