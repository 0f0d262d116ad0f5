"""Recall through the services against its floor, in one run (issue 7, item 5: a shorter path).

Builds the four services in this process on free loopback ports, as tests/conftest.py does (or,
with ``--up``, one process each as ``recallatron up`` runs them), on an embedded PostgreSQL in a
temporary folder (or ``DATABASE_URL``); loads the first LoCoMo
conversations of the eval data's LoCoMo (``bench.corpus.EVAL``) (``--conversations``, default 4: 2,080 real dialog
turns) into one workspace through ``Remember``; waits for the embeddings; then asks the questions
of those conversations (``--queries``, spread evenly) and times, per question and interleaved so
both see the same machine load:

- ``Recall`` through the gateway in each mode, re-rank off (``skip_rerank``), and once more in
  hybrid mode with re-rank requested (the default request; no cross-encoder is installed here, so
  it shows what an unavailable re-ranker costs);
- the floor: the query embedded in-process by the same BiEncoder, and the candidate SQL of
  ``store_service/search/candidates.py`` (``lexical``, ``dense``) called directly on one autocommit
  connection to the workspace database (hybrid floor = embed + dense + lexical, run one after
  another).

Prints p50 / p95 per mode, the ratio of recall p50 to floor p50 (issue 7 asks for <= 1.5), and the
internal gRPC calls one recall makes (read from the services' ``grpc_server_handled`` counters).

Usage: ``.venv/bin/python -m bench.recall_path_bench [--up] [--queries 150] [--conversations 4] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import psycopg
from pgvector.psycopg import register_vector
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from psycopg.conninfo import make_conninfo
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.gateway.v1 import gateway_pb2_grpc
from recallatron.memory.v1 import memory_pb2 as m

from bench.corpus import EVAL, require_eval
from client import bearer, system
from embed_service.models import BiEncoder
from embed_service.server import EmbedService
from gateway.recall import RecallConfig
from gateway.server import GatewayService
from rank_service.server import start as start_rank
from servicekit import clients
from servicekit.embedded_pg import EmbeddedPostgres
from servicekit.embedding_input import INPUT_VERSION
from store_service.search import candidates
from store_service.server import StoreService

ROOT = Path(__file__).resolve().parent.parent
LOCOMO = EVAL / "locomo"
OPERATOR = "rco_bench_operator"
PURPOSE = "conversation"
LIMIT = 100  # RecallConfig.candidate_limit, the rows each arm contributes
FLOOR = 0.30  # the workspace's default dense floor
MODES = {"lexical": m.RECALL_MODE_LEXICAL, "dense": m.RECALL_MODE_DENSE, "hybrid": m.RECALL_MODE_HYBRID}
INTERNAL = ("recallatron.store.v1.StoreService", "recallatron.embed.v1.EmbedService", "recallatron.rank.v1.RankService")
# The RPCs a recall can make (the embedding job's and the dependency watch's calls run in the
# background and are not counted).
RECALL_RPCS = {
    "Authenticate",
    "LexicalCandidates",
    "EmbedQueries",
    "DenseCandidates",
    "FuseAndWalk",
    "GetMemories",
    "Rerank",
}


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def pct(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of ``values``, in milliseconds."""
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


class InProcess:
    """The four services in this process on free loopback ports, as tests/conftest.py builds them."""

    def __init__(self, pg_url: str, encoder: BiEncoder, token_path: Path) -> None:
        self.embed = EmbedService("127.0.0.1:0", "", encoder=encoder)
        self.rank = start_rank("127.0.0.1:0")
        self.store = StoreService(pg_url, "127.0.0.1:0", f"127.0.0.1:{self.embed.port}")
        self.gateway = GatewayService(
            "127.0.0.1:0",
            f"127.0.0.1:{self.store.port}",
            f"127.0.0.1:{self.embed.port}",
            f"127.0.0.1:{self.rank.port}",
            token_path,
            RecallConfig(candidate_limit=LIMIT),
        )
        self.gateway_addr = f"127.0.0.1:{self.gateway.port}"

    def handled(self) -> Counter:
        """grpc_server_handled counts of the recall RPCs of the internal services, keyed by method."""
        return _handled(REGISTRY.collect())

    def stop(self) -> None:
        self.gateway.stop()
        self.store.stop()
        self.rank.stop()
        self.embed.stop()


class Up:
    """``recallatron up`` (``client.system``) in a temporary home: four service processes on ports
    ``base+1..4``, their metrics on ``base+11..14``, the web screen on ``base+5``, the control plane
    on ``pg_url`` (PostgreSQL of this bench)."""

    def __init__(self, pg_url: str, token_path: Path, home: Path, base: int) -> None:
        ports = {"gateway": base + 1, "store": base + 2, "embed": base + 3, "rank": base + 4}
        env = {
            "DATABASE_URL": pg_url,
            "RECALLATRON_OPERATOR_TOKEN_FILE": str(token_path),
            "RECALLATRON_CANDIDATE_LIMIT": str(LIMIT),
        }
        self.metrics = [f"http://127.0.0.1:{ports[n] + 10}/metrics" for n in ("store", "embed", "rank")]
        try:
            self.system = system.System.start(
                home,
                env,
                addrs={name: f"127.0.0.1:{port}" for name, port in ports.items()},
                metrics={name: port + 10 for name, port in ports.items()},
                web=f"127.0.0.1:{base + 5}",  # the screen `up` starts too
            )
        except RuntimeError:
            raise SystemExit(f"recallatron up did not start; logs in {home / 'logs'}") from None
        self.system.drain()  # keep its pipe drained
        self.gateway_addr = self.system.gateway

    def handled(self) -> Counter:
        """grpc_server_handled counts of the recall RPCs, scraped from the services' /metrics."""
        families = []
        for url in self.metrics:
            with urllib.request.urlopen(url, timeout=10) as resp:
                families += text_string_to_metric_families(resp.read().decode())
        return _handled(families)

    def stop(self) -> None:
        self.system.stop(60)


def _handled(families) -> Counter:
    counts = Counter()
    for metric in families:
        if metric.name != "grpc_server_handled":
            continue
        for sample in metric.samples:
            if (
                sample.name.endswith("_total")
                and sample.labels["grpc_service"] in INTERNAL
                and sample.labels["grpc_method"] in RECALL_RPCS
            ):
                counts[sample.labels["grpc_method"]] += int(sample.value)
    return counts


class Bench:
    """One workspace of LoCoMo memories on a running stack, and the timed calls."""

    def __init__(self, stack: InProcess | Up, encoder: BiEncoder, pg_url: str) -> None:
        self.stack, self.encoder, self.pg_url = stack, encoder, pg_url
        self.channel = clients.channel(stack.gateway_addr)
        deadline = time.monotonic() + 60
        while not clients.is_serving(self.channel) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.memory = gateway_pb2_grpc.MemoryServiceStub(self.channel)
        self.admin = gateway_pb2_grpc.AdminServiceStub(self.channel)
        self.op = bearer(OPERATOR)

    def load(self, rows: list[dict]) -> None:
        """A workspace and member; every row remembered (4 client threads); embeddings drained."""
        ws = self.admin.CreateWorkspace(g.CreateWorkspaceRequest(name="recall path bench"), metadata=self.op)
        member = self.admin.AddMember(g.AddMemberRequest(workspace_id=ws.workspace_id), metadata=self.op)
        self.md = bearer(member.token)

        def one(row: dict) -> None:
            self.memory.Remember(
                g.RememberRequest(
                    purpose=m.PURPOSE_CONVERSATION,
                    kind=m.KIND_NOTE,
                    title=row.get("title") or "",
                    body=row["body"],
                    audience=m.AUDIENCE_WORKSPACE,
                    request_id=row["id"],
                ),
                metadata=self.md,
                timeout=60,
            )

        start = time.monotonic()
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(one, rows))
        print(f"loaded {len(rows)} memories in {time.monotonic() - start:.1f} s", file=sys.stderr)
        start = time.monotonic()
        while self.admin.GetStatus(g.GetStatusRequest(), metadata=self.op).embedding_backlog:
            time.sleep(0.5)
        print(f"embedded them in {time.monotonic() - start:.1f} s", file=sys.stderr)
        self.caller = m.Caller(
            workspace_id=ws.workspace_id,
            member_id=member.member_id,
            role=m.ROLE_MEMBER,
            granted_purposes=[m.PURPOSE_CONVERSATION, m.PURPOSE_TASKS, m.PURPOSE_REPORTING, m.PURPOSE_ADMINISTRATION],
        )  # a new member holds all four
        with psycopg.connect(self.pg_url) as control:
            db_name = control.execute("SELECT db_name FROM workspace WHERE id = %s", (ws.workspace_id,)).fetchone()[0]
        self.conn = psycopg.connect(make_conninfo(self.pg_url, dbname=db_name), autocommit=True)
        register_vector(self.conn)

    def recall(self, query: str, mode: int, skip_rerank: bool = True) -> g.RecallResponse:
        return self.memory.Recall(
            g.RecallRequest(query=query, purpose=m.PURPOSE_CONVERSATION, mode=mode, skip_rerank=skip_rerank),
            metadata=self.md,
            timeout=30,
        )

    def floor(self, query: str, mode: str) -> None:
        """What the recall cannot avoid: the in-process query embedding and the candidate SQL."""
        if mode in ("dense", "hybrid"):
            vector = self.encoder.encode([query])[0]
            candidates.dense(self.conn, self.caller, PURPOSE, vector, INPUT_VERSION, FLOOR, LIMIT)
        if mode in ("lexical", "hybrid"):
            candidates.lexical(self.conn, self.caller, PURPOSE, query, LIMIT, False)

    def timed(self, questions: list[str]) -> dict[str, list[float]]:
        """Per-question timings of every variant, in a shuffled order per question."""
        variants = {}
        for name, mode in MODES.items():
            variants[f"recall {name}"] = lambda q, mode=mode: self.recall(q, mode)
            variants[f"floor {name}"] = lambda q, name=name: self.floor(q, name)
        variants["recall hybrid, re-rank asked"] = lambda q: self.recall(q, m.RECALL_MODE_HYBRID, skip_rerank=False)
        out = {name: [] for name in variants}
        rng = random.Random(7)
        for q in questions:
            order = list(variants)
            rng.shuffle(order)
            for name in order:
                start = time.perf_counter()
                variants[name](q)
                out[name].append(time.perf_counter() - start)
        return out

    def internal_calls(self, query: str) -> dict[str, dict[str, int]]:
        """The internal RPCs one recall makes, per variant, counted on the servers."""
        out = {}
        for label, mode, skip in [
            ("lexical", m.RECALL_MODE_LEXICAL, True),
            ("dense", m.RECALL_MODE_DENSE, True),
            ("hybrid", m.RECALL_MODE_HYBRID, True),
            ("hybrid, re-rank asked", m.RECALL_MODE_HYBRID, False),
        ]:
            before = self.stack.handled()
            self.recall(query, mode, skip)
            out[label] = dict(self.stack.handled() - before)
        return out

    def close(self) -> None:
        self.conn.close()
        self.channel.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=LOCOMO, help="the LoCoMo folder (one sub-folder per conversation)")
    parser.add_argument("--conversations", type=int, default=4, help="LoCoMo conversations loaded (in name order)")
    parser.add_argument("--queries", type=int, default=150, help="questions timed, spread over the conversations")
    parser.add_argument("--warmup", type=int, default=20, help="questions asked first, untimed")
    parser.add_argument(
        "--up",
        action="store_true",
        help="run the services as `recallatron up` does (one process each) instead of in this process",
    )
    parser.add_argument(
        "--port-base", type=int, default=50250, help="with --up: gRPC ports base+1..4, metrics base+11..14"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    if args.data == LOCOMO:  # the default: the bench's eval data, which may be absent
        require_eval()

    folders = sorted(p for p in args.data.iterdir() if (p / "memories.jsonl").is_file())[: args.conversations]
    rows, questions = [], []
    for folder in folders:
        rows += [{**r, "id": f"{folder.name}/{r['id']}"} for r in read_jsonl(folder / "memories.jsonl")]
        questions += [q["question"] for q in read_jsonl(folder / "queries.jsonl")]
    step = max(1, len(questions) // args.queries)
    timed_questions = questions[::step][: args.queries]
    warmup = questions[1::step][: args.warmup]

    with tempfile.TemporaryDirectory(prefix="recall-bench-") as tmp:
        token_path = Path(tmp) / "operator-token"
        token_path.write_text(OPERATOR + "\n")
        server = None
        pg_url = os.environ.get("DATABASE_URL")
        if not pg_url:
            server = EmbeddedPostgres(Path(tmp) / "pg")
            pg_url = server.control_url
        encoder = BiEncoder()
        if args.up:
            stack = Up(pg_url, token_path, Path(tmp) / "home", args.port_base)
        else:
            stack = InProcess(pg_url, encoder, token_path)
        bench = Bench(stack, encoder, pg_url)
        try:
            bench.load(rows)
            bench.timed(warmup)
            times = bench.timed(timed_questions)
            calls = bench.internal_calls(timed_questions[0])
        finally:
            bench.close()
            stack.stop()
            if server is not None:
                server.stop()

    print(
        f"\n{len(rows)} LoCoMo memories ({', '.join(f.name for f in folders)}), {len(timed_questions)} questions, "
        f"single client, {os.cpu_count()} cores, services {'in separate processes' if args.up else 'in-process'}, "
        f"query encoder {getattr(encoder, 'backend', 'sentence-transformers')}; times in ms"
    )
    print(f"{'mode':<24}{'recall p50':>11}{'p95':>8}{'floor p50':>11}{'p95':>8}{'ratio p50':>11}   internal calls")
    figures = {}
    for name in ("lexical", "dense", "hybrid", "hybrid, re-rank asked"):
        rec = times[f"recall {name}"]
        flo = times[f"floor {name.split(',')[0]}"]
        row = {
            "recall_p50": pct(rec, 0.5),
            "recall_p95": pct(rec, 0.95),
            "floor_p50": pct(flo, 0.5),
            "floor_p95": pct(flo, 0.95),
            "calls": calls[name],
        }
        row["ratio_p50"] = row["recall_p50"] / row["floor_p50"]
        figures[name] = row
        listed = ", ".join(f"{k} {v}" if v > 1 else k for k, v in sorted(calls[name].items()))
        print(
            f"{name:<24}{row['recall_p50']:>11.1f}{row['recall_p95']:>8.1f}{row['floor_p50']:>11.1f}"
            f"{row['floor_p95']:>8.1f}{row['ratio_p50']:>11.2f}   {sum(calls[name].values())}: {listed}"
        )
    print(
        f"{'mean recall - floor':<24}"
        + "  ".join(
            f"{n} {statistics.fmean(times[f'recall {n}']) * 1000 - statistics.fmean(times[f'floor {n}']) * 1000:.1f}"
            for n in MODES
        )
    )
    if args.json:
        print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
