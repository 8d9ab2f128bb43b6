"""A server that renames, removes or changes a tool while a run calls it, and says so
(``notifications/tools/list_changed``): the bridge (every mode's calls go through it: a script's, `tooltree agent`'s
native tools, serve's passthrough) checks the tool against what the server lists now, and refuses its call saying the
tree is out of date and the command that regenerates it. Before: checked against the listing of the session's start,
the call went out and came back as the server's own "Unknown tool: echo", or was sent with the parameters the
server had replaced.

Real parts: `generate-tree` of a real stdio server that shifts its tools on a call, and the pool that runs it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import tool_tree.pool_start
from sandbox.bridge import ToolCallRefused
from sandbox.mcp_bridge import McpBridge
from tool_tree.config import load_config
from tool_tree.pool import BackgroundPool
from tooltree_cli.main import main

SHIFTING = Path(__file__).resolve().parents[1] / "servers" / "shifting_server.py"
OBJECT = {"type": "object"}


def project(tmp_path: Path, *more: str) -> tuple[Path, Path]:
    config, tree = tmp_path / "tooltree.yaml", tmp_path / "tree"
    args = ", ".join(json.dumps(a) for a in [str(SHIFTING), str(tmp_path / "tools.json"), *more])
    config.write_text(
        f"servers:\n  s:\n    command: {json.dumps(sys.executable)}\n    args: [{args}]\n", encoding="utf-8"
    )
    (tmp_path / "tools.json").write_text(json.dumps({"echo": OBJECT, "add": OBJECT}), encoding="utf-8")
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    return config, tree


def call(bridge: McpBridge, pool: BackgroundPool, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run_coroutine_threadsafe(bridge.call_tool("s", tool, args), pool.loop).result()


def test_a_tool_the_server_renamed_or_changed_while_running_is_refused_saying_to_regenerate_the_tree(
    tmp_path: Path,
) -> None:
    config, tree = project(tmp_path)
    again = f"tooltree generate-tree --config {config} --out {tree}"
    with BackgroundPool(load_config(config)) as pool:
        bridge = McpBridge(tree, pool.pool, config=load_config(config))
        assert call(bridge, pool, "echo", {})["content"][0]["text"] == "echo ran"
        assert call(bridge, pool, "add", {})["content"][0]["text"] == "add ran"
        number = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        call(bridge, pool, "shift", {"tools": {"echo2": OBJECT, "add": number}})
        with pytest.raises(ToolCallRefused) as renamed:
            call(bridge, pool, "echo", {})
        assert renamed.value.code == "tool_changed"
        assert renamed.value.message == f"s.echo is no longer offered by the server; regenerate the tree ({again})"
        with pytest.raises(ToolCallRefused) as changed:
            call(bridge, pool, "add", {})
        assert changed.value.code == "tool_changed" and changed.value.message.startswith(
            "s.add changed since the tree was generated: its parameters; review the change"
        )
        # A new run on the same servers (a new bridge: an execution, an agent run, a serve session) is told the same.
        with pytest.raises(ToolCallRefused) as fresh:
            call(McpBridge(tree, pool.pool, config=load_config(config)), pool, "echo", {})
        assert fresh.value.message == renamed.value.message
        # Put back as the tree has them: called again.
        call(bridge, pool, "shift", {"tools": {"echo": OBJECT, "add": OBJECT}})
        assert call(bridge, pool, "echo", {})["content"][0]["text"] == "echo ran"
        assert call(bridge, pool, "add", {})["content"][0]["text"] == "add ran"


def test_a_native_tool_the_server_removed_while_an_agent_runs_is_refused_to_the_model_saying_to_regenerate_the_tree(
    tmp_path: Path,
) -> None:
    # `tooltree agent --mode direct` (filtered and tool-search call the same way): the model sees why in the result.
    from agent.toolsets.direct import DirectToolset
    from sandbox.host import Runtime

    config, tree = project(tmp_path)
    toolset = DirectToolset(tree)
    with Runtime(load_config(config), tree) as runtime:
        assert not toolset.call("s__echo", {}, runtime).is_error
        assert not toolset.call("s__shift", {"tools": {"add": OBJECT}}, runtime).is_error
        removed = toolset.call("s__echo", {}, runtime)
        kept = toolset.call("s__add", {}, runtime)
    said = "".join(str(b.get("text", "")) for b in removed.content)
    assert (
        removed.is_error
        and "s.echo is no longer offered by the server; regenerate the tree (tooltree generate-tree" in (said)
    )
    assert "Unknown tool" not in said and not kept.is_error


def test_a_tool_a_session_less_server_removed_while_a_runtime_runs_is_refused_saying_to_regenerate_the_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server of the 2026-07-28 protocol says its tools changed only on a `subscriptions/listen` stream, which the pool
    # opened only for a listener (`tooltree serve`'s): under `tooltree agent`, `exec` and a `Runtime` of the Python
    # API, none, and the removed tool's call went out, answered by the server's own "Unknown tool: echo".
    from agent.toolsets.direct import DirectToolset
    from sandbox.host import Runtime

    real, heard = tool_tree.pool_start.heard, threading.Event()

    def counted(slot: Any, kind: str) -> None:  # the real one, and the test told (its notice comes on the stream)
        real(slot, kind)
        heard.set()

    monkeypatch.setattr(tool_tree.pool_start, "heard", counted)
    config, tree = project(tmp_path, "--both-eras")
    toolset = DirectToolset(tree)
    with Runtime(load_config(config), tree) as runtime:
        assert not toolset.call("s__echo", {}, runtime).is_error
        assert not toolset.call("s__shift", {"tools": {"add": OBJECT}}, runtime).is_error
        assert heard.wait(20)
        removed = toolset.call("s__echo", {}, runtime)
        kept = toolset.call("s__add", {}, runtime)
    said = "".join(str(b.get("text", "")) for b in removed.content)
    assert removed.is_error and "s.echo is no longer offered by the server; regenerate the tree (" in said, said
    assert not kept.is_error
