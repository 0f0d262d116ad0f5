"""The embed service's models: real MiniLM vectors, the stamp, batch limits, and the re-ranker.

The re-rank tests build a tiny random-weight BERT cross-encoder in a temp folder (no cross-encoder
weights can be downloaded here); its scores are meaningless, only the loading and wiring are real.
"""

import time

import grpc
import numpy as np
import pytest
from conftest import code_of
from recallatron.embed.v1 import embed_pb2 as e
from recallatron.embed.v1 import embed_pb2_grpc
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.gateway.v1 import gateway_pb2_grpc
from recallatron.memory.v1 import memory_pb2 as m

from embed_service.models import Reranker
from embed_service.server import EmbedService
from gateway.recall import RecallConfig
from servicekit import clients
from servicekit.embedding_input import INPUT_VERSION


@pytest.fixture(scope="module")
def embed_stub(stack):
    ch = clients.channel(stack.embed_bind)
    yield embed_pb2_grpc.EmbedServiceStub(ch)
    ch.close()


def test_vectors_are_384_d_unit_and_stamped(embed_stub):
    resp = embed_stub.EmbedDocuments(
        e.EmbedDocumentsRequest(documents=[e.Document(title="T", body="hello world"), e.Document(body="another")])
    )
    vecs = np.array([v.values for v in resp.vectors])
    assert vecs.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)
    assert resp.model_id == "sentence-transformers/all-MiniLM-L6-v2" and resp.input_version == INPUT_VERSION
    q = embed_stub.EmbedQueries(e.EmbedQueriesRequest(queries=["hello world"]))
    assert q.input_version == INPUT_VERSION and len(q.vectors[0].values) == 384


def test_similar_texts_are_closer(embed_stub):
    resp = embed_stub.EmbedQueries(
        e.EmbedQueriesRequest(
            queries=["a cat sat on the mat", "a kitten rested on a rug", "quarterly tax filing deadline"]
        )
    )
    a, b, c = (np.array(v.values) for v in resp.vectors)
    assert a @ b > a @ c + 0.2


def test_batch_limits(embed_stub):
    assert code_of(embed_stub.EmbedQueries, e.EmbedQueriesRequest()) == grpc.StatusCode.INVALID_ARGUMENT
    assert (
        code_of(embed_stub.EmbedQueries, e.EmbedQueriesRequest(queries=["x"] * 257)) == grpc.StatusCode.INVALID_ARGUMENT
    )
    assert code_of(embed_stub.EmbedDocuments, e.EmbedDocumentsRequest()) == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.slow
def test_reranker_unavailable_without_weights(embed_stub):
    info = embed_stub.GetModelInfo(e.GetModelInfoRequest())
    assert not info.reranker_available and info.dimensions == 384
    req = e.RerankRequest(query="q", documents=[e.Document(body="p")])
    assert code_of(embed_stub.Rerank, req) == grpc.StatusCode.UNAVAILABLE
    assert not Reranker("/nonexistent/cross-encoder").available


def test_recall_reranks_with_a_loaded_cross_encoder(stack, tiny_cross_encoder, tmp_path):
    reranker = Reranker(tiny_cross_encoder)
    assert reranker.available, reranker.error
    embed = EmbedService("127.0.0.1:0", "", encoder=stack.encoder, reranker=reranker)
    gw = stack.extra_gateway(embed.port, tmp_path, RecallConfig(rerank_top_n=5))
    try:
        ws = stack.workspace("rerank")
        alice = stack.member(ws)
        for i in range(8):
            alice.remember(f"Meeting note {i}: the team discussed the launch plan and budget item {i}.")
        stack.wait_backlog_empty()
        ch = clients.channel(f"127.0.0.1:{gw.port}")
        stub = gateway_pb2_grpc.MemoryServiceStub(ch)
        req = g.RecallRequest(query="launch plan budget", purpose=m.PURPOSE_CONVERSATION, top_k=8)
        resp = stub.Recall(req, metadata=alice.md())
        assert resp.reranked and len(resp.items) == 8
        head = [it.rerank_score for it in resp.items[:5]]
        assert head == sorted(head, reverse=True) and any(s != 0 for s in head)
        assert all(it.rerank_score == 0 for it in resp.items[5:])  # only the top 5 are scored
        req.skip_rerank = True
        off = stub.Recall(req, metadata=alice.md())
        assert not off.reranked and all(it.rerank_score == 0 for it in off.items)
        assert [it.fused_score for it in off.items] == sorted((it.fused_score for it in off.items), reverse=True)
        ch.close()
        # Past its deadline the fused order stands. The same cross-encoder, made slow on purpose (a
        # test double for a busy re-ranker): a deadline of 1 us used to be raised to gRPC's 1 ms
        # floor, which the tiny model on a quiet machine sometimes beat (1 of 5 runs here).
        slow_embed = EmbedService("127.0.0.1:0", "", encoder=stack.encoder, reranker=SlowReranker(tiny_cross_encoder))
        late = stack.extra_gateway(
            slow_embed.port, tmp_path, RecallConfig(rerank_top_n=5, rerank_deadline=SlowReranker.DELAY / 4)
        )
        ch = clients.channel(f"127.0.0.1:{late.port}")
        req.skip_rerank = False
        slow = gateway_pb2_grpc.MemoryServiceStub(ch).Recall(req, metadata=alice.md())
        assert not slow.reranked and [it.memory.id for it in slow.items] == [it.memory.id for it in off.items]
        ch.close()
        late.stop()
        slow_embed.stop()
    finally:
        gw.stop()
        embed.stop()


class SlowReranker(Reranker):
    """The real cross-encoder, answering ``DELAY`` seconds late (test double for a busy re-ranker)."""

    DELAY = 0.4

    def score(self, query, passages):
        time.sleep(self.DELAY)
        return super().score(query, passages)
