"""The gateway's connections to the internal services: a channel to each, and a circuit breaker per
dependency (servicekit.breaker), so a frozen or failing service is skipped rather than waited for.

| dependency | calls behind it | own deadline | re-probed in the background by |
|---|---|---|---|
| ``store`` | every StoreService call | ``internal_deadline`` (30 s) | health check, every 0.5 s |
| ``rank`` | every RankService call | ``internal_deadline`` (30 s) | health check, every 0.5 s |
| ``embed`` | EmbedQueries (the dense arm) | ``RecallConfig.embed_deadline`` (2 s) | health check, every 0.5 s |
| ``reranker`` | Rerank (on the embed service) | ``RecallConfig.rerank_deadline`` (3 s) | GetModelInfo, every 2 s |

Every call also ends with the caller's deadline, when that comes first (servicekit.deadlines).
The optional stages (embed, reranker) get at most half the caller's remaining time
(servicekit.deadlines.optional_stage). The ``reranker`` breaker also opens whenever the embed
service answers that its re-ranker is not loaded (``GetModelInfo.reranker_available``, read by the
gateway's dependency watch at start and every 2 s), so the re-ranker is not called while it reports
itself unavailable; its probe closes it again once it reports itself available. Health checks and
GetModelInfo are not behind a breaker: they are how the gateway looks.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from recallatron.embed.v1 import embed_pb2, embed_pb2_grpc
from recallatron.rank.v1 import rank_pb2, rank_pb2_grpc
from recallatron.store.v1 import store_pb2, store_pb2_grpc

from gateway.recall import RecallConfig
from servicekit import clients
from servicekit.breaker import CircuitBreaker
from servicekit.limits import INTERNAL_DEADLINE_SECONDS

STORE_SERVICE = store_pb2.DESCRIPTOR.services_by_name["StoreService"].full_name
EMBED_SERVICE = embed_pb2.DESCRIPTOR.services_by_name["EmbedService"].full_name
RANK_SERVICE = rank_pb2.DESCRIPTOR.services_by_name["RankService"].full_name
# How often the gateway's dependency watch polls (gateway.server.DependencyWatch), and so the
# re-ranker breaker's probe: the re-ranker's availability changes only when the embed service restarts.
WATCH_SECONDS = 2.0
PROBE_TIMEOUT_SECONDS = 1.0


class Dependencies:
    """Channels, stubs and breakers of the gateway's three internal services; the breakers' probes
    run from construction until ``close``.

    ``interceptors`` are extra client interceptors for every channel, run inside the breakers (so
    they see only the calls really sent).
    """

    def __init__(
        self,
        store_addr: str,
        embed_addr: str,
        rank_addr: str,
        config: RecallConfig,
        internal_deadline: float = INTERNAL_DEADLINE_SECONDS,
        interceptors: Sequence[grpc.UnaryUnaryClientInterceptor] = (),
    ) -> None:
        self.breakers = {
            "store": CircuitBreaker("store", internal_deadline),
            "rank": CircuitBreaker("rank", internal_deadline),
            "embed": CircuitBreaker("embed", config.embed_deadline),
            "reranker": CircuitBreaker("reranker", config.rerank_deadline, probe_seconds=WATCH_SECONDS),
        }
        b = self.breakers
        kwargs = {"default_deadline": internal_deadline, "interceptors": interceptors}
        self.channels = {
            "store": clients.guarded_channel(store_addr, STORE_SERVICE, b["store"], **kwargs),
            "embed": clients.channel(
                embed_addr,
                {f"/{EMBED_SERVICE}/EmbedQueries": b["embed"], f"/{EMBED_SERVICE}/Rerank": b["reranker"]},
                **kwargs,
            ),
            "rank": clients.guarded_channel(rank_addr, RANK_SERVICE, b["rank"], **kwargs),
        }
        self.store = store_pb2_grpc.StoreServiceStub(self.channels["store"])
        self.embed = embed_pb2_grpc.EmbedServiceStub(self.channels["embed"])
        self.rank = rank_pb2_grpc.RankServiceStub(self.channels["rank"])
        b["embed"].start(lambda: clients.is_serving(self.channels["embed"], EMBED_SERVICE))
        b["reranker"].start(self._reranker_available)

    def _reranker_available(self) -> bool:
        info = self.embed.GetModelInfo(embed_pb2.GetModelInfoRequest(), timeout=PROBE_TIMEOUT_SECONDS)
        return info.reranker_available

    def reranker_up(self) -> bool:
        """Whether recall should call the re-ranker: neither its breaker nor the embed service's
        (the re-ranker runs in the embed service) is open."""
        return not (self.breakers["reranker"].is_open or self.breakers["embed"].is_open)

    def close(self) -> None:
        """Stops the probes and closes the channels."""
        for breaker in self.breakers.values():
            breaker.stop()
        for ch in self.channels.values():
            ch.close()
