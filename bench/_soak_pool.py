"""The pool under load: many sandbox sessions at once, each making many calls across many real servers.

Every session is a container with its own `McpBridge` (allowlist, validation, budgets) over one shared
`BackgroundPool` of catalog servers (`bench/_catalog.py`, each also serving ``echo`` and ``count``).
Each execution calls ``echo`` round-robin over the servers, times every call from inside the script,
and checks every answer; afterwards each server says how many calls it served, so a lost or doubled
call shows. The host's RSS is sampled throughout.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from _common import proc_status

from sandbox import DockerBackend, Sandbox
from sandbox.mcp_bridge import McpBridge
from tool_tree.pool import BackgroundPool

SOAK_TOOLS = [
    {
        "name": "echo",
        "description": "Answer the arguments as JSON text.",
        "inputSchema": {"type": "object", "properties": {"i": {"type": "integer"}}, "required": ["i"]},
    },
    {"name": "count", "description": "How many calls this server has served.", "inputSchema": {"type": "object"}},
]

SCRIPT = """\
import json, time
from tool_tree.runtime import call_tool
servers = {servers!r}
latencies, bad = [], 0
for j in range({calls}):
    n = {offset} + j
    started = time.perf_counter()
    text = call_tool(servers[n % len(servers)], 'echo', {{'i': n}}).text
    latencies.append(round((time.perf_counter() - started) * 1000, 3))
    bad += json.loads(text)['arguments']['i'] != n
print(json.dumps({{'latencies': latencies, 'bad': bad}}))
"""


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def served_calls(pool: BackgroundPool, servers: list[str]) -> int:
    """Calls the servers have served, each asked once (the asking call itself not counted)."""
    return sum(int(pool.call(s, "count", {})["content"][0]["text"]) for s in servers)


def run(
    backend: DockerBackend,
    tree: Path,
    pool: BackgroundPool,
    servers: list[str],
    *,
    sessions: int,
    calls: int,
    rounds: int,
) -> dict[str, Any]:
    """``sessions`` concurrent sessions, each making ``calls`` calls in ``rounds`` executions."""
    for s in servers:  # start every server before the clock starts (at most start_jobs at a time)
        pool.call(s, "echo", {"i": -1})
    before_served = served_calls(pool, servers)
    per_round = calls // rounds
    latencies: list[float] = []
    failures: list[str] = []
    bad = 0
    lock = threading.Lock()
    samples: list[tuple[float, int]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.25):
            samples.append((time.perf_counter(), proc_status("VmRSS")))

    def session(k: int) -> None:
        nonlocal bad
        bridge = McpBridge(tree, pool.pool, session=f"soak-{k}")
        with Sandbox(backend, tools=bridge, tool_loop=pool.loop) as sb:
            for r in range(rounds):
                script = SCRIPT.format(servers=servers, calls=per_round, offset=(k * rounds + r) * per_round)
                result = sb.execute(script, timeout=300)
                try:
                    data = json.loads(result.stdout)
                except ValueError:
                    with lock:
                        failures.append(f"session {k} round {r}: {result.error} {result.stdout[:200]!r}")
                    continue
                with lock:
                    latencies.extend(data["latencies"])
                    bad += data["bad"]
                    if len(data["latencies"]) != per_round:
                        failures.append(f"session {k} round {r}: {len(data['latencies'])} of {per_round} calls")

    sampler = threading.Thread(target=sample, daemon=True)
    rss_start = proc_status("VmRSS")
    started = time.perf_counter()
    sampler.start()
    threads = [threading.Thread(target=session, args=(k,)) for k in range(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    done.set()
    sampler.join()
    rss_end = proc_status("VmRSS")
    served = served_calls(pool, servers) - before_served - len(servers)  # minus the first count calls
    expected = sessions * per_round * rounds
    rss = [r for _, r in samples] or [rss_end]
    quarter = max(1, len(rss) // 4)
    return {
        "sessions": sessions,
        "servers": len(servers),
        "calls_expected": expected,
        "calls_answered": len(latencies),
        "calls_served_by_servers": served,
        "wrong_answers": bad,
        "failures": failures[:10],
        "wall_seconds": round(wall, 2),
        "calls_per_second": round(len(latencies) / wall, 1),
        "latency_ms": {
            "p50": percentile(latencies, 50) if latencies else None,
            "p90": percentile(latencies, 90) if latencies else None,
            "p99": percentile(latencies, 99) if latencies else None,
            "max": max(latencies) if latencies else None,
            "mean": round(statistics.fmean(latencies), 3) if latencies else None,
        },
        "rss_mib": {
            "start": round(rss_start / 2**20, 1),
            "first_quarter_median": round(statistics.median(rss[:quarter]) / 2**20, 1),
            "last_quarter_median": round(statistics.median(rss[-quarter:]) / 2**20, 1),
            "max": round(max(rss) / 2**20, 1),
            "end": round(rss_end / 2**20, 1),
        },
    }
