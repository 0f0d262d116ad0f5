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
(servicekit.deadlines.optional_stage). Health checks and GetModelInfo are not behind a breaker:
they are how the gateway looks.

The re-ranker has three states (``reranker_state``), read from the embed service's
GetModelInfo by the gateway's dependency watch at start and every ``WATCH_SECONDS``:

- not configured (``reranker_model`` empty): recall never calls it and misses nothing, so nothing
  counts as degraded and its breaker stays closed (an operator's choice is not an outage). The
  watch's poll is the only call; a re-ranker configured later (the embed service restarted with
  one) is noticed within ``WATCH_SECONDS``.
- down: configured but not loaded (``reranker_available`` false: its breaker is opened, so it is not
  called while it reports itself unavailable, and its probe closes it once it reports itself
  available), or its breaker or the embed service's is open. Recall skips it and counts the skip.
- up: called.

While the embed service does not answer GetModelInfo the re-ranker keeps its last known
configuration.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from recallatron.embed.v1 import embed_pb2, embed_pb2_grpc
from recallatron.gateway.v1 import gateway_pb2 as g
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
# re-ranker breaker's probe and how soon a re-ranker configured later is noticed: the re-ranker's
# configuration and availability change only when the embed service restarts.
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
        # Until GetModelInfo first answers: configured, so a missing re-ranker counts as missing.
        self.reranker_configured = True
        b["embed"].start(lambda: clients.is_serving(self.channels["embed"], EMBED_SERVICE))
        b["reranker"].start(self._reranker_available)

    def _reranker_available(self) -> bool:
        info = self.embed.GetModelInfo(embed_pb2.GetModelInfoRequest(), timeout=PROBE_TIMEOUT_SECONDS)
        return info.reranker_available

    def reranker_reported(self, info: embed_pb2.GetModelInfoResponse) -> None:
        """Takes what the embed service's GetModelInfo said of its re-ranker: not configured closes
        the breaker (nothing to fail) and keeps recall from calling it; configured but unavailable
        opens the breaker."""
        self.reranker_configured = bool(info.reranker_model)
        if not self.reranker_configured:
            self.breakers["reranker"].reset()
        elif not info.reranker_available:
            self.breakers["reranker"].trip()

    def reranker_state(self) -> int:
        """``g.DEPENDENCY_STATE_NOT_CONFIGURED`` when the embed service has no re-ranker configured
        (as last reported), ``DOWN`` when its breaker or the embed service's (the re-ranker runs in
        the embed service) is open, else ``UP``: whether recall should call it."""
        if not self.reranker_configured:
            return g.DEPENDENCY_STATE_NOT_CONFIGURED
        if self.breakers["reranker"].is_open or self.breakers["embed"].is_open:
            return g.DEPENDENCY_STATE_DOWN
        return g.DEPENDENCY_STATE_UP

    def close(self) -> None:
        """Stops the probes and closes the channels."""
        for breaker in self.breakers.values():
            breaker.stop()
        for ch in self.channels.values():
            ch.close()
