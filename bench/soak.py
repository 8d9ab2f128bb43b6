"""Soak the sandbox: many executions and tool calls across concurrent sessions, then count what leaked.

    python bench/soak.py [--executions 1000] [--calls 10000] [--sessions 4] [--recycle 50]

``--sessions`` threads each run their share of the executions; every execution makes its share
of the tool calls (relayed to an in-process `FunctionBridge` on the host); every ``--recycle``
executions a thread closes its session and opens a new one, so container start and removal are
soaked too. One execution in fifty also raises, and one in a hundred prints a megabyte.

Reported (and required to be 0): containers left with the soak's label, child processes of this
process, file descriptors and threads above the baseline taken after a warm-up. Host memory growth
(resident set, after the run minus after the warm-up) is reported as a number.

Needs a Docker engine and the image. Containers carry ``tooltree.owner=tooltree-soak``; the script
removes any left at the end (after counting them). Writes bench/out/soak.json.
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

from _common import ROOT, print_table, summary, write_json

sys.path.insert(0, str(ROOT))

from sandbox import DockerBackend, Sandbox, SandboxConfig
from sandbox._docker import DockerCLI
from sandbox.bridge import FunctionBridge
from sandbox.docker_backend import remove_containers
from sandbox.image import build_image

OWNER = "tooltree-soak"
LABEL = f"tooltree.owner={OWNER}"


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


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


def snapshot(docker: DockerCLI) -> dict[str, int]:
    gc.collect()
    return {
        "containers": len(docker.text(["ps", "--all", "--quiet", "--filter", f"label={LABEL}"]).split()),
        "processes": len(child_processes()),
        "fds": len(os.listdir("/proc/self/fd")),
        "threads": threading.active_count(),
        "rss": rss_bytes(),
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=10_000, help="tool calls in all")
    parser.add_argument("--sessions", type=int, default=4, help="concurrent sessions")
    parser.add_argument("--recycle", type=int, default=50, help="executions per session before it is replaced")
    args = parser.parse_args()
    calls_per_execution = max(1, args.calls // args.executions)

    docker = DockerCLI()
    build_image(docker)
    backend = DockerBackend(SandboxConfig(owner=OWNER), docker=docker)
    backend.prepare()
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
    leftover = remove_containers(docker, label=LABEL)

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
    print_table("Soak", ["measure", "value"], rows)
    for line in failures[:10]:
        print("  ", line)
    write_json(
        "soak.json",
        {
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
        },
    )
    if failures or any(leaks.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
