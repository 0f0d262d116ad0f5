"""The measurements of one bench workspace: the recall mix through the gateway, the floor in this
process, and the internal calls timed directly against their services.

Single client, per question and interleaved (so every figure of a question sees the same machine
load): Recall in lexical, dense and hybrid mode (top 10, ``skip_rerank``); the floor, i.e. the
question embedded in this process by the embed service's ``BiEncoder`` plus the candidate SQL of
``store_service.search.candidates`` (``lexical`` and ``dense``, limit 100 as the gateway asks, the
workspace's dense floor) run on one autocommit psycopg connection to the workspace database;
and ``LexicalCandidates``, ``DenseCandidates`` (store) and ``EmbedQueries`` (embed) over gRPC.
Floor per mode: lexical = lexical SQL; dense = embed + dense SQL; hybrid = embed + lexical SQL +
dense SQL, one after another (the gateway runs the lexical arm beside embed + dense, so a perfect
gateway could beat this floor). The four steps of a question (the three recalls, then floor and
direct calls together) run in an order rotated by one per question, so each is first, and pays
for the question's pages not yet in PostgreSQL's buffers, for a quarter of the questions.

Then 8 concurrent clients (each its own channel) per mode, ``CONCURRENT_ROUNDS`` passes over the
questions between them; recalls per second is recalls / wall time.
"""

from __future__ import annotations

import datetime
import statistics
import threading
import time
import uuid

import numpy as np
import psycopg
from google.protobuf import timestamp_pb2
from pgvector.psycopg import register_vector
from recallatron.embed.v1 import embed_pb2, embed_pb2_grpc
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2, store_pb2_grpc

import client
from bench import corpus
from bench.stack import Stack
from servicekit import clients
from store_service.database import new_db_name
from store_service.search import candidates

MODES = {"lexical": m.RECALL_MODE_LEXICAL, "dense": m.RECALL_MODE_DENSE, "hybrid": m.RECALL_MODE_HYBRID}
# Reads in time (docs/time.md), each measured beside the same mode without one: within the calendar
# month (UTC) in which the question's first relevant memory was said; as of that month's end (valid
# time; as of now when the month is the current one); as known when half the workspace had been
# written (write time: the median created_at).
WINDOW_MODES = {"lexical": m.RECALL_MODE_LEXICAL, "hybrid": m.RECALL_MODE_HYBRID}
IN_TIME = ("in a month", "as of the month's end", "known at the build's middle")
TOP_K = 10
CANDIDATE_LIMIT = 100  # the gateway's RECALLATRON_CANDIDATE_LIMIT default
WARMUP = 20
CLIENTS = 8
CONCURRENT_ROUNDS = 2
PURPOSE = "conversation"


def summary(ms: list[float]) -> dict:
    """p50 / p95 / max / mean of latencies in milliseconds."""
    a = np.asarray(ms, dtype=float)
    if a.size == 0:
        return {"p50": float("nan"), "p95": float("nan"), "max": float("nan"), "mean": float("nan"), "n": 0}
    return {
        "p50": float(np.percentile(a, 50)),
        "p95": float(np.percentile(a, 95)),
        "max": float(a.max()),
        "mean": float(a.mean()),
        "n": int(a.size),
    }


class Probe:
    """Everything one workspace measurement needs: stubs, the caller, a SQL connection, the encoder."""

    def __init__(self, stack: Stack, entry: dict, encoder) -> None:
        self.stack, self.entry, self.encoder = stack, entry, encoder
        self.md = client.bearer(entry["token"])
        self.gw = client.Gateway(stack.addrs["gateway"], None)
        self.store_ch = clients.channel(stack.addrs["store"])
        self.embed_ch = clients.channel(stack.addrs["embed"])
        self.store = store_pb2_grpc.StoreServiceStub(self.store_ch)
        self.embed = embed_pb2_grpc.EmbedServiceStub(self.embed_ch)
        auth = self.store.Authenticate(store_pb2.AuthenticateRequest(token=entry["token"]))
        self.caller, self.dense_floor = auth.caller, auth.settings.dense_floor
        self.input_version = self.embed.GetModelInfo(embed_pb2.GetModelInfoRequest()).input_version
        self.conn = psycopg.connect(stack.pg_conninfo(new_db_name(uuid.UUID(entry["workspace_id"]))), autocommit=True)
        register_vector(self.conn)
        self.relevant = {}
        self.back = {v: k for k, v in entry["core_ids"].items()}
        said = dict(
            self.conn.execute(
                "SELECT id::text, said_at FROM memory WHERE id = ANY(%s::uuid[])", (list(entry["core_ids"].values()),)
            ).fetchall()
        )
        self.said = {key: said[mid] for key, mid in entry["core_ids"].items() if mid in said}
        self.middle = self.conn.execute(
            "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY created_at) FROM memory"
        ).fetchone()[0]

    def close(self) -> None:
        self.conn.close()
        self.gw.close()
        self.store_ch.close()
        self.embed_ch.close()

    def in_time(self, question: corpus.Question, kind: str) -> dict:
        """The RecallRequest fields of a read in time (``IN_TIME``) for a question: its month is the
        calendar month (UTC) in which its first relevant memory was said."""
        when = self.said[question.relevant[0]].astimezone(datetime.UTC)
        start = datetime.datetime(when.year, when.month, 1, tzinfo=datetime.UTC)
        end = datetime.datetime(when.year + when.month // 12, when.month % 12 + 1, 1, tzinfo=datetime.UTC)
        instants = {
            "in a month": {"occurred_after": start, "occurred_before": end},
            # A question said this month (an undated memory's said time is its writing): as of now.
            "as of the month's end": {
                "as_of": min(end - datetime.timedelta(microseconds=1), datetime.datetime.now(datetime.UTC))
            },
            "known at the build's middle": {"known_at": self.middle},
        }[kind]
        fields = {}
        for name, value in instants.items():
            fields[name] = timestamp_pb2.Timestamp()
            fields[name].FromDatetime(value)
        return fields

    def recall(
        self, gw: client.Gateway, question: corpus.Question, mode: int, in_time: str = ""
    ) -> tuple[float, bool, bool]:
        """One Recall (a read in time of the kind ``in_time`` names, when set); (milliseconds, answer in
        the top 10, dense arm available)."""
        window = self.in_time(question, in_time) if in_time else {}
        t0 = time.perf_counter()
        resp = gw.memory.Recall(
            g.RecallRequest(
                query=question.text,
                purpose=m.PURPOSE_CONVERSATION,
                mode=mode,
                top_k=TOP_K,
                skip_rerank=True,
                **window,
            ),
            metadata=self.md,
            timeout=120,
        )
        ms = (time.perf_counter() - t0) * 1000
        hit = any(self.back.get(it.memory.id) in question.relevant for it in resp.items)
        return ms, hit, resp.dense_available

    def floor(self, question: corpus.Question) -> dict[str, float]:
        """The floor components of one question, milliseconds."""
        t0 = time.perf_counter()
        vector = self.encoder.encode([question.text])[0]
        t1 = time.perf_counter()
        candidates.lexical(self.conn, self.caller, PURPOSE, question.text, CANDIDATE_LIMIT, False)
        t2 = time.perf_counter()
        candidates.dense(self.conn, self.caller, PURPOSE, vector, self.input_version, self.dense_floor, CANDIDATE_LIMIT)
        t3 = time.perf_counter()
        return {"embed": (t1 - t0) * 1000, "lexical_sql": (t2 - t1) * 1000, "dense_sql": (t3 - t2) * 1000}

    def direct(self, question: corpus.Question) -> dict[str, float]:
        """EmbedQueries, DenseCandidates and LexicalCandidates over gRPC, milliseconds, the candidate
        calls as a recall of the top 10 with re-rank off makes them (carrying 10 memories)."""
        t0 = time.perf_counter()
        emb = self.embed.EmbedQueries(embed_pb2.EmbedQueriesRequest(queries=[question.text]), timeout=60)
        t1 = time.perf_counter()
        self.store.DenseCandidates(
            store_pb2.DenseCandidatesRequest(
                caller=self.caller,
                purpose=m.PURPOSE_CONVERSATION,
                vector=emb.vectors[0].values,
                input_version=emb.input_version,
                floor=self.dense_floor,
                limit=CANDIDATE_LIMIT,
                memories_top=TOP_K,
            ),
            timeout=60,
        )
        t2 = time.perf_counter()
        self.store.LexicalCandidates(
            store_pb2.LexicalCandidatesRequest(
                caller=self.caller,
                purpose=m.PURPOSE_CONVERSATION,
                query=question.text,
                limit=CANDIDATE_LIMIT,
                memories_top=TOP_K,
            ),
            timeout=60,
        )
        t3 = time.perf_counter()
        return {
            "EmbedQueries": (t1 - t0) * 1000,
            "DenseCandidates": (t2 - t1) * 1000,
            "LexicalCandidates": (t3 - t2) * 1000,
        }

    def single_client(self, questions: list[corpus.Question], passes: int = 1) -> dict:
        """The interleaved single-client pass (module docstring), over the questions ``passes`` times
        (more samples for each p95; answer@10 is the share over all of them)."""
        for q in questions[:WARMUP]:
            for mode in MODES.values():
                self.recall(self.gw, q, mode)
            self.floor(q)
            self.direct(q)
        windowed = {f"{name} {kind}": (mode, kind) for name, mode in WINDOW_MODES.items() for kind in IN_TIME}
        lat = {name: [] for name in [*MODES, *windowed]}
        hits = dict.fromkeys(lat, 0)
        dense_down = dict.fromkeys(lat, 0)
        parts: dict[str, list[float]] = {}
        # The steps of a question in turn, the order rotated by one per question: whichever step reads
        # a question's postings and vectors first pays for pages not yet cached, so each step is first
        # for a share of the questions (always recalling lexical first once made that mode the slow one).
        steps = [*((name, (mode, "")) for name, mode in MODES.items()), *windowed.items(), ("floor", None)]
        asked = questions * passes
        for i, q in enumerate(asked):
            for name, mode in steps[i % len(steps) :] + steps[: i % len(steps)]:
                if mode is None:
                    for k, v in {**self.floor(q), **self.direct(q)}.items():
                        parts.setdefault(k, []).append(v)
                    continue
                ms, hit, dense_ok = self.recall(self.gw, q, *mode)
                lat[name].append(ms)
                hits[name] += hit
                dense_down[name] += not dense_ok
        floors = {
            "lexical": parts["lexical_sql"],
            "dense": [a + b for a, b in zip(parts["embed"], parts["dense_sql"], strict=True)],
            "hybrid": [
                a + b + c for a, b, c in zip(parts["embed"], parts["lexical_sql"], parts["dense_sql"], strict=True)
            ],
        }
        out = {}
        for name in MODES:
            rec, flo = summary(lat[name]), summary(floors[name])
            out[name] = {
                "recall": rec,
                "floor": flo,
                "ratio": rec["p50"] / flo["p50"] if flo["p50"] else float("nan"),
                "per_second": 1000 / statistics.mean(lat[name]),
                "hit_at_10": hits[name] / len(asked),
                "dense_unavailable": dense_down[name],
            }
        windows = {}
        for name in WINDOW_MODES:
            plain = summary(lat[name])
            for kind in IN_TIME:
                inside = summary(lat[f"{name} {kind}"])
                windows[f"{name} {kind}"] = {
                    "plain": plain,
                    "window": inside,
                    "p95_ratio": inside["p95"] / plain["p95"],
                    "hit_at_10_plain": hits[name] / len(asked),
                    "hit_at_10_window": hits[f"{name} {kind}"] / len(asked),
                }
        return {
            "modes": out,
            "windows": windows,
            "parts": {k: summary(v) for k, v in parts.items()},
            "questions": len(questions),
        }

    def _client(
        self, gw: client.Gateway, share: list[corpus.Question], mode: int, barrier: threading.Barrier, out: list[float]
    ) -> None:
        """One concurrent client: connects, waits for the others, asks its share."""
        self.recall(gw, share[0], mode)  # connect before the clock starts
        barrier.wait()
        for q in share:
            out.append(self.recall(gw, q, mode)[0])

    def concurrent(
        self, questions: list[corpus.Question], clients_n: int = CLIENTS, rounds: int = CONCURRENT_ROUNDS
    ) -> dict:
        """``clients_n`` clients, each its own channel, asking ``rounds`` passes of the questions between
        them per mode; latencies pooled, recalls per second over the wall time."""
        out = {}
        total = rounds * len(questions)
        for name, mode in MODES.items():
            gws = [client.Gateway(self.stack.addrs["gateway"], None) for _ in range(clients_n)]
            lat: list[list[float]] = [[] for _ in range(clients_n)]
            barrier = threading.Barrier(clients_n + 1)
            shares = [[questions[i % len(questions)] for i in range(k, total, clients_n)] for k in range(clients_n)]
            threads = [
                threading.Thread(target=self._client, args=(gws[k], shares[k], mode, barrier, lat[k]))
                for k in range(clients_n)
            ]
            for t in threads:
                t.start()
            barrier.wait()
            t0, cpu0 = time.perf_counter(), self.stack.cpu_seconds()
            for t in threads:
                t.join()
            wall, cpu1 = time.perf_counter() - t0, self.stack.cpu_seconds()
            for gw in gws:
                gw.close()
            pooled = [x for xs in lat for x in xs]
            out[name] = {
                "recall": summary(pooled),
                "per_second": len(pooled) / wall,
                "clients": clients_n,
                # CPU milliseconds per recall of each process over the phase (issue 28, item 2:
                # the 8-client rate is bounded by CPU; this says whose).
                "cpu_ms_per_recall": {k: 1000 * (cpu1[k] - cpu0[k]) / len(pooled) for k in cpu0},
                "wall_seconds": wall,
            }
        return out


def measure_workspace(
    stack: Stack,
    entry: dict,
    encoder,
    questions: list[corpus.Question],
    clients_n: int = CLIENTS,
    rounds: int = CONCURRENT_ROUNDS,
    passes: int = 1,
) -> dict:
    """Single client with the floor (``passes`` times over the questions), then concurrent clients,
    then resident memory."""
    probe = Probe(stack, entry, encoder)
    try:
        single = probe.single_client(questions, passes)
        conc = probe.concurrent(questions, clients_n, rounds) if clients_n > 1 else {}
    finally:
        probe.close()
    return {"single": single, "concurrent": conc, "memory_mib": stack.memory_mib()}


def ingest_probe(stack: Stack, gw: client.Gateway, encoder, n: int, eval_dir=corpus.EVAL) -> dict:
    """A fresh workspace of the first ``n`` recipe rows: write rate with embedding paused, then the
    backlog drain rate, then the same texts encoded in this process (texts/s) and the ratio."""
    from bench import workspace
    from servicekit.embedding_input import compose

    ws = gw.admin.CreateWorkspace(g.CreateWorkspaceRequest(name="bench ingest probe"), metadata=gw.metadata)
    member = gw.admin.AddMember(
        g.AddMemberRequest(workspace_id=ws.workspace_id, display_name="bench"), metadata=gw.metadata
    )
    rows = corpus.rows(n, eval_dir)
    writer = workspace.Writer(gw, member.token)
    stack.pause_embed()
    try:
        t0 = time.perf_counter()
        for i in range(0, n, workspace.CHUNK):
            writer.write(i, rows[i : i + workspace.CHUNK])
        ingest_s = time.perf_counter() - t0
    finally:
        stack.resume_embed()
        writer.close()
    drained = workspace.drain(gw, "ingest probe backlog")
    texts = [compose(r.title, r.body) for r in rows]
    encoder.encode(texts[:64])  # warm
    t0 = time.perf_counter()
    for i in range(0, len(texts), 256):
        encoder.encode(texts[i : i + 256])
    encode_s = time.perf_counter() - t0
    encode_rate = n / encode_s
    return {
        "rows": n,
        "form": writer.name,
        "ingest_seconds": round(ingest_s, 2),
        "ingest_rate": n / ingest_s,
        "drain": drained,
        "encode_seconds": round(encode_s, 2),
        "encode_rate": encode_rate,
        "drain_vs_encode": drained["rate"] / encode_rate if encode_rate else float("nan"),
    }
