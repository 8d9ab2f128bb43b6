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
- servers listed, failed (with the first errors), the slowest server's own start-up (from taking its
  start slot to being stopped; the default timeout is 30 s), and processes left behind (this process
  is a child subreaper, so anything ``generate-tree`` started and did not reap becomes its child).

``--sweep`` runs each start limit in turn on the same config (the default is chosen on a sweep of a
different server count than the one reported). ``--config PATH`` uses any config instead of the
catalog servers; ``--lone`` first lists each server alone, one at a time, with the SDK client (within
its own timeout) and then reports every server listed alone that ``generate-tree`` did not list (the
goal: none). Writes bench/out/start_servers.json.
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

from _catalog import write_config
from _common import ROOT, positive_int, print_table, write_json


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text(encoding="ascii").split("\n", 1)[0].split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    total = sum(fields[:8]) / ticks
    idle = (fields[3] + fields[4]) / ticks
    return total - idle, total


def become_subreaper() -> None:
    """Orphans of the processes this one starts become its children (Linux ``PR_SET_CHILD_SUBREAPER``),
    so a server that outlived ``generate-tree`` shows up as a child here."""
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:
        sys.exit(f"prctl(PR_SET_CHILD_SUBREAPER) failed: errno {ctypes.get_errno()}")


def leftovers() -> list[str]:
    """Live processes whose parent is this one (after the run: left behind by it), reaping dead ones."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    me, found = str(os.getpid()), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text(encoding="utf-8").rsplit(")", 1)[1].split()
            if fields[1] == me and fields[0] != "Z":
                found.append((stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200])
        except OSError:
            continue
    return found


def listed_alone(config: Path) -> dict[str, str | None]:
    """Each server listed on its own with the SDK client, one after another: name → error (None: listed)."""
    import anyio

    from tool_tree.config import load_config
    from tool_tree.connect import connect, list_tools_raw
    from tool_tree.stderr_log import StderrLog

    async def one(server: Any) -> str | None:
        log = StderrLog()  # keeps the servers' start-up chatter off this terminal
        try:
            with anyio.fail_after(server.timeout):
                async with connect(server, stderr=log) as conn:
                    await list_tools_raw(conn.client)
        except Exception as e:  # a benchmark: any failure is recorded, not raised
            return f"{type(e).__name__}: {str(e)[:200]} {log.tail(3)}"
        finally:
            log.close()
        return None

    outcome: dict[str, str | None] = {}
    for server in load_config(config).enabled_servers:
        outcome[server.name] = anyio.run(one, server)
        print(f"alone: {server.name}: {outcome[server.name] or 'listed'}", file=sys.stderr, flush=True)
    return outcome


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
    listed = sorted(s["name"] for s in summary["servers"] if s["status"] == "ok")
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
        "slowest_server_s": max((s["seconds"] for s in summary["servers"]), default=0.0),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "cpu_per_server_s": round(cpu / max(1, len(statuses)), 3),
        "ideal_s": round(ideal, 2),
        "ratio": round(wall / ideal, 2),
        "other_load_cores": round(other / wall, 2),
        "machine_idle_pct": round(100 * max(0.0, 1 - machine_busy / (total1 - total0)), 1),
        "load_avg_1m_before": round(load0, 2),
        "machine_cores": cores,
        "left_behind": leftovers(),
        "listed_names": listed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=120)
    parser.add_argument("--runs", type=positive_int, default=1)
    parser.add_argument("--jobs", type=int, default=None, help="pass --jobs N (default: generate-tree's default)")
    parser.add_argument("--sweep", default="", help="comma-separated start limits to run in turn instead")
    parser.add_argument("--out", default="start_servers.json", help="file name under bench/out/")
    parser.add_argument("--config", default=None, help="use this config instead of --servers catalog servers")
    parser.add_argument("--lone", action="store_true", help="first list each server alone with the SDK client")
    args = parser.parse_args()
    limits: list[int | None] = [int(x) for x in args.sweep.split(",")] if args.sweep else [args.jobs]

    become_subreaper()
    results = []
    alone: dict[str, str | None] = {}
    with tempfile.TemporaryDirectory(prefix="tooltree-start-") as tmp:
        folder = Path(tmp)
        config = Path(args.config).resolve() if args.config else write_config(folder, args.servers)[0]
        if args.lone:
            alone = listed_alone(config)
        for _ in range(args.runs):
            for jobs in limits:
                results.append(run_once(config, folder / "tree", jobs))
                brief = {k: v for k, v in results[-1].items() if k != "listed_names"}
                print(json.dumps(brief), file=sys.stderr, flush=True)
    rows = [
        [
            "default" if r["jobs"] is None else r["jobs"],
            f"{r['listed']}/{r['servers']}",
            r["slowest_server_s"],
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
    header = [
        "jobs",
        "listed",
        "slowest s",
        "wall s",
        "CPU s",
        "CPU÷cores s",
        "wall÷that",
        "other load",
        "idle",
        "left",
    ]
    title = f"Start-up of {args.config}" if args.config else f"Start-up of {args.servers} Python stdio servers"
    print_table(title, header, rows)
    for r in results:
        for e in r["errors"]:
            print(f"  jobs={r['jobs']}: {e}")
        if alone:
            r["listed_alone"] = sorted(n for n, e in alone.items() if e is None)
            r["listed_alone_but_not_together"] = sorted(set(r["listed_alone"]) - set(r["listed_names"]))
            print(f"  jobs={r['jobs']}: {len(r['listed_alone'])} listed alone, of those not listed together: "
                  f"{r['listed_alone_but_not_together'] or 'none'}")  # fmt: skip
    count = results[0]["servers"] if results else 0
    write_json(args.out, {"servers": count, "config": args.config, "measured_at": time.strftime("%Y-%m-%d %H:%M"),
                          "alone": alone, "runs": results})  # fmt: skip


if __name__ == "__main__":
    main()
