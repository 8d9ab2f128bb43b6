"""Start-up of many Python stdio MCP servers in one config: ``generate-tree`` listing them all.

    python bench/start_servers.py [--servers 120] [--runs 1] [--jobs N] [--sweep 1,2,3,4]

The servers are `bench/servers/catalog_server.py` (the official SDK, ~1 CPU-s to import), each
serving one server's tools of the 527-tool LiveMCPBench catalog (70 servers), repeated and renamed
to ``--servers``. Each run is one whole ``tooltree generate-tree --embeddings off`` process with
default settings (``--jobs`` passes a start limit). Reported per run:

- wall time, and the CPU it needed: user + system time of the process and every server it started
  (the children's rusage, so each server's CPU is counted once it is reaped);
- CPU ÷ cores: the wall time a perfect scheduler would need on an idle machine; the goal is
  wall ≤ 1.3 × that;
- how busy the machine was with other work meanwhile (from ``/proc/stat``, minus this run's CPU), and
  how much of it stood idle: the machine is shared, so wall time alone says little; a start limit that
  keeps the cores busy leaves ~0 % idle while servers wait;
- servers listed, failed (with the first errors), and processes left behind (any process whose
  command line names this run's folder, after the run).

``--sweep`` runs each start limit in turn on the same config (the default is chosen on a sweep of a
different server count than the one reported). Writes bench/out/start_servers.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, corpus, print_table, write_json

SERVER = ROOT / "bench" / "servers" / "catalog_server.py"


def catalog_servers() -> list[dict[str, Any]]:
    """One entry per server of the catalog: name, description, raw tools."""
    data = json.loads(corpus("livemcpbench", "tools.json").read_text(encoding="utf-8"))
    out = []
    for entry in data:
        for name, body in entry["tools"].items():
            out.append({"name": name, "description": entry.get("description", ""), "tools": body.get("tools", [])})
    return out


def write_config(folder: Path, count: int) -> Path:
    """``count`` servers (the catalog's, repeated and renamed) and a tooltree.yaml starting them."""
    base = catalog_servers()
    lines = ["servers:"]
    for i in range(count):
        spec = dict(base[i % len(base)])
        spec["name"] = f"{spec['name']}-{i // len(base)}" if i >= len(base) else spec["name"]
        path = folder / f"server{i:03d}.json"
        path.write_text(json.dumps(spec), encoding="utf-8")
        lines += [
            f"  s{i:03d}-{spec['name']}:",
            f"    command: {json.dumps(sys.executable)}",
            f"    args: [{json.dumps(str(SERVER))}, {json.dumps(str(path))}]",
        ]
    config = folder / "tooltree.yaml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return config


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text(encoding="ascii").split("\n", 1)[0].split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    total = sum(fields[:8]) / ticks
    idle = (fields[3] + fields[4]) / ticks
    return total - idle, total


def leftovers(folder: Path) -> list[int]:
    """Live processes whose command line names ``folder``."""
    found = []
    needle = str(folder).encode()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if needle in (proc / "cmdline").read_bytes():
                state = (proc / "stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(proc.name))
        except OSError:
            continue
    return found


def run_once(config: Path, out: Path, jobs: int | None) -> dict[str, Any]:
    argv = [sys.executable, "-m", "tooltree_cli.main", "generate-tree", "--config", str(config), "--out", str(out)]
    argv += ["--embeddings", "off", "--json"]
    if jobs is not None:
        argv += ["--jobs", str(jobs)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cores = os.cpu_count() or 1
    before_usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy0, total0 = machine_cpu()
    load0 = os.getloadavg()[0]
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    wall = time.perf_counter() - started
    busy1, total1 = machine_cpu()
    after_usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after_usage.ru_utime - before_usage.ru_utime) + (after_usage.ru_stime - before_usage.ru_stime)
    if proc.returncode not in (0, 3):
        sys.exit(f"generate-tree exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    summary = json.loads(proc.stdout)
    statuses = [s["status"] for s in summary["servers"]]
    errors = sorted({s["error"] for s in summary["servers"] if s["error"]})
    machine_busy = busy1 - busy0
    other = max(0.0, machine_busy - cpu)  # CPU-seconds other work took meanwhile
    ideal = cpu / cores
    return {
        "jobs": jobs,
        "servers": len(statuses),
        "listed": statuses.count("ok"),
        "failed": statuses.count("failed"),
        "errors": errors[:5],
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "cpu_per_server_s": round(cpu / max(1, len(statuses)), 3),
        "ideal_s": round(ideal, 2),
        "ratio": round(wall / ideal, 2),
        "other_load_cores": round(other / wall, 2),
        "machine_idle_pct": round(100 * max(0.0, 1 - machine_busy / (total1 - total0)), 1),
        "load_avg_1m_before": round(load0, 2),
        "machine_cores": cores,
        "left_behind": leftovers(config.parent),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=120)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=None, help="pass --jobs N (default: generate-tree's default)")
    parser.add_argument("--sweep", default="", help="comma-separated start limits to run in turn instead")
    parser.add_argument("--out", default="start_servers.json", help="file name under bench/out/")
    args = parser.parse_args()
    limits: list[int | None] = [int(x) for x in args.sweep.split(",")] if args.sweep else [args.jobs]

    results = []
    with tempfile.TemporaryDirectory(prefix="tooltree-start-") as tmp:
        folder = Path(tmp)
        config = write_config(folder, args.servers)
        for _ in range(args.runs):
            for jobs in limits:
                results.append(run_once(config, folder / "tree", jobs))
                print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    rows = [
        [
            "default" if r["jobs"] is None else r["jobs"],
            f"{r['listed']}/{r['servers']}",
            r["wall_s"],
            r["cpu_s"],
            r["ideal_s"],
            f"{r['ratio']}×",
            r["other_load_cores"],
            f"{r['machine_idle_pct']} %",
            len(r["left_behind"]),
        ]
        for r in results
    ]
    header = ["jobs", "listed", "wall s", "CPU s", "CPU÷cores s", "wall÷that", "other load (cores)", "idle", "left"]
    print_table(f"Start-up of {args.servers} Python stdio servers", header, rows)
    for r in results:
        for e in r["errors"]:
            print(f"  jobs={r['jobs']}: {e}")
    write_json(args.out, {"servers": args.servers, "measured_at": time.strftime("%Y-%m-%d %H:%M"), "runs": results})


if __name__ == "__main__":
    main()
