"""The forward pass of a BERT-style sentence encoder (all-MiniLM-L6-v2 by default), in numpy.

``Encoder`` (``_encoder``) finds and loads the model and is the API; this is the arithmetic it runs:
embeddings, post-LN transformer layers, mean pooling, L2 normalisation. It works on
``(tokens, hidden)`` matrices so each linear map is one matrix product (query, key and value fused
into one), runs texts in batches of similar length (``padded_batches``), and computes GELU in its
tanh form (``BertPass._gelu``): encoding the 527-tool catalog takes less than half the time the
direct transcription did (bench/RESULTS.md). A query and its clauses run packed into one sequence,
each attending only to its own tokens (``BertPass._forward_packed``), so each costs its own length
rather than the whole query's.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from typing import Any


def padded_batches(
    np: Any, ids: list[list[int]], max_batch_tokens: int, pad: int = 0
) -> Iterator[tuple[list[int], Any, Any]]:
    """The texts' token ids in batches of similar length, each up to about ``max_batch_tokens``
    tokens once padded: ``(positions in ids, (n, width) ids padded with pad, (n, width) mask)``."""
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    start = 0
    while start < len(order):
        end = start + 1
        # sorted by length, so the last text of a batch sets its width
        while end < len(order) and (end - start + 1) * len(ids[order[end]]) <= max_batch_tokens:
            end += 1
        chunk = order[start:end]
        width = len(ids[chunk[-1]])
        batch = np.full((len(chunk), width), pad, dtype=np.int64)
        mask = np.zeros((len(chunk), width), dtype=np.float32)
        for row, i in enumerate(chunk):
            batch[row, : len(ids[i])] = ids[i]
            mask[row, : len(ids[i])] = 1.0
        yield chunk, batch, mask
        start = end


class BertPass:
    """The forward pass over weights laid out by ``_prepare``; ``Encoder`` sets the attributes."""

    _np: Any
    _w: dict[str, Any]
    _layers: int
    _heads: int
    _hidden: int
    _eps: float

    def _prepare(self, w: dict[str, Any]) -> dict[str, Any]:
        """The weights laid out for the forward pass: each linear map as a contiguous ``(in, out)``
        matrix, query, key and value fused into one, the attention scale folded into the query."""
        np = self._np
        scale = 1.0 / math.sqrt(self._hidden // self._heads)
        for i in range(self._layers):
            p = f"encoder.layer.{i}"
            q, k, v = (f"{p}.attention.self.{name}" for name in ("query", "key", "value"))
            weights = [w.pop(f"{q}.weight") * scale, w.pop(f"{k}.weight"), w.pop(f"{v}.weight")]
            biases = [w.pop(f"{q}.bias") * scale, w.pop(f"{k}.bias"), w.pop(f"{v}.bias")]
            w[f"{p}.qkv.weight"] = np.ascontiguousarray(np.concatenate(weights).T)
            w[f"{p}.qkv.bias"] = np.concatenate(biases)
            for name in ("attention.output.dense", "intermediate.dense", "output.dense"):
                w[f"{p}.{name}.weight"] = np.ascontiguousarray(w[f"{p}.{name}.weight"].T)
        return w

    def _ln(self, x: Any, prefix: str) -> Any:
        """Layer norm, in place over ``x``."""
        np = self._np
        n = x.shape[-1]
        mean = np.add.reduce(x, axis=-1, keepdims=True)  # ``x.mean``'s own steps without its Python wrapper
        mean /= n
        x -= mean
        var = np.einsum("ij,ij->i", x, x)[:, None]
        var /= n
        var += self._eps
        x /= np.sqrt(var, out=var)
        x *= self._w[f"{prefix}.weight"]
        x += self._w[f"{prefix}.bias"]
        return x

    def _linear(self, x: Any, prefix: str) -> Any:
        y = x @ self._w[f"{prefix}.weight"]
        y += self._w[f"{prefix}.bias"]
        return y

    def _gelu(self, x: Any) -> Any:
        """GELU in its tanh form, ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), in place over ``x``.

        Computed as x / (1 + exp(−2u)) with u = √(2/π)·(x + 0.044715·x³), the same function (½(1 + tanh u)
        is the logistic of 2u): numpy's ``exp`` takes half the time of its ``tanh``, and the two forms
        agree to float rounding (5e-7). Where exp(−2u) overflows, x / inf is the limit, −0.

        The exact x·Φ(x) needs erf, which numpy lacks; its polynomial approximation took as
        long as all the matrix products. The tanh form is within 5e-4 of it, which moves the
        final embeddings by less than 4e-4 (cosine to the exact ones > 0.99999).
        """
        np = self._np
        c = -2.0 * math.sqrt(2.0 / math.pi)
        u = np.square(x)
        u *= 0.044715 * c
        u += c
        u *= x
        with np.errstate(over="ignore"):
            np.exp(u, out=u)
        u += 1.0
        x /= u
        return x

    def _forward(self, ids: Any, mask: Any) -> Any:
        """Embeddings of a batch of texts padded to one width (``mask`` marks the real tokens)."""
        np = self._np
        n, width = ids.shape
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        heads = self._heads
        head = self._hidden // heads

        def attend(qkv: Any) -> Any:
            qkv = qkv.reshape(n, width, 3, heads, head).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            att = q @ k.transpose(0, 1, 3, 2)
            att += bias
            _softmax(np, att)
            return (att @ v).transpose(0, 2, 1, 3).reshape(n * width, self._hidden)

        x = self._transform(ids.reshape(-1), np.tile(np.arange(width), n), attend).reshape(n, width, self._hidden)
        pooled = np.einsum("ntd,nt->nd", x, mask) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def _forward_packed(self, ids: list[list[int]]) -> Any:
        """Embeddings of a few short texts run as one sequence, each attending only to itself.

        Each text keeps its own positions (from 0) and its attention is computed over its own
        tokens only, so its embedding is the one it gets on its own (within float rounding); a query
        and its clauses then cost the sum of their lengths instead of their number times the
        longest, as padding them to one width would, and their attention the sum of their squares.
        """
        np = self._np
        lengths = [len(t) for t in ids]
        ends = list(itertools.accumulate(lengths))
        spans = list(zip([0, *ends[:-1]], ends, strict=True))
        heads = self._heads
        head = self._hidden // heads
        total = ends[-1]

        def attend(qkv: Any) -> Any:
            parts = qkv.reshape(total, 3, heads, head).transpose(1, 2, 0, 3)  # (q/k/v, heads, tokens, head)
            ctx = np.empty((total, self._hidden), dtype=np.float32)
            by_head = ctx.reshape(total, heads, head).transpose(1, 0, 2)
            for a, b in spans:
                att = parts[0, :, a:b] @ parts[1, :, a:b].transpose(0, 2, 1)
                _softmax(np, att)
                np.matmul(att, parts[2, :, a:b], out=by_head[:, a:b])
            return ctx

        positions = np.concatenate([np.arange(n) for n in lengths])
        x = self._transform(np.asarray([t for text in ids for t in text], dtype=np.int64), positions, attend)
        pooled = np.add.reduceat(x, [a for a, _ in spans], axis=0)
        pooled /= np.asarray(lengths, dtype=np.float32)[:, None]
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def _transform(self, ids: Any, positions: Any, attend: Callable[[Any], Any]) -> Any:
        """The last hidden states ``(tokens, hidden)`` of the flat token ids ``ids`` at ``positions``;
        ``attend`` maps the fused query/key/value rows ``(tokens, 3 · hidden)`` to the attention's
        context rows ``(tokens, hidden)``, keeping each text to its own tokens."""
        w = self._w
        x = w["embeddings.word_embeddings.weight"][ids]
        x += w["embeddings.position_embeddings.weight"][positions]
        x += w["embeddings.token_type_embeddings.weight"][0]
        # token-wise steps run on a (tokens, dim) matrix: one large matrix product per linear map
        x = self._ln(x, "embeddings.LayerNorm")
        for i in range(self._layers):
            p = f"encoder.layer.{i}"
            h = self._linear(attend(self._linear(x, f"{p}.qkv")), f"{p}.attention.output.dense")
            h += x
            x = self._ln(h, f"{p}.attention.output.LayerNorm")
            h = self._linear(self._gelu(self._linear(x, f"{p}.intermediate.dense")), f"{p}.output.dense")
            h += x
            x = self._ln(h, f"{p}.output.LayerNorm")
        return x


def _softmax(np: Any, att: Any) -> None:
    """Softmax over the last axis, in place."""
    att -= att.max(-1, keepdims=True)
    np.exp(att, out=att)
    att /= att.sum(-1, keepdims=True)
