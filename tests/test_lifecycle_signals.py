"""SIGTERM, as an orchestrator sends it: the service turns NOT_SERVING on its health service, lets
the call in flight finish within the grace period, closes its channels and pools, and exits 0."""

from __future__ import annotations

import signal
import threading
import time
import urllib.request

import grpc
import pytest
from conftest import ServiceProcess
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.gateway.v1 import gateway_pb2_grpc
from recallatron.memory.v1 import memory_pb2 as m

from servicekit import clients

pytestmark = pytest.mark.system

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class HealthWatch:
    """A Health.Watch stream on one address (service "": the whole server), its statuses in order."""

    def __init__(self, addr: str) -> None:
        self.channel = clients.channel(addr)
        self.statuses: list[int] = []
        self.stream = health_pb2_grpc.HealthStub(self.channel).Watch(health_pb2.HealthCheckRequest(service=""))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for resp in self.stream:
                self.statuses.append(resp.status)
        except grpc.RpcError:
            pass  # cancelled by close(), or the server went away

    def wait_for(self, status: int, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while status not in self.statuses:
            assert time.monotonic() < deadline, f"no {status} in {self.statuses}"
            time.sleep(0.05)

    def close(self) -> None:
        """Cancels the stream (an open stream is a call in flight: it would hold the shutdown)."""
        self.stream.cancel()
        self.channel.close()


def started_total(service: ServiceProcess, method: str) -> float:
    """grpc_server_started_total of ``method`` on the process's /metrics endpoint."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{service.metrics_port}/metrics", timeout=10).read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "grpc_server_started_total" and sample.labels["grpc_method"] == method:
                return sample.value
    return 0.0


def test_sigterm_lets_the_recall_in_flight_finish_then_exits_0(stack, embed_process, tmp_path):
    ws = stack.workspace("sigterm")
    alice = stack.member(ws)
    memory = alice.remember("The lighthouse keeper logs the ships that pass at night.")
    stack.wait_backlog_empty()
    token = tmp_path / "operator-token"
    token.write_text("rco_sigterm_test\n")
    gateway = ServiceProcess.start(
        "gateway",
        tmp_path,
        {
            "RECALLATRON_STORE_ADDR": f"127.0.0.1:{stack.store.port}",
            "RECALLATRON_RANK_ADDR": f"127.0.0.1:{stack.rank.port}",
            "RECALLATRON_EMBED_ADDR": embed_process.addr,
            "RECALLATRON_OPERATOR_TOKEN_FILE": str(token),
            "RECALLATRON_EMBED_DEADLINE_SECONDS": "5",
            "RECALLATRON_SHUTDOWN_GRACE_SECONDS": "30",
        },
    )
    ch = clients.channel(gateway.addr)
    watch = HealthWatch(gateway.addr)
    try:
        watch.wait_for(SERVING)
        # The embed service frozen, a recall waits for its query embedding (5 s): in flight for that long.
        embed_process.freeze()
        try:
            req = g.RecallRequest(query="lighthouse ships", purpose=m.PURPOSE_CONVERSATION)
            recall = gateway_pb2_grpc.MemoryServiceStub(ch).Recall.future(req, metadata=alice.md(), timeout=60)
            deadline = time.monotonic() + 20
            while started_total(gateway, "Recall") < 1:
                assert time.monotonic() < deadline, "the gateway never received the recall"
                time.sleep(0.05)
            gateway.proc.send_signal(signal.SIGTERM)
            watch.wait_for(NOT_SERVING)
            assert not recall.done()  # NOT_SERVING while the recall is still in flight
            resp = recall.result()
        finally:
            embed_process.resume()
        assert not resp.dense_available and [it.memory.id for it in resp.items] == [memory.id]
    finally:
        watch.close()
        ch.close()
    assert gateway.proc.wait(timeout=60) == 0, gateway.log.read_text()[-3000:]
    assert "gateway stopped" in gateway.log.read_text()


@pytest.mark.parametrize("name", ["store", "rank", "embed"])
def test_sigterm_turns_each_service_not_serving_then_exits_0(name, pg, embed_process, tmp_path):
    env = {"DATABASE_URL": pg, "RECALLATRON_RERANKER_MODEL": ""}
    if name == "store":
        env["RECALLATRON_EMBED_ADDR"] = embed_process.addr
    service = ServiceProcess.start(name, tmp_path, env)
    watch = HealthWatch(service.addr)
    try:
        watch.wait_for(SERVING)
        service.proc.send_signal(signal.SIGTERM)
        watch.wait_for(NOT_SERVING)
    finally:
        watch.close()
    assert service.proc.wait(timeout=60) == 0, service.log.read_text()[-3000:]
    log = service.log.read_text()
    assert f"{name} stopped" in log and "Traceback" not in log, log[-3000:]
