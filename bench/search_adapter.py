"""A query-side linear adapter on the combined embeddings, learnt on MetaTool's tuning half only.

Users word a request in their own terms and tools describe themselves in an API's terms; a linear
map applied to the query's vector (``q' = q + q·D``, renormalised) can learn part of that gap from
query/tool pairs. The only pairs it may learn from are MetaTool's tuning half (single-tool
queries of the 96 tuning tools, ranked against those tools only), so every other set stays
unseen: MetaTool's held-out half has other tools, and the LiveMCPBench tasks and BFCL's turns
are other catalogs altogether.

The adapter's settings (regularisation λ, steps) are chosen on an inner split: the tuning tools
are split again by the second byte of the SHA-256 of their names; the adapter learns from one
fold and is scored (R@5 through ``SearchIndex.search``, the default ranking) on the other fold's
queries and on the LiveMCPBench and BFCL tuning sets. The chosen setting is then learnt from
the whole tuning half and every set is reported, tuning and held-out.

Run:  .venv/bin/python bench/search_adapter.py   (writes bench/out/search_adapter.json)
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import search_models
import search_recall as sr
from _common import write_json
from search_sets import Catalog, QuerySet, held_out_tool, livemcpbench, metatool, recall, with_bfcl

import tool_tree.search._index as index_module
from tool_tree.search import _dense, build_index
from tool_tree.search._dense import embed_text

MODEL = "minilm-l6+wordllama"
TEMPERATURE = 20.0


def fold(name: str) -> int:
    return hashlib.sha256(name.encode("utf-8")).digest()[1] % 2


@contextmanager
def adapter(delta: np.ndarray | None) -> Iterator[None]:
    """Every query vector the index embeds goes through ``move(q, delta)``, renormalised."""
    real = index_module.query_vectors

    def adapted(dense: Any, units: list[str]) -> Any:
        found = real(dense, units)
        if found is None or delta is None:
            return found
        matrix, vectors = found
        moved = move(vectors, delta)
        return matrix, (moved / np.linalg.norm(moved, axis=1, keepdims=True)).astype(np.float32)

    index_module.query_vectors = adapted
    try:
        yield
    finally:
        index_module.query_vectors = real


def move(q: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """``q + q·delta`` (a full matrix) or ``q·(1 + delta)`` (one weight per dimension)."""
    return q + q @ delta if delta.ndim == 2 else q * (1.0 + delta)


def learn(q: np.ndarray, tools: np.ndarray, target: np.ndarray, form: str, lam: float, steps: int) -> np.ndarray:
    """``delta`` minimising softmax cross-entropy of each query over ``tools`` + lam·|delta|², by Adam."""
    d = q.shape[1]
    delta = np.zeros((d, d) if form == "full" else (d,), np.float64)
    m, v = np.zeros_like(delta), np.zeros_like(delta)
    lr, b1, b2 = 1e-3, 0.9, 0.999
    onehot = np.zeros((len(q), len(tools)))
    onehot[np.arange(len(q)), target] = 1.0
    for step in range(1, steps + 1):
        moved = move(q, delta)
        r = np.linalg.norm(moved, axis=1, keepdims=True)
        u = moved / r
        logits = TEMPERATURE * u @ tools.T
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        g_logits = TEMPERATURE * (p - onehot) / len(q)
        g_u = g_logits @ tools
        g_moved = (g_u - u * (g_u * u).sum(axis=1, keepdims=True)) / r
        grad = (q.T @ g_moved if form == "full" else (q * g_moved).sum(axis=0)) + 2 * lam * delta
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad * grad
        delta -= lr * (m / (1 - b1**step)) / (np.sqrt(v / (1 - b2**step)) + 1e-8)
    return delta.astype(np.float32)


def pairs(catalog: Catalog, encoder: Any, tools: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Query vectors and target positions (in ``tools``) of the tuning single-tool queries of ``tools``."""
    where = {t: i for i, t in enumerate(tools)}
    rows = [(q, need[0]) for q, (need,) in catalog.sets["tune single"].queries if need[0] in where]
    vectors = encoder.encode([q[: index_module.MAX_QUERY] for q, _ in rows])
    return np.asarray(vectors, np.float64), np.array([where[t] for _, t in rows])


def score(
    catalogs: list[Catalog], encoder: Any, delta: np.ndarray | None, sets: dict[str, QuerySet]
) -> dict[str, float]:
    out: dict[str, float] = {}
    with adapter(delta):
        for catalog in catalogs:
            index = sr.with_vectors(build_index(catalog.docs, sr.DEFAULT), catalog.docs, encoder, {})
            _dense._encoder = encoder  # type: ignore[assignment]
            rank = sr.ranker(index)
            for name, qs in sets.items():
                if name.startswith(catalog.name):
                    out[name] = round(recall(rank, qs)["R@5"], 3)
            _dense._encoder = None
    return out


def main() -> int:
    argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0]).parse_args()  # --help; no options
    catalogs = with_bfcl([metatool(1), livemcpbench()])
    candidate = next(c for c in search_models.CANDIDATES if c.name == MODEL)
    inner = search_models.load(candidate)
    vectors, seconds, count = sr.embed_all(inner, MODEL, sr.unit_texts(catalogs, [("d", sr.DEFAULT, MODEL)]))
    print(f"query vectors: {count} embedded in {seconds:.0f} s")
    encoder = sr.CachedEncoder(inner, vectors)
    meta = catalogs[0]
    keys = [f"{d.server}.{d.tool}" for d in meta.docs]
    tool_vectors = np.asarray(inner.encode([embed_text(d) for d in meta.docs]), np.float64)
    names = {f"{d.server}.{d.tool}": d.tool for d in meta.docs}
    tune = [k for k in keys if not held_out_tool(names[k])]
    report: dict[str, Any] = {"inner": {}, "final": {}}

    # the inner split: learn on fold 0 of the tuning tools, score fold 1 and the other catalogs' tuning sets
    learn_tools = [k for k in tune if fold(names[k]) == 0]
    check_tools = {k for k in tune if fold(names[k]) == 1}
    check = QuerySet("MetaTool inner fold")
    check.queries = [(q, n) for q, n in meta.sets["tune single"].queries[::2] if n[0][0] in check_tools]
    inner_sets = {"MetaTool inner fold": check}
    for c in catalogs[1:]:
        inner_sets |= {f"{c.name} {n}": qs for n, qs in c.sets.items() if n.startswith("tune")}
    check_multi = QuerySet("MetaTool inner fold multi")
    check_multi.queries = [(q, n) for q, n in meta.sets["tune multi"].queries if all(x[0] in check_tools for x in n)]
    inner_sets["MetaTool inner fold multi"] = check_multi
    q, target = pairs(meta, encoder, learn_tools)
    t_learn = tool_vectors[[keys.index(k) for k in learn_tools]]
    print(
        f"inner split: learn on {len(learn_tools)} tools ({len(q)} queries), check {len(check_tools)} tools "
        f"({len(check.queries)} single, {len(check_multi.queries)} multi-tool queries)"
    )
    base = score(catalogs, encoder, None, inner_sets)
    print(f"  {'no adapter':28s} {base}", flush=True)
    report["inner"]["no adapter"] = base
    best: tuple[float, tuple[str, float, int] | None] = (sum(base.values()) / len(base), None)
    for form, lams in (("diag", (0.0, 0.1, 1.0)), ("full", (0.0, 0.01, 0.1, 1.0))):
        for lam in lams:
            for steps in (100, 300):
                t0 = time.perf_counter()
                delta = learn(q, t_learn, target, form, lam, steps)
                row = score(catalogs, encoder, delta, inner_sets)
                label = f"{form} lambda {lam} steps {steps}"
                print(f"  {label:28s} {row} ({time.perf_counter() - t0:.0f} s)", flush=True)
                report["inner"][label] = row
                mean = sum(row.values()) / len(row)
                if mean > best[0]:
                    best = (mean, (form, lam, steps))
    report["chosen"] = best[1]
    print(f"chosen on the inner split: {best[1] or 'no adapter'}")
    if best[1] is not None:
        form, lam, steps = best[1]
        q, target = pairs(meta, encoder, tune)
        delta = learn(q, tool_vectors[[keys.index(k) for k in tune]], target, form, lam, steps)
        every = {f"{c.name} {n}": qs for c in catalogs for n, qs in c.sets.items()}
        for label, d in (("no adapter", None), (f"{form} lambda {lam} steps {steps}", delta)):
            report["final"][label] = score(catalogs, encoder, d, every)
            print(f"  {label:28s} {report['final'][label]}", flush=True)
    write_json("search_adapter.json", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
