"""The gRPC server metrics: each call counted once, with the status code the caller received, in the
registry the server was given (the process-wide one, which /metrics serves, when none is)."""

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
from servicekit.metrics import server_metrics
from servicekit.server import start_server

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
