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

import pytest
from conftest import ServiceProcess
from dnslib import QTYPE, RR, A
from dnslib.server import BaseResolver, DNSLogger, DNSServer
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from client.system import free_port
from gateway.recall import RecallConfig
from gateway.server import GatewayService
from servicekit import clients

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
