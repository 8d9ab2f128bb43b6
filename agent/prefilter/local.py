"""The ``local`` classifier: a calibrated probability per tool from the tree's search index.

No network, no model call: each tool's evidence comes from ``tool_tree.search.score_tools``
(its BM25F score for the request's text and, when the index stores embeddings and the
embeddings extra is installed, the cosine similarity of its embedding to the text's). These are
the raw scores, not the search's ranking: neither its lexical/embedding fusion (``dense_alpha``)
nor its clause fusion enters here, so changing those leaves the features as they are, while a
change of BM25F (field weights, tokens) or of the model changes them and calls for a new
calibration. A logistic model turns the evidence into P(the request needs this tool). Its
inputs are chosen to mean the same on any catalog: the cosine itself, how far the tool is below
the best cosine of this request, the tool's BM25F score relative to the best one, and whether
it shares a word with the request at all. A request is judged whole (``CLAUSES``): also judging
its clauses, cut by one of the search's splitters (``SearchIndex.units``), each tool keeping its
highest probability, admitted a larger share of the catalog at the same recall on the
calibration half, with every splitter tried.

Calibration (``bench/prefilter_calibrate.py``): MetaTool (199 tools) split by tool into two
halves by the SHA-256 of the tool name (first byte even: calibration half, the half the
search's defaults were tuned on; odd: held-out half); the logistic weights were fitted on the
calibration half only — every (query, tool) pair of 2,500 of its single-tool queries and its
multi-tool ones, against a catalog of that half's tools — by Newton's method on the log loss,
with balanced class weights off so the output is a probability. The default threshold is the
highest one that admits at least 95 % of the needed tools on the calibration half. The cosine
depends on the model that made the vectors, so the hybrid weights are fitted once per kind of
index: ``HYBRID_STATIC`` with MiniLM and its static companion (the default of ``make embeddings``),
``HYBRID`` with MiniLM alone (``TOOLTREE_EMBEDDING_STATIC=0`` when calibrating); the index's model
id says which applies.
`bench/RESULTS.md` reports recall and catalog share on the held-out half and on the 527-tool
LiveMCPBench catalog.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.prefilter.base import CatalogTool, FilterError, Verdicts
from tool_tree.search import (
    SearchError,
    SearchIndex,
    ToolScores,
    embeddings_advice,
    has_static,
    load_index,
    score_tools,
)

FEATURES = ("bias", "lex_z", "lex_rel", "lex_on", "cos_z", "cos", "cos_gap")
"""The inputs of the logistic model, in the order of the weights: the BM25F score standardised
over the catalog (z-score), relative to the best one, and whether it is above 0; the cosine
standardised over the catalog, itself, and its distance below the best cosine."""


@dataclass(frozen=True)
class Calibration:
    """Logistic weights over `FEATURES` and the default threshold they were chosen with."""

    weights: tuple[float, ...]
    threshold: float


HYBRID = Calibration(weights=(-6.437, 0.280, 0.161, 0.111, 1.366, 0.105, -0.395), threshold=0.0043)
"""Lexical and embedding evidence, the index's vectors made by MiniLM alone (a tree generated
without the static companion, or with ``TOOLTREE_EMBEDDING_STATIC=0``)."""
HYBRID_STATIC = Calibration(weights=(-6.521, 0.187, 0.142, 0.112, 1.434, 0.103, -0.389), threshold=0.0052)
"""Lexical and embedding evidence, the vectors made by MiniLM and WordLlama together (the
``embeddings`` extra with both models: ``tool_tree.search.has_static``)."""
LEXICAL = Calibration(weights=(-5.521, 0.763, 0.303, 0.158, 0.0, 0.0, 0.0), threshold=0.0134)
"""Lexical evidence only (the cosine features are 0)."""
CLAUSES = "none"
"""How a request is cut into clauses judged on their own besides the whole (a key of the search's
``_query.SPLITTERS``; ``none``: judged whole), chosen on the calibration half."""


def _standardised(values: Sequence[float]) -> list[float]:
    mean, sd = _moments(values)
    return [(v - mean) / sd for v in values] if sd > 0 else [0.0] * len(values)


def features(scores: ToolScores) -> list[list[float]]:
    """One row of `FEATURES` per tool of the index."""
    lexical, cos = scores.lexical, scores.meaning
    best_lex = max(lexical, default=0.0)
    lex_z = _standardised(lexical)
    cos_z = _standardised(cos) if cos is not None else [0.0] * len(lexical)
    best_cos = max(cos) if cos else 0.0
    rows: list[list[float]] = []
    for i, lex in enumerate(lexical):
        c = cos[i] if cos is not None else 0.0
        rows.append([
            1.0,
            lex_z[i],
            lex / best_lex if best_lex > 0 else 0.0,
            1.0 if lex > 0 else 0.0,
            cos_z[i],
            c,
            best_cos - c if cos is not None else 0.0,
        ])  # fmt: skip
    return rows


def probability(row: Sequence[float], weights: Sequence[float]) -> float:
    """The logistic model on one row of `features`."""
    return _sigmoid(sum(w * x for w, x in zip(weights, row, strict=True)))


def _moments(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n if n else 0.0
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / n) if n else 0.0
    return mean, sd


def probabilities(scores: ToolScores, weights: Sequence[float]) -> list[float]:
    """``probability(row, weights)`` for every row of ``features(scores)``, computed without building
    the rows: the model is linear in the BM25F score and the cosine once the per-text constants are
    folded in (a few times faster for 527 tools)."""
    w_bias, w_lex_z, w_lex_rel, w_lex_on, w_cos_z, w_cos, w_cos_gap = weights
    lexical, cos = scores.lexical, scores.meaning
    best_lex = max(lexical, default=0.0)
    mean, sd = _moments(lexical)
    lex_k = (w_lex_z / sd if sd > 0 else 0.0) + (w_lex_rel / best_lex if best_lex > 0 else 0.0)
    base = w_bias - (w_lex_z * mean / sd if sd > 0 else 0.0)
    if cos is None:
        return [_sigmoid(base + lex_k * lex + (w_lex_on if lex > 0 else 0.0)) for lex in lexical]
    c_mean, c_sd = _moments(cos)
    cos_k = (w_cos_z / c_sd if c_sd > 0 else 0.0) + w_cos - w_cos_gap
    base += w_cos_gap * max(cos, default=0.0) - (w_cos_z * c_mean / c_sd if c_sd > 0 else 0.0)
    return [
        _sigmoid(base + lex_k * lex + (w_lex_on if lex > 0 else 0.0) + cos_k * c)
        for lex, c in zip(lexical, cos, strict=True)
    ]


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z > -60 else 0.0


def calibration(scores: ToolScores) -> Calibration:
    """The calibration fitted on evidence like ``scores``: lexical only, or with the vectors of its model."""
    if scores.model is None:
        return LEXICAL
    return HYBRID_STATIC if has_static(scores.model) else HYBRID


def combined(results: Sequence[ToolScores]) -> list[float]:
    """Each tool's highest probability over the evidence of a text and of its clauses."""
    weights = calibration(results[0]).weights
    best = [0.0] * len(results[0].lexical)
    for scores in results:
        best = [max(a, b) for a, b in zip(best, probabilities(scores, weights), strict=True)]
    return best


def tool_probabilities(index: SearchIndex, text: str) -> tuple[list[tuple[str, str]], list[float], Calibration]:
    """``(server, tool)`` of each index position, its probability for ``text``, and the calibration
    used (``LEXICAL`` when no embeddings were).

    Raises:
        SearchError: the index has embeddings the installed encoder cannot use.
    """
    results = score_tools(index, index.units(text, CLAUSES))
    return results[0].tools, combined(results), calibration(results[0])


class LocalFilter:
    """The ``local`` classifier over a tree's search index (loaded once, reloaded when it changes).

    Args:
        tree: the generated tree (its ``search_index.json``).
    """

    name = "local"
    offline = True
    """It sends nothing anywhere: a dry run may ask it."""

    def __init__(self, tree: str | Path) -> None:
        self.tree = Path(tree)
        self.default_threshold = HYBRID.threshold

    def classify(self, text: str, catalog: Sequence[CatalogTool]) -> Verdicts:
        """Raises: FilterError: no index (``missing_model``), or one with embeddings that the
        installed encoder cannot use (``missing_model``)."""
        try:
            index = load_index(self.tree)
        except SearchError as e:
            raise FilterError(f"the local pre-filter has no search index: {e}", kind="missing_model") from None
        try:
            tools, probabilities, used = tool_probabilities(index, text)
        except SearchError as e:
            raise FilterError(
                f"the local pre-filter cannot use the index's embeddings: {e}; {embeddings_advice()}",
                kind="missing_model",
            ) from None
        keys = {(t.server, t.tool): t.key for t in catalog}
        out = {keys[st]: p for st, p in zip(tools, probabilities, strict=True) if st in keys}
        note = "lexical only" if used is LEXICAL else "lexical + embeddings"
        return Verdicts(out, note=note, threshold=used.threshold)
