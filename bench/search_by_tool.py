"""How many tools each recall figure measures, and how wide it would be if its tools were drawn again.

Recall@5 per need counts queries, but the needs of one tool move together: a tool whose
description reads unlike its users' words misses most of its queries at once. MetaTool's
multi-tool halves are the extreme case (their 77 and 154 queries ask, in pairs, for only 7 and 8
distinct tools), so a figure of 0.75 there is closer to "6 of 8 tools found" than to 308
independent needs. This prints, per set, the needs, the distinct tools they name (a need is
grouped by its first acceptable tool), R@5 of the default ranking, the 95 % interval of R@5 over
2,000 resamples of the set's tools with replacement (each drawn tool brings all its needs: a
cluster bootstrap), and the tools with the most misses.

It reports, it chooses nothing: no setting is picked from its output, so it may read the held-out
halves.

Run:  .venv/bin/python bench/search_by_tool.py [--sets held] [--step 4]
      (reuses bench/search_recall.py's cache of query embeddings; the hybrid rows need
      ``make embeddings``; writes bench/out/search_by_tool.json)
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import search_models
import search_recall as sr
from _common import write_json
from search_sets import Catalog, QuerySet, livemcpbench, metatool, with_bfcl

from tool_tree.search import _dense, build_index

MODEL = "minilm-l6+wordllama"
RESAMPLES = 2000
K = 5


def per_tool(rank: Any, qs: QuerySet) -> dict[str, list[int]]:
    """``tool -> [needs met in the first K, needs]``, a need grouped by its first acceptable tool."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for query, needs in qs.queries:
        top = list(rank(query))[:K]
        for need in needs:
            row = counts[need[0]]
            row[0] += any(t in top for t in need)
            row[1] += 1
    return dict(counts)


def interval(counts: dict[str, list[int]], rng: random.Random) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of R@K with the tools resampled with replacement."""
    rows = list(counts.values())
    values = []
    for _ in range(RESAMPLES):
        drawn = [rows[rng.randrange(len(rows))] for _ in rows]
        values.append(sum(r[0] for r in drawn) / sum(r[1] for r in drawn))
    values.sort()
    return values[int(0.025 * RESAMPLES)], values[int(0.975 * RESAMPLES) - 1]


def report(catalogs: list[Catalog], sets: str, encoder: Any | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for catalog in catalogs:
        index = build_index(catalog.docs, sr.DEFAULT)
        if encoder is not None:
            index = sr.with_vectors(index, catalog.docs, encoder, {})
            _dense._encoder = encoder  # type: ignore[assignment]  # answers from the benchmark's cache
        rank = sr.ranker(index)
        for name, qs in catalog.sets.items():
            if sets != "all" and not name.startswith(sets):
                continue
            counts = per_tool(rank, qs)
            met, needs = sum(r[0] for r in counts.values()), sum(r[1] for r in counts.values())
            low, high = interval(counts, random.Random(0))
            worst = sorted(counts.items(), key=lambda kv: kv[1][0] - kv[1][1])[:3]
            label = f"{catalog.name} {name}"
            out[label] = {
                "needs": needs,
                "tools": len(counts),
                f"R@{K}": round(met / needs, 3),
                "interval": [round(low, 3), round(high, 3)],
                "most missed": {tool.split(".", 1)[1]: f"{m}/{n}" for tool, (m, n) in worst},
            }
            row = out[label]
            print(
                f"  {label:42s} {needs:6d} {len(counts):5d}  {row[f'R@{K}']:.3f}  [{low:.3f}, {high:.3f}]  "
                + ", ".join(f"{t} {v}" for t, v in row["most missed"].items()),
                flush=True,
            )
        _dense._encoder = None
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="held", choices=("tune", "held", "all"))
    parser.add_argument("--step", type=int, default=4, help="every step-th MetaTool single-tool row")
    args = parser.parse_args()
    catalogs = with_bfcl([metatool(args.step), livemcpbench()])
    result: dict[str, Any] = {}
    header = f"  {'set':42s} {'needs':>6s} {'tools':>5s}  R@{K}   95 % interval (tools resampled)  most missed"
    print("lexical default\n" + header)
    result["lexical"] = report(catalogs, args.sets, None)
    candidate = next(c for c in search_models.CANDIDATES if c.name == MODEL)
    why = search_models.missing(candidate)
    if why is None:
        inner = search_models.load(candidate)
        variants: list[sr.Variant] = [("default", sr.DEFAULT, MODEL)]
        vectors, _, _ = sr.embed_all(inner, MODEL, sr.unit_texts(catalogs, variants))
        print("hybrid default\n" + header)
        result["hybrid"] = report(catalogs, args.sets, sr.CachedEncoder(inner, vectors))
    else:
        print(f"hybrid rows left out: {why}")
    write_json("search_by_tool.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
