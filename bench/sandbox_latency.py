"""Benchmark the sandbox: warm execution, a session from the pool, a cold session, docker exec.

    python bench/sandbox_latency.py [--runs 200] [--sessions 10] [--processes 60] [--runtime runsc]

Every container runs under ``--runtime`` (``SandboxConfig(runtime=...)``; default: the engine's,
runc here), so ``--runtime runsc`` gives the same figures under gVisor, written to
``sandbox_latency_runsc.json`` beside the default's ``sandbox_latency.json``.

- warm ``execute("print(1)")`` on a started session (target ≤ 20 ms median);
- a ``print`` that makes one tool call relayed to the host;
- a session from a warm `SandboxPool` (``acquire`` until it can execute; target ≤ 60 ms);
- a cold session (create + inspect + attach + start + ready + first execute), with the time of
  each Engine API call, so the rest is the container's own start (runtime, supervisor, worker);
- the channel alone: a 200-byte echo round trip over a container's attach socket, beside the
  same echo program on a pipe on the host;
- one engine step as a ``docker`` process (what the sandbox ran before) against the same API call;
- an exec of ``python3 -c 'print(1)'`` in the container through the Engine API: what the channel avoids;
- process starts inside a session (the script times them itself): ``os.fork()`` + ``_exit`` + wait,
  ``subprocess.run(["true"])`` and ``subprocess.run([sys.executable, "-c", "pass"])``, interleaved.

Needs a Docker engine and the image (``python -m sandbox.image build``). Containers carry
the label ``tooltree.owner=tooltree-bench-<pid>`` and are removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

from _common import ROOT, positive_int, print_table, summary, write_json

sys.path.insert(0, str(ROOT))

from sandbox import DockerBackend, Sandbox, SandboxConfig, SandboxError, SandboxPool
from sandbox._attach import AttachSocket
from sandbox._docker import DockerEngine
from sandbox.image import build_image
from sandbox.prune import remove_containers

OWNER = f"tooltree-bench-{os.getpid()}"  # per process: other runs on this engine keep theirs
ECHO = "import os\nwhile True:\n    d = os.read(0, 65536)\n    if not d: break\n    os.write(1, d)\n"
MESSAGE = b"x" * 200
# Run in the session: times `n` starts of each kind, interleaved so load from elsewhere falls on all alike.
PROCESS_STARTS = """
import json, os, subprocess, sys, time
def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
kinds = {
    "fork": fork,
    "true": lambda: subprocess.run(["true"], check=True),
    "python": lambda: subprocess.run([sys.executable, "-c", "pass"], check=True),
}
times = {k: [] for k in kinds}
for _ in range(%d):
    for k, fn in kinds.items():
        start = time.perf_counter()
        fn()
        times[k].append(time.perf_counter() - start)
print(json.dumps(times))
"""
PROCESS_ROWS = {
    "fork": "process start in the session: os.fork() + _exit + wait",
    "true": "  subprocess.run(['true'])",
    "python": "  subprocess.run([sys.executable, '-c', 'pass'])",
}


class TimedEngine(DockerEngine):
    """The engine, recording how long each call of a session's start takes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, float] = {}

    def _timed(self, name: str, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        try:
            return fn()
        finally:
            self.calls[name] = self.calls.get(name, 0.0) + time.perf_counter() - start

    def create_container(self, spec: Mapping[str, Any]) -> str:
        return str(self._timed("create", lambda: super(TimedEngine, self).create_container(spec)))

    def inspect_container(self, container: str) -> dict[str, Any]:
        return dict(self._timed("inspect", lambda: super(TimedEngine, self).inspect_container(container)))

    def attach(self, container: str) -> AttachSocket:
        return cast(AttachSocket, self._timed("attach", lambda: super(TimedEngine, self).attach(container)))

    def start(self, container: str) -> None:
        self._timed("start", lambda: super(TimedEngine, self).start(container))


def echo_round_trips(write: Callable[[bytes], Any], read: Callable[[int], bytes], runs: int) -> list[float]:
    def once() -> None:
        write(MESSAGE)
        got = 0
        while got < len(MESSAGE):
            got += len(read(65536))

    return timed(once, runs)


def timed(fn: Callable[[], Any], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def runtime_name(value: str) -> str:
    """A runtime as the engine names them (``runsc``, ``io.containerd.runc.v2``); it also names the JSON file."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a runtime name such as runsc")
    return value


def process_starts(sb: Sandbox, count: int) -> dict[str, list[float]]:
    """Seconds of ``count`` process starts of each kind, timed inside the session, in batches of 10."""
    times: dict[str, list[float]] = {}
    sb.execute(PROCESS_STARTS % 2)  # warm up: the binaries in the page cache
    for done in range(0, count, 10):
        result = sb.execute(PROCESS_STARTS % min(10, count - done), timeout=120)
        if result.error:
            sys.exit(f"timing process starts in the sandbox failed: {result.error}\n{result.stderr[-2000:]}")
        for kind, values in json.loads(result.stdout).items():
            times.setdefault(kind, []).extend(values)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=positive_int, default=200, help="warm executions to time")
    parser.add_argument("--sessions", type=positive_int, default=10, help="sessions to time (pool and cold)")
    parser.add_argument("--processes", type=positive_int, default=60, help="process starts of each kind in a session")
    parser.add_argument(
        "--runtime", type=runtime_name, default=None, help="OCI runtime of every container, e.g. runsc (gVisor)"
    )
    args = parser.parse_args()

    docker = TimedEngine()
    build_image(docker)
    backend = DockerBackend(SandboxConfig(owner=OWNER, runtime=args.runtime), docker=docker)
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
            runtime = str(docker.inspect_container(container)["HostConfig"]["Runtime"])  # what the engine ran
            for kind, values in process_starts(sb, args.processes).items():
                results[PROCESS_ROWS[kind]] = summary(values)

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
        phases: dict[str, list[float]] = {}
        for _ in range(args.sessions):
            docker.calls.clear()
            start = time.perf_counter()
            session = Sandbox(backend, tools=tool).start()
            started = time.perf_counter()
            session.execute("print(1)")
            cold_times.append(time.perf_counter() - start)
            session.close()
            engine = sum(docker.calls.values())
            for name, seconds in [
                *docker.calls.items(),
                ("the container starting until ready", started - start - engine),
            ]:
                phases.setdefault(name, []).append(seconds)
        results["cold session (+ first execute)"] = summary(cold_times)
        for name, values in phases.items():
            results[f"  of which {name}"] = summary(values)

        spec = {
            "image": backend.image, "command": ["python3", "-c", ECHO], "stdin_open": True,
            "labels": {"tooltree.owner": OWNER}, "use_config_proxy": False,
            "host_config": {"NetworkMode": "none", "AutoRemove": True, "LogConfig": {"Type": "none", "Config": {}},
                            **({"Runtime": args.runtime} if args.runtime else {})},
        }  # fmt: skip
        container = docker.create_container(spec)
        attached = docker.attach(container)
        docker.start(container)
        pipe = subprocess.Popen([sys.executable, "-c", ECHO], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        assert pipe.stdin is not None and pipe.stdout is not None
        attach_rtt: list[float] = []
        pipe_rtt: list[float] = []
        per_round = max(1, args.runs // 10)  # --runs under 10 still times one round trip of each
        for _ in range(10):  # alternating, so load from elsewhere falls on both alike
            attach_rtt += echo_round_trips(attached.stdin.write, attached.stdout.read, per_round)
            pipe_rtt += echo_round_trips(pipe.stdin.write, pipe.stdout.read, per_round)
        attached.close()
        pipe.stdin.close()
        pipe.wait()
        results["channel alone: echo over the attach socket"] = summary(attach_rtt)
        results["  the same echo on a pipe on the host"] = summary(pipe_rtt)

        if shutil.which("docker"):  # what one step cost when the sandbox ran `docker` processes
            cli = ["docker", "image", "inspect", backend.image]
            results["one step as a `docker` process (image inspect)"] = summary(
                timed(lambda: subprocess.run(cli, capture_output=True, check=True), 20)
            )
            results["  the same step as an API call"] = summary(timed(lambda: docker.image_exists(backend.image), 20))
    finally:
        remove_containers(docker, label=f"tooltree.owner={OWNER}")

    rows = [
        (name, f"{s['median'] * 1000:.3f}", f"{s['p90'] * 1000:.3f}", f"{s['min'] * 1000:.3f}", int(s["runs"]))
        for name, s in results.items()
    ]
    print_table(f"sandbox latency under {runtime} (ms)", ["what", "median", "p90", "min", "runs"], rows)
    name = f"sandbox_latency_{args.runtime}.json" if args.runtime else "sandbox_latency.json"
    write_json(name, {"unit": "seconds", "runtime": runtime, "requested_runtime": args.runtime, "results": results})


if __name__ == "__main__":
    try:
        main()
    except SandboxError as e:  # an engine without --runtime's runtime, no image: one line, not a traceback
        sys.exit(f"sandbox_latency: {e}")
