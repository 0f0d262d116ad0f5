"""The gateway's part of duplicate proposals (issue 9; docs/curation.md): naming the stamp.

The store compares stored vectors only (it loads no model), and only vectors of the embed service's
current input version: the gateway asks the embed service for that stamp (``GetModelInfo``) and
passes it on. The embed service is optional here as in recall: while its breaker is open, or when
the call fails or passes its deadline, the stamp is unknown (empty) and the store answers the list
with ``dense_available=false`` rather than failing (the degrade rule of docs/architecture.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import grpc
from recallatron.embed.v1 import embed_pb2, embed_pb2_grpc

from servicekit import deadlines

log = logging.getLogger(__name__)


class InputVersion:
    """Answers the embed service's current input-version stamp, or "" when it cannot be learnt.

    ``embed_open`` says whether the embed service's breaker is open (gateway.dependencies), and
    ``deadline`` is the embed stage's own deadline (seconds; at most half of what is left of the
    caller's, as for the query embedding: servicekit.deadlines.optional_stage).
    """

    def __init__(
        self, embed: embed_pb2_grpc.EmbedServiceStub | None, embed_open: Callable[[], bool], deadline: float
    ) -> None:
        self.embed, self.embed_open, self.deadline = embed, embed_open, deadline

    def current(self) -> str:
        """The stamp, or "" (embed service missing, its breaker open, down or late)."""
        if self.embed is None or self.embed_open():
            return ""
        try:
            info = self.embed.GetModelInfo(
                embed_pb2.GetModelInfoRequest(), timeout=deadlines.optional_stage(self.deadline)
            )
        except grpc.RpcError as exc:
            log.warning("duplicate proposals without vectors: embed service %s", exc.code())
            return ""
        return info.input_version
