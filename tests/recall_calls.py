"""Which internal RPCs a recall made, read from the services' ``grpc_server_handled`` counters
(the in-process stack of conftest.py shares one Prometheus registry); and the store's own stub with
members' callers, for tests that call the candidate RPCs as the gateway does."""

from __future__ import annotations

from collections import Counter

from prometheus_client import REGISTRY
from recallatron.store.v1 import store_pb2 as s
from recallatron.store.v1 import store_pb2_grpc

from bench.recall_path_bench import RECALL_RPCS  # the one list, shared with the bench
from servicekit import clients


def internal_calls(run) -> Counter:
    """The recall RPCs the internal services handled while ``run()`` ran, by method."""

    def handled() -> Counter:
        counts = Counter()
        for metric in REGISTRY.collect():
            for sample in metric.samples if metric.name == "grpc_server_handled" else ():
                if (
                    sample.name.endswith("_total")
                    and sample.labels["grpc_method"] in RECALL_RPCS
                    and not sample.labels["grpc_service"].startswith("recallatron.gateway.")
                ):
                    counts[sample.labels["grpc_method"]] += int(sample.value)
        return counts

    before = handled()
    run()
    return handled() - before


def store_callers(stack, **members):
    """``(channel, store stub, {name: Caller})``: the store of the in-process ``stack`` and the
    caller the store resolves each member's token to (close the channel when done)."""
    channel = clients.channel(f"127.0.0.1:{stack.store.port}")
    store = store_pb2_grpc.StoreServiceStub(channel)
    callers = {name: store.Authenticate(s.AuthenticateRequest(token=who.token)).caller for name, who in members.items()}
    return channel, store, callers
