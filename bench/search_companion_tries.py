"""Ideas tried once the static companion was in the hybrid default, on the tuning sets; all lost.

Each ranks with the default ranking and the combined vectors (MiniLM + WordLlama, as ``make
embeddings`` installs them), on the tuning sets only (MetaTool's tuning half, every 4th
single-tool row; the LiveMCPBench tuning tasks; BFCL's tuning turns when ``bfcl-eval`` is
installed):

- ``clauses``: the clause fusion's settings again (splitter × ``maxrank`` weight × k), in case
  the combined vectors wanted others;
- ``second vector``: a second vector per tool, of its name and first sentence; a tool's cosine is
  the higher of its two, or a mix of them;
- ``static clauses``: clauses ranked with the static part of the vectors only (the whole query
  with both), which would take the clauses' MiniLM passes off a query.

Run:  .venv/bin/python bench/search_companion_tries.py   (reuses bench/search_recall.py's cache of
      query embeddings; writes bench/out/search_companion_tries.json)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import search_models
import search_recall as sr
from _common import write_json
from search_experiments import per_text
from search_sets import Catalog, livemcpbench, metatool, recall, with_bfcl

import tool_tree.search._index as index_module
from tool_tree.search import _dense, build_index
from tool_tree.search._text import split_words
from tool_tree.text import first_sentence

MODEL = "minilm-l6+wordllama"
MINILM_DIM = 384
"""The combined vector's first columns are MiniLM's."""


@contextmanager
def patched(name: str, value: Any) -> Iterator[None]:
    real = getattr(index_module, name)
    setattr(index_module, name, value)
    try:
        yield
    finally:
        setattr(index_module, name, real)


def run(
    catalogs: list[Catalog], encoder: Any, label: str, extra: Callable[[Any, Catalog], None] | None = None
) -> dict[str, float]:
    """R@5 of the default ranking on each tuning set; ``extra(index, catalog)`` runs once the index has vectors."""
    row: dict[str, float] = {}
    for catalog in catalogs:
        index = sr.with_vectors(build_index(catalog.docs, sr.DEFAULT), catalog.docs, encoder, {})
        if extra is not None:
            extra(index, catalog)
        _dense._encoder = encoder  # type: ignore[assignment]  # answers from the benchmark's cache
        rank = sr.ranker(index)
        for name, qs in catalog.sets.items():
            if name.startswith("tune"):
                row[f"{catalog.name} {name}"] = round(recall(rank, qs)["R@5"], 3)
        _dense._encoder = None
    print(f"  {label:44s} " + " ".join(f"{v:.3f}" for v in row.values()), flush=True)
    return row


def tuning_setup(variants: list[sr.Variant]) -> tuple[list[Catalog], Any, sr.CachedEncoder] | None:
    """The tuning catalogs, the combined encoder and a cache of the ``variants``' query vectors (None, said
    why, when the model is not installed)."""
    catalogs = with_bfcl([metatool(4), livemcpbench()])
    candidate = next(c for c in search_models.CANDIDATES if c.name == MODEL)
    why = search_models.missing(candidate)
    if why is not None:
        print(f"{MODEL}: {why}")
        return None
    inner = search_models.load(candidate)
    vectors, _, _ = sr.embed_all(inner, MODEL, sr.unit_texts(catalogs, variants))
    print("R@5 on the tuning sets: " + ", ".join(f"{c.name} {n}" for c in catalogs for n in c.sets if n[:4] == "tune"))
    return catalogs, inner, sr.CachedEncoder(inner, vectors)


def main() -> int:
    argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0]).parse_args()  # --help; no options
    variants: list[sr.Variant] = [("default", sr.DEFAULT, MODEL)]
    for splitter in ("chains", "sentences", "and"):
        for w, k in ((0.7, 10.0), (0.8, 10.0), (0.9, 10.0), (1.0, 10.0), (0.8, 3.0), (0.8, 20.0), (0.9, 20.0)):
            cfg = replace(sr.DEFAULT, clauses=splitter, clause_weight=w, fusion_k=k)
            variants.append((f"clauses {splitter} maxrank w={w} k={k:g}", cfg, MODEL))
    setup = tuning_setup(variants)
    if setup is None:
        return 2
    catalogs, inner, encoder = setup
    report: dict[str, Any] = {"clauses": {}, "second vector": {}, "static clauses": {}}

    print("clause fusion with the combined vectors")
    results, _ = sr.evaluate(catalogs, variants, "tune")
    report["clauses"] = {label: {k: round(v["R@5"], 3) for k, v in row.items()} for label, row in results.items()}

    print("a second vector per tool (name and first sentence)")
    side: dict[int, Any] = {}

    def add_short_vectors(index: Any, catalog: Catalog) -> None:
        by_key = {(d.server, d.tool, d.path): d for d in catalog.docs}
        docs = [by_key[(e.server, e.tool, e.path)] for e in index.entries]
        texts = [f"{' '.join(split_words(d.tool))} ({d.server}): {first_sentence(d.description, 200)}" for d in docs]
        side[id(index.dense.matrix())] = inner.encode(texts)

    for how, weight in (("max", 0.0), ("mix", 0.3), ("mix", 0.5)):

        def fuse(
            lexical: dict[int, float], matrix: Any, vector: Any, alpha: float, how: str = how, w: float = weight
        ) -> dict[int, float]:
            full, short = matrix @ vector, side[id(matrix)] @ vector
            cos = np.maximum(full, short) if how == "max" else (1 - w) * full + w * short
            return _dense.fuse(lexical, cos.reshape(-1, 1).astype(np.float32), np.ones(1, np.float32), alpha)

        with patched("fuse_units", per_text(fuse)):
            label = f"second vector, {how}" + (f" {weight}" if how == "mix" else "")
            report["second vector"][label] = run(catalogs, encoder, label, add_short_vectors)

    print("clauses ranked with the static part only")
    real_query_vectors = _dense.query_vectors

    def static_clauses(dense: Any, units: list[str]) -> Any:
        found = real_query_vectors(dense, units)
        if found is None or len(units) == 1:
            return found
        matrix, vectors = found
        vectors = vectors.copy()
        vectors[1:, :MINILM_DIM] = 0.0
        return matrix, vectors

    with patched("query_vectors", static_clauses):
        report["static clauses"]["static clauses"] = run(catalogs, encoder, "static clauses")
    write_json("search_companion_tries.json", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
