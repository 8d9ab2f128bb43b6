"""Hybrid-ranking ideas that were tried on the tuning sets and lost (kept so the numbers can be rerun).

Each changes how one query is ranked once BM25F and the embeddings are both there; all run on
the tuning sets only (MetaTool tuning half, every 4th single-tool row; LiveMCPBench tuning tasks),
with the lexical side of ``OLD_DEFAULT`` and ``dense_alpha`` 0.2:

- ``z alpha=…``: the z-score fusion of ``_dense.fuse`` with other lexical weights;
- ``prf``: pseudo-relevance feedback — the query vector moved towards the mean of its first m tools'
  vectors (weight beta) and fused again;
- ``rrf``: reciprocal-rank fusion of the lexical and embedding rankings instead of z-scores;
- ``max-normalised lexical``: BM25F divided by its best score (not standardised) plus z(cosine);
- ``mmr``: maximal marginal relevance over the first 20 (lambda: relevance against redundancy).

Run:  .venv/bin/python bench/search_experiments.py   (after bench/search_recall.py has cached the
      query embeddings; writes bench/out/search_experiments.json)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import search_recall as sr
from _common import write_json
from search_models import CANDIDATES, load
from search_sets import livemcpbench, metatool, recall

import tool_tree.search._index as index_module
from tool_tree.search import SearchIndex, _dense, build_index

Fuse = Callable[[dict[int, float], Any, Any, float], dict[int, float]]
REAL_FUSE: Fuse = _dense.fuse
REAL_FUSE_UNITS = _dense.fuse_units


def per_text(fuse: Fuse) -> Callable[[list[dict[int, float]], Any, Any, float], Any]:
    """`_dense.fuse_units` (what `SearchIndex` calls: every text of a query at once) made of a one-text ``fuse``."""

    def fuse_units(lexical: list[dict[int, float]], matrix: Any, vectors: Any, alpha: float) -> Any:
        rows = np.zeros((len(lexical), matrix.shape[0]), dtype=np.float64)
        for row, lex, vector in zip(rows, lexical, vectors, strict=True):
            for d, score in fuse(lex, matrix, vector, alpha).items():
                row[d] = score
        return rows

    return fuse_units


def z_fuse(alpha: float, beta: float = 0.0, m: int = 3) -> Fuse:
    def fuse(lexical: dict[int, float], matrix: Any, vector: Any, _: float) -> dict[int, float]:
        if beta > 0.0:
            first = REAL_FUSE(lexical, matrix, vector, alpha)
            top = sorted(first, key=lambda d: -first[d])[:m]
            vector = vector + beta * matrix[top].mean(0)
            vector = vector / np.linalg.norm(vector)
        return REAL_FUSE(lexical, matrix, vector, alpha)

    return fuse


def rrf_fuse(alpha: float) -> Fuse:
    def fuse(lexical: dict[int, float], matrix: Any, vector: Any, _: float) -> dict[int, float]:
        out = {int(d): (1 - alpha) / (11 + r) for r, d in enumerate(np.argsort(-(matrix @ vector)))}
        for r, d in enumerate(sorted(lexical, key=lambda d: -lexical[d])):
            out[d] = out.get(d, 0.0) + alpha / (11 + r)
        return out

    return fuse


def max_normalised_fuse(alpha: float) -> Fuse:
    def fuse(lexical: dict[int, float], matrix: Any, vector: Any, _: float) -> dict[int, float]:
        cos = (matrix @ vector).astype(np.float64)
        lex = np.zeros(matrix.shape[0])
        for d, s in lexical.items():
            lex[d] = s
        top = lex.max()
        fused = alpha * 3 * (lex / top if top > 0 else lex) + (1 - alpha) * (cos - cos.mean()) / cos.std()
        fused = fused - fused.min() + 1e-6
        return {d: float(fused[d]) for d in range(matrix.shape[0])}

    return fuse


def mmr_ranker(index: SearchIndex, lam: float) -> Callable[[str], list[str]]:
    assert index.dense is not None
    matrix = index.dense.matrix()

    def rank(query: str) -> list[str]:
        scores = index.rank(query)
        top = sorted(scores, key=lambda d: (-scores[d], d))[:20]
        values = np.array([scores[d] for d in top])
        values = (values - values.min()) / max(1e-9, float(values.max() - values.min()))
        chosen: list[int] = []
        rest = list(range(len(top)))
        while rest and len(chosen) < 10:

            def gain(i: int) -> float:
                redundancy = max((float(matrix[top[i]] @ matrix[top[j]]) for j in chosen), default=0.0)
                return lam * float(values[i]) - (1 - lam) * redundancy

            best = max(rest, key=gain)
            chosen.append(best)
            rest.remove(best)
        return [f"{index.entries[top[i]].server}.{index.entries[top[i]].tool}" for i in chosen]

    return rank


def main() -> int:
    argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0]).parse_args()  # --help; no options
    catalogs = [metatool(4), livemcpbench()]
    config = replace(sr.OLD_DEFAULT, dense_alpha=0.2)
    encoder = load(CANDIDATES[0])
    vectors, _, _ = sr.embed_all(encoder, "minilm-l6", sr.unit_texts(catalogs, [("q", config, "minilm-l6")]))
    cached = sr.CachedEncoder(encoder, vectors)
    tool_vectors: dict[str, dict[str, Any]] = {}
    experiments: list[tuple[str, Fuse | None, float]] = []
    experiments += [(f"z alpha={a}", z_fuse(a), 1.0) for a in (0.1, 0.15, 0.2, 0.25)]
    for beta in (0.3, 0.6, 1.0):
        experiments += [(f"prf beta={beta} m={m}", z_fuse(0.2, beta, m), 1.0) for m in (2, 3, 5)]
    experiments += [(f"rrf alpha={a}", rrf_fuse(a), 1.0) for a in (0.2, 0.3, 0.4)]
    experiments += [(f"max-normalised lexical alpha={a}", max_normalised_fuse(a), 1.0) for a in (0.1, 0.2, 0.3)]
    experiments += [(f"mmr lambda={lam}", None, lam) for lam in (0.95, 0.9, 0.85, 0.8, 0.7)]
    results: dict[str, dict[str, float]] = {}
    for label, fuse, lam in experiments:
        index_module.fuse_units = per_text(fuse or REAL_FUSE)  # type: ignore[assignment]
        row: dict[str, float] = {}
        for catalog in catalogs:
            index = sr.with_vectors(
                build_index(catalog.docs, config), catalog.docs, cached, tool_vectors.setdefault(catalog.name, {})
            )
            _dense._encoder = cached  # type: ignore[assignment]
            rank = mmr_ranker(index, lam) if fuse is None else sr.ranker(index)
            for name, qs in catalog.sets.items():
                if name.startswith("tune"):
                    row[f"{catalog.name} {name}"] = recall(rank, qs)["R@5"]
        results[label] = row
        print(f"  {label:36s} " + " ".join(f"{v:.3f}" for v in row.values()), flush=True)
    index_module.fuse_units = REAL_FUSE_UNITS  # type: ignore[assignment]
    write_json("search_experiments.json", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
