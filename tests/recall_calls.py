"""Which internal RPCs a recall made, read from the services' ``grpc_server_handled`` counters
(the in-process stack of conftest.py shares one Prometheus registry)."""

from __future__ import annotations

from collections import Counter

from prometheus_client import REGISTRY

from bench.recall_path_bench import RECALL_RPCS  # the one list, shared with the bench


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
