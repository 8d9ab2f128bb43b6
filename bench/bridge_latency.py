"""Benchmark one tool call through the whole path: sandbox → channel → bridge → ServerPool → MCP server.

    python bench/bridge_latency.py [--calls 20] [--rounds 50]

- the same call (``media.slow_echo`` with ``seconds=0``) made directly from the host with the
  MCP SDK vs from a script in the sandbox (timed inside the script); target ratio ≤ 1.3×. The two
  alternate in ``--rounds`` rounds of ``--calls`` calls each, so load from other work on the
  machine falls on both alike; the ratio is of the medians over all rounds, and the median of the
  rounds' own ratios is printed beside it;
- sequential and concurrent (``parallel``, 8 at a time) throughput from the sandbox;
- ten concurrent 200 ms calls divided by one; target ≤ 1.5×.

Needs a Docker engine and the image (``make sandbox-image``). Containers carry the label
``tooltree.owner=tooltree-bench`` and are removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, print_table, write_json

sys.path.insert(0, str(ROOT))

import mcp
from anyio.from_thread import BlockingPortal, start_blocking_portal

from sandbox import Sandbox, SandboxConfig
from sandbox.mcp_bridge import McpBridge
from sandbox.prune import remove_containers, remove_volumes
from tool_tree.config import ServerConfig
from tool_tree.pool import BackgroundPool
from tooltree_cli.main import main as cli

THROUGHPUT_CALLS = 300
OWNER = f"tooltree-bench-{os.getpid()}"  # per process: other runs on this engine keep theirs
MEDIA = ServerConfig(name="media", command=sys.executable, args=(str(ROOT / "examples/sample_servers/media.py"),))

SEQUENTIAL = """
import json, time
from tool_tree.runtime import call_tool
args = {{"text": "x", "seconds": 0}}
call_tool("media", "slow_echo", args)  # warm-up
seq = []
for _ in range({calls}):
    t = time.perf_counter(); call_tool("media", "slow_echo", args); seq.append(time.perf_counter() - t)
print(json.dumps(seq))
"""

SCRIPT = """
import json, time
from tool_tree.runtime import call_tool, parallel
N = {calls}
args = {{"text": "x", "seconds": 0}}
t = time.perf_counter()
parallel(*[lambda: call_tool("media", "slow_echo", args) for _ in range(N)], max_workers=8)
conc = time.perf_counter() - t
slow = {{"text": "x", "seconds": 0.2}}
ones, tens = [], []
for _ in range(5):
    t = time.perf_counter(); call_tool("media", "slow_echo", slow); ones.append(time.perf_counter() - t)
    t = time.perf_counter(); parallel(*[lambda: call_tool("media", "slow_echo", slow) for _ in range(10)])
    tens.append(time.perf_counter() - t)
print(json.dumps({{"concurrent_total": conc, "one_200ms": ones, "ten_200ms": tens}}))
"""


class Direct:
    """The same server called with the MCP SDK from the host, on its own event loop thread."""

    def __init__(self, portal: BlockingPortal, client: mcp.Client) -> None:
        self.portal = portal
        self.client = client
        portal.call(client.list_tools)

    async def _calls(self, calls: int) -> list[float]:
        await self.client.call_tool("slow_echo", {"text": "x", "seconds": 0})  # warm-up
        times = []
        for _ in range(calls):
            t = time.perf_counter()
            await self.client.call_tool("slow_echo", {"text": "x", "seconds": 0})
            times.append(time.perf_counter() - t)
        return times

    def calls(self, calls: int) -> list[float]:
        return self.portal.call(self._calls, calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20, help="calls per round, each way")
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    direct_times: list[float] = []
    sandbox_times: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "tooltree.yaml"
        config.write_text(
            f"servers:\n  media:\n    command: {json.dumps(MEDIA.command)}\n    args: [{json.dumps(MEDIA.args[0])}]\n",
            encoding="utf-8",
        )
        tree = Path(tmp) / "tree"
        assert cli(["generate-tree", "--config", str(config), "--out", str(tree), "--json"]) == 0
        try:
            params = mcp.StdioServerParameters(command=MEDIA.command or "", args=list(MEDIA.args))
            with (
                BackgroundPool([MEDIA]) as bg,
                start_blocking_portal() as portal,
                portal.wrap_async_context_manager(mcp.Client(params)) as client,
            ):
                direct = Direct(portal, client)
                bridge = McpBridge(tree, bg.pool)
                with Sandbox(
                    config=SandboxConfig(owner=OWNER, timeout=600), tree=tree, tools=bridge, tool_loop=bg.loop
                ) as sb:
                    for _ in range(args.rounds):
                        direct_times += direct.calls(args.calls)
                        seq = sb.execute(SEQUENTIAL.format(calls=args.calls))
                        if seq.error:
                            sys.exit(f"the benchmark script failed: {seq.traceback or seq.error}")
                        sandbox_times += json.loads(seq.stdout)
                    result = sb.execute(SCRIPT.format(calls=THROUGHPUT_CALLS))
        finally:
            remove_containers(label=f"tooltree.owner={OWNER}")
            remove_volumes(label=f"tooltree.owner={OWNER}")
    if result.error:
        sys.exit(f"the benchmark script failed: {result.traceback or result.error}")
    data: dict[str, Any] = json.loads(result.stdout)
    d_med = statistics.median(direct_times)
    s_med = statistics.median(sandbox_times)
    one = statistics.median(data["one_200ms"])
    ten = statistics.median(data["ten_200ms"])
    out = {
        "direct_ms_median": d_med * 1000,
        "sandbox_ms_median": s_med * 1000,
        "ratio": s_med / d_med,
        "sequential_calls_per_s": 1 / s_med,
        "concurrent_calls_per_s": THROUGHPUT_CALLS / data["concurrent_total"],
        "one_200ms_s": one,
        "ten_200ms_s": ten,
        "ten_over_one": ten / one,
        "calls": args.calls,
        "rounds": args.rounds,
        "round_ratios": [
            statistics.median(sandbox_times[i : i + args.calls]) / statistics.median(direct_times[i : i + args.calls])
            for i in range(0, len(direct_times), args.calls)
        ],
    }
    print_table(
        "one tool call (media.slow_echo, seconds=0)",
        ["path", "median ms", "note"],
        [
            ["host → MCP SDK → server", f"{d_med * 1000:.2f}", "direct"],
            ["sandbox → bridge → pool → server", f"{s_med * 1000:.2f}", f"ratio {s_med / d_med:.2f}× (target ≤ 1.3×)"],
        ],
    )
    out["median_round_ratio"] = statistics.median(out["round_ratios"])
    print(f"median of the {args.rounds} rounds' ratios: {out['median_round_ratio']:.2f}×")
    print_table(
        "throughput and concurrency from the sandbox",
        ["case", "value", "target"],
        [
            ["sequential calls/s", f"{out['sequential_calls_per_s']:.0f}", ""],
            ["concurrent calls/s (8 workers)", f"{out['concurrent_calls_per_s']:.0f}", ""],
            ["one 200 ms call (s)", f"{one:.3f}", ""],
            ["ten concurrent 200 ms calls (s)", f"{ten:.3f}", ""],
            ["ten / one", f"{ten / one:.2f}×", "≤ 1.5×"],
        ],
    )
    write_json("bridge_latency.json", out)


if __name__ == "__main__":
    main()
