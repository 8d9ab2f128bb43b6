"""Benchmark the memory `tooltree serve` holds of its servers' listings as client sessions add up.

    python bench/serve_listing_memory.py [--runs 3] [--sessions 1 4 8] [--src DIR ...]

Each case is one process that makes `tooltree serve`'s tool server (`agent.serve.server.ToolServer`) for a config of
one `tests/servers/raw_server.py` server listing 3 tools of 800,000 empty objects (2.4 million JSON values, just
under one server's cap) and its tree (generated once, by another process), then opens N client sessions' runtimes
as serve makes them (`ToolServer._runtime`) and calls the server's tool once in each, so each session starts the
server and keeps its listing, as a client's passthrough call or script does. Reported: the process's peak resident
set (``VmHWM``, the servers' own memory not in it), its wall time and how the sessions' calls ended. No sandbox is
started. Median of ``--runs``, the cases interleaved.

``--src DIR`` measures another checkout of tooltree too (``git worktree add /tmp/before <commit>``), with this one's
virtualenv (its code first on the path). Writes bench/out/serve_listing_memory.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, checkouts, positive_int, print_table, write_json

RAW = ROOT / "tests" / "servers" / "raw_server.py"
RUN = """
import collections, contextlib, sys
from agent.serve.server import ToolServer
from agent.serve.settings import ServeSettings
from sandbox.config import SandboxConfig
from tooltree_cli.common import load

config = load(sys.argv[1])
app = ToolServer(config, sys.argv[2], settings=ServeSettings.from_config(config), sandbox_config=SandboxConfig())
ended = collections.Counter()
with contextlib.ExitStack() as sessions:
    for n in range(int(sys.argv[3])):
        runtime = sessions.enter_context(app._runtime(f"client{n}"))
        try:
            runtime.call_tool("dense", "t0", {})
            ended["ok"] += 1
        except Exception as e:
            ended[str(e)[:80]] += 1
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(f"VmHWM {hwm}", file=sys.stderr)
print(dict(ended))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=positive_int, default=3)
    parser.add_argument("--sessions", type=positive_int, nargs="+", default=[1, 4, 8])
    args, sources = checkouts(parser)
    results: dict[tuple[int, Path], list[dict[str, Any]]] = {(n, src): [] for n in args.sessions for src in sources}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        spec = folder / "dense.json"
        tools = [[{"name": f"t{i}", "inputSchema": {"type": "object", "x": [{}] * 800_000}}] for i in range(3)]
        spec.write_text(json.dumps({"pages": tools}), encoding="utf-8")
        config = folder / "tooltree.yaml"
        config.write_text(
            f"servers:\n  dense:\n    command: {json.dumps(sys.executable)}\n"
            f"    args: {json.dumps([str(RAW), str(spec)])}\n    timeout: 300\nserve:\n  warm: 0\n",
            encoding="utf-8",
        )
        tree = folder / "tree"  # generated once, outside the processes measured
        argv = ["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]
        subprocess.run([sys.executable, "-m", "tooltree_cli.main", *argv], cwd=ROOT, check=True, capture_output=True)
        for _ in range(args.runs):
            for n in args.sessions:
                for src in sources:  # the checkouts interleaved, so one run's ratios compare like with like
                    env = {**os.environ, "PYTHONPATH": str(src)}
                    started = time.perf_counter()
                    done = subprocess.run(
                        [sys.executable, "-c", RUN, str(config), str(tree), str(n)],
                        cwd=src, env=env, capture_output=True, text=True, timeout=1800,
                    )  # fmt: skip
                    seconds = time.perf_counter() - started
                    if done.returncode != 0:
                        raise SystemExit(f"{src}, {n} sessions: exited {done.returncode}\n{done.stderr[-3000:]}")
                    hwm = next(int(x.split()[1]) for x in done.stderr.splitlines() if x.startswith("VmHWM"))
                    ended = done.stdout.strip().splitlines()[-1]
                    results[n, src].append({"mib": hwm / 1024, "seconds": seconds, "ended": ended})
    rows, data = [], {}
    for (n, src), runs in results.items():
        mib, seconds = statistics.median(r["mib"] for r in runs), statistics.median(r["seconds"] for r in runs)
        label = "this checkout" if src == ROOT else str(src)
        rows.append([str(n), label, f"{mib:,.0f}", f"{seconds:.1f}", runs[-1]["ended"]])
        data.setdefault(str(n), {})[label] = {"peak_mib": mib, "seconds": seconds, "runs": runs}
    print_table(
        f"tooltree serve's peak memory with N client sessions of a server listing 2.4 million values "
        f"(median of {args.runs})",
        ["sessions", "checkout", "peak MiB", "s", "calls ended"],
        rows,
    )
    write_json("serve_listing_memory.json", {"runs": args.runs, "cases": data})


if __name__ == "__main__":
    main()
