"""`McpBridge` between a script and the real third-party servers: what a call that cannot work says.

The servers are installed by `make real-servers`; without them these tests skip (see conftest.py).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.bridge import ToolCallRefused
from sandbox.mcp_bridge import AuditLog, McpBridge
from tool_tree.config import load_config
from tool_tree.pool import BackgroundPool
from tooltree_cli.main import main

pytestmark = pytest.mark.real_servers

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "tests" / "real_servers.yaml"


@pytest.fixture(scope="module")
def everything(
    tmp_path_factory: pytest.TempPathFactory, real_servers_root: Path
) -> Iterator[tuple[Path, BackgroundPool]]:
    """A tree of server-everything alone, and a pool running it."""
    environ = {**os.environ, "TOOLTREE_REAL_SERVERS": str(real_servers_root)}
    server = load_config(CONFIG, environ=environ).server("everything")
    tmp = tmp_path_factory.mktemp("everything")
    config = tmp / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {"everything": {"command": server.command, "args": list(server.args)}}}),
        encoding="utf-8",
    )
    tree = tmp / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    with BackgroundPool([server]) as pool:
        yield tree, pool


def _call(bridge: McpBridge, pool: BackgroundPool, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run_coroutine_threadsafe(bridge.call_tool("everything", tool, arguments), pool.loop).result(60)


def test_a_tool_that_runs_only_as_a_task_is_left_out_of_the_tree_and_refused_before_the_server_is_asked(
    everything: tuple[Path, BackgroundPool],
) -> None:
    # Called plainly, the server answers isError "MCP error -32601: ... requires task augmentation": a tool
    # error, which a script would take for a failure worth retrying. The stub promised a tool nobody can call.
    tree, pool = everything
    snapshot = json.loads((tree / "snapshots" / "everything.json").read_text(encoding="utf-8"))
    tasks_only = [t["name"] for t in snapshot["tools"] if (t.get("execution") or {}).get("taskSupport") == "required"]
    assert tasks_only == ["simulate-research-query"]
    manifest = json.loads((tree / "manifest.json").read_text(encoding="utf-8"))
    assert "simulate-research-query" not in [t["tool"] for t in manifest["tools"]]
    assert not (tree / "servers" / "everything" / "simulate_research_query.py").exists()
    stream = io.StringIO()
    bridge = McpBridge(tree, pool.pool, audit=AuditLog(stream))
    with pytest.raises(ToolCallRefused) as info:
        _call(bridge, pool, "simulate-research-query", {"topic": "bees"})
    assert info.value.code == "not_allowed"
    (line,) = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert (line["outcome"], line["code"], line["tool"]) == ("refused", "not_allowed", "simulate-research-query")
    # A tool that allows plain calls still goes through.
    assert _call(bridge, pool, "echo", {"message": "hi"})["content"] == [{"type": "text", "text": "Echo: hi"}]
