"""What leaving malformed tools out of a ``tools/list`` answer costs the host (`tool_tree.listing_check`).

Every answer to ``tools/list`` is now validated whole once more before the SDK validates it (the check's cost on a
well-formed listing); an answer the schema refuses is validated tool by tool, and the refused ones are left out.
Measured on the real catalog of 527 tools of 70 MCP servers (``livemcpbench/tools.json`` of the corpora), as one
listing, and on its largest server's; with one tool made malformed; and on a hostile listing of 10,000 tools, each
malformed. Printed as a table (median and p90 of ``--runs`` runs, ms) and written to
``bench/out/listing_check.json``.

    .venv/bin/python bench/listing_check.py --runs 20
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mcp_types as types
from _catalog import catalog_servers
from _common import positive_int, print_table, summary, write_json
from mcp.shared.message import SessionMessage

from tool_tree.listing_check import ListingCheck


def answered(tools: list[dict[str, Any]]) -> Callable[[], int]:
    """One listing through a fresh `ListingCheck`: the request noted, the answer checked; returns the tools kept."""

    def run() -> int:
        check = ListingCheck("bench")
        check.sent(types.JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/list"))
        item = check.received(SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=1, result={"tools": tools})))
        assert isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCResponse)
        return len(item.message.result["tools"])

    return run


def timed(run: Callable[[], int], runs: int) -> tuple[list[float], int]:
    kept, times = 0, []
    for _ in range(runs):
        start = time.perf_counter()
        kept = run()
        times.append((time.perf_counter() - start) * 1000)
    return times, kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=positive_int, default=20)
    args = parser.parse_args()
    by_server = [server["tools"] for server in catalog_servers()]
    everything = [t for tools in by_server for t in tools]
    largest = max(by_server, key=len)
    one_bad = [*everything[:-1], {**everything[-1], "annotations": {"readOnlyHint": "maybe"}}]
    hostile = [{"name": f"t{i}", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": "?"}} for i in
               range(10_000)]  # fmt: skip
    cases = [
        (f"all {len(everything)} tools, well formed", everything),
        (f"largest server ({len(largest)} tools), well formed", largest),
        (f"all {len(everything)} tools, one malformed", one_bad),
        ("10,000 tools, each malformed", hostile),
    ]
    rows, data = [], []
    for label, tools in cases:
        times, kept = timed(answered(tools), args.runs)
        s = summary(times)
        rows.append([label, len(tools), kept, f"{s['median']:.2f}", f"{s['p90']:.2f}"])
        data.append({"case": label, "tools": len(tools), "kept": kept, "ms": s})
    print_table(f"tools/list answers through the listing check ({args.runs} runs)",
                ["case", "tools", "kept", "median ms", "p90 ms"], rows)  # fmt: skip
    write_json("listing_check", {"runs": args.runs, "cases": data})


if __name__ == "__main__":
    main()
