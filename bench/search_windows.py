"""Sliding windows of a query's words as units ranked on their own, fused like clauses; tuning sets.

The clause fusion (``_query.split_clauses``, bench/RESULTS.md) ranks a query's clauses on their own,
but a need that no "and" or punctuation separates from the next ("… What's it going to be like
outside over the next few days, and what time is it over there right now?") has no ranking of its
own. Here the units are windows of ``w`` words (between spaces) with stride ``w // 2``, for queries
longer than ``w`` words (w 6, 8, 12). At most ``MAX_WINDOWS`` (8) per query: when the stride would
give more, 8 windows are spread evenly instead, the first at the query's start and the last at its
end (the stride grows, no word is dropped while ``8 · w`` covers the query). The window that would
end before the last word is followed by one ending at it. Each window is ranked like a clause and
fused with the whole query's ranking by best rank (``maxrank``, k 10), at weight 0.7, 0.8 or 0.9:

- ``instead``: windows replace the splitter's clauses (a query of ``w`` words or fewer is ranked whole);
- ``added``: windows after the clauses (these keep the default clause weight 0.8).

Both the hybrid (MiniLM + WordLlama, as ``make embeddings`` installs them) and the lexical ranking,
against their defaults and plain BM25 in the same run; R@1 / R@5 / R@10 per set and the mean R@5.
``SearchIndex.units`` is patched (the units the ranking scores), and the fusion's weights with it.
In use a query's units are embedded in one packed pass (``_encoder.PACK_TOKENS``); here the windows'
vectors are computed once and cached in bench/out/embed_windows_<model>.npz (a window attends only
to itself in a packed pass, so its vector is the one it has alone). The cost is given as units per
query and, unless ``--no-speed``, as hybrid query latency with the real encoder on the LiveMCPBench
tuning tasks and user tasks, interleaved query by query. ``--sets held`` runs the held-out sets
instead (once, for a variant that won on the tuning sets; ``--variants`` names which): here
``--sets held --no-speed --variants "hybrid windows 12 added w=0.8"``.

Run:  OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/search_windows.py [--sets tune] [--step 16]
      (reuses bench/search_recall.py's cache of query embeddings; BFCL's sets need ``bfcl-eval``;
      writes bench/out/search_windows[_held].json)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import search_models
import search_recall as sr
from _common import patched, write_json
from search_sets import Catalog, livemcpbench, metatool, with_bfcl

import tool_tree.search._index as index_module
from tool_tree.search import SearchIndex, _dense, build_index
from tool_tree.search._index import MAX_QUERY

MODEL = "minilm-l6+wordllama"
WIDTHS = (6, 8, 12)
WEIGHTS = (0.7, 0.8, 0.9)
MODES = ("instead", "added")
MAX_WINDOWS = 8

REAL_UNITS = SearchIndex.units
REAL_FUSE_BY_RANK = index_module.fuse_by_rank
REAL_FUSE_RANKINGS = index_module.fuse_rankings
REAL_EMBED_ALL = sr.embed_all
REAL_WITH_VECTORS = sr.with_vectors

TOOL_CACHE: dict[str, Any] = {}
"""Tool texts' vectors across variants and the speed run."""


def windows(text: str, width: int) -> list[str]:
    """Windows of ``width`` words of ``text`` with stride ``width // 2`` (at most ``MAX_WINDOWS``, spread evenly),
    or ``[]`` when it has ``width`` words or fewer."""
    words = text.split()
    n = len(words)
    if n <= width:
        return []
    starts = list(range(0, n - width + 1, max(1, width // 2)))
    if starts[-1] + width < n:
        starts.append(n - width)
    if len(starts) > MAX_WINDOWS:
        starts = sorted({round(i * (n - width) / (MAX_WINDOWS - 1)) for i in range(MAX_WINDOWS)})
    return [" ".join(words[s : s + width]) for s in starts]


class WindowUnits:
    """The patched ranking's state: which windows a query gets and the weight of each unit."""

    def __init__(self) -> None:
        self.width = 0
        self.mode = "added"
        self.weight = 0.8
        self.weights: list[float] | None = None
        self.units_seen: list[int] = []

    def units(self, index: SearchIndex, query: str, clauses: str | None = None) -> list[str]:
        units = REAL_UNITS(index, query, clauses)
        self.weights = None
        if self.width:
            text = units[0]
            kept = units[1:] if self.mode == "added" else []
            found = windows(text, self.width)
            self.weights = [1.0] + [index.config.clause_weight] * len(kept) + [self.weight] * len(found)
            units = [text, *kept, *found]
        self.units_seen.append(len(units))
        return units

    def _weights(self, weights: Sequence[float]) -> Sequence[float]:
        return self.weights if self.weights is not None and len(self.weights) == len(weights) else weights

    def fuse_by_rank(self, scores: Any, weights: Sequence[float], k: float) -> Any:
        return REAL_FUSE_BY_RANK(scores, self._weights(weights), k)

    def fuse_rankings(self, rankings: Any, weights: Sequence[float], k: float, how: str = "rrf") -> Any:
        return REAL_FUSE_RANKINGS(rankings, self._weights(weights), k, how)


STATE = WindowUnits()
WINDOW_TEXTS: list[str] = []
"""Every window of the queries being ranked, embedded into their own cache."""


def embed_all(encoder: Any, name: str, texts: Sequence[str]) -> tuple[dict[str, Any], float, int]:
    """``search_recall.embed_all`` of the units it knows, plus the windows (cached apart from its file)."""
    vectors, seconds, count = REAL_EMBED_ALL(encoder, name, texts)
    more, more_seconds, more_count = REAL_EMBED_ALL(encoder, f"windows_{name}", WINDOW_TEXTS)
    return {**more, **vectors}, seconds + more_seconds, count + more_count


def with_vectors(index: SearchIndex, docs: Any, encoder: Any, _: dict[str, Any]) -> SearchIndex:
    return REAL_WITH_VECTORS(index, docs, encoder, TOOL_CACHE)


@contextmanager
def window_ranking(width: int, mode: str, weight: float) -> Iterator[None]:
    """Rank with windows of ``width`` words (0: the default units) ``mode`` the clauses, at ``weight``."""

    def units(self: SearchIndex, query: str, clauses: str | None = None) -> list[str]:
        return STATE.units(self, query, clauses)

    patches = {
        (SearchIndex, "units"): units,
        (index_module, "fuse_by_rank"): STATE.fuse_by_rank,
        (index_module, "fuse_rankings"): STATE.fuse_rankings,
        (sr, "embed_all"): embed_all,
        (sr, "with_vectors"): with_vectors,
    }
    STATE.width, STATE.mode, STATE.weight = width, mode, weight
    try:
        with patched(patches):
            yield
    finally:
        STATE.width, STATE.weights = 0, None


def label_of(kind: str, width: int, mode: str, weight: float) -> str:
    return f"{kind} windows {width} {mode} w={weight}"


def queries_of(catalogs: Sequence[Catalog], sets: str) -> list[str]:
    return [q[:MAX_QUERY] for c in catalogs for n, qs in c.sets.items() if n.startswith(sets) for q, _ in qs.queries]


def units_per_query(catalogs: Sequence[Catalog], sets: str, width: int, mode: str) -> dict[str, float]:
    """Units a query is ranked as (the whole query, clauses, windows) over the sets, mean and largest."""
    index = build_index(catalogs[1].docs, sr.DEFAULT)
    STATE.units_seen = []
    with window_ranking(width, mode, 0.8):
        for q in queries_of(catalogs, sets):
            index.units(q)
    seen = STATE.units_seen
    return {"mean": round(statistics.mean(seen), 2), "max": max(seen), "queries": len(seen)}


def speed(catalog: Catalog, encoder: Any, configs: dict[str, tuple[int, str]]) -> dict[str, dict[str, float]]:
    """Hybrid query latency (ms) with the real encoder (units packed in one pass, as in use) of each
    configuration over the LiveMCPBench tuning tasks and user tasks, interleaved query by query."""
    queries = [q for n, qs in catalog.sets.items() if n.startswith("tune") for q, _ in qs.queries]
    with window_ranking(0, "added", 0.8):
        index = sr.with_vectors(build_index(catalog.docs, sr.DEFAULT), catalog.docs, encoder, TOOL_CACHE)
    _dense._encoder = encoder
    times: dict[str, list[float]] = {name: [] for name in configs}
    try:
        index.search("warm up")
        for q in queries:
            for name, (width, mode) in configs.items():
                with window_ranking(width, mode, 0.8):
                    t = time.perf_counter()
                    index.search(q, limit=5)
                    times[name].append(time.perf_counter() - t)
    finally:
        _dense._encoder = None
    out: dict[str, dict[str, float]] = {}
    for name, v in times.items():
        p50, p90 = sr.percentile(v, 0.5), sr.percentile(v, 0.9)
        out[name] = {"p50_ms": round(p50 * 1000, 1), "p90_ms": round(p90 * 1000, 1), "queries": len(v)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sets", choices=("tune", "held"), default="tune")
    parser.add_argument("--step", type=int, default=16, help="use every STEP-th MetaTool single-tool row")
    parser.add_argument("--variants", nargs="*", help="only these variants (labels as printed), besides the references")
    parser.add_argument("--no-speed", action="store_true", help="skip the latency measurement")
    args = parser.parse_args()
    catalogs = with_bfcl([metatool(args.step), livemcpbench()])
    WINDOW_TEXTS[:] = sorted({w for q in queries_of(catalogs, "") for width in WIDTHS for w in windows(q, width)})
    print(f"sets {args.sets}, MetaTool single rows every {args.step}; {len(WINDOW_TEXTS)} windows; R@5 per set")

    references: list[tuple[str, sr.Variant]] = [
        ("plain BM25", ("plain BM25", sr.BASELINE, None)),
        ("lexical default", ("lexical default", sr.DEFAULT, None)),
        ("hybrid default", ("hybrid default", sr.DEFAULT, MODEL)),
    ]
    chosen: list[tuple[str, tuple[int, str, float], sr.Variant]] = []
    for kind, model in (("hybrid", MODEL), ("lexical", None)):
        for width in WIDTHS:
            for mode in MODES:
                for weight in WEIGHTS:
                    label = label_of(kind, width, mode, weight)
                    if args.variants is None or label in args.variants:
                        cfg = replace(sr.DEFAULT, clause_weight=weight) if mode == "instead" else sr.DEFAULT
                        chosen.append((label, (width, mode, weight), (label, cfg, model)))

    results: dict[str, dict[str, dict[str, float]]] = {}
    with window_ranking(0, "added", 0.8):
        row, notes = sr.evaluate(catalogs, [v for _, v in references], args.sets)
    results.update(row)
    for _, (width, mode, weight), variant in chosen:
        with window_ranking(width, mode, weight):
            row, _ = sr.evaluate(catalogs, [variant], args.sets)
        results.update(row)

    def mean(label: str) -> float:
        return sr.mean_r5(results[label])

    base = results["plain BM25"]
    verdicts: dict[str, str] = {}
    for label in results:
        if " windows " not in label:
            continue
        default = "hybrid default" if label.startswith("hybrid") else "lexical default"
        above = all(r["R@5"] > base[c]["R@5"] for c, r in results[label].items())
        gain = mean(label) - mean(default)
        if args.sets == "held":  # reported, not chosen on
            verdicts[label] = f"{gain:+.4f} mean against the default{'' if above else ', ≤ BM25 on a set'}"
        else:
            lost = f"lost ({gain:+.3f} mean{'' if above else ', ≤ BM25'})"
            verdicts[label] = "wins" if gain > 1e-9 and above else "level" if abs(gain) <= 1e-9 and above else lost

    sr.print_cells(results, 36, 20, verdicts, "held out" if args.sets == "held" else "rule")

    units = {"default (clauses)": units_per_query(catalogs, args.sets, 0, "added")}
    for width in WIDTHS:
        for mode in MODES:
            units[f"windows {width} {mode}"] = units_per_query(catalogs, args.sets, width, mode)
    print("\nunits ranked per query (whole query + clauses/windows), mean / largest:")
    for name, u in units.items():
        print(f"  {name:22s} {u['mean']:5.2f} / {u['max']}")

    latency: dict[str, Any] = {}
    if not args.no_speed and "hybrid default" in results:
        candidate = next(c for c in search_models.CANDIDATES if c.name == MODEL)
        encoder = search_models.load(candidate)
        configs = {"default (clauses)": (0, "added")}
        configs |= {f"windows {w} {m}": (w, m) for w in WIDTHS for m in MODES}
        latency = speed(catalogs[1], encoder, configs)
        print("\nhybrid query latency, real encoder, LiveMCPBench tuning tasks + user tasks (interleaved):")
        for name, lat in latency.items():
            print(f"  {name:22s} p50 {lat['p50_ms']:7.1f} ms  p90 {lat['p90_ms']:7.1f} ms")

    report = {"sets": args.sets, "step": args.step, "max_windows": MAX_WINDOWS, "results": results,
              "means_R@5": {label: round(mean(label), 4) for label in results}, "verdicts": verdicts,
              "units_per_query": units, "latency": latency, "models": notes}  # fmt: skip
    write_json(f"search_windows{'_held' if args.sets == 'held' else ''}.json", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
