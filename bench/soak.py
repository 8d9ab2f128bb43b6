"""Soak the sandbox and the server pool, and measure what hostile scripts cost the host.

    python bench/soak.py [--only sandbox,pool,hostile] [--executions 1000] [--calls 10000] [--sessions 4]
                         [--recycle 50] [--pool-sessions 16] [--pool-calls 500] [--servers 10]

Three parts, each in its own table:

- **sandbox**: ``--sessions`` threads each run their share of the executions; every execution makes its
  share of the tool calls (relayed to an in-process `FunctionBridge` on the host); every ``--recycle``
  executions a thread closes its session and opens a new one, so container start and removal are
  soaked too. One execution in fifty also raises, and one in a hundred prints a megabyte.
- **pool**: ``--pool-sessions`` sessions at once, each making ``--pool-calls`` calls across ``--servers``
  real MCP servers through `McpBridge` and one `BackgroundPool` (`bench/_soak_pool.py`): calls lost
  or doubled (each server counts what it served), p50/p99 call latency timed inside the scripts, and
  the host's RSS sampled throughout.
- **hostile**: the host-side attacks of SECURITY.md, each in a fresh host process
  (`bench/_hostile.py`): peak host RSS and host CPU of one execution.

Reported (and required to be 0): containers left with the soak's label, child processes of this
process, file descriptors and threads above the baseline taken after a warm-up; calls lost. Host
memory growth (resident set, after the run minus after the warm-up) is reported as a number.

Needs a Docker engine and the image; the pool and hostile parts also the benchmark corpora (their
servers serve the LiveMCPBench catalog's tools). Containers carry ``tooltree.owner=$TOOLTREE_SANDBOX_OWNER``
(``tooltree-soak`` when it is not set); the script removes any left at the end (after counting them). Writes
bench/out/soak.json.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _common import ROOT, print_table, proc_status, summary, write_json
from _hostile import soak_owner

sys.path.insert(0, str(ROOT))

from sandbox import DockerBackend, Sandbox, SandboxConfig
from sandbox._docker import DockerEngine
from sandbox.bridge import FunctionBridge
from sandbox.image import build_image
from sandbox.prune import remove_containers


def label() -> str:
    """The label of the soak's sandboxes, by which it counts and removes them (its own run's only, when runs on one
    engine are given their own ``$TOOLTREE_SANDBOX_OWNER``)."""
    return f"tooltree.owner={soak_owner()}"


def child_processes() -> list[str]:
    """Live (non-zombie) processes whose parent is this one."""
    me = str(os.getpid())
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text(encoding="utf-8").rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me and fields[0] != "Z":
            found.append(stat.parent.name)
    return found


def snapshot(docker: DockerEngine) -> dict[str, Any]:
    gc.collect()
    return {
        "containers": len(docker.containers(label())),
        "processes": len(child_processes()),
        "fds": len(os.listdir("/proc/self/fd")),
        "threads": threading.active_count(),
        "thread_names": sorted(t.name for t in threading.enumerate()),
        "rss": proc_status("VmRSS"),
    }


def script(calls: int, n: int) -> str:
    lines = ["from tool_tree.runtime import call_tool", "total = 0"]
    lines += [f"for i in range({calls}):", "    total += len(call_tool('soak', 'echo', {'i': i}).text)"]
    if n % 100 == 99:
        lines.append("print('x' * (1 << 20))")
    if n % 50 == 49:
        lines.append("raise ValueError('planned failure')")
    lines.append("print(total)")
    return "\n".join(lines) + "\n"


def soak_sandbox(args: argparse.Namespace, docker: DockerEngine, backend: DockerBackend) -> tuple[dict[str, Any], bool]:
    """The sandbox soak (in-process bridge, recycled sessions); its figures and whether it passed."""
    calls_per_execution = max(1, args.calls // args.executions)
    served = 0
    served_lock = threading.Lock()

    def echo(server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        nonlocal served
        with served_lock:
            served += 1
        return {"content": [{"type": "text", "text": f"{tool} {arguments['i']}"}]}

    bridge = FunctionBridge(echo)
    # Warm-up: imports, thread pools and caches settle before the baseline is taken.
    with Sandbox(backend, tools=bridge) as sb:
        for n in range(5):
            sb.execute(script(calls_per_execution, n))
    served = 0
    before = snapshot(docker)

    durations: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()

    def soak(share: int, offset: int) -> None:
        done = 0
        while done < share:
            with Sandbox(backend, tools=bridge) as sb:
                for _ in range(min(args.recycle, share - done)):
                    n = offset + done
                    started = time.perf_counter()
                    result = sb.execute(script(calls_per_execution, n))
                    elapsed = time.perf_counter() - started
                    expected_error = n % 50 == 49
                    ok = (result.error == "ValueError: planned failure") if expected_error else result.ok
                    calls_ok = len(result.tool_calls) == calls_per_execution and all(c.ok for c in result.tool_calls)
                    with lock:
                        durations.append(elapsed)
                        if not (ok and calls_ok):
                            failures.append(f"execution {n}: {result.error} {len(result.tool_calls)} calls")
                    done += 1

    shares = [args.executions // args.sessions + (i < args.executions % args.sessions) for i in range(args.sessions)]
    offsets = [sum(shares[:i]) for i in range(args.sessions)]
    started = time.perf_counter()
    threads = [threading.Thread(target=soak, args=(s, o)) for s, o in zip(shares, offsets, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    after = snapshot(docker)
    leftover = remove_containers(docker, label=label())

    leaks = {key: after[key] - before[key] for key in ("containers", "processes", "fds", "threads")}
    growth_mib = (after["rss"] - before["rss"]) / (1 << 20)
    stats = summary(durations)
    rows = [
        ["executions", len(durations)],
        ["tool calls served", served],
        ["concurrent sessions", args.sessions],
        ["sessions opened", sum((s + args.recycle - 1) // args.recycle for s in shares)],
        ["failed executions", len(failures)],
        ["wall time (s)", f"{wall:.1f}"],
        ["execution median (ms)", f"{stats['median'] * 1000:.1f}"],
        ["execution p90 (ms)", f"{stats['p90'] * 1000:.1f}"],
        ["leaked containers", leaks["containers"]],
        ["leaked processes", leaks["processes"]],
        ["leaked file descriptors", leaks["fds"]],
        ["leaked threads", leaks["threads"]],
        ["host RSS before (MiB)", f"{before['rss'] / (1 << 20):.1f}"],
        ["host RSS after (MiB)", f"{after['rss'] / (1 << 20):.1f}"],
        ["host RSS growth (MiB)", f"{growth_mib:.1f}"],
    ]
    print_table("Soak: sandbox sessions", ["measure", "value"], rows)
    for line in failures[:10]:
        print("  ", line)
    if leaks["threads"]:
        print("   threads left:", sorted(set(after["thread_names"]) - set(before["thread_names"])))
    figures = {
        "executions": len(durations),
        "tool_calls": served,
        "sessions": args.sessions,
        "recycle": args.recycle,
        "failed_executions": len(failures),
        "wall_seconds": round(wall, 2),
        "execution_seconds": stats,
        "leaked": leaks,
        "containers_removed_after_counting": leftover,
        "rss_before_bytes": before["rss"],
        "rss_after_bytes": after["rss"],
        "rss_growth_mib": round(growth_mib, 2),
    }
    return figures, not failures and not any(leaks.values())


def soak_pool(
    args: argparse.Namespace, docker: DockerEngine, backend: DockerBackend, work: Path
) -> tuple[dict[str, Any], bool]:
    """Many sessions × many calls across real servers; its figures and whether no call was lost or leaked."""
    import _soak_pool
    from _catalog import write_config

    from tool_tree.config import load_config
    from tool_tree.pool import BackgroundPool

    config, names = write_config(work, args.servers, extra_tools=_soak_pool.SOAK_TOOLS)
    tree = work / "tree"
    generate(config, tree)
    with Sandbox(backend) as sb:  # the engine's events thread and connections start before the baseline
        sb.execute("print(1)")
    before = snapshot(docker)
    with BackgroundPool(load_config(config).servers) as pool:
        figures = _soak_pool.run(
            backend, tree, pool, names, sessions=args.pool_sessions, calls=args.pool_calls, rounds=args.pool_rounds
        )
    after = snapshot(docker)
    remove_containers(docker, label=label())
    figures["leaked"] = {key: after[key] - before[key] for key in ("containers", "processes", "fds", "threads")}
    lat, rss = figures["latency_ms"], figures["rss_mib"]
    rss_line = " / ".join(str(rss[k]) for k in ("start", "first_quarter_median", "last_quarter_median", "max", "end"))
    rows = [
        ["sessions × calls each", f"{args.pool_sessions} × {args.pool_calls} ({args.pool_rounds} executions each)"],
        ["servers", figures["servers"]],
        ["calls answered / expected", f"{figures['calls_answered']} / {figures['calls_expected']}"],
        ["calls the servers served", figures["calls_served_by_servers"]],
        ["wrong answers", figures["wrong_answers"]],
        ["wall time (s)", figures["wall_seconds"]],
        ["calls per second", figures["calls_per_second"]],
        ["call latency p50 / p90 / p99 / max (ms)", f"{lat['p50']} / {lat['p90']} / {lat['p99']} / {lat['max']}"],
        ["host RSS start / first quarter / last quarter / max / end (MiB)", rss_line],
        ["leaked containers, processes, fds, threads", " ".join(str(v) for v in figures["leaked"].values())],
    ]
    print_table("Soak: server pool under many sessions", ["measure", "value"], rows)
    for line in figures["failures"]:
        print("  ", line)
    if figures["leaked"]["threads"]:
        print("   threads left:", sorted(set(after["thread_names"]) - set(before["thread_names"])))
    lost = figures["calls_answered"] != figures["calls_expected"] or figures["wrong_answers"]
    doubled = figures["calls_served_by_servers"] != figures["calls_expected"]
    return figures, not (lost or doubled or figures["failures"] or any(figures["leaked"].values()))


def hostile(args: argparse.Namespace, work: Path) -> list[Any]:
    """Host cost of each hostile script, each in a fresh host process."""
    import _hostile
    from _catalog import write_config

    config, _ = write_config(work, args.servers, extra_tools=_hostile_tools())
    tree = work / "tree"
    generate(config, tree)
    only = set(args.cases.split(",")) if args.cases else set()
    results = _hostile.run_all(config, tree, deadline=args.deadline, only=only, log=lambda s: print(s, flush=True))
    rows = []
    for r in results:
        r["within_bounds"] = _hostile.within_bounds(r)
        saw = r.get("saw") or [None, r.get("crashed", "")[-200:] or f"killed after {r.get('killed_after_s')} s"]
        nxt = r.get("next_print_1") or r.get("next_session_error", "")
        rows.append(
            [
                r["case"],
                r.get("wall_s", f">{r.get('killed_after_s', '?')}"),
                r.get("host_cpu_s", "?"),
                r.get("host_peak_above_base_mib", "?"),
                r.get("host_peak_rss_mib", "?"),
                r.get("server_peak_rss_mib", "?"),
                r["within_bounds"],
                str(saw[0] or saw[1])[:70].replace("\n", " "),
                str(nxt)[:40] + (f" ({r['next_session_s']} s)" if "next_session_s" in r else ""),
            ]
        )
    header = ["case", "wall s", "host CPU s", "peak RSS +MiB", "peak RSS MiB", "server MiB", "within bounds"]
    header += ["what the script saw", "next session"]
    title = (
        f"Host cost per hostile execution (bounds: +{_hostile.HOST_PEAK_BOUND_MIB} MiB, {_hostile.HOST_CPU_BOUND_S:g} "
        f"CPU-s, {_hostile.TIMEOUT_S + _hostile.WALL_GRACE_S:g} s wall)"
    )
    print_table(title, header, rows)
    return results


def _hostile_tools() -> list[dict[str, Any]]:
    import _soak_pool

    echo = dict(_soak_pool.SOAK_TOOLS[0])
    echo["inputSchema"] = {"type": "object", "properties": {"i": {"type": "integer"}, "text": {"type": "string"}}}
    return [echo]


def generate(config: Path, tree: Path) -> None:
    """The tree of ``config`` (embeddings when installed, as by default), or exit with generate-tree's error."""
    import subprocess

    argv = [sys.executable, "-m", "tooltree_cli.main", "generate-tree", "--config", str(config), "--out", str(tree)]
    done = subprocess.run([*argv, "--json"], capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        sys.exit(f"generate-tree failed ({done.returncode}):\n{done.stderr[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="sandbox,pool,hostile", help="which parts to run (comma-separated)")
    parser.add_argument("--executions", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=10_000, help="tool calls in all")
    parser.add_argument("--sessions", type=int, default=4, help="concurrent sessions")
    parser.add_argument("--recycle", type=int, default=50, help="executions per session before it is replaced")
    parser.add_argument("--pool-sessions", type=int, default=16, help="pool part: concurrent sessions")
    parser.add_argument("--pool-calls", type=int, default=500, help="pool part: tool calls per session")
    parser.add_argument("--pool-rounds", type=int, default=5, help="pool part: executions per session")
    parser.add_argument("--servers", type=int, default=10, help="pool and hostile parts: MCP servers")
    parser.add_argument("--cases", default="", help="hostile part: only these cases (comma-separated)")
    parser.add_argument("--deadline", type=float, default=180.0, help="hostile part: seconds before a case is killed")
    args = parser.parse_args()
    parts = set(args.only.split(","))

    import tempfile

    docker = DockerEngine()
    build_image(docker)
    backend = DockerBackend(SandboxConfig(owner=soak_owner()), docker=docker)
    backend.prepare()
    report: dict[str, Any] = {"measured_at": time.strftime("%Y-%m-%d %H:%M"), "load_avg_1m": os.getloadavg()[0]}
    ok = True
    with tempfile.TemporaryDirectory(prefix="tooltree-soak-") as tmp:
        if "sandbox" in parts:
            report["sandbox"], passed = soak_sandbox(args, docker, backend)
            ok = ok and passed
        if "pool" in parts:
            (Path(tmp) / "pool").mkdir()
            report["pool"], passed = soak_pool(args, docker, backend, Path(tmp) / "pool")
            ok = ok and passed
        if "hostile" in parts:
            (Path(tmp) / "hostile").mkdir()
            report["hostile"] = hostile(args, Path(tmp) / "hostile")
    report["containers_removed_at_end"] = remove_containers(docker, label=label())
    write_json("soak.json", report)
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
