"""Catalog-adaptive post-processing of the hybrid's embeddings, fitted on the catalog alone; tuning sets.

Each transform is fitted on one catalog's own tool vectors (no query, no label), and applied to the
tools' and the queries' vectors before the cosine, separately to the two parts of the combined vector
(MiniLM's 384 columns and WordLlama's 256; each part back to unit length after, then joined with the
static weight as ``Encoder.encode`` does):

- ``center``: the catalog's mean tool vector subtracted (of both parts, or of one);
- ``abtt D``: "all-but-the-top" — centred, then the projections on the catalog's top D principal
  components removed (D 1, 2, 3, 5);
- ``sif a``: the static part re-embedded from WordLlama's token rows, each row weighted
  ``a / (a + p(token))`` with ``p`` the token's share of all tokens of the catalog's tool texts (a
  token the catalog lacks weighs 1), then the first singular vector of the tools' weighted vectors
  removed from tools and queries (``sif a, weights only``: without that removal);
- combinations of the best MiniLM-part and the best static-part transform on the tuning sets.

Everything ranks through ``SearchIndex.search`` with the default ranking: ``query_vectors`` is wrapped
so the index's tool matrix and the query's vectors (whole query and clauses) come back transformed.
Against the hybrid default and plain BM25 in the same run; R@1 / R@5 / R@10 per set. The rule: a
variant is a candidate when it raises the tuning mean of R@5 and is above plain BM25 on every set.
``--sets held`` runs the held-out sets instead (once, for the best candidate; ``--variants`` names
which). The cost: a query's transform (its units' vectors) timed alone, and hybrid searches over the
LiveMCPBench catalog with the benchmark's cached query vectors (the encoder's pass left out, so the
difference is all post-processing), interleaved with the default's.

Run:  OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/search_postprocess.py [--sets tune] [--step 16]
      (reuses bench/search_recall.py's cache of query embeddings; BFCL's sets need ``bfcl-eval``;
      writes bench/out/search_postprocess[_held].json)
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import math
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import search_models
import search_recall as sr
from _common import patched, write_json
from search_sets import Catalog, livemcpbench, metatool, with_bfcl

import tool_tree.search._index as index_module
from tool_tree.search import SearchIndex, _dense, build_index
from tool_tree.search._encoder import read_safetensors
from tool_tree.search._static import MAX_TOKENS, STATIC_WEIGHT, static_info

MODEL = "minilm-l6+wordllama"
MINILM_DIM = 384
"""The combined vector's first columns are MiniLM's, the rest WordLlama's."""
DIMS = (1, 2, 3, 5)
SIF_A = (1e-2, 1e-3, 1e-4)
"""SIF's ``a``: 1e-3 and 1e-4 as in the SIF paper; 1e-2 (milder) added after they lost."""

COSTED = ("both center", "both abtt 5")
"""Timed besides the best variant: centring, and the largest projection."""
REAL_QUERY_VECTORS = _dense.query_vectors
"""What ``_index`` calls (it imports it from ``_dense``)."""
REAL_WITH_VECTORS = sr.with_vectors
TOOL_CACHE: dict[str, Any] = {}
"""Tool texts' default vectors across variants."""


@dataclass(frozen=True)
class Part:
    """The transform of one part: centre, remove the top ``dims`` principal components (of the centred tools)."""

    center: bool = False
    dims: int = 0


@dataclass(frozen=True)
class Post:
    """A variant: the MiniLM part's and the static part's transforms, and SIF for the static part."""

    minilm: Part = Part()
    static: Part = Part()
    sif_a: float = 0.0
    """0: the static part as embedded; else SIF's ``a``."""
    sif_pc: bool = True
    """With SIF: remove the first singular vector of the tools' weighted static vectors."""

    @property
    def plain(self) -> bool:
        return self == Post()


class StaticRows:
    """WordLlama's tokenizer and table (as ``_static.StaticEncoder`` reads them), for re-embedding with weights."""

    def __init__(self) -> None:
        info = static_info()
        assert info is not None, "wordllama is not installed"
        tokenizer = importlib.import_module("tokenizers").Tokenizer.from_file(str(info.tokenizer))
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self._table = next(iter(read_safetensors(info.weights, float32=False).values()))
        self._ids: dict[str, list[int]] = {}

    def ids(self, text: str) -> list[int]:
        if text not in self._ids:
            ids = self._tokenizer.encode(text, add_special_tokens=False).ids[:MAX_TOKENS]
            self._ids[text] = [min(max(i, 0), len(self._table) - 1) for i in ids]
        return self._ids[text]

    def weighted(self, texts: Sequence[str], weight: dict[int, float]) -> Any:
        """Each text's mean of its tokens' rows, each row times ``weight`` (default 1), unit length."""
        out = np.zeros((len(texts), self._table.shape[1]), dtype=np.float32)
        for row, text in enumerate(texts):
            ids = self.ids(text)
            if ids:
                w = np.array([weight.get(i, 1.0) for i in ids], dtype=np.float32)
                out[row] = (w[:, None] * self._table[ids].astype(np.float32)).sum(axis=0) / len(ids)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), np.float32(1e-12))


def split(vectors: Any) -> tuple[Any, Any]:
    """The unit MiniLM and static parts of combined vectors."""
    m = vectors[:, :MINILM_DIM] * np.float32(math.sqrt(1.0 + STATIC_WEIGHT))
    s = vectors[:, MINILM_DIM:] * np.float32(math.sqrt((1.0 + STATIC_WEIGHT) / STATIC_WEIGHT))
    return m, s


def unit(x: Any) -> Any:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), np.float32(1e-12))


def join(m: Any, s: Any) -> Any:
    """Each part to unit length, joined as ``Encoder.encode`` joins them."""
    both = np.concatenate([unit(m), unit(s) * np.float32(math.sqrt(STATIC_WEIGHT))], axis=1)
    return (both / np.float32(math.sqrt(1.0 + STATIC_WEIGHT))).astype(np.float32)


class Fitted:
    """One part's transform fitted on a catalog's tool vectors: ``x ↦ (x − mean) − ((x − mean)·U)Uᵀ``."""

    def __init__(self, tools: Any, part: Part, remove: Any = None) -> None:
        """``remove``: a direction to project out first (SIF's first singular vector), or None."""
        self.remove = remove
        tools = self._remove(tools)
        self.mean = tools.mean(axis=0) if part.center or part.dims else np.zeros(tools.shape[1], np.float32)
        self.pcs = np.zeros((0, tools.shape[1]), np.float32)
        if part.dims:
            _, _, vt = np.linalg.svd(tools - self.mean, full_matrices=False)
            self.pcs = vt[: part.dims].astype(np.float32)

    def _remove(self, x: Any) -> Any:
        if self.remove is None:
            return x
        return x - np.outer(x @ self.remove, self.remove).astype(np.float32)

    def __call__(self, x: Any) -> Any:
        y = self._remove(x) - self.mean
        if len(self.pcs):
            y = y - (y @ self.pcs.T) @ self.pcs
        return y


class Catalogue:
    """What a variant fitted on one index: the transformed tool matrix and the transforms for queries."""

    def __init__(self, post: Post, matrix: Any, texts: list[str], rows: StaticRows) -> None:
        self.post = post
        m, s = split(matrix)
        self.weight: dict[int, float] = {}
        remove = None
        if post.sif_a:
            counts = Counter(itertools.chain.from_iterable(rows.ids(t) for t in texts))
            total = sum(counts.values())
            self.weight = {i: post.sif_a / (post.sif_a + n / total) for i, n in counts.items()}
            s = rows.weighted(texts, self.weight)
            if post.sif_pc:
                _, _, vt = np.linalg.svd(s, full_matrices=False)
                remove = vt[0].astype(np.float32)
        self.fit_m = Fitted(m, post.minilm)
        self.fit_s = Fitted(s, post.static, remove)
        # as a stored index would hold them: float16
        self.matrix = join(self.fit_m(m), self.fit_s(s)).astype(np.float16).astype(np.float32)

    def queries(self, units: Sequence[str], vectors: Any, rows: StaticRows) -> Any:
        m, s = split(vectors)
        if self.post.sif_a:
            s = rows.weighted(units, self.weight)
        return join(self.fit_m(m), self.fit_s(s))


class PostProcess:
    """The wrapped ``query_vectors`` and ``with_vectors``: per index, the variant's fitted transforms."""

    def __init__(self, rows: StaticRows) -> None:
        self.rows = rows
        self.post = Post()
        self.texts: dict[int, tuple[Any, list[str]]] = {}
        self.fitted: dict[tuple[int, Post], Catalogue] = {}

    def with_vectors(self, index: SearchIndex, docs: Any, encoder: Any, _: dict[str, Any]) -> SearchIndex:
        index = REAL_WITH_VECTORS(index, docs, encoder, TOOL_CACHE)
        by_key = {(d.server, d.tool, d.path): d for d in docs}
        texts = [_dense.embed_text(by_key[(e.server, e.tool, e.path)]) for e in index.entries]
        self.texts[id(index.dense)] = (index.dense, texts)  # the object kept, so its id stays its own
        return index

    def catalogue(self, dense: Any, matrix: Any) -> Catalogue:
        key = (id(dense), self.post)
        if key not in self.fitted:
            self.fitted[key] = Catalogue(self.post, matrix, self.texts[id(dense)][1], self.rows)
        return self.fitted[key]

    def query_vectors(self, dense: Any, units: Sequence[str]) -> tuple[Any, Any] | None:
        found = REAL_QUERY_VECTORS(dense, units)
        if found is None or self.post.plain:
            return found
        matrix, vectors = found
        fitted = self.catalogue(dense, matrix)
        return fitted.matrix, fitted.queries(units, vectors, self.rows)


@contextmanager
def variant(pp: PostProcess, post: Post) -> Iterator[None]:
    patches = {(sr, "with_vectors"): pp.with_vectors, (index_module, "query_vectors"): pp.query_vectors}
    pp.post = post
    try:
        with patched(patches):
            yield
    finally:
        pp.post = Post()


def label_of(post: Post) -> str:
    """A variant's label, e.g. ``minilm abtt 2 + static sif 0.001``."""
    if post.plain:
        return "hybrid default"

    def part(p: Part) -> str:
        return f"abtt {p.dims}" if p.dims else "center" if p.center else ""

    m = part(post.minilm)
    s = part(post.static)
    if post.sif_a:
        sif = f"sif {post.sif_a:g}{'' if post.sif_pc else ' weights only'}"
        s = f"{sif} + {s}" if s else sif
    if m and m == s:
        return f"both {m}"
    return " + ".join(x for x in (f"minilm {m}" if m else "", f"static {s}" if s else "") if x)


def single_variants() -> list[Post]:
    """(a), (b) and (c): each transform on both parts, on the MiniLM part, on the static part."""
    out: list[Post] = []
    for p in [Part(center=True)] + [Part(True, d) for d in DIMS]:
        out += [Post(minilm=p, static=p), Post(minilm=p), Post(static=p)]
    for a in SIF_A:
        out += [Post(sif_a=a), Post(sif_a=a, sif_pc=False)]
    return out


def combinations(means: dict[Post, float]) -> list[Post]:
    """(d): the best MiniLM-part transform with the best static-part one, and with the best SIF, by tuning mean."""
    minilm_only = [p for p in means if p.minilm != Part() and p.static == Part() and not p.sif_a]
    static_only = [p for p in means if p.minilm == Part() and (p.static != Part() or p.sif_a)]
    sif = [p for p in static_only if p.sif_a]
    if not minilm_only or not static_only:
        return []
    best_m = max(minilm_only, key=means.__getitem__).minilm
    out = [replace(max(static_only, key=means.__getitem__), minilm=best_m)]
    if sif:
        best_sif = max(sif, key=means.__getitem__)
        out.append(replace(best_sif, minilm=best_m))
        best_center = max((p for p in static_only if not p.sif_a), key=means.__getitem__)
        out.append(replace(best_sif, minilm=best_m, static=best_center.static))  # SIF, then centred / ABTT
    return list(dict.fromkeys(out))


def cost(pp: PostProcess, posts: list[Post], catalog: Catalog, encoder: sr.CachedEncoder) -> dict[str, Any]:
    """Per variant of ``posts``: a query's transform alone (its units' vectors, µs), and hybrid searches of the
    LiveMCPBench tuning queries with the cached vectors, the default and every variant interleaved query by
    query (ms)."""
    queries = [q for name, qs in catalog.sets.items() if name.startswith("tune") for q, _ in qs.queries]
    index = build_index(catalog.docs, sr.DEFAULT)
    with variant(pp, Post()):
        index = sr.with_vectors(index, catalog.docs, encoder, {})
    _dense._encoder = encoder  # type: ignore[assignment]  # answers from the benchmark's cache
    everything = [Post(), *posts]
    times: dict[str, list[float]] = {label_of(p): [] for p in everything}
    transform: dict[str, list[float]] = {label_of(p): [] for p in posts}
    try:
        for q in queries:
            units = index.units(q)
            assert index.dense is not None
            found = REAL_QUERY_VECTORS(index.dense, units)
            assert found is not None
            matrix, vectors = found
            for post in posts:
                with variant(pp, post):
                    fitted = pp.catalogue(index.dense, matrix)
                    t = time.perf_counter()
                    fitted.queries(units, vectors, pp.rows)
                    transform[label_of(post)].append(time.perf_counter() - t)
            for post in everything:
                with variant(pp, post):
                    t = time.perf_counter()
                    index.search(q, limit=5)
                    times[label_of(post)].append(time.perf_counter() - t)
    finally:
        _dense._encoder = None
    out: dict[str, Any] = {"queries": len(queries), "tools": len(catalog.docs)}
    for name, v in times.items():
        out[name] = {"search_p50_ms": round(sr.percentile(v, 0.5) * 1000, 3),
                     "search_p90_ms": round(sr.percentile(v, 0.9) * 1000, 3)}  # fmt: skip
        if name in transform:
            out[name]["transform_p50_us"] = round(sr.percentile(transform[name], 0.5) * 1e6, 1)
            out[name]["transform_p90_us"] = round(sr.percentile(transform[name], 0.9) * 1e6, 1)
    return out


def anisotropy(catalogs: list[Catalog], encoder: Any) -> dict[str, dict[str, Any]]:
    """Per catalog and part, how far the tools' vectors share a direction: the norm of their mean, their mean
    pairwise cosine, and the share of the centred variance along each of the top 5 principal components."""
    out: dict[str, dict[str, Any]] = {}
    for catalog in catalogs:
        index = REAL_WITH_VECTORS(build_index(catalog.docs, sr.DEFAULT), catalog.docs, encoder, TOOL_CACHE)
        assert index.dense is not None
        for name, x in zip(("minilm", "static"), split(index.dense.matrix()), strict=True):
            n, mean = len(x), x.mean(axis=0)
            pairwise = (float((x @ x.T).sum()) - n) / (n * n - n)
            var = np.linalg.svd(x - mean, compute_uv=False) ** 2
            out.setdefault(catalog.name, {})[name] = {
                "mean_norm": round(float(np.linalg.norm(mean)), 3),
                "mean_pairwise_cos": round(pairwise, 3),
                "top5_pc_variance_share": [round(float(v), 3) for v in var[:5] / var.sum()],
            }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sets", choices=("tune", "held"), default="tune")
    parser.add_argument("--step", type=int, default=16, help="use every STEP-th MetaTool single-tool row")
    parser.add_argument("--variants", nargs="*", help="only these variants (labels as printed), besides the references")
    args = parser.parse_args()
    catalogs = with_bfcl([metatool(args.step), livemcpbench()])
    pp = PostProcess(StaticRows())
    print(f"sets {args.sets}, MetaTool single rows every {args.step}; R@5 per set")

    results: dict[str, dict[str, dict[str, float]]] = {}
    row, notes = sr.evaluate(catalogs, [("plain BM25", sr.BASELINE, None)], args.sets)
    results.update(row)
    posts: dict[str, Post] = {}

    def run(post: Post) -> None:
        label = label_of(post)
        with variant(pp, post):
            row, more = sr.evaluate(catalogs, [(label, sr.DEFAULT, MODEL)], args.sets)
        results.update(row)
        notes.update(more)
        posts[label] = post

    def mean(label: str) -> float:
        return sr.mean_r5(results[label])

    run(Post())
    for post in single_variants():
        if args.variants is None or label_of(post) in args.variants:
            run(post)
    if args.variants is None:
        for post in combinations({p: mean(label) for label, p in posts.items() if not p.plain}):
            if label_of(post) not in results:
                run(post)
    if args.variants is not None:
        by_label = {label_of(p): p for p in single_variants()}
        for name in args.variants:
            if name not in results:  # a combination, named by its label
                run(by_label.get(name) or parse_combination(name))

    base = results["plain BM25"]
    verdicts: dict[str, str] = {}
    for label, post in posts.items():
        if post.plain:
            continue
        above = all(r["R@5"] > base[c]["R@5"] for c, r in results[label].items())
        gain = mean(label) - mean("hybrid default")
        if args.sets == "held":  # reported, not chosen on
            verdicts[label] = f"{gain:+.4f} mean against the default{'' if above else ', ≤ BM25 on a set'}"
        else:
            lost = f"lost ({gain:+.4f} mean{'' if above else ', ≤ BM25'})"
            verdicts[label] = f"candidate ({gain:+.4f})" if gain > 1e-9 and above else lost

    sr.print_cells(results, 44, 20, verdicts, "held out" if args.sets == "held" else "rule")

    candidates = [label for label, v in verdicts.items() if v.startswith("candidate")]
    best = max(candidates, key=mean) if candidates else max((k for k in posts if k != "hybrid default"), key=mean)
    timed = list(dict.fromkeys([best, *(label for label in COSTED if label in posts)]))
    candidate = next(c for c in search_models.CANDIDATES if c.name == MODEL)
    inner = search_models.load(candidate)
    vectors, _, _ = sr.embed_all(inner, MODEL, sr.unit_texts(catalogs, [("", sr.DEFAULT, MODEL)]))
    speed = cost(pp, [posts[label] for label in timed], catalogs[1], sr.CachedEncoder(inner, vectors))
    print(f"\ncost on LiveMCPBench ({speed['tools']} tools, {speed['queries']} tuning queries; cached query vectors,")
    print("so the encoder's pass is left out of every search time):")
    for name in ("hybrid default", *timed):
        s = speed[name]
        alone = f"  the query's transform alone p50 {s['transform_p50_us']} µs" if "transform_p50_us" in s else ""
        print(f"  {name:44s} search p50 {s['search_p50_ms']:6.3f} ms  p90 {s['search_p90_ms']:6.3f} ms{alone}")

    shared = anisotropy(catalogs, inner)
    print("\nthe catalogs' tool vectors: norm of the mean / mean pairwise cosine / variance share of the top 5 PCs")
    for name, parts in shared.items():
        for part, a in parts.items():
            shares = " ".join(f"{v:.3f}" for v in a["top5_pc_variance_share"])
            print(f"  {name:14s} {part:6s} {a['mean_norm']:.3f} / {a['mean_pairwise_cos']:.3f} / {shares}")

    report = {"sets": args.sets, "step": args.step, "results": results, "candidates": candidates,
              "means_R@5": {label: round(mean(label), 4) for label in results}, "verdicts": verdicts,
              "cost": speed, "anisotropy": shared,
              "models": notes}  # fmt: skip
    write_json(f"search_postprocess{'_held' if args.sets == 'held' else ''}.json", report)
    return 0


def parse_combination(label: str) -> Post:
    """The ``Post`` of a label that ``label_of`` printed for a combination (for ``--variants``)."""
    for post in itertools.product(
        [Part()] + [Part(True)] + [Part(True, d) for d in DIMS],
        [Part()] + [Part(True)] + [Part(True, d) for d in DIMS],
        (0.0, *SIF_A),
        (True, False),
    ):
        candidate = Post(minilm=post[0], static=post[1], sif_a=post[2], sif_pc=post[3])
        if label_of(candidate) == label:
            return candidate
    raise SystemExit(f"unknown variant: {label}")


if __name__ == "__main__":
    sys.exit(main())
