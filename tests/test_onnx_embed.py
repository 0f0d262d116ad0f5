"""The bi-encoder on ONNX Runtime gives the sentence-transformers vectors (issue 7, item 4).

Both backends run in this process on the repository's demo conversation (``demo/``: its turns as the
service composes them, its questions, and runs of twenty turns as one memory, past the 256 word-piece
limit) plus edge cases written here (long, Unicode, odd). The minimum cosine
must be >= 0.9999 for single texts (the query path) and for length-sorted batches (the document path):
that is what lets both backends share one ``INPUT_VERSION``. The tokenizer must give the very token ids
sentence-transformers gives. Also: where the export comes from when it is missing, and the
fallback when it cannot be made.
"""

from __future__ import annotations

import collections
import json
import logging
from pathlib import Path

import numpy as np
import onnx
import pytest

from embed_service import export_onnx
from embed_service.models import DIMENSIONS, BiEncoder
from embed_service.onnx_encoder import OnnxEncoder
from servicekit.embedding_input import compose

DEMO = Path(__file__).resolve().parent.parent / "demo"
MIN_COSINE = 0.9999

EDGE_CASES = [
    "",
    " ",
    "\n\t \n",
    "ok",
    "What is the capital of France?",
    "🙂🎉🚀",
    "Caroline loved the concert 🎸🔥 and said it was 💯",
    "東京で新しい仕事を始めました。毎日とても忙しいです。",
    "我们明天下午三点在图书馆见面。",
    "Мария переехала в Порту в прошлом году.",
    "ماريا انتقلت إلى بورتو العام الماضي",
    "मारिया पिछले साल पोर्टो चली गई।",
    "มาเรียย้ายไปปอร์โตเมื่อปีที่แล้ว",
    "Ünïcödé café naïve résumé Ångström",
    "e\u0301 combining accent and zero\u200bwidth space",
    "UPPER lower MiXeD 12345 3.14159 $100 #tag @user https://example.org/a?b=c",
    "word " * 1000,  # far past 256 word pieces
    "antidisestablishmentarianism " * 120,  # many word pieces per word
    "A" * 5000,  # one very long token
    "Title line\n" + "The patient cohort was followed for five years. " * 80,
    "Release notes v2.3.1 — Straße, Ærø, naïve café; 東京 and Порту offices; ticket ÉQ-7781 (≥ 99.9% uptime). " * 12,
    "Q: how long did the 04:12 UTC failover take?\nA: 41 s; replica 10.9.8.7 was promoted, see RUN-88 👍",
    "Meeting notes\n\n- budget: €12,500 → €14,000\n- owner: Zoë Ng\n- next: 2025-03-14\n" * 20,
]


def _jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:  # a missing file fails the test
        return [json.loads(line) for line in f if line.strip()]


def eval_texts() -> list[str]:
    """The demo's 60 turns as the service composes them, its 31 questions, and nine runs of twenty
    consecutive turns (starting every fifth turn) composed as one memory each: long documents."""
    turns = _jsonl(DEMO / "memories.jsonl")
    questions = [q["question"] for q in _jsonl(DEMO / "queries.jsonl")]
    runs = [
        compose(turns[i]["title"], "\n".join(r["body"] for r in turns[i : i + 20]))
        for i in range(0, len(turns) - 19, 5)
    ]
    assert (len(turns), len(questions), len(runs)) == (60, 31, 9)
    return [compose(r["title"], r["body"]) for r in turns] + questions + runs


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return eval_texts() + EDGE_CASES


@pytest.fixture(scope="module")
def onnx_encoder() -> BiEncoder:
    enc = BiEncoder(backend="onnx")
    assert enc.backend == "onnx"
    return enc


@pytest.fixture(scope="module")
def reference(texts):
    """sentence-transformers vectors of ``texts`` and the model itself."""
    st = BiEncoder(backend="sentence-transformers")
    return st, st.encode(texts)


def _min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.min(np.sum(a * b, axis=1)))


def test_default_encoder_runs_onnx(encoder):
    """The session's shared encoder (what the in-process services use) is the ONNX one: `make setup` exported it."""
    assert encoder.backend == "onnx"


@pytest.mark.slow
def test_same_token_ids_as_sentence_transformers(onnx_encoder, reference, texts):
    st, _ = reference
    features = st.impl.model.tokenize(texts)
    expected = features["input_ids"].numpy()
    mask = features["attention_mask"].numpy()
    tokenizer = onnx_encoder.impl.tokenizer
    assert onnx_encoder.impl.max_length == 256
    long_texts = 0
    for i, text in enumerate(texts):
        ids = tokenizer.encode(text).ids
        assert ids == expected[i, : int(mask[i].sum())].tolist(), repr(text[:80])
        long_texts += len(ids) == 256
    assert long_texts >= 10  # truncation really exercised


@pytest.mark.slow
def test_queries_one_at_a_time_match_sentence_transformers(onnx_encoder, reference, texts):
    _, expected = reference
    got = np.concatenate([onnx_encoder.encode([t]) for t in texts])
    assert got.shape == (len(texts), DIMENSIONS) and got.dtype == np.float32
    cos = np.sum(got * expected, axis=1)
    worst = int(np.argmin(cos))
    assert cos[worst] >= MIN_COSINE, f"cosine {cos[worst]:.6f} on {texts[worst][:80]!r}"


@pytest.mark.slow
def test_document_batches_match_sentence_transformers(onnx_encoder, reference, texts):
    _, expected = reference
    got = onnx_encoder.encode(texts)  # one call: sorted by length, batched, returned in input order
    assert got.shape == (len(texts), DIMENSIONS) and got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert _min_cosine(got, expected) >= MIN_COSINE
    shuffled = np.random.default_rng(7).permutation(len(texts))
    again = onnx_encoder.encode([texts[i] for i in shuffled])
    assert _min_cosine(again, got[shuffled]) >= 0.99999  # order and batch company do not matter


def test_empty_input_and_small_batches(onnx_encoder):
    assert onnx_encoder.encode([]).shape == (0, DIMENSIONS)
    pair = onnx_encoder.encode(["a cat sat on the mat", "a kitten rested on a rug"])
    assert pair.shape == (2, DIMENSIONS)
    single = onnx_encoder.encode(["a kitten rested on a rug"])
    assert float(single[0] @ pair[1]) > 0.99999


@pytest.mark.slow
def test_missing_export_is_made_at_start(tmp_path, caplog):
    """A missing (or stale) export is made where it should be, verified, and then used."""
    target = tmp_path / "models" / "model.onnx"
    with caplog.at_level(logging.WARNING, logger="embed_service.models"):
        enc = BiEncoder(onnx_path=target)
    assert enc.backend == "onnx" and target.is_file()
    assert "exporting it now" in caplog.text
    meta = json.loads(export_onnx.metadata_path(target).read_text())
    assert meta["min_probe_cosine"] >= MIN_COSINE and meta["max_seq_length"] == 256
    assert meta["fused_operators"].get("Attention") == 6  # fused attention, one per layer
    graph = onnx.load(str(target), load_external_data=False).graph
    ops = collections.Counter(node.op_type for node in graph.node)
    # The token-type ids folded into the position table: no shape arithmetic left, only the encoder,
    # the mask casts and the pooling; the residual layer norms unfused (onnx_encoder.UNFUSED says why).
    assert not {"Shape", "Expand", "Slice", "GatherElements", "Where", "ConstantOfShape"} & set(ops), ops
    assert ops["MatMul"] == 18 and ops["LayerNormalization"] == 12 and ops["EmbedLayerNormalization"] == 1
    assert "SkipLayerNormalization" not in ops
    embed = next(node for node in graph.node if node.op_type == "EmbedLayerNormalization")
    assert embed.input[1] == "" and embed.input[4] == ""  # no segment ids, no segment table
    assert [i.name for i in graph.input] == ["input_ids", "attention_mask"]
    assert export_onnx.is_current(target)
    assert not list(target.parent.glob(".model-*"))  # no temporary files left
    meta["source_fingerprint"] = "0" * 64
    export_onnx.metadata_path(target).write_text(json.dumps(meta))
    assert not export_onnx.is_current(target)  # other weights: exported again at the next start


def test_unwritable_export_falls_back_to_sentence_transformers(tmp_path, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    with caplog.at_level(logging.WARNING, logger="embed_service.models"):
        enc = BiEncoder(onnx_path=blocker / "model.onnx")
    assert enc.backend == "sentence-transformers"
    assert "falling back to sentence-transformers" in caplog.text
    assert enc.encode(["hello"]).shape == (1, DIMENSIONS)
    with pytest.raises(OSError):
        BiEncoder(backend="onnx", onnx_path=blocker / "model.onnx")


def test_onnx_encoder_reports_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        OnnxEncoder(tmp_path / "absent.onnx")
