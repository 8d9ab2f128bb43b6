"""Hybrid search latency: the working tree's search code against an earlier commit's, interleaved.

Only ratios measured within one run mean anything on a shared machine, so both versions of
``tool_tree/search`` run in this one process, query by query, on the same index and queries: the
commit's copy is read with ``git show`` (nothing in the work tree or the repository changes),
renamed to a package of its own, and loaded beside the current one. Each query is timed under
both, the order alternating from query to query, and the pair is also checked for sameness: the
ranked tools (first ten) and the query's vectors (the largest difference per coordinate).

Queries: the 601 of ``search_recall.py --grid speed`` (400 held-out MetaTool rows, the 151 of the
LiveMCPBench sets: tasks, user tasks and the pre-filter's 37; 50 MetaTool multi-tool queries; 604 before the three
pre-filter tasks that repeat a tuning task left the held-out sets, 2026-12-07) over the
527-tool LiveMCPBench catalog. They only time code that ranks the same; nothing is chosen on them.

``--check`` compares instead of timing: the tuning sets of ``search_recall.py`` (MetaTool every 4th
single-tool row and its multi-tool queries, the LiveMCPBench tuning tasks, BFCL's tuning turns when
installed), each catalog embedded once and searched by both versions with their own encoders; it
counts the queries whose first 20 tools or their scores differ.

Run:  TOOLTREE_CORPORA=../shared/corpora .venv/bin/python bench/search_speed.py [--before HEAD] [--rounds 2]
      (writes bench/out/search_speed.json; with --check, bench/out/search_speed_check.json)
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import ROOT, write_json
from search_sets import livemcpbench, metatool, with_bfcl

from tool_tree.search import SearchIndex, _blas, _dense, build_index

PACKAGE = "tool_tree/search"


def load_before(rev: str, folder: Path) -> Any:
    """The search package as it was at ``rev``, importable as ``_search_before`` (its own module objects)."""
    names = subprocess.run(
        ["git", "ls-tree", "--name-only", f"{rev}:{PACKAGE}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    target = folder / "_search_before"
    target.mkdir()
    for name in names:
        if not name.endswith(".py"):
            continue
        text = subprocess.run(
            ["git", "show", f"{rev}:{PACKAGE}/{name}"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        (target / name).write_text(re.sub(r"\btool_tree\.search\b", "_search_before", text), encoding="utf-8")
    sys.path.insert(0, str(folder))
    return importlib.import_module("_search_before")


def queries() -> list[str]:
    """The queries of ``search_recall.py --grid speed``."""
    mt, live = metatool(1), livemcpbench()
    out = [q for q, _ in mt.sets["held single"].queries[::20]][:400]
    out += [q for qs in live.sets.values() for q, _ in qs.queries]
    out += [q for q, _ in mt.sets["held multi"].queries[:50]]
    return out


def check(before: Any) -> int:
    """Compare the two versions' first 20 hits (tools and scores) on every tuning set."""
    report: dict[str, Any] = {}
    for catalog in with_bfcl([metatool(4), livemcpbench()]):
        text = build_index(catalog.docs, embeddings=True).to_json()
        now_index, old_index = SearchIndex.from_json(text), before.SearchIndex.from_json(text)
        for name, qs in catalog.sets.items():
            if not name.startswith("tune"):
                continue
            tools = scores = 0
            largest = 0.0
            for q, _ in qs.queries:
                a, b = old_index.search(q, limit=20), now_index.search(q, limit=20)
                tools += [(h.server, h.tool) for h in a] != [(h.server, h.tool) for h in b]
                scores += [h.score for h in a] != [h.score for h in b]
                largest = max([largest, *(abs(x.score - y.score) for x, y in zip(a, b, strict=False))])
            label = f"{catalog.name} {name}"
            report[label] = {"queries": len(qs.queries), "tools differ": tools, "scores differ": scores,
                             "largest score difference": largest}  # fmt: skip
            print(f"  {label:32s} {len(qs.queries):5d} queries: first 20 tools differ on {tools}, "
                  f"their scores (4 decimals) on {scores}, by at most {largest:.4f}")  # fmt: skip
    write_json("search_speed_check.json", report)
    return 0


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def stats(values: list[float]) -> dict[str, float]:
    return {"p50_ms": percentile(values, 0.5) * 1000, "p90_ms": percentile(values, 0.9) * 1000, "n": len(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="HEAD", help="the commit whose search code is compared (default HEAD)")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the queries (default 2)")
    parser.add_argument("--threads", choices=("default", "one", "openblas"), default="default",
                        help="BLAS threads of the query embedding: by load (default), one, OpenBLAS's own")  # fmt: skip
    parser.add_argument("--check", action="store_true", help="compare the rankings on the tuning sets, no timing")
    args = parser.parse_args()
    live = livemcpbench()
    qs = queries()
    with tempfile.TemporaryDirectory() as tmp:
        before = load_before(args.before, Path(tmp))
        if args.check:
            return check(before)
        t = time.perf_counter()
        text = build_index(live.docs, embeddings=True).to_json()
        print(f"index of {len(live.docs)} tools built in {time.perf_counter() - t:.1f} s; {len(qs)} queries")
        now_index = SearchIndex.from_json(text)
        old_index = before.SearchIndex.from_json(text)
    policy = {"default": _blas.query_threads, "one": lambda: 1, "openblas": lambda: None}[args.threads]
    _dense.query_threads = policy
    before._dense.query_threads = policy
    now_enc, old_enc = _dense.get_encoder(), before._dense.get_encoder()
    model = now_index.dense.model if now_index.dense is not None else None

    # sameness: the rankings and the vectors
    differ: list[str] = []
    largest = 0.0
    for q in qs:
        a = [(h.server, h.tool) for h in old_index.search(q, limit=10)]
        b = [(h.server, h.tool) for h in now_index.search(q, limit=10)]
        if a != b:
            differ.append(q)
        units = now_index.units(q)
        diff = abs(old_enc.encode(units, model_id=model) - now_enc.encode(units, model_id=model)).max()
        largest = max(largest, float(diff))
    print(f"first ten tools differ on {len(differ)} of {len(qs)} queries; vectors differ by at most {largest:.1e}")

    runs = {"before": old_index, "now": now_index}
    times: dict[str, list[float]] = {name: [] for name in runs}
    multi: dict[str, list[float]] = {name: [] for name in runs}
    embed: dict[str, list[float]] = {name: [] for name in runs}
    encoders = {"before": old_enc, "now": now_enc}
    loads = [os.getloadavg()[0]]
    for index in runs.values():
        index.search("warm up")
    for r in range(args.rounds):
        for i, q in enumerate(qs):
            order = list(runs) if (i + r) % 2 == 0 else list(reversed(runs))
            units = now_index.units(q)
            for name in order:
                t = time.perf_counter()
                runs[name].search(q, limit=5)
                elapsed = time.perf_counter() - t
                times[name].append(elapsed)
                if len(units) > 1:
                    multi[name].append(elapsed)
            for name in order:
                t = time.perf_counter()
                encoders[name].encode(units, threads=policy(), model_id=model)
                embed[name].append(time.perf_counter() - t)
    loads.append(os.getloadavg()[0])
    report: dict[str, Any] = {
        "before": args.before,
        "threads": args.threads,
        "load_before_after": loads,
        "queries": len(qs),
        "rounds": args.rounds,
        "rankings_differ": len(differ),
        "largest_vector_difference": largest,
        "search": {n: stats(v) for n, v in times.items()},
        "search, queries of several clauses": {n: stats(v) for n, v in multi.items()},
        "query embedding": {n: stats(v) for n, v in embed.items()},
    }
    print(f"load {loads[0]:.1f} → {loads[1]:.1f}, BLAS threads: {args.threads}, {args.rounds} rounds")
    for part in ("search", "search, queries of several clauses", "query embedding"):
        a, b = report[part]["before"], report[part]["now"]
        print(
            f"  {part:36s} before p50 {a['p50_ms']:6.2f} p90 {a['p90_ms']:6.2f} ms | now p50 {b['p50_ms']:6.2f} "
            f"p90 {b['p90_ms']:6.2f} ms | now ÷ before p50 {b['p50_ms'] / a['p50_ms']:.2f} p90 "
            f"{b['p90_ms'] / a['p90_ms']:.2f}  ({a['n']} timings each)"
        )
    write_json("search_speed.json", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
