"""What a server's question costs when `tooltree serve` passes it on to its client, against the same question asked
of the client directly.

    python bench/serve_asks.py [--calls 40]

tests/servers/asking_server.py (``protocol: legacy``: questions on the wire) with ``client_capabilities:
[elicitation]``; the official SDK client answers each elicitation at once. Interleaved, ``--calls`` times each: a
call that asks nothing (``ask_times`` with ``times: 0``) and one that asks one question (``ask``), through `tooltree
serve` over stdio (``warm: 0``, its tree generated once) and with the client connected to the server directly. The
cost of passing a question on is serve's added time for the asking call less serve's added time for the plain one.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp
import mcp.types as mt
from _common import ROOT, positive_int, print_table, summary, write_json

ASKING = ROOT / "tests" / "servers" / "asking_server.py"


async def answer(ctx: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
    return mt.ElicitResult(action="accept", content={"name": "Ana"})


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    result = await call()
    assert not result.is_error, result
    return (time.perf_counter() - start) * 1000


def setup(folder: Path) -> tuple[Path, Path]:
    """The config and the tree, generated (before the event loop: generate-tree runs its own)."""
    from tooltree_cli.main import main as cli

    servers = (
        f"servers:\n  asking:\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(ASKING))}]\n"
        "    protocol: legacy\n    client_capabilities: [elicitation]\n"
    )
    config = folder / "tooltree.yaml"
    config.write_text(f"{servers}serve:\n  warm: 0\n  passthrough: [asking.ask, asking.ask_times]\n", "utf-8")
    tree = folder / "tree"
    assert cli(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    return config, tree


async def main_async(calls: int, config: Path, tree: Path) -> dict[str, Any]:
    argv = ["-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree), "--no-regenerate"]
    served = mcp.StdioServerParameters(command=sys.executable, args=argv, cwd=str(ROOT))
    direct = mcp.StdioServerParameters(command=sys.executable, args=[str(ASKING)])
    times: dict[str, list[float]] = {k: [] for k in ("serve plain", "serve asks", "direct plain", "direct asks")}
    async with (
        mcp.Client(served, elicitation_callback=answer) as via,
        mcp.Client(direct, elicitation_callback=answer, mode="legacy") as to,
    ):
        kinds = {"kind": "elicitation"}
        plain = {"kind": "elicitation", "times": 0}
        jobs = {
            "serve plain": lambda: via.call_tool("asking__ask_times", plain),
            "serve asks": lambda: via.call_tool("asking__ask", kinds),
            "direct plain": lambda: to.call_tool("ask_times", plain),
            "direct asks": lambda: to.call_tool("ask", kinds),
        }
        for job in jobs.values():  # warm up: servers started, first-call costs paid
            await timed(job)
        for _ in range(calls):
            for name, job in jobs.items():
                times[name].append(await timed(job))
    stats = {name: summary(values) for name, values in times.items()}
    added = {
        "plain": stats["serve plain"]["median"] - stats["direct plain"]["median"],
        "asks": stats["serve asks"]["median"] - stats["direct asks"]["median"],
    }
    return {
        "calls": calls,
        "ms": stats,
        "serve_added_ms": added,
        "question_passed_on_ms": added["asks"] - added["plain"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=positive_int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = anyio.run(main_async, args.calls, *setup(Path(tmp)))
    rows = [[name, f"{s['median']:.2f}", f"{s['p90']:.2f}", f"{s['min']:.2f}"] for name, s in data["ms"].items()]
    print_table(f"calls, ms ({args.calls} each, interleaved)", ["call", "median", "p90", "min"], rows)
    added = data["serve_added_ms"]
    print(
        f"\nserve adds {added['plain']:.2f} ms to a call that asks nothing, {added['asks']:.2f} ms to one asking once:"
    )
    print(f"passing one question on costs {data['question_passed_on_ms']:.2f} ms (medians)")
    write_json("serve_asks.json", data)


if __name__ == "__main__":
    main()
