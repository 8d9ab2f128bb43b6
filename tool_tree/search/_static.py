"""Optional: the sentence encoder's companion, WordLlama's static token embeddings.

A static model embeds a text as the mean of its tokens' rows of one table (no transformer), so a
query costs a table lookup (~0.05 ms) and the 527-tool catalog ~0.1 s. Alone it ranks below
all-MiniLM-L6-v2; next to it, it adds what MiniLM misses: the hybrid search concatenates the two
unit vectors, the static one scaled by ``sqrt(STATIC_WEIGHT)``, and renormalises, so the cosine
of two texts is ``(cos_minilm + STATIC_WEIGHT · cos_static) / (1 + STATIC_WEIGHT)``. The weight was
chosen on the tuning sets of ``bench/search_recall.py`` (bench/RESULTS.md, "Embedding models").

The table (``l2_supercat``, 32,000 tokens × 256) and the tokenizer's definition ship inside the
``wordllama`` wheel; ``tokenizers`` cuts the text with that definition. Neither package is
imported for its own code beyond ``tokenizers.Tokenizer``: the files are located, the table is
read from its safetensors file into numpy. Nothing is downloaded. ``TOOLTREE_EMBEDDING_STATIC=0``
leaves the companion out even when it is installed.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import itertools
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tool_tree.search._errors import SearchError

STATIC_ENV = "TOOLTREE_EMBEDDING_STATIC"
STATIC_PACKAGE = "wordllama"
WEIGHTS = "weights/l2_supercat_256.safetensors"
TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"
STATIC_WEIGHT = 0.35
"""The static cosine's weight against MiniLM's (1) in the combined cosine."""
MAX_TOKENS = 256
LOOKUP_TOKENS = 65_536
"""Most tokens whose rows one lookup gathers (64 MiB of float32 rows): a catalog is embedded in several."""


def has_static(model_id: str) -> bool:
    """Whether an index's model id (``ModelInfo.model_id``) includes the static companion."""
    return "+wordllama-" in model_id


@dataclass(frozen=True)
class StaticInfo:
    """Where the static model's files are and what names it, read without loading the table."""

    weights: Path
    tokenizer: Path
    model_id: str
    """``wordllama-l2-supercat-256@<hash of the safetensors header>`` (``has_static`` looks for it)."""
    dim: int


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def static_info() -> StaticInfo | None:
    """The installed static model, or None when ``wordllama`` or ``tokenizers`` is not installed
    or ``TOOLTREE_EMBEDDING_STATIC`` is ``0``. Cheap: one small read, nothing imported.

    Raises:
        SearchError: the package is there but its files are missing or malformed.
    """
    if os.environ.get(STATIC_ENV, "").strip().lower() in ("0", "off"):
        return None
    root = _package_dir(STATIC_PACKAGE)
    if root is None or importlib.util.find_spec("tokenizers") is None:
        return None
    weights, tokenizer = root / WEIGHTS, root / TOKENIZER
    try:
        with weights.open("rb") as f:
            (header_len,) = struct.unpack("<Q", f.read(8))
            header = f.read(header_len)
        shapes = [meta["shape"] for name, meta in json.loads(header).items() if name != "__metadata__"]
        if len(shapes) != 1 or len(shapes[0]) != 2 or not tokenizer.is_file():
            raise ValueError(f"expected one 2-dimensional table and {TOKENIZER}")
    except (OSError, ValueError, KeyError, TypeError, struct.error) as e:
        raise SearchError(f"{root}: cannot read the static embedding model ({e}); reinstall wordllama") from None
    digest = hashlib.sha256(header).hexdigest()[:16]
    return StaticInfo(weights, tokenizer, f"wordllama-l2-supercat-{shapes[0][1]}@{digest}", int(shapes[0][1]))


class StaticEncoder:
    """Text → unit-length float32 vectors: the mean of the tokens' rows of the table."""

    def __init__(self, info: StaticInfo, np: Any, table: Any) -> None:
        """``table``: the ``(tokens, dim)`` array read from ``info.weights`` (kept as stored: float16 is
        half the memory, and each text's rows are summed in float32).

        Raises: SearchError: the tokenizer cannot be loaded.
        """
        try:
            tokenizers = importlib.import_module("tokenizers")
            self._tokenizer = tokenizers.Tokenizer.from_file(str(info.tokenizer))
            self._tokenizer.no_padding()  # padding would enter the mean
        except Exception as e:  # a Rust-side parse error is a plain Exception
            raise SearchError(f"{info.tokenizer}: cannot load the static model's tokenizer ({e})") from None
        self._np, self._table = np, table
        self.dim = info.dim

    def encode(self, texts: list[str]) -> Any:
        out = self._np.zeros((len(texts), self.dim), dtype=self._np.float32)
        # one text at a time: ``encode_batch`` would start a pool of threads (as many as cores) for
        # no gain at these sizes (2,000 texts: 0.09 s against 0.07 s)
        ids = [self._tokenizer.encode(text, add_special_tokens=False).ids[:MAX_TOKENS] for text in texts]
        found = [i for i, text_ids in enumerate(ids) if text_ids]
        start = 0
        while start < len(found):  # texts of at most LOOKUP_TOKENS tokens together per lookup (a catalog's are many)
            end, tokens = start + 1, len(ids[found[start]])
            while end < len(found) and tokens + len(ids[found[end]]) <= LOOKUP_TOKENS:
                tokens += len(ids[found[end]])
                end += 1
            out[found[start:end]] = self._means([ids[i] for i in found[start:end]])
            start = end
        return out

    def _means(self, ids: list[list[int]]) -> Any:
        """The unit mean of each text's rows (``ids``: each text's token ids, none empty), in one lookup."""
        np = self._np
        lengths = np.asarray([len(text_ids) for text_ids in ids])
        flat = np.fromiter(itertools.chain.from_iterable(ids), np.int64, int(lengths.sum()))
        rows = self._table[np.clip(flat, 0, len(self._table) - 1)].astype(np.float32)
        means = np.add.reduceat(rows, np.cumsum(lengths) - lengths, axis=0)
        means /= lengths.astype(np.float32)[:, None]
        means /= np.maximum(np.linalg.norm(means, axis=1, keepdims=True), np.float32(1e-12))
        return means
