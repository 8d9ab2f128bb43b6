"""How long the pre-filter takes to find each tool's siblings (`agent.prefilter.sibling_map`, mode ``named``) for one
server of N tools, each description naming one other tool: the work every `tooltree agent` run with a pre-filter does
before its first request (a dry run too). ``--names dotted`` names the tools ``grp7.tool_0007`` (MCP allows the dot),
which are searched for by pattern, not looked up by word.

    python bench/prefilter_siblings.py [--runs 5] [--sizes 100,300,1000] [--names word|dotted]

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


def _server(size: int, names: str) -> list[CatalogTool]:
    """``size`` tools of one server, each described in 40 words and naming the next tool."""

    def name(i: int) -> str:
        return f"tool_{i:04d}" if names == "word" else f"grp{i % 50}.tool_{i:04d}"

    tools = []
    for i in range(size):
        text = " ".join([*(WORDS[(i * 7 + k) % 8] for k in range(40)), f"then {name((i + 1) % size)}."])
        native = f"big__{name(i).replace('.', '_')}"
        tools.append(CatalogTool(f"big.{name(i)}", native, "big", name(i), text))
    return tools


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=positive_int, default=5)
    parser.add_argument("--sizes", default="100,300,1000")
    parser.add_argument("--names", choices=["word", "dotted"], default="word")
    args = parser.parse_args()
    rows, out = [], {}
    for size in (int(s) for s in args.sizes.split(",")):
        tools, times = _server(size, args.names), []
        for _ in range(args.runs):
            started = time.perf_counter()
            sibling_map(tools)
            times.append(time.perf_counter() - started)
        out[size] = summary(times)
        rows.append([size, f"{out[size]['median'] * 1000:.1f}"])
    print_table(f"sibling_map, one server, {args.names} names", ["tools", "median ms"], rows)
    write_json("prefilter_siblings", {"runs": args.runs, "names": args.names, "by_size": out})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
