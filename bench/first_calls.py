"""Benchmark the host CPU of the first call of each of many tools of one big server.

    python bench/first_calls.py [--runs 3] [--tools 20000] [--calls 200] [--src DIR ...]

A `tests/servers/raw_server.py` server lists ``--tools`` small tools (one string parameter each); its tree is
generated once. Each case is one process that opens a `Runtime` on that tree (as `tooltree exec` or a `tooltree
serve` client session does) and calls ``--calls`` distinct tools once each, through the bridge that checks each call's
arguments against the tool's stored definition. Reported: the process's CPU time (all its threads; the server's own
not in it) and wall time for those calls, and per call. Median of ``--runs``, the checkouts interleaved.

``--src DIR`` measures another checkout of tooltree too (``git worktree add /tmp/before <commit>``), with this one's
virtualenv (its code first on the path). Writes bench/out/first_calls.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import ROOT, checkouts, positive_int, print_table, run_in, write_json

RAW = ROOT / "tests" / "servers" / "raw_server.py"
RUN = """
import sys, time
from sandbox.host import Runtime
from tooltree_cli.common import load

config = load(sys.argv[1])
with Runtime(config, sys.argv[2]) as runtime:
    runtime.call_tool("many", "tool_0", {"a": "x"})  # the server started and listed, outside what is measured
    cpu, wall = time.process_time(), time.perf_counter()
    for i in range(1, int(sys.argv[3]) + 1):
        runtime.call_tool("many", f"tool_{i}", {"a": "x"})
    print(time.process_time() - cpu, time.perf_counter() - wall)
"""


def many_tools_tree(folder: Path, tools: int) -> tuple[Path, Path]:
    """A config in ``folder`` starting one `tests/servers/raw_server.py` server, ``many``, that lists ``tools`` small
    tools (``tool_0`` …, one string parameter ``a`` each), and the tree generated from it: the config and the tree."""
    spec = folder / "many.json"
    listed = [
        {"name": f"tool_{i}", "description": f"Does thing {i}.", "inputSchema": {"type": "object",
         "properties": {"a": {"type": "string"}}}}
        for i in range(tools)
    ]  # fmt: skip
    spec.write_text(json.dumps({"pages": [listed]}), encoding="utf-8")
    config = folder / "tooltree.yaml"
    config.write_text(
        f"servers:\n  many:\n    command: {json.dumps(sys.executable)}\n"
        f"    args: {json.dumps([str(RAW), str(spec)])}\n    timeout: 300\n",
        encoding="utf-8",
    )
    tree = folder / "tree"
    argv = ["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]
    subprocess.run([sys.executable, "-m", "tooltree_cli.main", *argv], cwd=ROOT, check=True, capture_output=True)
    return config, tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=positive_int, default=3)
    parser.add_argument("--tools", type=positive_int, default=20_000)
    parser.add_argument("--calls", type=positive_int, default=200)
    args, sources = checkouts(parser)
    results: dict[Path, list[dict[str, Any]]] = {src: [] for src in sources}
    with tempfile.TemporaryDirectory() as tmp:
        config, tree = many_tools_tree(Path(tmp), args.tools)
        for _ in range(args.runs):
            for src in sources:  # the checkouts interleaved, so one run's ratios compare like with like
                cpu, wall = map(float, run_in(src, RUN, config, tree, args.calls).split()[-2:])
                results[src].append({"cpu": cpu, "wall": wall})
    rows, data = [], {}
    for src, runs in results.items():
        cpu, wall = statistics.median(r["cpu"] for r in runs), statistics.median(r["wall"] for r in runs)
        label = "this checkout" if src == ROOT else str(src)
        per = 1000 * cpu / args.calls
        rows.append([label, f"{cpu:.2f}", f"{wall:.2f}", f"{per:.1f}"])
        data[label] = {"cpu_s": cpu, "wall_s": wall, "cpu_ms_per_call": per, "runs": runs}
    print_table(
        f"{args.calls} first calls of distinct tools of a server of {args.tools:,} tools (median of {args.runs})",
        ["checkout", "CPU s", "wall s", "CPU ms a call"],
        rows,
    )
    write_json("first_calls.json", {"runs": args.runs, "tools": args.tools, "calls": args.calls, "checkouts": data})


if __name__ == "__main__":
    main()
