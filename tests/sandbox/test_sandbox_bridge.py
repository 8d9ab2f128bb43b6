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


def test_a_call_handed_to_a_loop_that_closes_before_running_it_is_refused_not_waited_for_ever() -> None:
    # The window: a BackgroundPool's loop between its last round of tasks and its close (a script's tool call, or
    # Runtime.call_tool, arriving as the runtime closes). Before: resolve waited for ever, holding its thread.
    from sandbox.bridge import LOOP_CLOSED
    from tests.support import wait_until

    async def tool() -> str:
        return "never"

    loop = asyncio.new_event_loop()  # not running: the call is queued on it, never run
    outcome: list[object] = []
    done = threading.Event()

    def caller() -> None:
        try:
            outcome.append(resolve(tool(), loop))
        except ToolCallRefused as e:
            outcome.append(e)
        done.set()

    threading.Thread(target=caller, daemon=True).start()
    wait_until(lambda: len(loop._ready) == 1, "the call to be queued on the loop")  # type: ignore[attr-defined]
    loop.close()  # drops the queued call
    assert done.wait(10), "resolve still waits for a call the closed loop will never run"
    assert isinstance(outcome[0], ToolCallRefused) and str(outcome[0]) == LOOP_CLOSED
