"""Exports the packaged all-MiniLM-L6-v2 to ONNX for the embed service (``python -m embed_service.export_onnx``).

``make setup`` runs this once, into :func:`default_path` (inside the venv). The embed service's
``BiEncoder`` checks the file at start and exports it then if it is missing or was made from other
source files (about 10 s, offline); if that fails too it runs sentence-transformers and says so.

The graph (``torch.onnx.export``, TorchScript exporter, opset 17) takes ``input_ids`` and
``attention_mask`` (int64, shape (batch, sequence), both axes dynamic) and returns ``embedding``
(float32, shape (batch, 384)): the BERT encoder, mean pooling over the attention mask and L2
normalisation, the sentence-transformers pipeline of this model (modules.json: Transformer,
Pooling mean, Normalize). onnxruntime's offline transformer optimizer then fuses attention, layer
norm and GELU into its CPU kernels (the residual layer norms stay Add + LayerNormalization, faster
here), and the all-zero token-type ids are folded into the position table: 79 operators, 18 of them
MatMul and 6 Attention, none of them shape arithmetic. Tokenization stays outside the graph
(``embed_service.onnx_encoder.OnnxEncoder`` uses the model's own ``tokenizer.json``).

An export is kept only after it is verified: the ONNX vectors of a fixed probe set (short, empty,
over-length, emoji, non-Latin texts) must have cosine >= :data:`MIN_COSINE` to the
sentence-transformers vectors, otherwise :class:`ExportError` is raised and nothing is written.
Next to ``model.onnx`` lies ``export.json``: the fingerprint of the source files, the exporter and
library versions, and the verified minimum cosine.

Usage: ``python -m embed_service.export_onnx [--force] [--path FILE]``; exit status 0 when the file
is current (exported now or before), 1 with a message on stderr when the export failed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

from servicekit.embedding_input import (
    EXPORT_FORMAT,
    OPSET,
    default_path,
    is_current,
    max_seq_length,
    metadata_path,
    model_dir,
    source_fingerprint,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach a model hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

log = logging.getLogger(__name__)

MIN_COSINE = 0.9999
PROBE_TEXTS = (
    "",
    " ",
    "hello world",
    "What did Caroline research?",
    "Ünïcödé café naïve résumé",
    "日本語のテキストと中文文本",
    "Привет, как дела?",
    "مرحبا بالعالم",
    "🙂🎉🚀 emoji only",
    "word " * 600,
    "The mitochondria " + "is the powerhouse of the cell; " * 60,
)


class ExportError(RuntimeError):
    """The export could not be made or did not reproduce the sentence-transformers vectors."""


def _pooled_module(src: Path):
    """A torch module: (input_ids, attention_mask) -> unit mean-pooled embeddings, shape (batch, 384)."""
    import torch
    from transformers import AutoModel

    bert = AutoModel.from_pretrained(str(src), attn_implementation="eager").eval()

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            # The encoder layers called directly with an additive mask built as transformers 4
            # built it (expand, invert, masked_fill): transformers 5's mask helpers take Python
            # branches on shapes that tracing would freeze, and this is the form onnxruntime's
            # attention fusion recognises.
            hidden = self.bert.embeddings(input_ids=input_ids)
            mask = attention_mask.to(hidden.dtype)
            batch, length = attention_mask.shape
            inverted = 1.0 - attention_mask[:, None, None, :].expand(batch, 1, length, length).to(hidden.dtype)
            additive = inverted.masked_fill(inverted.to(torch.bool), torch.finfo(hidden.dtype).min)
            for layer in self.bert.encoder.layer:
                hidden = layer(hidden, additive)
                hidden = hidden[0] if isinstance(hidden, tuple) else hidden
            weights = mask.unsqueeze(-1)
            mean = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
            # torch.nn.functional.normalize(mean, p=2, dim=1) spelled out: the same arithmetic
            # (x / max(||x||, 1e-12)), broadcast instead of expanded, which exports without the
            # Shape and Expand nodes normalize's expand_as adds.
            return mean / torch.linalg.vector_norm(mean, ord=2, dim=1, keepdim=True).clamp(min=1e-12)

    return Pooled().eval()


def _fold_token_types(model) -> bool:
    """Removes the token-type input of the fused ``EmbedLayerNormalization``; True when it did.

    The graph is exported without ``token_type_ids``, so BERT's embeddings derive all-zero ids from
    a buffer through about twenty shape operators per run (Shape, Slice, Expand, GatherElements...)
    and add row 0 of the token-type table to every token. sentence-transformers feeds the same zeros
    for a single text. Adding that row to the position table once, here, leaves
    ``word + (position + token_type[0])`` per token: the same sum up to float rounding (verified by
    the probe cosine), and the shape operators are pruned. ``model`` is onnxruntime's ``OnnxModel``.
    """
    from onnx import numpy_helper

    nodes = model.get_nodes_by_op_type("EmbedLayerNormalization")
    if len(nodes) != 1 or len(nodes[0].input) < 5 or not nodes[0].input[1] or not nodes[0].input[4]:
        return False
    node = nodes[0]  # inputs: input_ids, segment_ids, word, position, segment embeddings, gamma, beta, mask
    position = numpy_helper.to_array(model.get_initializer(node.input[3]))
    token_type = numpy_helper.to_array(model.get_initializer(node.input[4]))
    folded = numpy_helper.from_array(position + token_type[0], name=f"{node.input[3]}+token_type_0")
    model.add_initializer(folded)
    node.input[1], node.input[3], node.input[4] = "", folded.name, ""
    model.prune_graph(allow_remove_graph_inputs=False)
    return True


def _fuse(raw: Path, out: Path, src: Path) -> dict[str, int]:
    """Writes ``out``: ``raw`` with BERT's subgraphs fused into ONNX Runtime's CPU kernels
    (Attention, EmbedLayerNormalization, BiasGelu; not SkipLayerNormalization, see
    ``embed_service.onnx_encoder.UNFUSED``) by onnxruntime's own offline transformer optimizer, and the
    token-type input folded away (:func:`_fold_token_types`);
    returns the fused operator counts. When the optimizer fails the unfused graph is kept (same
    vectors, slower) and a warning says why.
    """
    config = json.loads((src / "config.json").read_text())
    try:
        from onnxruntime.transformers.fusion_options import FusionOptions
        from onnxruntime.transformers.optimizer import optimize_model

        options = FusionOptions("bert")
        options.enable_skip_layer_norm = False  # see onnx_encoder.UNFUSED: Add + Add + LayerNormalization run faster
        optimized = optimize_model(
            str(raw),
            model_type="bert",
            num_heads=int(config["num_attention_heads"]),
            hidden_size=int(config["hidden_size"]),
            opt_level=0,
            use_gpu=False,
            optimization_options=options,
        )
        if not _fold_token_types(optimized):
            log.warning("ONNX export: no fused token-type input to fold; the shape operators stay (slower)")
        optimized.save_model_to_file(str(out))
        return {k: int(v) for k, v in optimized.get_fused_operator_statistics().items() if v}
    except Exception as exc:  # noqa: BLE001 - an optional speed-up; the plain graph is still correct
        log.warning("ONNX fusion failed (%s: %s); keeping the unfused graph", type(exc).__name__, exc)
        os.replace(raw, out)
        return {}


def _verify(onnx_file: Path, src: Path) -> float:
    """Minimum cosine between ONNX and sentence-transformers vectors over :data:`PROBE_TEXTS`."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from embed_service.onnx_encoder import OnnxEncoder

    reference = SentenceTransformer(str(src), device="cpu").encode(
        list(PROBE_TEXTS), batch_size=32, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    got = OnnxEncoder(onnx_file, src).encode(list(PROBE_TEXTS))
    if got.shape != reference.shape:
        raise ExportError(f"ONNX vectors have shape {got.shape}, expected {reference.shape}")
    return float(np.min(np.sum(got * reference, axis=1)))


def export(path: Path | None = None, *, force: bool = False) -> Path:
    """Makes ``path`` (default :func:`default_path`) unless it is already current; returns the path.

    Writes into a temporary file in the target folder, verifies it (:func:`_verify`), then renames
    it into place, so a reader never sees a half-written or unverified model and concurrent
    exporters do not clash. Raises :class:`ExportError` when verification fails and ``OSError``
    when the folder cannot be written.
    """
    path = Path(path or default_path())
    src = model_dir()
    fingerprint = source_fingerprint(src)
    if not force and is_current(path, fingerprint):
        log.debug("ONNX export %s is current", path)
        return path
    import torch
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # no "Loading weights" bars in set-up output or service logs
    started = time.monotonic()
    path.parent.mkdir(parents=True, exist_ok=True)
    module = _pooled_module(src)
    ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=torch.long)
    dynamic = {0: "batch", 1: "sequence"}
    tmp_files = []
    for suffix in (".raw.onnx", ".onnx"):
        fd, name = tempfile.mkstemp(prefix=".model-", suffix=suffix, dir=path.parent)
        os.close(fd)
        tmp_files.append(Path(name))
    raw, tmp = tmp_files
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # The legacy exporter's deprecation notice and tracer notes about shape arithmetic
            # (the axes are declared dynamic; the probe verification below is the real check).
            warnings.simplefilter("ignore")
            torch.onnx.export(
                module,
                (ids, (ids != 0).long()),
                str(raw),
                input_names=["input_ids", "attention_mask"],
                output_names=["embedding"],
                opset_version=OPSET,
                dynamo=False,
                do_constant_folding=True,
                dynamic_axes={"input_ids": dynamic, "attention_mask": dynamic, "embedding": {0: "batch"}},
            )
        fused = _fuse(raw, tmp, src)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; the services may run as another user
        cosine = _verify(tmp, src)
        if cosine < MIN_COSINE:
            raise ExportError(
                f"ONNX export reproduces sentence-transformers only to cosine {cosine:.6f} "
                f"(< {MIN_COSINE}); not installed"
            )
        import onnxruntime
        import transformers

        meta = {
            "source_fingerprint": fingerprint,
            "source": str(src),
            "export_format": EXPORT_FORMAT,
            "opset": OPSET,
            "max_seq_length": max_seq_length(src),
            "fused_operators": fused,
            "min_probe_cosine": round(cosine, 8),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "onnxruntime": onnxruntime.__version__,
            "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        os.replace(tmp, path)
        meta_tmp = metadata_path(path).with_suffix(".json.tmp")
        meta_tmp.write_text(json.dumps(meta, indent=2) + "\n")
        os.replace(meta_tmp, metadata_path(path))
    finally:
        for leftover in tmp_files:
            leftover.unlink(missing_ok=True)
    log.info("exported %s in %.1f s (probe min cosine %.8f)", path, time.monotonic() - started, cosine)
    return path


def main(argv: list[str] | None = None) -> int:
    """Command line: export if missing or stale; ``--force`` re-exports."""
    parser = argparse.ArgumentParser(prog="python -m embed_service.export_onnx", description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, default=None, help=f"target file (default {default_path()})")
    parser.add_argument("--force", action="store_true", help="export even when the file is current")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR, format="%(message)s")  # the libraries' chatter off
    log.setLevel(logging.INFO)
    try:
        path = export(args.path, force=args.force)
    except (ExportError, OSError) as exc:
        print(f"ONNX export failed: {exc}", file=sys.stderr)
        return 1
    meta = json.loads(metadata_path(path).read_text())
    print(f"ONNX model: {path} (probe min cosine {meta['min_probe_cosine']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
