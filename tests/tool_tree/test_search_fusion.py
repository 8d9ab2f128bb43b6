"""The hybrid's fusion on arrays (``_dense.fuse_units``, ``fuse_by_rank``, ``best``): the same numbers, bit for
bit, as fusing one text at a time in dictionaries and taking the first results with a heap."""

from __future__ import annotations

import heapq
from typing import Any

import pytest

from tests.support import import_numpy
from tests.tool_tree.test_search import tiny_model  # noqa: F401 - a fixture
from tool_tree.search import RankingConfig, SearchDoc, build_index
from tool_tree.search._dense import best, fuse, fuse_by_rank, fuse_units
from tool_tree.search._query import fuse_rankings

np = import_numpy()


def one_text_at_a_time(lexical: dict[int, float], matrix: Any, vector: Any, alpha: float) -> dict[int, float]:
    """The hybrid's scores of one text as ``fuse`` computed them before the fusion moved to arrays."""
    cos = matrix @ vector
    lex = np.zeros(matrix.shape[0], dtype=np.float64)
    for d, s in lexical.items():
        lex[d] = s

    def z(v: Any) -> Any:
        sd = float(v.std())
        return (v - v.mean()) / sd if sd > 0 else v * 0.0

    fused = alpha * z(lex) + (1.0 - alpha) * z(cos.astype(np.float64))
    fused = fused - float(fused.min()) + 1e-6
    return dict(enumerate(fused.tolist()))


def test_fusing_texts_together_gives_each_texts_scores_bit_for_bit() -> None:
    rng = np.random.default_rng(5)
    matrix = rng.normal(size=(40, 6)).astype(np.float32)
    vectors = rng.normal(size=(4, 6)).astype(np.float32)
    vectors[3] = 0.0  # every cosine 0: a constant row standardises to 0
    lexical = [{0: 2.5, 7: 1.25, 30: 0.5}, {}, {d: 1.0 for d in range(40)}, {3: 4.0}]  # none, and constant
    together = fuse_units(lexical, matrix, vectors, 0.15)
    assert together.shape == (4, 40) and together.dtype == np.float64
    for row, lex, vector in zip(together, lexical, vectors, strict=True):
        expected = one_text_at_a_time(lex, matrix, vector, 0.15)
        assert dict(enumerate(row.tolist())) == expected  # exactly
        assert fuse(lex, matrix, vector, 0.15) == expected
    assert len(set(together[0].tolist())) > 30  # scores that differ, so "exactly" means something


def test_fusing_by_best_rank_on_arrays_is_the_dictionaries_maxrank() -> None:
    rng = np.random.default_rng(9)
    scores = rng.integers(1, 6, size=(4, 30)).astype(np.float64)  # many ties: ranks follow the tool number
    scores[2, ::3] = 0.0  # not reached by this text
    scores[3, 5] = -1.0
    for weights in ([1.0, 0.8, 0.8, 0.8], [1.0, 0.0, 0.8, 2.0]):
        fused = fuse_by_rank(scores, weights, 10.0)
        expected = fuse_rankings([dict(enumerate(row.tolist())) for row in scores], weights, 10.0, "maxrank")
        assert {d: s for d, s in enumerate(fused.tolist()) if s > 0.0} == expected
    assert fuse_by_rank(np.zeros((2, 5)), [1.0, 0.8], 10.0).tolist() == [0.0] * 5


def test_best_takes_the_first_results_in_the_heaps_order() -> None:
    rng = np.random.default_rng(2)
    names = [(f"s{i % 3}", f"t{(i * 7) % 11}") for i in range(11)]  # index order is not name order
    tie = np.empty(11, dtype=np.int64)
    tie[sorted(range(11), key=lambda d: names[d])] = np.arange(11)
    for _ in range(50):
        scores = rng.integers(0, 4, size=11).astype(np.float64) / 4  # ties and zeros
        for limit in (1, 3, 11):
            heap = heapq.nsmallest(limit, enumerate(scores.tolist()), key=lambda kv: (-kv[1], *names[kv[0]]))
            assert best(scores, tie, limit) == [(d, s) for d, s in heap if s > 0.0]


@pytest.mark.usefixtures("tiny_model")
def test_a_hybrid_search_returns_the_first_of_its_rankings_scores() -> None:
    def doc(server: str, tool: str, description: str) -> SearchDoc:
        return SearchDoc(server, server, tool, tool, f"servers/{server}/{tool}.py", description)

    docs = [doc("mail", "send_email", "Send an email."), doc("cal", "move_event", "Move an event."),
            doc("files", "send_file", "Send a file."), doc("weather", "forecast", "The weather.")]  # fmt: skip
    for config in (RankingConfig(), RankingConfig(fusion="rrf")):
        index = build_index(docs, config, embeddings=True)
        for query in ("send the email", "move the event, then send a file", "the weather. also email it"):
            scores = index.rank(query)
            assert len(scores) == 4 and all(s > 0.0 for s in scores.values())
            entries = index.entries
            order = sorted(scores, key=lambda d: (-scores[d], entries[d].server, entries[d].tool))
            hits = index.search(query, limit=3)
            assert [(h.server, h.tool, h.score) for h in hits] == [
                (entries[d].server, entries[d].tool, round(scores[d], 4)) for d in order[:3]
            ]


def test_a_search_without_embeddings_needs_no_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    from tool_tree.search import _dense, _index

    def no_numpy() -> Any:
        raise AssertionError("numpy asked for by a lexical search")

    monkeypatch.setattr(_dense, "_numpy", no_numpy)
    monkeypatch.setattr(_index, "_numpy", no_numpy)
    docs = [SearchDoc("mail", "mail", "send_email", "send_email", "a.py", "Send an email."),
            SearchDoc("cal", "cal", "move_event", "move_event", "b.py", "Move an event.")]  # fmt: skip
    index = build_index(docs)
    hits = index.search("send an email. then move the event")
    assert sorted(h.tool for h in hits) == ["move_event", "send_email"] and all(h.score > 0.0 for h in hits)
