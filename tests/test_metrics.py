"""The gRPC server metrics: each call counted once, with the status code the caller received, in the
registry the server was given (the process-wide one, which /metrics serves, when none is)."""

import time

import grpc
import pytest
from conftest import code_of
from prometheus_client import REGISTRY, CollectorRegistry
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.gateway.v1 import gateway_pb2_grpc
from recallatron.store.v1 import store_pb2_grpc

from gateway.recall import RecallConfig, Recaller
from gateway.server import MemoryServicer
from servicekit import clients
from servicekit.metrics import PoolCollector, server_metrics
from servicekit.server import start_server
from store_service.database import Databases

SERVICE = g.DESCRIPTOR.services_by_name["MemoryService"].full_name


@pytest.fixture
def gateway(stack):
    """A second MemoryService in front of the session's store, counting into its own registry."""
    registry = CollectorRegistry()
    channel = clients.channel(f"127.0.0.1:{stack.store.port}")
    store = store_pb2_grpc.StoreServiceStub(channel)
    running = start_server(
        "127.0.0.1:0",
        [
            (
                gateway_pb2_grpc.add_MemoryServiceServicer_to_server,
                MemoryServicer(store, Recaller(store, None, None, RecallConfig())),
                SERVICE,
            )
        ],
        registry=registry,
    )
    client = clients.channel(f"127.0.0.1:{running.port}")
    yield gateway_pb2_grpc.MemoryServiceStub(client), registry
    client.close()
    running.stop()
    channel.close()


def sample(registry, name: str, method: str, **labels) -> float | None:
    return registry.get_sample_value(
        name, {"grpc_type": "unary", "grpc_service": SERVICE, "grpc_method": method, **labels}
    )


def test_a_not_found_is_counted_once_with_its_code(stack, gateway):
    api, registry = gateway
    alice = stack.member(stack.workspace("metrics"))
    known = alice.remember("The metrics test keeps one memory.").id
    process_wide = sample(REGISTRY, "grpc_server_handled_total", "Read", grpc_code="NOT_FOUND")
    missing = "00000000-0000-4000-8000-000000000000"
    assert code_of(api.Read, g.ReadRequest(id=missing), metadata=alice.md()) == grpc.StatusCode.NOT_FOUND
    assert sample(registry, "grpc_server_handled_total", "Read", grpc_code="NOT_FOUND") == 1.0
    assert sample(registry, "grpc_server_started_total", "Read") == 1.0
    assert sample(registry, "grpc_server_handling_seconds_count", "Read") == 1.0
    assert sample(registry, "grpc_server_handled_total", "Read", grpc_code="OK") is None  # no OK yet
    assert api.Read(g.ReadRequest(id=known), metadata=alice.md()).memory.id == known
    assert code_of(api.Read, g.ReadRequest(id=known)) == grpc.StatusCode.UNAUTHENTICATED  # no token
    assert sample(registry, "grpc_server_handled_total", "Read", grpc_code="OK") == 1.0
    assert sample(registry, "grpc_server_handled_total", "Read", grpc_code="UNAUTHENTICATED") == 1.0
    assert sample(registry, "grpc_server_handled_total", "Read", grpc_code="NOT_FOUND") == 1.0
    assert sample(registry, "grpc_server_started_total", "Read") == 3.0
    # The process-wide registry saw none of it; the session's own gateway was not called.
    assert sample(REGISTRY, "grpc_server_handled_total", "Read", grpc_code="NOT_FOUND") == process_wide


def test_one_registry_one_set_of_metrics():
    registry = CollectorRegistry()
    assert server_metrics(registry) is server_metrics(registry)  # a second server reuses them
    assert server_metrics(registry) is not server_metrics(REGISTRY)
    assert {m.name for m in registry.collect()} == {
        "grpc_server_started",
        "grpc_server_handled",
        "grpc_server_handling_seconds",
    }


def wait_for(check, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.2)


@pytest.mark.slow
def test_backlog_gauges_move_while_the_embed_service_is_down(stack):
    """recallatron_embedding_backlog and _oldest_job_age_seconds are what the backlog alert reads
    (deploy/alerts.yml), so they must keep moving through an embed outage."""
    alice = stack.member(stack.workspace("backlog gauges"))
    stack.wait_backlog_empty()
    wait_for(lambda: REGISTRY.get_sample_value("recallatron_embedding_backlog") == 0)
    assert REGISTRY.get_sample_value("recallatron_embedding_oldest_job_age_seconds") == 0
    with stack.embed_down():
        alice.remember("The ferry timetable changes in October.")
        wait_for(lambda: REGISTRY.get_sample_value("recallatron_embedding_backlog") == 1)
        first = REGISTRY.get_sample_value("recallatron_embedding_oldest_job_age_seconds")
        assert 0 < first < 30
        wait_for(lambda: REGISTRY.get_sample_value("recallatron_embedding_oldest_job_age_seconds") > first + 1)
    stack.wait_backlog_empty()
    wait_for(lambda: REGISTRY.get_sample_value("recallatron_embedding_backlog") == 0)
    assert REGISTRY.get_sample_value("recallatron_embedding_oldest_job_age_seconds") == 0


@pytest.mark.slow
def test_pool_use_is_read_from_the_pools_by_kind(pg):
    """A collector of its own watching a Databases of its own, so no other pool of the session counts."""
    collector, registry = PoolCollector(), CollectorRegistry()
    registry.register(collector)
    dbs = Databases(pg, pool_max=3)
    collector.watch(dbs)

    def value(name, **labels):
        return registry.get_sample_value(name, labels)

    assert value("recallatron_db_pools_open", pool="control") == 0  # not opened yet: closed pools are left out
    dbs.open()
    try:
        assert value("recallatron_db_pools_open", pool="control") == 1
        assert value("recallatron_db_pool_max_connections", pool="control") == 3
        assert value("recallatron_db_pool_connections", pool="control", state="idle") == 1  # min_size 1
        with dbs.control.connection():
            assert value("recallatron_db_pool_connections", pool="control", state="in_use") == 1
            assert value("recallatron_db_pool_connections", pool="control", state="idle") == 0
            assert value("recallatron_db_pool_requests_waiting", pool="control") == 0
        assert value("recallatron_db_pool_connections", pool="control", state="in_use") == 0
        assert value("recallatron_db_pools_open", pool="workspace") == 0
        assert value("recallatron_db_pool_max_connections", pool="workspace") == 0
        assert {m.name for m in registry.collect()} == {
            "recallatron_db_pool_connections",
            "recallatron_db_pool_max_connections",
            "recallatron_db_pool_requests_waiting",
            "recallatron_db_pools_open",
        }
    finally:
        dbs.close()
    assert value("recallatron_db_pools_open", pool="control") == 0
