"""Benchmark the Python memory each `tooltree serve` client session adds for a big tree, before any call.

    python bench/serve_session_memory.py [--runs 3] [--tools 20000] [--sessions 8] [--src DIR ...]

Each case is one process that makes `tooltree serve`'s tool server (`agent.serve.server.ToolServer`) for the tree of
one server listing ``--tools`` small tools (`first_calls.many_tools_tree`, generated once by another process) and
opens ``--sessions`` client sessions' runtimes one by one, as serve makes them (`ToolServer._runtime`), no call made.
Reported: the Python memory (`tracemalloc`) once the first session is open, and what each later one adds (median of
the later sessions). No server and no sandbox are started. Median of ``--runs``, the checkouts interleaved.

``--src DIR`` measures another checkout of tooltree too (``git worktree add /tmp/before <commit>``), with this one's
virtualenv (its code first on the path). Writes bench/out/serve_session_memory.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from _common import ROOT, checkouts, positive_int, print_table, run_in, write_json
from first_calls import many_tools_tree

RUN = """
import contextlib, json, sys, tracemalloc
from agent.serve.server import ToolServer
from agent.serve.settings import ServeSettings
from sandbox.config import SandboxConfig
from tooltree_cli.common import load

config = load(sys.argv[1])
tracemalloc.start()
app = ToolServer(config, sys.argv[2], settings=ServeSettings.from_config(config), sandbox_config=SandboxConfig())
held = []
with contextlib.ExitStack() as sessions:
    for n in range(int(sys.argv[3])):
        sessions.enter_context(app._runtime(f"client{n}"))
        held.append(tracemalloc.get_traced_memory()[0])
print(json.dumps(held))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=positive_int, default=3)
    parser.add_argument("--tools", type=positive_int, default=20_000)
    parser.add_argument("--sessions", type=positive_int, default=8)
    args, sources = checkouts(parser)
    if args.sessions < 2:
        parser.error("--sessions: at least 2 (what a session adds is measured from the second)")
    results: dict[Path, list[list[int]]] = {src: [] for src in sources}
    with tempfile.TemporaryDirectory() as tmp:
        config, tree = many_tools_tree(Path(tmp), args.tools)
        with config.open("a", encoding="utf-8") as f:
            f.write("serve:\n  warm: 0\n")  # no server started with the first session
        for _ in range(args.runs):
            for src in sources:  # the checkouts interleaved, so one run's ratios compare like with like
                results[src].append(json.loads(run_in(src, RUN, config, tree, args.sessions).splitlines()[-1]))
    rows, data = [], {}
    mib = 1024 * 1024
    for src, runs in results.items():
        first = statistics.median(run[0] for run in runs)
        added = statistics.median(b - a for run in runs for a, b in itertools.pairwise(run))
        last = statistics.median(run[-1] for run in runs)
        label = "this checkout" if src == ROOT else str(src)
        rows.append([label, f"{first / mib:.1f}", f"{added / mib:.2f}", f"{last / mib:.1f}"])
        data[label] = {"first_session_bytes": first, "each_later_session_bytes": added, "all_bytes": last, "runs": runs}
    print_table(
        f"Python memory of {args.sessions} serve sessions on a tree of {args.tools:,} tools (median of {args.runs})",
        ["checkout", "MiB, one session", "MiB each later session adds", f"MiB, {args.sessions} sessions"],
        rows,
    )
    result: dict[str, Any] = {"runs": args.runs, "tools": args.tools, "sessions": args.sessions, "checkouts": data}
    write_json("serve_session_memory.json", result)


if __name__ == "__main__":
    main()
