"""How long the pre-filter takes to find each tool's siblings (`agent.prefilter.sibling_map`, mode ``named``) for one
server of N tools, each description naming one other tool: the work every `tooltree agent` run with a pre-filter does
before its first request (a dry run too).

    python bench/prefilter_siblings.py [--runs 5] [--sizes 100,300,1000]

Writes ``bench/out/prefilter_siblings.json``.
"""

from __future__ import annotations

import argparse
import sys
import time

from _common import ROOT, positive_int, print_table, summary, write_json

sys.path.insert(0, str(ROOT))

from agent.prefilter import CatalogTool, sibling_map

WORDS = ["read", "write", "record", "list", "search", "update", "export", "import"]


def _server(size: int) -> list[CatalogTool]:
    """``size`` tools of one server, each described in 40 words and naming the next tool."""
    tools = []
    for i in range(size):
        text = " ".join([*(WORDS[(i * 7 + k) % 8] for k in range(40)), f"then tool_{(i + 1) % size:04d}"])
        tools.append(CatalogTool(f"big.tool_{i:04d}", f"big__tool_{i:04d}", "big", f"tool_{i:04d}", text))
    return tools


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=positive_int, default=5)
    parser.add_argument("--sizes", default="100,300,1000")
    args = parser.parse_args()
    rows, out = [], {}
    for size in (int(s) for s in args.sizes.split(",")):
        tools, times = _server(size), []
        for _ in range(args.runs):
            started = time.perf_counter()
            sibling_map(tools)
            times.append(time.perf_counter() - started)
        out[size] = summary(times)
        rows.append([size, f"{out[size]['median'] * 1000:.1f}"])
    print_table("sibling_map, one server", ["tools", "median ms"], rows)
    write_json("prefilter_siblings", {"runs": args.runs, "by_size": out})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
