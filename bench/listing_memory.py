"""Benchmark the memory generate-tree holds while it lists hostile servers' tools (the value cap of a listing).

    python bench/listing_memory.py [--runs 3] [--src DIR ...]

Each case runs ``generate-tree --embeddings off`` in a fresh process against ``tests/servers/raw_server.py``
servers, which serve a listing as given, a tool a page (one message carries at most 1,000,000 values). Reported:
the peak resident set of the generate-tree process alone (its ``VmHWM``, read as it ends: the servers' own memory is
not in it), its wall time, and how the servers ended. Median of ``--runs``, the cases interleaved.

- ``15 × 990k``: 15 tools of 990,000 empty objects each, 15 pages, 60 MB of JSON (under the 64 MiB byte cap);
- ``3 × 800k``: 3 tools of 800,000, 2.4 million values: just under the value cap (`tool_tree.connect.MAX_LIST_VALUES`);
- each of them from 4 and 10 servers at once, and ``3 × 800k`` from 20 (every server's listing is held until all are
  listed: what the servers of one run hold together is bounded too, `tool_tree.held_values.MAX_HELD_VALUES`);
- the 527 real tools of the LiveMCPBench catalog as one server (when the corpora are there): what an honest listing
  costs.

``--src DIR`` measures another checkout of tooltree too (``git worktree add /tmp/before <commit>``), with this one's
virtualenv (its code first on the path), each case run on every checkout in turn, so the ratios come from one run.
Writes bench/out/listing_memory.json.
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

from _common import ROOT, checkouts, corpus, positive_int, print_table, write_json

RAW = ROOT / "tests" / "servers" / "raw_server.py"
RUN = """
import sys
from tooltree_cli.main import main
code = main(["generate-tree", "--config", sys.argv[1], "--out", sys.argv[2], "--embeddings", "off", "--json"])
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(f"VmHWM {hwm}", file=sys.stderr)
"""


SERVERS = {"15 × 990k": (1, 4, 10), "3 × 800k": (1, 4, 10, 20), "527 real tools": (1,)}
"""How many servers list each case at once."""


def dense(tools: int, values: int) -> dict[str, Any]:
    return {"pages": [[{"name": f"t{i}", "inputSchema": {"type": "object", "x": [{}] * values}}] for i in range(tools)]}


def real() -> dict[str, Any] | None:
    try:
        data = json.loads(corpus("livemcpbench", "tools.json").read_text(encoding="utf-8"))
    except (OSError, SystemExit):
        return None
    return {"pages": [[t for e in data for body in e["tools"].values() for t in body.get("tools", [])]]}


def config(folder: Path, spec: Path, servers: int) -> Path:
    lines = ["servers:"]
    for s in range(servers):
        lines += [
            f"  svc{s}:",
            f"    command: {json.dumps(sys.executable)}",
            f"    args: {json.dumps([str(RAW), str(spec)])}",
        ]
        lines.append("    timeout: 120")
    path = folder / f"{spec.stem}_{servers}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run(conf: Path, out: Path, src: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(conf), str(out)], cwd=src, env=env, capture_output=True, text=True, timeout=900
    )
    seconds = time.perf_counter() - started
    hwm = next(int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("VmHWM"))
    summary = json.loads(done.stdout)
    ended = sorted({s["status"] if s["status"] == "ok" else (s.get("error") or "")[:90] for s in summary["servers"]})
    return {"mib": hwm / 1024, "seconds": seconds, "ended": ended}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=positive_int, default=3)
    args, sources = checkouts(parser)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        specs = {"15 × 990k": dense(15, 990_000), "3 × 800k": dense(3, 800_000), "527 real tools": real()}
        cases: list[tuple[str, Path]] = []
        for name, spec in specs.items():
            if spec is None:
                print(f"{name}: skipped (no corpora)", file=sys.stderr)
                continue
            path = folder / f"{len(cases)}.json"
            path.write_text(json.dumps(spec), encoding="utf-8")
            for servers in SERVERS[name]:
                cases.append((f"{name}, {servers} server{'s' if servers > 1 else ''}", config(folder, path, servers)))
        results: dict[tuple[str, Path], list[dict[str, Any]]] = {(n, src): [] for n, _ in cases for src in sources}
        for _ in range(args.runs):
            for name, conf in cases:
                for src in sources:  # the checkouts interleaved, so one run's ratios compare like with like
                    results[name, src].append(run(conf, folder / "tree", src))
                    subprocess.run(["rm", "-rf", str(folder / "tree")], check=True)
    rows, data = [], {}
    for (name, src), runs in results.items():
        mib, seconds = statistics.median(r["mib"] for r in runs), statistics.median(r["seconds"] for r in runs)
        ended = "; ".join(e[:60] for e in runs[-1]["ended"])
        label = "this checkout" if src == ROOT else str(src)
        rows.append([name, label, f"{mib:,.0f}", f"{seconds:.1f}", ended])
        data.setdefault(name, {})[label] = {
            "peak_mib": mib,
            "seconds": seconds,
            "ended": runs[-1]["ended"],
            "runs": runs,
        }
    print_table(
        f"generate-tree's peak memory while it lists (median of {args.runs})",
        ["case", "checkout", "peak MiB", "s", "servers ended"],
        rows,
    )
    write_json("listing_memory.json", {"runs": args.runs, "cases": data})


if __name__ == "__main__":
    main()
