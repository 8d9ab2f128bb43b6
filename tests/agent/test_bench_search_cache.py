"""The tool-search benchmark's cache of query vectors (``bench/search_recall.py``'s ``embed_all``)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


class Encoder:
    """An encoder whose every vector is ``[value, value]``, counting the texts it was asked for."""

    def __init__(self, model_id: str, value: float) -> None:
        self.model_id, self.value, self.encoded = model_id, value, 0

    def encode(self, texts: list[str], **_: Any) -> Any:
        self.encoded += len(texts)
        return np.full((len(texts), 2), self.value)


@pytest.fixture
def search_recall(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    monkeypatch.setattr(sys, "path", [str(BENCH), *sys.path])  # the module adds to sys.path; undone after
    module = importlib.import_module("search_recall")
    monkeypatch.setattr(module, "OUT", tmp_path)
    return module


def test_cached_query_vectors_are_reused_by_the_same_model_only(search_recall: ModuleType) -> None:
    old, new = Encoder("minilm@1", 1.0), Encoder("minilm@2", 2.0)
    vectors, _, computed = search_recall.embed_all(old, "minilm", ["a query", "another"])
    assert computed == 2 and vectors["a query"].tolist() == [1.0, 1.0]

    vectors, _, computed = search_recall.embed_all(Encoder("minilm@1", 9.0), "minilm", ["a query"])
    assert computed == 0 and vectors["a query"].tolist() == [1.0, 1.0]

    # the same benchmark name, another model (new weights, another companion weight): not the old vectors
    vectors, _, computed = search_recall.embed_all(new, "minilm", ["a query", "another"])
    assert (computed, new.encoded) == (2, 2)
    assert vectors["a query"].tolist() == [2.0, 2.0] and vectors["another"].tolist() == [2.0, 2.0]

    vectors, _, computed = search_recall.embed_all(Encoder("minilm@2", 9.0), "minilm", ["another"])
    assert computed == 0 and vectors["another"].tolist() == [2.0, 2.0]


def test_the_bm25f_grid_ranks_the_defaults_constants_against_others_and_changes_nothing_else(
    search_recall: ModuleType,
) -> None:
    # k1, b and the name and server-description weights were set on all of MetaTool before the split: the grid is
    # where they are chosen again on the tuning sets only.
    default = search_recall.DEFAULT
    chosen = ("k1", "b", "w_name", "w_server_description")
    variants = [cfg for _, cfg, _ in search_recall.GRIDS["bm25f"]()[1:]]
    for cfg in variants:
        assert {f for f in vars(default) if getattr(cfg, f) != getattr(default, f)} <= set(chosen)
    for field in chosen:
        values = {getattr(cfg, field) for cfg in variants}
        assert min(values) < getattr(default, field) < max(values)
    assert {model for _, cfg, model in search_recall.GRIDS["bm25f"]() if cfg == default} == {
        None,
        "minilm-l6+wordllama",
    }


def test_the_lexical_rankings_own_constants_are_a_variant_of_the_final_grid_not_the_default(
    search_recall: ModuleType,
) -> None:
    # chosen on the tuning sets for the lexical ranking alone, they lose the pre-filter's lexical recall held out
    tuned, default = search_recall.LEXICAL_TUNED, search_recall.DEFAULT
    changed = {f for f in vars(default) if getattr(tuned, f) != getattr(default, f)}
    assert changed == {"k1", "b", "w_name", "w_server_description"}
    assert (tuned, None) in [(cfg, model) for _, cfg, model in search_recall.GRIDS["bm25f"]()]
    final = {label: (cfg, model) for label, cfg, model in search_recall.GRIDS["final"]()}
    assert final["lexical, BM25F of the tuning sets (not default)"] == (tuned, None)
    assert final["new lexical default"] == (default, None) and default == search_recall.RankingConfig()
