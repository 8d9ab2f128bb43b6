"""A session's requests: refused at once where no bridge is needed, else served with few hand-offs."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from sandbox.bridge import FunctionBridge, ToolBridge, ToolCallRefused
from sandbox.calls import CallServer


class Answers:
    """A channel that records each answer and the thread that wrote it."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None, str]] = {}
        self._cond = threading.Condition()

    def respond(
        self, call_id: str, *, result: dict[str, Any] | None = None, error: dict[str, Any] | None = None
    ) -> None:
        with self._cond:
            self.answers[call_id] = (result, error, threading.current_thread().name)
            self._cond.notify_all()

    def wait(self, call_id: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str]:
        with self._cond:
            assert self._cond.wait_for(lambda: call_id in self.answers, timeout=10), f"no answer to {call_id}"
            return self.answers[call_id]


class AsyncTools(ToolBridge):
    def __init__(self) -> None:
        self.threads: list[str] = []

    async def call_tool(self, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.threads.append(threading.current_thread().name)
        if tool == "refuse":
            raise ToolCallRefused("not in the manifest", "not_allowed")
        if tool == "big":
            return {"content": [{"type": "text", "text": str(i)} for i in range(3000)]}
        return {"content": [{"type": "text", "text": f"{tool} {arguments}"}]}


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="tool-loop", daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def call(server: str = "crm", tool: str = "list", arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"server": server, "tool": tool, "arguments": {"a": 1} if arguments is None else arguments}


def test_an_async_bridge_is_served_on_its_loop_and_answered_from_it(loop: asyncio.AbstractEventLoop) -> None:
    tools, channel = AsyncTools(), Answers()
    calls = CallServer(tools, loop)
    calls.begin()
    calls.on_request(channel, "c1", "tool_call", call())
    calls.on_request(channel, "c2", "tool_call", call(tool="refuse"))
    assert channel.wait("c1") == ({"content": [{"type": "text", "text": "list {'a': 1}"}]}, None, "tool-loop")
    assert channel.wait("c2") == (None, {"code": "not_allowed", "message": "not in the manifest"}, "tool-loop")
    assert tools.threads == ["tool-loop", "tool-loop"]
    ledger = calls.end()
    assert [(r.tool, r.ok, r.error) for r in ledger] == [("list", True, None), ("refuse", False, "not in the manifest")]
    assert calls.arguments_in_flight.bytes == 0 and calls.arguments_in_flight.nodes == 0
    calls.close()


def test_a_result_too_large_for_the_loop_is_encoded_on_the_thread_pool(loop: asyncio.AbstractEventLoop) -> None:
    channel = Answers()
    calls = CallServer(AsyncTools(), loop)
    calls.begin()
    calls.on_request(channel, "c1", "tool_call", call(tool="big"))
    result, error, thread = channel.wait("c1")
    assert error is None and result is not None and len(result["content"]) == 3000
    assert thread.startswith("sandbox-tool")
    assert calls.end()[0].response_bytes > 30_000
    calls.close()


def test_a_synchronous_bridge_is_served_on_the_thread_pool() -> None:
    channel = Answers()
    calls = CallServer(
        FunctionBridge(lambda s, t, a: {"content": [], "threads": threading.current_thread().name}), None
    )
    calls.begin()
    calls.on_request(channel, "c1", "tool_call", call())
    result, _, thread = channel.wait("c1")
    assert result is not None and result["threads"].startswith("sandbox-tool") and thread == result["threads"]
    calls.close()


@pytest.mark.parametrize(
    ("method", "params", "executing", "code"),
    [
        ("tool_call", call(), False, "no_execution"),
        ("shell", {}, True, "unknown_method"),
        ("tool_call", call(server=7), True, "invalid_arguments"),  # type: ignore[arg-type]
        ("tool_call", call(tool="t" * 257), True, "invalid_arguments"),
        ("tool_call", call(arguments={"pad": [0] * 100_000}), True, "arguments_too_large"),
        ("tool_call", None, True, "arguments_too_large"),  # refused unparsed by the channel
        ("search_tools", None, True, "invalid_arguments"),
    ],
    ids=["no_execution", "unknown_method", "malformed", "long_name", "too_many_values", "unparsed", "unparsed_search"],
)
def test_what_needs_no_bridge_is_refused_at_once_on_the_callers_thread(
    loop: asyncio.AbstractEventLoop, method: str, params: dict[str, Any] | None, executing: bool, code: str
) -> None:
    tools, channel = AsyncTools(), Answers()
    calls = CallServer(tools, loop)
    if executing:
        calls.begin()
    calls.on_request(channel, "c1", method, params)
    assert "c1" in channel.answers  # answered before on_request returned
    result, error, thread = channel.answers["c1"]
    assert result is None and error is not None and error["code"] == code
    assert thread == threading.current_thread().name and tools.threads == []
    assert calls.arguments_in_flight.nodes == 0
    calls.close()
