"""The embed service: batched embedding and re-ranking over gRPC.

Health is SERVING once the bi-encoder is loaded; the re-ranker's availability is reported
separately (GetModelInfo) because recall works without it.
"""

from __future__ import annotations

import contextlib
import logging
import threading

import grpc
from prometheus_client import Histogram
from recallatron.embed.v1 import embed_pb2 as e
from recallatron.embed.v1 import embed_pb2_grpc

from embed_service.models import DIMENSIONS, MAX_BATCH, BiEncoder, Reranker
from servicekit.embedding_input import INPUT_VERSION, MODEL_ID, compose
from servicekit.errors import InvalidArgument, Unavailable
from servicekit.limits import SHUTDOWN_GRACE_SECONDS
from servicekit.server import Running, start_server

log = logging.getLogger(__name__)
MAX_TEXT_CHARS = 262_144
# Per model call, by operation (documents, queries, rerank): texts in the call (buckets up to
# MAX_BATCH) and the seconds the model took (encoding or scoring, without gRPC and validation).
BATCH_SIZE = Histogram(
    "recallatron_embed_batch_size",
    "Texts per embed service call.",
    ["operation"],
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
)
BATCH_SECONDS = Histogram(
    "recallatron_embed_batch_seconds",
    "Model time per embed service call.",
    ["operation"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)


@contextlib.contextmanager
def _measured(operation: str, texts: int):
    """Observes a model call of ``texts`` texts into BATCH_SIZE and BATCH_SECONDS."""
    BATCH_SIZE.labels(operation).observe(texts)
    with BATCH_SECONDS.labels(operation).time():
        yield


def _check_batch(n: int, what: str) -> None:
    if not 1 <= n <= MAX_BATCH:
        raise InvalidArgument(f"{what} must hold 1..{MAX_BATCH} items", field=what)


def _check_texts(texts, what: str) -> None:
    if any(len(t) > MAX_TEXT_CHARS for t in texts):
        raise InvalidArgument(f"each of {what} must be at most {MAX_TEXT_CHARS} characters", field=what)


class EmbedServicer(embed_pb2_grpc.EmbedServiceServicer):
    """Implements recallatron.embed.v1.EmbedService."""

    def __init__(self, encoder: BiEncoder | None, reranker: Reranker) -> None:
        self.encoder = encoder
        self.reranker = reranker

    def _encode(self, texts: list[str], operation: str):
        if self.encoder is None:
            raise Unavailable("the bi-encoder is not loaded yet")
        with _measured(operation, len(texts)):
            vectors = self.encoder.encode(texts)
        return [e.Vector(values=v.tolist()) for v in vectors]

    def EmbedDocuments(self, request, context):
        _check_batch(len(request.documents), "documents")
        texts = [compose(d.title, d.body) for d in request.documents]
        _check_texts(texts, "documents")
        return e.EmbedDocumentsResponse(
            vectors=self._encode(texts, "documents"), model_id=MODEL_ID, input_version=INPUT_VERSION
        )

    def EmbedQueries(self, request, context):
        if not context.is_active():  # its caller gave up while it waited for a thread
            context.abort(grpc.StatusCode.CANCELLED, "the caller went away")
        _check_batch(len(request.queries), "queries")
        _check_texts(request.queries, "queries")
        return e.EmbedQueriesResponse(
            vectors=self._encode(list(request.queries), "queries"), model_id=MODEL_ID, input_version=INPUT_VERSION
        )

    def Rerank(self, request, context):
        if not self.reranker.available:
            raise Unavailable(f"re-ranker unavailable: {self.reranker.error}")
        _check_batch(len(request.documents), "documents")
        passages = [compose(d.title, d.body) for d in request.documents]
        _check_texts([request.query, *passages], "documents")
        with _measured("rerank", len(passages)):
            scores = self.reranker.score(request.query, passages)
        return e.RerankResponse(scores=scores.tolist(), model=self.reranker.name)

    def GetModelInfo(self, request, context):
        return e.GetModelInfoResponse(
            model_id=MODEL_ID,
            input_version=INPUT_VERSION,
            dimensions=DIMENSIONS,
            reranker_available=self.reranker.available,
            reranker_model=self.reranker.name,
            reranker_error=self.reranker.error,
        )


class EmbedService:
    """A running embed service. Starts NOT_SERVING, loads the models, then turns SERVING.

    ``encoder`` may be passed in (tests share one loaded model between restarts).
    """

    def __init__(
        self,
        bind: str,
        reranker_model: str,
        *,
        encoder: BiEncoder | None = None,
        reranker: Reranker | None = None,
        block: bool = True,
    ) -> None:
        # Until the loader has run, GetModelInfo names the configured re-ranker as loading.
        self.servicer = EmbedServicer(encoder, reranker or Reranker(reranker_model, load=False))
        self.running: Running = start_server(
            bind,
            [
                (
                    embed_pb2_grpc.add_EmbedServiceServicer_to_server,
                    self.servicer,
                    e.DESCRIPTOR.services_by_name["EmbedService"].full_name,
                )
            ],
            serving=encoder is not None,
        )
        self._reranker_model = reranker_model
        loader = threading.Thread(target=self._load, daemon=True, name="model-loader")
        loader.start()
        if block:
            loader.join()

    def _load(self) -> None:
        if self.servicer.encoder is None:
            self.servicer.encoder = BiEncoder()
            log.info("bi-encoder %s loaded", MODEL_ID)
        if not self.servicer.reranker.available and self._reranker_model:
            self.servicer.reranker = Reranker(self._reranker_model)
        self.running.set_serving(True)

    @property
    def port(self) -> int:
        """The bound gRPC port."""
        return self.running.port

    def stop(self, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
        """NOT_SERVING, then stops once calls in flight finish (``grace`` seconds at most)."""
        self.running.stop(grace)
