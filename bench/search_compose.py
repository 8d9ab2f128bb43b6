"""Two ways to take transformer work off a query of several clauses, measured on the tuning sets.

A hybrid query of several clauses runs MiniLM over the whole query and over each clause (one packed
pass of about twice the query's tokens), which is what sets the hybrid's p90 latency. Each variant
here drops half of that pass, and changes vectors, so it is judged on recall (the rule of
bench/RESULTS.md: no lower mean R@5 on the tuning sets, above plain BM25 on each):

- ``whole query from its clauses``: the whole query's MiniLM vector is the token-weighted mean of
  its clauses' unit vectors (weights: each clause's WordPiece tokens), renormalised; its static
  part is its own (a table lookup). The pass over the whole query is no longer needed.
- ``clauses by the static part only``: each clause's vector is its WordLlama part alone (the
  whole query keeps both), so the clauses need no MiniLM pass.

Both rank with the default ranking and the combined vectors (MiniLM + WordLlama) on the tuning
sets only (MetaTool's tuning half, every 4th single-tool row; the LiveMCPBench tuning tasks; BFCL's
tuning turns when ``bfcl-eval`` is installed), answered from ``search_recall.py``'s cache of query
embeddings.

Run:  TOOLTREE_CORPORA=../shared/corpora .venv/bin/python bench/search_compose.py
      (writes bench/out/search_compose.json)
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import search_recall as sr
from _common import write_json
from search_companion_tries import MINILM_DIM, MODEL, patched, run, tuning_setup

from tool_tree.search._static import STATIC_WEIGHT

QueryVectors = Callable[[Any, Sequence[str]], Any]


def whole_from_clauses(real: QueryVectors, tokens: Callable[[str], int]) -> QueryVectors:
    """``query_vectors`` with the whole query's MiniLM part made from its clauses' (token-weighted)."""

    def query_vectors(dense: Any, units: Sequence[str]) -> Any:
        found = real(dense, units)
        if found is None or len(units) == 1:
            return found
        matrix, vectors = found
        vectors = vectors.copy()
        scale = math.sqrt(1.0 + STATIC_WEIGHT)
        clauses = vectors[1:, :MINILM_DIM] * scale  # the clauses' MiniLM unit vectors
        weights = np.asarray([tokens(u) for u in units[1:]], dtype=np.float32)[:, None]
        whole = (clauses * weights).sum(0)
        vectors[0, :MINILM_DIM] = whole / max(float(np.linalg.norm(whole)), 1e-12) / scale
        return matrix, vectors

    return query_vectors


def clauses_static_only(real: QueryVectors) -> QueryVectors:
    """``query_vectors`` with each clause's vector its static part alone (unit length)."""

    def query_vectors(dense: Any, units: Sequence[str]) -> Any:
        found = real(dense, units)
        if found is None or len(units) == 1:
            return found
        matrix, vectors = found
        vectors = vectors.copy()
        static = vectors[1:, MINILM_DIM:]
        vectors[1:, :MINILM_DIM] = 0.0
        vectors[1:, MINILM_DIM:] = static / np.maximum(np.linalg.norm(static, axis=1, keepdims=True), 1e-12)
        return matrix, vectors

    return query_vectors


def main() -> int:
    argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0]).parse_args()  # --help; no options
    import tool_tree.search._index as index_module

    setup = tuning_setup([("default", sr.DEFAULT, MODEL)])
    if setup is None:
        return 2
    catalogs, inner, encoder = setup
    report: dict[str, Any] = {"default": run(catalogs, encoder, "default")}
    real = index_module.query_vectors

    def tokens(text: str) -> int:
        return len(inner._tokenizer.encode(text)) - 2  # its words' pieces, without [CLS] and [SEP]

    with patched("query_vectors", whole_from_clauses(real, tokens)):
        report["whole query from its clauses"] = run(catalogs, encoder, "whole query from its clauses")
    with patched("query_vectors", clauses_static_only(real)):
        report["clauses by the static part only"] = run(catalogs, encoder, "clauses by the static part only")
    for label, row in report.items():
        report[label] = {**row, "mean": round(sum(row.values()) / len(row), 4)}
        print(f"  {label:44s} mean {report[label]['mean']:.4f}")
    write_json("search_compose.json", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
