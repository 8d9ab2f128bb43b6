"""Benchmark `tooltree serve`: what a client puts in its context, latency added to an execution, session start.

    python bench/serve.py [--runs 200] [--sessions 20]

- tokens of ``initialize`` + ``tools/list`` for the 527-tool LiveMCPBench catalog, served by tooltree
  (four tools + instructions) vs the same 527 tools proxied directly (every tool as an MCP tool), both
  counted with `agent.tokens` (4 characters per token of the compact JSON; target ≤ 2 %);
- ``execute_python("print(1)")`` as the official SDK client sees it over stdio and over HTTP, median of
  ``--runs``, vs ``Sandbox.execute("print(1)")`` on a warm session in this process (target ≤ 10 ms added);
- session start with the warm pool: a new client connects to a running HTTP server, opens its MCP
  session and gets its first ``print(1)`` back, median of ``--sessions`` (target ≤ 1 s); and the same
  over stdio, where it includes starting the process.

Needs a Docker engine and the image. Containers carry ``tooltree.owner=$TOOLTREE_SANDBOX_OWNER``
(``tooltree-bench-serve`` when it is not set) and are removed at the end. Tokens need only the corpus
(``--tokens-only`` skips the rest).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, positive_int, print_table, sandbox_owner, summary, write_json

sys.path.insert(0, str(ROOT))

import anyio

from tests.support import ServeProcess

OWNER = "tooltree-bench-serve"
"""The sandboxes' owner label when ``$TOOLTREE_SANDBOX_OWNER`` is not set (`owner`)."""
TOKEN = "bench-token-0123456789"


# ---- tokens -------------------------------------------------------------------------------------------------------


async def _client_view(server: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``initialize`` and ``tools/list`` results an SDK client gets from an in-process server (handshake era)."""
    import mcp

    async with mcp.Client(server, mode="legacy") as client:
        init = client.session.initialize_result
        assert init is not None
        listed = await client.list_tools()
    dump: dict[str, Any] = {"by_alias": True, "mode": "json", "exclude_none": True}
    return init.model_dump(**dump), listed.model_dump(**dump)


def tokens(work: Path) -> dict[str, Any]:
    import mcp_types as types
    from agent_tasks import generate
    from generate_tree import livemcpbench_snapshots
    from mcp.server.lowlevel import Server

    from agent.serve import ServeSettings, ToolServer
    from agent.tokens import json_tokens
    from sandbox import SandboxConfig
    from tool_tree.config import Config
    from tool_tree.tree import Manifest, load_snapshot

    n_tools = livemcpbench_snapshots(work / "snap527")
    tree = generate(None, work / "tree527", snapshots=work / "snap527", embeddings="off")
    app = ToolServer(Config(servers=()), tree, settings=ServeSettings(), sandbox_config=SandboxConfig())
    served = anyio.run(_client_view, app.mcp_server())

    manifest = Manifest.load(tree)
    proxied_tools = [
        types.Tool.model_validate(raw, by_name=False) for s in manifest.servers for raw in load_snapshot(tree, s)
    ]
    listing = types.ListToolsResult(tools=proxied_tools)

    async def list_all(ctx: Any, params: Any) -> types.ListToolsResult:
        return listing

    direct = anyio.run(_client_view, Server("proxy", version="1", on_list_tools=list_all))
    rows: dict[str, Any] = {}
    for name, (init, listed) in (("tooltree serve", served), ("proxied directly", direct)):
        rows[name] = {
            "tools": len(listed["tools"]),
            "initialize_tokens": json_tokens(init),
            "tools_list_tokens": json_tokens(listed),
            "total_tokens": json_tokens(init) + json_tokens(listed),
        }
    share = rows["tooltree serve"]["total_tokens"] / rows["proxied directly"]["total_tokens"]
    return {"catalog_tools": n_tools, "rows": rows, "share": share}


# ---- latency and session start --------------------------------------------------------------------------------------


def sample_project(work: Path) -> tuple[Path, Path]:
    from agent_tasks import generate, sample_config

    config = sample_config(work)
    with config.open("a", encoding="utf-8") as f:
        f.write("serve:\n  warm: 2\n")
    return config, generate(config, work / "tree", embeddings="off")


def serve_argv(config: Path, tree: Path, *more: str) -> list[str]:
    base = [sys.executable, "-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree)]
    return [*base, "--no-regenerate", *more]


def owner() -> str:
    """The owner label of the benchmark's sandboxes, the served ones and its own: it removes them by it at the end."""
    return sandbox_owner(OWNER)


def env() -> dict[str, str]:
    return {**os.environ, "TOOLTREE_SANDBOX_OWNER": owner(), "TOOLTREE_SERVE_TOKEN": TOKEN}


async def _http_client_session(url: str, runs: int, timings: list[float]) -> None:
    import httpx2
    import mcp
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        mcp.Client(streamable_http_client(url, http_client=http)) as client,
    ):
        await _execute_many(client, runs, timings)


async def _execute_many(client: Any, runs: int, timings: list[float]) -> None:
    await client.call_tool("execute_python", {"code": "print(1)"})  # the first takes the sandbox from the pool
    for _ in range(runs):
        start = time.perf_counter()
        result = await client.call_tool("execute_python", {"code": "print(1)"})
        timings.append(time.perf_counter() - start)
        assert result.content[0].text == "1", result


async def _stdio_session(argv: list[str], runs: int, timings: list[float]) -> None:
    import mcp
    from mcp import StdioServerParameters

    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env(), cwd=str(ROOT))
    async with mcp.Client(params) as client:
        await _execute_many(client, runs, timings)


async def _session_start(url: str) -> float:
    """Seconds from a new client connecting to its first ``print(1)`` coming back."""
    import httpx2
    import mcp
    from mcp.client.streamable_http import streamable_http_client

    start = time.perf_counter()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        mcp.Client(streamable_http_client(url, http_client=http)) as client,
    ):
        result = await client.call_tool("execute_python", {"code": "print(1)"})
        elapsed = time.perf_counter() - start
    assert result.content[0].text == "1", result
    return elapsed


async def _stdio_start(argv: list[str]) -> float:
    import mcp
    from mcp import StdioServerParameters

    start = time.perf_counter()
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env(), cwd=str(ROOT))
    async with mcp.Client(params) as client:
        result = await client.call_tool("execute_python", {"code": "print(1)"})
        elapsed = time.perf_counter() - start
    assert result.content[0].text == "1", result
    return elapsed


def warm_execute(tree: Path, runs: int) -> list[float]:
    from sandbox import Sandbox, SandboxConfig

    times = []
    with Sandbox(config=SandboxConfig(owner=owner()), tree=tree) as sb:
        sb.execute("print(1)")
        for _ in range(runs):
            start = time.perf_counter()
            result = sb.execute("print(1)")
            times.append(time.perf_counter() - start)
            assert result.stdout == "1\n"
    return times


def latency(work: Path, runs: int, sessions: int) -> dict[str, Any]:
    config, tree = sample_project(work)
    results: dict[str, Any] = {}
    # Interleaved: the machine is shared, so each path is measured in two halves, alternating.
    sandbox_times: list[float] = []
    stdio_times: list[float] = []
    http_times: list[float] = []
    server = ServeProcess(serve_argv(config, tree, "--http", "--port", "0"), env())
    try:
        for half in (runs // 2, runs - runs // 2):  # an odd --runs times all of them
            sandbox_times += warm_execute(tree, half)
            anyio.run(_stdio_session, serve_argv(config, tree), half, stdio_times)
            anyio.run(_http_client_session, server.url, half, http_times)
        starts = []
        for _ in range(sessions):
            time.sleep(3)  # let the pool put a warm sandbox back (bench only: the client cannot see the pool)
            starts.append(anyio.run(_session_start, server.url))
    finally:
        server.stop()
    stdio_starts = [anyio.run(_stdio_start, serve_argv(config, tree)) for _ in range(max(3, sessions // 4))]
    results["warm_sandbox_execute"] = summary(sandbox_times)
    results["stdio_execute"] = summary(stdio_times)
    results["http_execute"] = summary(http_times)
    results["session_start_http_warm_pool"] = summary(starts)
    results["session_start_stdio_with_process"] = summary(stdio_starts)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=positive_int, default=200, help="executions to time per path")
    parser.add_argument("--sessions", type=positive_int, default=20, help="session starts to time")
    parser.add_argument("--tokens-only", action="store_true", help="only the token comparison (no Docker)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tooltree-bench-serve-") as tmp:
        work = Path(tmp)
        counted = tokens(work)
        rows = [[name, r["tools"], f"{r['initialize_tokens']:,}", f"{r['tools_list_tokens']:,}",
                 f"{r['total_tokens']:,}"] for name, r in counted["rows"].items()]  # fmt: skip
        print_table(
            f"initialize + tools/list, {counted['catalog_tools']}-tool catalog (tokens: agent.tokens approximation)",
            ["server", "tools", "initialize", "tools/list", "total"], rows,
        )  # fmt: skip
        print(f"tooltree serve / proxied directly: {100 * counted['share']:.2f} % (target <= 2 %)")
        data: dict[str, Any] = {"tokens": counted}
        if not args.tokens_only:
            from sandbox._docker import DockerEngine
            from sandbox.image import build_image
            from sandbox.prune import remove_containers

            docker = DockerEngine()
            build_image(docker)
            try:
                timed = latency(work, args.runs, args.sessions)
            finally:
                remove_containers(docker, label=f"tooltree.owner={owner()}")
            ms = {k: {m: round(v * 1000, 2) if m != "runs" else v for m, v in s.items()} for k, s in timed.items()}
            print_table(
                "execute_python('print(1)') and session start (ms)", ["what", "median", "p90", "min", "runs"],
                [[k, v["median"], v["p90"], v["min"], v["runs"]] for k, v in ms.items()],
            )  # fmt: skip
            base = ms["warm_sandbox_execute"]["median"]
            for path in ("stdio_execute", "http_execute"):
                print(f"added by tooltree serve over {path.split('_')[0]}: {ms[path]['median'] - base:.2f} ms "
                      "(median; target <= 10 ms)")  # fmt: skip
            data["latency_ms"] = ms
        write_json("serve.json", data)


if __name__ == "__main__":
    main()
