"""The tool bridge seam: plain functions, sync and async bridges."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from sandbox.bridge import FunctionBridge, NoToolsBridge, ToolBridge, ToolCallRefused, as_bridge, resolve


def test_a_plain_function_becomes_a_bridge() -> None:
    bridge = as_bridge(lambda server, tool, arguments: {"content": [], "server": server})
    assert isinstance(bridge, FunctionBridge)
    assert bridge.call_tool("crm", "x", {}) == {"content": [], "server": "crm"}
    with pytest.raises(ToolCallRefused, match="search"):
        bridge.search_tools("q", limit=5)


def test_no_tools_refuses_every_call() -> None:
    bridge = as_bridge(None)
    assert isinstance(bridge, NoToolsBridge)
    with pytest.raises(ToolCallRefused) as info:
        bridge.call_tool("crm", "x", {})
    assert info.value.code == "no_tools"


def test_an_async_handler_is_awaited_on_the_shared_loop() -> None:
    async def handler(server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"content": [{"type": "text", "text": f"{server}.{tool}"}]}

    bridge = as_bridge(handler)
    assert resolve(bridge.call_tool("crm", "list", {}), None) == {"content": [{"type": "text", "text": "crm.list"}]}


def test_an_async_bridge_runs_on_the_loop_it_is_given() -> None:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    seen: list[asyncio.AbstractEventLoop] = []

    class AsyncBridge(ToolBridge):
        async def call_tool(self, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            seen.append(asyncio.get_running_loop())
            return {"content": []}

    try:
        assert resolve(AsyncBridge().call_tool("s", "t", {}), loop) == {"content": []}
        assert seen == [loop]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_plain_values_pass_through_resolve() -> None:
    assert resolve({"a": 1}, None) == {"a": 1}
