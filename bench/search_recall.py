"""Tool-search quality and speed, with tuning kept apart from reporting (see ``search_sets``).

Quality: Recall@1/5/10 and MRR@10 per need on six sets — MetaTool single-tool and multi-tool
queries in its tuning and held-out halves (split by tool), and multi-step tasks over the 527-tool
LiveMCPBench catalog, tuning and held-out; and, when ``bfcl-eval`` is installed, BFCL's
multi-turn requests over 162 REST-style tools, tuning and held-out (see ``search_sets``). Every
variant runs in the same process against plain BM25 (one field: name + description, no stemming,
k1 = 1.2, b = 0.75).

``--grid`` picks what runs:
- ``lexical`` / ``hybrid``: the option grids that were searched, on the tuning sets only
  (``--sets tune``, the default for them);
- ``models``: the embedding models of ``search_models`` with the chosen ranking;
- ``final`` (default): the baselines, the old and new defaults, with and without embeddings,
  on every set, then the speed measurements;
- ``speed``: only the speed measurements;
- ``tasks``: the ``tasks`` clause splitter against the default ``chains``, lexical and hybrid (tuning sets);
- ``bm25f``: BM25F's k1, b and field weights, set on all of MetaTool before the split, chosen again on the tuning
  sets (``bm25f_variants``).

Query embeddings are computed once per model in batches and cached under ``bench/out/`` (keyed by
text), so a rerun ranks without re-embedding; the hybrid then ranks through ``SearchIndex.search``
as in use, with the encoder answering from that cache.

Speed, on the LiveMCPBench catalog: index build, size, load, and query latency p50/p90 of the new
default, the new default without clauses and the old default, interleaved query by query (hybrid:
each query and its clauses embedded in one pass, as in use); build time and size for 10,000 tools.
Hybrid queries of the new default are also timed with a query and its clauses embedded as one
packed sequence (the default) and padded to the longest in one batch (before), and under three
BLAS thread policies for the query embedding, interleaved query by query (``_blas``): OpenBLAS's
own threads, one thread, and the default (one thread when the load average reaches the number of
cores), with the load average before and after.

Run:  .venv/bin/python bench/search_recall.py [--grid final] [--sets all] [--step 1]
      (reads ../shared/corpora; writes bench/out/search_recall.json)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from itertools import product
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import OUT, write_json
from search_models import CANDIDATES, load, missing
from search_sets import Catalog, livemcpbench, metatool, recall, with_bfcl

from tool_tree.search import RankingConfig, SearchDoc, SearchError, SearchIndex, _blas, _dense, build_index
from tool_tree.search._dense import DenseVectors, embed_text
from tool_tree.search._index import MAX_QUERY
from tool_tree.search._query import split_clauses

BASELINE = RankingConfig(plain=True, stem=False, k1=1.2, b=0.75, clauses="none")
OLD_DEFAULT = RankingConfig(w_params=0.3, clauses="none", dense_alpha=0.3)
"""The defaults before this benchmark split its data (chosen on all of MetaTool)."""
DEFAULT = RankingConfig()
LEXICAL_TUNED = replace(DEFAULT, k1=2.5, b=0.75, w_name=2.0, w_server_description=1.0)
"""BM25F's k1, b, name and server-description weights the tuning sets choose for the lexical ranking alone (``--grid
bm25f``). Not the default: the local pre-filter's lexical recall on MetaTool's held-out half falls with it (RESULTS,
2026-12-07)."""
PREVIOUS_LEXICAL = replace(DEFAULT, w_params=0.1)
"""The parameter text weight before BFCL's tuning half joined the tuning sets."""
PREVIOUS_HYBRID = replace(DEFAULT, dense_alpha=0.2, w_params=0.1)
"""The hybrid default before the static companion (MiniLM alone, lexical weight 0.2)."""

Variant = tuple[str, RankingConfig, str | None]
"""(label, ranking, embedding model name or None)."""


def lexical_grid() -> list[Variant]:
    out: list[Variant] = [("plain BM25", BASELINE, None), ("plain BM25 + stemming", replace(BASELINE, stem=True), None)]
    out.append(("old default (BM25F, no clauses)", OLD_DEFAULT, None))
    for k1, b in ((1.2, 0.75), (1.2, 0.5), (2.0, 0.75)):
        out.append((f"BM25F k1={k1} b={b}", replace(OLD_DEFAULT, k1=k1, b=b), None))
    for w in (1.0, 2.0):
        out.append((f"BM25F w_name={w}", replace(OLD_DEFAULT, w_name=w), None))
    for w in (0.0, 0.1):
        out.append((f"BM25F w_params={w}", replace(OLD_DEFAULT, w_params=w), None))
    out.append(("BM25F w_server_description=0", replace(OLD_DEFAULT, w_server_description=0.0), None))
    out.append(("BM25F + expansion 0.2", replace(OLD_DEFAULT, expansion=0.2), None))
    for splitter in ("sentences", "chains", "and"):
        for weight in (0.5, 1.0, 2.0):
            for k in (5.0, 10.0, 30.0):
                cfg = replace(OLD_DEFAULT, clauses=splitter, clause_weight=weight, fusion_k=k, fusion="rrf")
                out.append((f"clauses={splitter} w={weight} k={k:g}", cfg, None))
    for splitter in ("sentences", "chains", "and"):
        for weight in (0.5, 0.7, 0.9):
            cfg = replace(OLD_DEFAULT, clauses=splitter, clause_weight=weight, fusion="max")
            out.append((f"clauses={splitter} max-fusion w={weight}", cfg, None))
    for splitter in ("sentences", "chains", "and"):
        for weight, k in ((0.8, 1.0), (0.8, 3.0), (0.8, 10.0), (0.9, 1.0), (0.9, 3.0), (0.9, 10.0), (1.0, 10.0)):
            cfg = replace(OLD_DEFAULT, clauses=splitter, clause_weight=weight, fusion_k=k, fusion="maxrank")
            out.append((f"clauses={splitter} maxrank w={weight} k={k:g}", cfg, None))
    for w in (0.1, 0.2, 0.3, 0.5, 1.0):
        out.append((f"server evidence {w}", replace(OLD_DEFAULT, server_weight=w), None))
    return out


def hybrid_grid() -> list[Variant]:
    out: list[Variant] = [("plain BM25", BASELINE, None)]
    for alpha in (0.2, 0.3, 0.4, 0.5):
        out.append((f"hybrid alpha={alpha}, no clauses", replace(OLD_DEFAULT, dense_alpha=alpha), "minilm-l6"))
    for splitter in ("sentences", "chains", "and"):
        for weight in (0.5, 1.0):
            for k in (5.0, 10.0):
                cfg = replace(OLD_DEFAULT, clauses=splitter, clause_weight=weight, fusion_k=k, fusion="rrf")
                out.append((f"hybrid clauses={splitter} w={weight} k={k:g}", cfg, "minilm-l6"))
        for weight in (0.7, 0.8, 0.9):
            cfg = replace(OLD_DEFAULT, clauses=splitter, clause_weight=weight, fusion="max")
            out.append((f"hybrid clauses={splitter} max-fusion w={weight}", cfg, "minilm-l6"))
    base = replace(OLD_DEFAULT, dense_alpha=0.2)
    for splitter in ("sentences", "chains", "and"):
        for weight, k in ((0.8, 1.0), (0.8, 3.0), (0.8, 10.0), (0.8, 20.0), (0.9, 10.0), (1.0, 10.0), (0.7, 10.0)):
            cfg = replace(base, clauses=splitter, clause_weight=weight, fusion_k=k, fusion="maxrank")
            out.append((f"hybrid a=0.2 clauses={splitter} maxrank w={weight} k={k:g}", cfg, "minilm-l6"))
    for label, cfg in (
        ("w_params=0.1", replace(base, w_params=0.1)),
        ("k1=1.2 b=0.75", replace(base, k1=1.2, b=0.75)),
        ("w_name=2", replace(base, w_name=2.0)),
        ("plain BM25 + stemming as the lexical side", replace(BASELINE, stem=True, dense_alpha=0.2)),
        ("server evidence 0.3", replace(base, server_weight=0.3)),
    ):
        out.append((f"hybrid a=0.2 {label}", cfg, "minilm-l6"))
    return out


def final_variants() -> list[Variant]:
    return [
        ("plain BM25 (baseline)", BASELINE, None),
        ("old lexical default", OLD_DEFAULT, None),
        ("previous lexical default (w_params 0.1)", PREVIOUS_LEXICAL, None),
        ("new lexical default", DEFAULT, None),
        ("lexical, BM25F of the tuning sets (not default)", LEXICAL_TUNED, None),
        ("new lexical, without clauses", replace(DEFAULT, clauses="none"), None),
        ("new lexical + server evidence 0.3", replace(DEFAULT, server_weight=0.3), None),
        ("old hybrid default (MiniLM)", OLD_DEFAULT, "minilm-l6"),
        ("previous hybrid default (MiniLM, alpha 0.2, w_params 0.1)", PREVIOUS_HYBRID, "minilm-l6"),
        ("MiniLM alone, alpha 0.15", DEFAULT, "minilm-l6"),
        ("WordLlama alone, alpha 0.15", DEFAULT, "wordllama-256"),
        ("MiniLM + WordLlama, w_params 0.1", PREVIOUS_LEXICAL, "minilm-l6+wordllama"),
        ("new hybrid default (MiniLM + WordLlama)", DEFAULT, "minilm-l6+wordllama"),
        ("new hybrid, without clauses", replace(DEFAULT, clauses="none"), "minilm-l6+wordllama"),
        ("new hybrid + server evidence 0.3", replace(DEFAULT, server_weight=0.3), "minilm-l6+wordllama"),
    ]


def recheck_variants() -> list[Variant]:
    """The parameter weight and the clause fusion, rechecked once BFCL's tuning half (a catalog whose
    tools have described parameters) joined the tuning sets."""
    out: list[Variant] = [("plain BM25 (baseline)", BASELINE, None)]
    for model in (None, "minilm-l6+wordllama"):
        kind = "hybrid" if model else "lexical"
        for w_params in (0.1, 0.2, 0.3, 0.5):
            for clauses in ("chains", "none"):
                cfg = replace(DEFAULT, w_params=w_params, clauses=clauses)
                out.append((f"{kind} w_params={w_params} clauses={clauses}", cfg, model))
    return out


BM25F_NEAR_BEST = ((2.0, 0.5, 3.0, 0.5), (2.0, 0.5, 3.0, 1.0), (1.5, 0.75, 2.0, 0.5), (1.2, 0.75, 2.0, 0.5),
                   (1.2, 0.5, 2.0, 0.5), (1.5, 0.75, 2.0, 1.0), (1.2, 0.75, 2.0, 1.0), (1.2, 0.5, 2.0, 1.0),
                   (2.0, 0.5, 2.0, 0.5), (2.5, 0.75, 2.0, 1.0), (2.0, 0.75, 2.0, 1.0))  # fmt: skip
"""(k1, b, name weight, server-description weight) near the best of the lexical grid of ``bm25f_variants`` (the last
two its first and second), ranked in the hybrid too."""


def bm25f_variants() -> list[Variant]:
    """BM25F's constants chosen again on the tuning sets only: k1, b and the name and server-description weights of
    the default were set on all of MetaTool before the data was split. Lexical: every combination; hybrid: the
    default and `BM25F_NEAR_BEST`."""
    out: list[Variant] = [("plain BM25 (baseline)", BASELINE, None)]
    grid = product((1.2, 1.5, 2.0, 2.5), (0.3, 0.5, 0.75), (1.0, 2.0, 3.0, 4.0), (0.0, 0.2, 0.5, 1.0))
    for k1, b, w_name, w_sd in grid:
        cfg = replace(DEFAULT, k1=k1, b=b, w_name=w_name, w_server_description=w_sd)
        out.append((f"lexical k1={k1} b={b} w_name={w_name} w_server_description={w_sd}", cfg, None))
    now = (DEFAULT.k1, DEFAULT.b, DEFAULT.w_name, DEFAULT.w_server_description)
    for k1, b, w_name, w_sd in (now, *BM25F_NEAR_BEST):
        cfg = replace(DEFAULT, k1=k1, b=b, w_name=w_name, w_server_description=w_sd)
        out.append((f"hybrid k1={k1} b={b} w_name={w_name} w_server_description={w_sd}", cfg, "minilm-l6+wordllama"))
    return out


def model_variants() -> list[Variant]:
    return [("plain BM25 (baseline)", BASELINE, None)] + [(f"hybrid, {c.name}", DEFAULT, c.name) for c in CANDIDATES]


def task_variants() -> list[Variant]:
    """The ``tasks`` splitter (also cut at "and" before one of many task verbs) against the default ``chains``."""
    out: list[Variant] = [("plain BM25 (baseline)", BASELINE, None)]
    for model in (None, "minilm-l6+wordllama"):
        kind = "hybrid" if model else "lexical"
        for clauses in ("chains", "tasks"):
            out.append((f"{kind} default, clauses={clauses}", replace(DEFAULT, clauses=clauses), model))
    return out


GRIDS: dict[str, Callable[[], list[Variant]]] = {
    "tasks": task_variants,
    "speed": list,
    "lexical": lexical_grid,
    "hybrid": hybrid_grid,
    "models": model_variants,
    "recheck": recheck_variants,
    "bm25f": bm25f_variants,
    "final": final_variants,
}


# --- embeddings: one batch per model, cached on disk ---------------------------------------


class CachedEncoder:
    """Answers ``encode`` from precomputed vectors (keyed by text), else asks the real encoder."""

    def __init__(self, inner: Any, vectors: dict[str, Any]) -> None:
        self.inner, self.vectors = inner, vectors
        self.model_id, self.dim = inner.model_id, inner.dim
        self.model_ids = (inner.model_id,)

    def encode(self, texts: list[str], **kwargs: Any) -> Any:
        import numpy as np

        if all(t in self.vectors for t in texts):
            return np.stack([self.vectors[t] for t in texts])
        kwargs.pop("model_id", None)  # one model per benchmark encoder
        return self.inner.encode(texts, **kwargs)


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def embed_all(encoder: Any, name: str, texts: Sequence[str]) -> tuple[dict[str, Any], float, int]:
    """Vectors of ``texts``; those not in ``bench/out/embed_<name>.npz`` are computed (seconds, count).

    The cache records the encoder's ``model_id`` and is used only by the same model: another model
    (new weights, another companion weight) under the same name starts it afresh, instead of ranking
    its tools' new vectors against the old model's query vectors.
    """
    import numpy as np

    path = OUT / f"embed_{name}.npz"
    cached: dict[str, Any] = {}
    if path.is_file():
        data = np.load(path)
        if "model" in data.files and str(data["model"]) == encoder.model_id:
            cached = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))
    todo = sorted({t for t in texts if _key(t) not in cached})
    t0 = time.perf_counter()
    if todo:
        vectors = encoder.encode(todo)
        cached.update({_key(t): v for t, v in zip(todo, vectors, strict=True)})
        OUT.mkdir(parents=True, exist_ok=True)
        keys = sorted(cached)
        stacked = np.stack([cached[k] for k in keys])
        np.savez(path, keys=np.array(keys), vectors=stacked, model=np.array(encoder.model_id))
    seconds = time.perf_counter() - t0
    return {t: cached[_key(t)] for t in set(texts)}, seconds, len(todo)


def unit_texts(catalogs: Sequence[Catalog], variants: Sequence[Variant]) -> list[str]:
    splitters = {cfg.clauses for _, cfg, model in variants if model is not None}
    texts: list[str] = []
    for catalog in catalogs:
        for qs in catalog.sets.values():
            for query, _ in qs.queries:
                q = query[:MAX_QUERY]
                texts.append(q)
                for s in splitters:
                    texts.extend(split_clauses(q, s))
    return texts


# --- ranking -------------------------------------------------------------------------------


def with_vectors(index: SearchIndex, docs: Sequence[SearchDoc], encoder: Any, cache: dict[str, Any]) -> SearchIndex:
    """``index`` with every tool embedded by ``encoder`` (the tool texts are cached per catalog)."""
    import base64

    by_key = {(d.server, d.tool, d.path): d for d in docs}
    texts = [embed_text(by_key[(e.server, e.tool, e.path)]) for e in index.entries]
    missing_texts = [t for t in texts if t not in cache]
    if missing_texts:
        cache.update(zip(missing_texts, encoder.encode(missing_texts), strict=True))
    encoded = [base64.b64encode(cache[t].astype("<f2").tobytes()).decode("ascii") for t in texts]
    index._dense = DenseVectors(model=encoder.model_id, dim=encoder.dim, encoded=encoded)
    return index


def ranker(index: SearchIndex) -> Callable[[str], list[str]]:
    def rank(query: str) -> list[str]:
        try:
            return [f"{h.server}.{h.tool}" for h in index.search(query, limit=10)]
        except SearchError:
            return []

    return rank


def model_cost(encoder: Any, catalogs: Sequence[Catalog]) -> dict[str, float]:
    """CPU cost of a model: one query embedded on its own (median of 50), and the 527-tool catalog."""
    queries = [q for q, _ in catalogs[0].sets["tune single"].queries[:50]]
    times = []
    for q in queries:
        t = time.perf_counter()
        encoder.encode([q])
        times.append(time.perf_counter() - t)
    tools = [embed_text(d) for d in catalogs[1].docs]
    t = time.perf_counter()
    encoder.encode(tools)
    return {
        "query_ms_p50": round(statistics.median(times) * 1000, 2),
        "catalog_527_s": round(time.perf_counter() - t, 1),
    }


def evaluate(
    catalogs: Sequence[Catalog], variants: Sequence[Variant], sets: str, *, cost: bool = False
) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, Any]]:
    from tool_tree.search import _dense

    results: dict[str, dict[str, dict[str, float]]] = {}
    notes: dict[str, Any] = {}
    encoders: dict[str, CachedEncoder] = {}
    tool_vectors: dict[str, dict[str, Any]] = {}
    for name in sorted({m for _, _, m in variants if m is not None}):
        candidate = next(c for c in CANDIDATES if c.name == name)
        why = missing(candidate)
        if why is not None:
            notes[name] = f"skipped: {why}"
            continue
        t0 = time.perf_counter()
        inner = load(candidate)
        load_s = time.perf_counter() - t0
        vectors, seconds, count = embed_all(inner, name, unit_texts(catalogs, variants))
        notes[name] = {"load_s": round(load_s, 2), "embedded_queries": count, "embed_s": round(seconds, 1)}
        if cost:
            notes[name] |= model_cost(inner, catalogs)
        encoders[name] = CachedEncoder(inner, vectors)
        tool_vectors[name] = {}
    for label, cfg, model in variants:
        if model is not None and model not in encoders:
            continue
        row: dict[str, dict[str, float]] = {}
        for catalog in catalogs:
            index = build_index(catalog.docs, cfg)
            if model is not None:
                index = with_vectors(index, catalog.docs, encoders[model], tool_vectors[model])
                _dense._encoder = encoders[model]  # type: ignore[assignment]  # the bench answers from its cache
            rank = ranker(index)
            for set_name, qs in catalog.sets.items():
                if sets != "all" and not set_name.startswith(sets):
                    continue
                row[f"{catalog.name} {set_name}"] = recall(rank, qs)
            _dense._encoder = None
        results[label] = row
        print(f"  {label:48s} " + " ".join(f"{r['R@5']:.3f}" for r in row.values()), flush=True)
    return results, notes


def print_table(results: dict[str, dict[str, dict[str, float]]]) -> None:
    columns = list(next(iter(results.values())).keys())
    base = results[next(iter(results))]
    print("\nRecall@5 per need (bold-free; * = below the first row, plain BM25, on that set)")
    print(f"{'variant':48s} | " + " | ".join(f"{c[:22]:>22s}" for c in columns))
    for label, row in results.items():
        cells = []
        for c in columns:
            v = row[c]["R@5"]
            cells.append(f"{v:21.3f}{'*' if v < base[c]['R@5'] - 1e-9 else ' '}")
        print(f"{label:48s} | " + " | ".join(cells))
    print("sizes: " + ", ".join(f"{c}: {base[c]['queries']} queries / {base[c]['needs']} needs" for c in columns))


def mean_r5(row: dict[str, dict[str, float]]) -> float:
    """The mean R@5 of one variant's sets."""
    import numpy as np

    return float(np.mean([r["R@5"] for r in row.values()]))


def print_cells(
    results: dict[str, dict[str, dict[str, float]]],
    width: int,
    cell: int,
    verdicts: dict[str, str] | None = None,
    last: str = "",
) -> None:
    """Each variant's R@1/R@5/R@10 per set and its mean R@5 (its label padded to ``width`` characters, a set's
    cell to ``cell``, the set's name cut to it), and its verdict after them, headed ``last``, when ``verdicts``
    are given; the sets' sizes are plain BM25's row's."""
    base = results["plain BM25"]
    columns = list(base)
    tail = "" if verdicts is None else f" | {last}"
    print(f"\n{'variant':{width}s} | " + " | ".join(f"{c[:cell]:>{cell}s}" for c in columns) + f" |   mean{tail}")
    for label, row in results.items():
        cells = [f"{r['R@1']:.3f}/{r['R@5']:.3f}/{r['R@10']:.3f}".rjust(cell) for r in row.values()]
        verdict = "" if verdicts is None else f" | {verdicts.get(label, '')}"
        print(f"{label:{width}s} | " + " | ".join(cells) + f" | {mean_r5(row):.3f}{verdict}")
    print("cells: R@1/R@5/R@10; sizes: " + ", ".join(f"{c} {base[c]['needs']} needs" for c in columns))


# --- speed ---------------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def build_and_load(docs: list[SearchDoc], embeddings: bool) -> tuple[SearchIndex, dict[str, float]]:
    """The index of ``docs`` as a query loads it from disk, with build time, size and load time."""
    t = time.perf_counter()
    index = build_index(docs, embeddings=embeddings)
    out = {"build_s": time.perf_counter() - t}
    text = index.to_json()
    out["index_bytes"] = len(text.encode("utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "search_index.json").write_text(text, encoding="utf-8")
        loads = []
        for _ in range(10):
            t = time.perf_counter()
            index = SearchIndex.load(Path(tmp))
            loads.append(time.perf_counter() - t)
    out["load_ms_p50"] = statistics.median(loads) * 1000
    return index, out


def interleaved(index: SearchIndex, setups: dict[str, Callable[[], object]], queries: list[str]) -> dict[str, Any]:
    """Query latency under each setup (called before each query), the setups interleaved query by query
    (so a busy machine slows them alike)."""
    times: dict[str, list[float]] = {name: [] for name in setups}
    index.search("warm up")
    for q in queries:
        for name, setup in setups.items():
            setup()
            t = time.perf_counter()
            index.search(q, limit=5)
            times[name].append(time.perf_counter() - t)
    return {
        name: {"p50_ms": percentile(v, 0.5) * 1000, "p90_ms": percentile(v, 0.9) * 1000, "queries": len(v)}
        for name, v in times.items()
    }


def latency(index: SearchIndex, configs: dict[str, RankingConfig], queries: list[str]) -> dict[str, dict[str, float]]:
    """Query latency of each ranking over the same index."""
    try:
        return interleaved(index, {n: partial(setattr, index, "_config", c) for n, c in configs.items()}, queries)
    finally:
        index._config = DEFAULT


THREAD_POLICIES: dict[str, Callable[[], int | None]] = {
    "OpenBLAS threads": lambda: None,
    "one thread": lambda: 1,
    "by load (default)": _blas.query_threads,
}


def thread_policies(index: SearchIndex, queries: list[str]) -> dict[str, Any]:
    """Hybrid query latency (new default) under each of `THREAD_POLICIES`, with the load average before
    and after and how often the default chose one thread."""
    loads = [os.getloadavg()[0]]
    chosen: list[bool] = []

    def by_load() -> None:
        _dense.query_threads = _blas.query_threads
        chosen.append(_blas.query_threads() == 1)

    setups = {n: partial(setattr, _dense, "query_threads", policy) for n, policy in THREAD_POLICIES.items()}
    setups["by load (default)"] = by_load
    try:
        times = interleaved(index, setups, queries)
    finally:
        _dense.query_threads = _blas.query_threads
    loads.append(os.getloadavg()[0])
    return {"cores": os.cpu_count(), "load_before_after": loads,
            "default_chose_one_thread": sum(chosen) / len(chosen), **times}  # fmt: skip


def packing(index: SearchIndex, queries: list[str]) -> dict[str, Any]:
    """Hybrid query latency (new default) with a query and its clauses embedded as one packed sequence
    (the default) and padded to the longest of them in one batch (before), interleaved."""
    from tool_tree.search import _encoder

    setups = {"packed (default)": partial(setattr, _encoder, "PACK_TOKENS", _encoder.PACK_TOKENS),
              "padded (before)": partial(setattr, _encoder, "PACK_TOKENS", 0)}  # fmt: skip
    real = _encoder.PACK_TOKENS
    try:
        return interleaved(index, setups, queries)
    finally:
        _encoder.PACK_TOKENS = real


def run_speed(catalog: Catalog, queries: list[str], hybrid: bool) -> dict[str, Any]:
    report: dict[str, Any] = {}
    rankings = {"new default": DEFAULT, "without clauses": replace(DEFAULT, clauses="none"), "old default": OLD_DEFAULT}
    modes = [("lexical", False), ("hybrid", True)] if hybrid else [("lexical", False)]
    for mode, embeddings in modes:
        index, sizes = build_and_load(catalog.docs, embeddings)
        report[mode] = {**sizes, "latency": latency(index, rankings, queries)}
        if embeddings:
            report[mode]["packing"] = packing(index, queries)
            report[mode]["blas_threads"] = thread_policies(index, queries)
        if not embeddings:
            report["regex_ms"] = regex_times(index)
    big = [replace(d, server=f"{d.server}_{i}", package=f"{d.package}_{i}") for i in range(19) for d in catalog.docs]
    t = time.perf_counter()
    big_index = build_index(big[:10_000])
    report["build_10000_s"] = time.perf_counter() - t
    report["index_bytes_10000"] = len(big_index.to_json().encode("utf-8"))
    print(f"\n{catalog.name} catalog: {len(catalog.docs)} tools, {len(queries)} queries")
    for mode, _ in modes:
        r = report[mode]
        print(
            f"  {mode:7s} build {r['build_s'] * 1000:8.1f} ms  index {r['index_bytes'] / 1024:6.0f} KiB  "
            f"load p50 {r['load_ms_p50']:6.1f} ms"
        )
        for name, lat in r["latency"].items():
            print(f"          {name:16s} query p50 {lat['p50_ms']:7.2f} ms  p90 {lat['p90_ms']:7.2f} ms")
        for name, lat in r.get("packing", {}).items():
            print(f"          {name:16s} query p50 {lat['p50_ms']:7.2f} ms  p90 {lat['p90_ms']:7.2f} ms")
        if "blas_threads" in r:
            b = r["blas_threads"]
            before, after = b["load_before_after"]
            share = 100 * b["default_chose_one_thread"]
            print(f"          query embedding, BLAS threads ({b['cores']} cores, load {before:.1f} → {after:.1f}; "
                  f"the default chose one thread for {share:.0f} % of queries):")  # fmt: skip
            for name in THREAD_POLICIES:
                print(f"            {name:18s} query p50 {b[name]['p50_ms']:7.2f} ms  p90 {b[name]['p90_ms']:7.2f} ms")
    mib = report["index_bytes_10000"] / 2**20
    print(f"  10,000 tools (lexical): build {report['build_10000_s']:.2f} s, {mib:.1f} MiB")
    print("  regex mode, median of 5 (ms): " + ", ".join(f"{p} {ms:.1f}" for p, ms in report["regex_ms"].items()))
    return report


CATASTROPHIC = [".*.*.*.*§", "(.*a){12}x", "(a|aa)+$", r"(\w+\s?)*$", "(x+x+)+y", "get_.*", "search|find"]
"""Patterns that backtracked for seconds to minutes under Python's ``re``, and two ordinary ones."""


def regex_times(index: SearchIndex) -> dict[str, float]:
    out: dict[str, float] = {}
    for pattern in CATASTROPHIC:
        times = []
        for _ in range(5):
            t = time.perf_counter()
            index.search(pattern, regex=True, limit=5)
            times.append(time.perf_counter() - t)
        out[pattern] = statistics.median(times) * 1000
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid", choices=sorted(GRIDS), default="final")
    parser.add_argument("--sets", choices=("tune", "held", "all"), help="default: tune for grids, all otherwise")
    parser.add_argument("--step", type=int, default=1, help="use every STEP-th MetaTool single-tool row")
    parser.add_argument("--no-dense", action="store_true", help="skip every variant that needs embeddings")
    parser.add_argument("--no-speed", action="store_true", help="skip the speed measurements")
    args = parser.parse_args()
    sets = args.sets or ("tune" if args.grid in ("lexical", "hybrid", "recheck", "tasks", "bm25f") else "all")
    variants = [v for v in GRIDS[args.grid]() if not (args.no_dense and v[2] is not None)]
    catalogs = with_bfcl([metatool(args.step), livemcpbench()])
    print(f"grid {args.grid}, sets {sets}, MetaTool single rows every {args.step}")
    results, notes = evaluate(catalogs, variants, sets, cost=args.grid == "models")
    if results:
        print_table(results)
    for name, note in notes.items():
        print(f"  {name}: {note}")
    report: dict[str, Any] = {"grid": args.grid, "sets": sets, "step": args.step, "results": results, "models": notes}
    if not args.no_speed and args.grid in ("final", "speed"):
        hybrid = not args.no_dense and missing(CANDIDATES[0]) is None
        queries = [q for q, _ in catalogs[0].sets["held single"].queries[::20]][:400]
        queries += [q for qs in catalogs[1].sets.values() for q, _ in qs.queries]
        queries += [q for q, _ in catalogs[0].sets["held multi"].queries[:50]]
        report["speed"] = run_speed(catalogs[1], queries, hybrid)
    write_json(f"search_recall_{args.grid}{'_no_dense' if args.no_dense else ''}.json", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
