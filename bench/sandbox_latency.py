"""Benchmark the sandbox: warm execution, a session from the pool, a cold session, docker exec.

    python bench/sandbox_latency.py [--runs 200] [--sessions 10]

- warm ``execute("print(1)")`` on a started session (target ≤ 20 ms median);
- a ``print`` that makes one tool call relayed to the host;
- a session from a warm `SandboxPool` (``acquire`` until it can execute; target ≤ 60 ms);
- a cold session (create + inspect + start + ready) for comparison;
- an exec of ``python3 -c 'print(1)'`` in the container through the Engine API: what the channel avoids.

Needs a Docker engine and the image (``python -m sandbox.image build``). Containers carry
the label ``tooltree.owner=tooltree-bench`` and are removed at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from _common import ROOT, print_table, summary, write_json

sys.path.insert(0, str(ROOT))

from sandbox import DockerBackend, Sandbox, SandboxConfig, SandboxPool
from sandbox._docker import DockerEngine
from sandbox.docker_backend import remove_containers
from sandbox.image import build_image

OWNER = f"tooltree-bench-{os.getpid()}"  # per process: other runs on this engine keep theirs


def timed(fn: Callable[[], Any], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="warm executions to time")
    parser.add_argument("--sessions", type=int, default=10, help="sessions to time (pool and cold)")
    args = parser.parse_args()

    docker = DockerEngine()
    build_image(docker)
    backend = DockerBackend(SandboxConfig(owner=OWNER), docker=docker)
    backend.prepare()

    def tool(server: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "pong"}]}

    results: dict[str, dict[str, float]] = {}
    try:
        with Sandbox(backend, tools=tool) as sb:
            for _ in range(20):  # warm up
                sb.execute("print(1)")
            results["warm execute print(1)"] = summary(timed(lambda: sb.execute("print(1)"), args.runs))
            call = "from tool_tree.runtime import call_tool\nprint(call_tool('s', 't', {}).text)"
            results["warm execute + 1 tool call"] = summary(timed(lambda: sb.execute(call), args.runs))
            container = sb.name

            def docker_exec() -> None:
                exec_id = docker.api.exec_create(container, ["python3", "-c", "print(1)"])["Id"]
                docker.api.exec_start(exec_id)

            results["docker exec python3 print(1) (API)"] = summary(timed(docker_exec, 10))

        pool_times: list[float] = []
        with SandboxPool(backend, size=2) as pool:
            for _ in range(args.sessions):
                pool.wait_ready()
                start = time.perf_counter()
                session = pool.acquire(tools=tool)
                session.execute("print(1)")
                pool_times.append(time.perf_counter() - start)
                session.close()
        results["session from pool (+ first execute)"] = summary(pool_times)

        cold_times: list[float] = []
        for _ in range(args.sessions):
            start = time.perf_counter()
            session = Sandbox(backend, tools=tool).start()
            session.execute("print(1)")
            cold_times.append(time.perf_counter() - start)
            session.close()
        results["cold session (+ first execute)"] = summary(cold_times)
    finally:
        remove_containers(docker, label=f"tooltree.owner={OWNER}")

    rows = [
        (name, f"{s['median'] * 1000:.2f}", f"{s['p90'] * 1000:.2f}", f"{s['min'] * 1000:.2f}", int(s["runs"]))
        for name, s in results.items()
    ]
    print_table("sandbox latency (ms)", ["what", "median", "p90", "min", "runs"], rows)
    write_json("sandbox_latency.json", {"unit": "seconds", "results": results})


if __name__ == "__main__":
    main()
