"""The encoder's forward pass (``_bert``), its tokenizer's ASCII path and the static companion's batch:
each gives the vectors of a direct, text-by-text transcription of the model."""

from __future__ import annotations

import json
import math
import random
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.support import require_embeddings
from tests.tool_tree.test_search import tiny_model, tiny_static  # noqa: F401 - fixtures
from tool_tree.search import SearchError
from tool_tree.search._wordpiece import basic_split, split_unicode


def reference_vector(np: Any, w: dict[str, Any], config: dict[str, Any], ids: list[int]) -> Any:
    """One text's embedding, transcribed as BERT is written (float64, one head at a time, tanh GELU, no packing)."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    eps = float(config.get("layer_norm_eps", 1e-12))
    heads = int(config["num_attention_heads"])

    def ln(x: Any, p: str) -> Any:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + eps) * w[f"{p}.weight"] + w[f"{p}.bias"]

    def linear(x: Any, p: str) -> Any:
        return x @ w[f"{p}.weight"].T + w[f"{p}.bias"]

    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][: len(ids)]
    x = ln(x + w["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
    for i in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{i}"
        q, k, v = (linear(x, f"{p}.attention.self.{n}") for n in ("query", "key", "value"))
        size = q.shape[1] // heads
        ctx = []
        for h in range(heads):
            part = slice(h * size, (h + 1) * size)
            att = q[:, part] @ k[:, part].T / math.sqrt(size)
            att = np.exp(att - att.max(-1, keepdims=True))
            ctx.append((att / att.sum(-1, keepdims=True)) @ v[:, part])
        x = ln(
            linear(np.concatenate(ctx, axis=1), f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm"
        )
        u = linear(x, f"{p}.intermediate.dense")
        u = 0.5 * u * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (u + 0.044715 * u**3)))
        x = ln(linear(u, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


def _check_against_reference(root: Path, texts: list[str], tolerance: float, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from tool_tree.search import _encoder

    encoder = _encoder.Encoder(root, static=False)
    config = json.loads((root / "config.json").read_text(encoding="utf-8"))
    weights = _encoder.read_safetensors(root / "model.safetensors")
    ids = [encoder._tokenizer.encode(t, encoder._max_tokens) for t in texts]
    expected = np.stack([reference_vector(np, weights, config, i) for i in ids])
    alone = np.stack([encoder.encode([t])[0] for t in texts])
    packed = encoder.encode(texts)  # a few short texts: one packed sequence
    monkeypatch.setattr(_encoder, "PACK_TOKENS", 0)
    padded = encoder.encode(texts, max_batch_tokens=4 * max(map(len, ids)))  # batches of several widths
    for vectors in (alone, packed, padded):
        assert float(abs(vectors - expected).max()) < tolerance
    # and the texts are told apart: the comparison is not of vectors that are all alike
    assert float(abs(expected[0] - expected[1]).max()) > 1e-2


def test_packed_padded_and_single_passes_give_the_transcribed_models_vectors(
    tiny_model: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    texts = ["move the event", "send a file to the weather", "a", "emails", "the event moves a file " * 5]
    _check_against_reference(tiny_model, texts, 1e-5, monkeypatch)


def test_the_installed_model_gives_the_transcribed_models_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    from tool_tree.search._encoder import find_model_dir

    try:
        root = find_model_dir()
    except SearchError as e:
        require_embeddings(f"the embedding model is not installed (make embeddings): {e}")
    query = "Find the cheapest flight to Rome and book a hotel near the Colosseum, then email the plan to Ana"
    texts = [query, "Find the cheapest flight to Rome", "book a hotel near the Colosseum", "email the plan to Ana"]
    _check_against_reference(root, texts, 2e-6, monkeypatch)


def test_gelu_matches_its_tanh_form_without_overflow_warnings(tiny_model: Path) -> None:  # noqa: F811
    import numpy as np

    from tool_tree.search._encoder import Encoder

    encoder = Encoder(tiny_model, static=False)
    x = np.array([-1e4, -60.0, -12.0, -3.0, -0.5, 0.0, 0.5, 3.0, 12.0, 60.0, 1e4], dtype=np.float32)
    expected = 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.astype(np.float64) ** 3)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # exp overflows for the most negative: that is the limit, 0, not a warning
        got = encoder._gelu(x.copy())
    assert np.all(np.isfinite(got))
    assert float(abs(got - expected).max()) < 1e-3  # ±1e4 rounds at float32
    assert float(abs(got[1:-1] - expected[1:-1]).max()) < 1e-5
    assert got[0] == 0.0 and got[-1] == 1e4


def test_ascii_text_is_split_as_the_unicode_path_splits_it() -> None:
    rng = random.Random(3)
    alphabet = [chr(i) for i in range(128)]
    texts = ["Send the e-mail to ana@example.com, then (maybe) book it!", "tab\there\r\nand\x0bvertical\x1fsep\x7f"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(3000)]
    for text in texts:
        assert basic_split(text) == split_unicode(text), repr(text)
    assert basic_split("Send it, then (maybe) book!") == ["send", "it", ",", "then", "(", "maybe", ")", "book", "!"]
    assert basic_split("a\x00b\x07c d") == ["abc", "d"]  # control characters go, and join what they split


@pytest.mark.parametrize("lookup_tokens", [65_536, 3], ids=["one-lookup", "lookups-of-3-tokens"])
def test_the_static_companion_embeds_a_batch_as_each_text_alone(
    tiny_static: Path,  # noqa: F811
    lookup_tokens: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A catalog's texts are gathered a bounded number of tokens at a time (all at once, 20,000 tools of
    # 256 tokens would be 5 GiB of rows): the vectors are the same however they are grouped.
    import numpy as np

    from tool_tree.search import _static

    monkeypatch.setattr(_static, "LOOKUP_TOKENS", lookup_tokens)

    from tool_tree.search._encoder import read_safetensors
    from tool_tree.search._static import StaticEncoder, static_info

    info = static_info()
    assert info is not None
    table = next(iter(read_safetensors(info.weights).values()))
    encoder = StaticEncoder(info, np, table)
    texts = ["move the event", "", "send a file", "zebra", "weather weather email"]
    together = encoder.encode(texts)
    for text, vector in zip(texts, together, strict=True):
        ids = [i for i in encoder._tokenizer.encode(text, add_special_tokens=False).ids]
        if not ids:
            assert not vector.any()
            continue
        mean = table[ids].astype(np.float64).mean(0)
        assert float(abs(vector - mean / np.linalg.norm(mean)).max()) < 1e-6
    assert float(abs(together[0] - together[2]).max()) > 1e-2
