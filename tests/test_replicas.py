"""Calls spread over replicas (issue 26, item 3; docs/scaling.md, "Replicas behind one name"): two
rank and two embed processes listen on two loopback addresses under one port, a real DNS server
(dnslib, in this process) resolves one name to both addresses, as a Kubernetes headless Service
resolves its name to its pods, and a gateway given those names spreads its calls over both replicas
of each (round_robin). A replica the name gains later receives calls once the servers' maximum
connection age has made the gateway resolve the name again."""

from __future__ import annotations

import threading
import time
import urllib.request

import psycopg
import pytest
from conftest import ServiceProcess
from dnslib import QTYPE, RR, A
from dnslib.server import BaseResolver, DNSLogger, DNSServer
from psycopg.conninfo import make_conninfo
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s
from recallatron.store.v1 import store_pb2_grpc as s_grpc

from client.system import free_port
from gateway.recall import RecallConfig
from gateway.server import GatewayService
from servicekit import clients
from servicekit.embedded_pg import EmbeddedPostgres

HOSTS = ("127.0.0.1", "127.0.0.2")


class Names(BaseResolver):
    """Answers A queries for the names it holds, each with its current addresses (TTL 1 s)."""

    def __init__(self) -> None:
        self.addresses: dict[str, list[str]] = {}
        self.lock = threading.Lock()

    def resolve(self, request, handler):
        reply = request.reply()
        name = str(request.q.qname).rstrip(".")
        with self.lock:
            found = list(self.addresses.get(name, ()))
        if QTYPE[request.q.qtype] == "A":
            for address in found:
                reply.add_answer(RR(request.q.qname, QTYPE.A, rdata=A(address), ttl=1))
        return reply


def started(metrics_port: int, method_prefix: str) -> int:
    """RPCs the process started whose method begins with ``method_prefix`` (its /metrics)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    total = 0
    for line in text.splitlines():
        if line.startswith("grpc_server_started_total{") and f'grpc_method="{method_prefix}' in line:
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


@pytest.mark.system
def test_calls_reach_every_replica_behind_one_name(stack, tmp_path):
    names = Names()
    dns_port = free_port()
    dns = DNSServer(names, port=dns_port, address="127.0.0.1", logger=DNSLogger("-request,-reply,-truncated"))
    dns.start_thread()
    embed_port, rank_port = free_port(), free_port()
    names.addresses = {"embed.recallatron.test": list(HOSTS), "rank.recallatron.test": [HOSTS[0]]}
    age = {"RECALLATRON_GRPC_MAX_CONNECTION_AGE_SECONDS": "2"}
    procs = []
    gateway = None
    try:
        for host in HOSTS:
            for name in ("embed", "rank"):
                (tmp_path / f"{name}-{host}").mkdir()
            procs.append(
                ServiceProcess.start(
                    "embed",
                    tmp_path / f"embed-{host}",
                    {"RECALLATRON_RERANKER_MODEL": "", **age},
                    addr=f"{host}:{embed_port}",
                )
            )
            procs.append(ServiceProcess.start("rank", tmp_path / f"rank-{host}", age, addr=f"{host}:{rank_port}"))
        embeds, ranks = procs[0::2], procs[1::2]
        gateway = GatewayService(
            "127.0.0.1:0",
            f"127.0.0.1:{stack.store.port}",
            f"dns://127.0.0.1:{dns_port}/embed.recallatron.test:{embed_port}",
            f"dns://127.0.0.1:{dns_port}/rank.recallatron.test:{rank_port}",
            tmp_path / "no-operator-token",
            RecallConfig(embed_deadline=10.0),
        )
        channel = clients.channel(f"127.0.0.1:{gateway.port}")
        memory = stack.memory.__class__(channel)
        alice = stack.member(stack.workspace("replicas"))
        alice.remember("The night train to the coast leaves from platform nine.")
        stack.wait_backlog_empty()

        def recall(n: int) -> None:
            for _ in range(n):
                hits = memory.Recall(
                    g.RecallRequest(query="night train platform", purpose=m.PURPOSE_CONVERSATION),
                    metadata=alice.md(),
                    timeout=30,
                )
                assert hits.items and hits.items[0].cosine > 0.3  # both arms ran: the query was embedded

        before = [started(p.metrics_port, "EmbedQueries") for p in embeds]
        recall(20)
        # Embed: the name resolves to both from the start, so both replicas embed queries.
        embedded = [started(p.metrics_port, "EmbedQueries") - b for p, b in zip(embeds, before, strict=True)]
        assert all(n >= 3 for n in embedded) and sum(embedded) >= 20, embedded
        # Rank: one address so far, so every call went to the first replica.
        ranked = [started(p.metrics_port, "Fuse") for p in ranks]
        assert ranked[0] >= 20 and ranked[1] == 0, ranked
        # The name gains the second replica: after the first replica's connection reaches its age (2 s),
        # the gateway resolves again and spreads the calls over both.
        with names.lock:
            names.addresses["rank.recallatron.test"] = list(HOSTS)
        deadline = time.monotonic() + 60
        while started(ranks[1].metrics_port, "Fuse") < 3:
            assert time.monotonic() < deadline, "the second rank replica never received a call"
            recall(5)
            time.sleep(0.5)
        mark = [started(p.metrics_port, "Fuse") for p in ranks]
        recall(20)
        spread = [started(p.metrics_port, "Fuse") - b for p, b in zip(ranks, mark, strict=True)]
        assert all(n >= 3 for n in spread), spread
        channel.close()
    finally:
        if gateway is not None:
            gateway.stop()
        for proc in procs:
            assert proc.stop() == 0, proc.log.read_text()[-3000:]
        dns.stop()


def metric(metrics_port: int, sample: str) -> float:
    """One sample of a process's /metrics, named with its labels as exposed (0 when absent)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(sample + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


BACKLOG_MEMORIES = 2_000
DOCUMENTS_EMBEDDED = 'recallatron_embed_batch_size_sum{operation="documents"}'


@pytest.mark.system
@pytest.mark.cluster
def test_two_store_processes_share_the_backlog_and_embed_each_memory_once(embed_process, tmp_path):
    """A backlog of 2,000 memories, written while no embed service answered, drained by two store
    processes over the same databases at once (the embed service is frozen while they start, so
    neither has a head start): together they write exactly one vector per memory, each of them a
    share, and the embed service is asked for each text once."""
    pg = EmbeddedPostgres(tmp_path / "pg")
    env = {"DATABASE_URL": pg.control_url}
    stores = []
    try:
        writer = ServiceProcess.start(
            "store", _folder(tmp_path, "writer"), {**env, "RECALLATRON_EMBED_ADDR": "127.0.0.1:9"}
        )
        store = s_grpc.StoreServiceStub(clients.channel(writer.addr))
        ws = store.CreateWorkspace(s.CreateWorkspaceRequest(name="backlog"), timeout=30).workspace_id
        token = store.AddMember(s.AddMemberRequest(workspace_id=ws), timeout=30).token
        caller = store.Authenticate(s.AuthenticateRequest(token=token), timeout=30).caller
        for start in range(0, BACKLOG_MEMORIES, 500):
            entries = [
                s.RememberBatchEntry(
                    purpose=m.PURPOSE_CONVERSATION,
                    audience=m.AUDIENCE_WORKSPACE,
                    body=f"Backlog note {k}: item {k * 7919 % 1009}.",
                )
                for k in range(start, start + 500)
            ]
            done = store.RememberBatch(s.RememberBatchRequest(caller=caller, requests=entries), timeout=60)
            assert [r.error.code for r in done.results] == [0] * len(entries), done.results[0]
        assert writer.stop() == 0
        texts_before = metric(embed_process.metrics_port, DOCUMENTS_EMBEDDED)
        embed_process.freeze()
        stores = [
            ServiceProcess.start(
                "store", _folder(tmp_path, f"store-{k}"), {**env, "RECALLATRON_EMBED_ADDR": embed_process.addr}
            )
            for k in (1, 2)
        ]
        embed_process.resume()
        started_at = time.monotonic()
        db = f"recallatron_ws_{ws.replace('-', '')}"
        with psycopg.connect(make_conninfo(pg.control_url, dbname=db), autocommit=True) as conn:
            deadline = time.monotonic() + 600
            while conn.execute("SELECT count(*) FROM embedding_job").fetchone()[0] > 0:
                assert time.monotonic() < deadline, "the backlog did not drain"
                time.sleep(0.2)
            drained = time.monotonic() - started_at
            vectors = conn.execute("SELECT count(*), count(DISTINCT memory_id) FROM memory_embedding").fetchone()
        written = [metric(p.metrics_port, "recallatron_embedding_vectors_written_total") for p in stores]
        texts = metric(embed_process.metrics_port, DOCUMENTS_EMBEDDED) - texts_before
        assert vectors == (BACKLOG_MEMORIES, BACKLOG_MEMORIES)
        assert sum(written) == BACKLOG_MEMORIES and min(written) >= BACKLOG_MEMORIES / 10, written
        assert texts == BACKLOG_MEMORIES, texts
        print(f"two stores drained {BACKLOG_MEMORIES} memories in {drained:.1f} s; vectors written {written}")
    finally:
        embed_process.resume()
        for proc in stores:
            assert proc.stop() == 0, proc.log.read_text()[-3000:]
        pg.stop()


def _folder(tmp_path, name: str):
    folder = tmp_path / name
    folder.mkdir()
    return folder
