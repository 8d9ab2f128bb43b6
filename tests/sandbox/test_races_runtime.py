"""`sandbox.host.Runtime` opened, used and closed from several threads at once: one server pool, never left running,
and the documented `SandboxError` rather than an `AssertionError`.

The interleavings are forced: the server pool's start and the bridge's making wait on gates the tests hold.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

import sandbox.mcp_bridge as mcp_bridge
import tool_tree.pool as tool_pool
from sandbox.errors import SandboxError
from sandbox.host import Runtime
from tests.support import in_thread, raw_server_tree
from tool_tree.config import load_config
from tool_tree.pool import BackgroundPool


def pool_threads() -> int:
    return sum(t.name == "tooltree-server-pool" for t in threading.enumerate())


@pytest.fixture
def runtime(tmp_path: Path) -> Runtime:
    tree, _ = raw_server_tree(tmp_path, [{"name": "echo", "inputSchema": {"type": "object"}}])
    return Runtime(load_config(tmp_path / "tooltree.yaml"), tree)


def test_threads_opening_a_runtime_at_once_start_one_server_pool(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: each started a server pool; the runtime kept the last, and close left the other running.
    entered: list[BackgroundPool] = []
    entering, release = threading.Event(), threading.Event()

    class Gated(BackgroundPool):
        def __enter__(self) -> BackgroundPool:
            entered.append(self)
            entering.set()
            assert release.wait(30)
            return super().__enter__()

    monkeypatch.setattr(tool_pool, "BackgroundPool", Gated, raising=False)
    before = pool_threads()
    opened: list[Runtime] = []
    first_done, first = in_thread(lambda: opened.append(runtime.open()))
    try:
        assert entering.wait(30)
        second_done, second = in_thread(lambda: opened.append(runtime.open()))
        assert not second_done.wait(0.5)  # waiting: before, in a second pool's start; now, for the first one's
    finally:
        release.set()
    assert first_done.wait(30) and second_done.wait(30)
    assert first == second == [] and opened == [runtime, runtime]
    runtime.close()
    assert len(entered) == 1
    assert pool_threads() == before


def test_the_bridge_asked_for_while_another_thread_opens_the_runtime_is_that_runtimes(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the asking thread found the pool started but no bridge yet: an AssertionError.
    making, release = threading.Event(), threading.Event()

    class Gated(mcp_bridge.McpBridge):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            making.set()
            assert release.wait(30)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(mcp_bridge, "McpBridge", Gated)
    opened, _ = in_thread(runtime.open)
    try:
        assert making.wait(30)
        outcome: list[object] = []
        asked, errors = in_thread(lambda: outcome.append(runtime.bridge))
        assert not asked.wait(0.5), f"it did not wait for the runtime to open: {outcome} {errors}"
    finally:
        release.set()
    try:
        assert opened.wait(30) and asked.wait(30)
        assert not errors and len(outcome) == 1 and isinstance(outcome[0], Gated) and outcome[0] is runtime.bridge
    finally:
        runtime.close()


def test_a_call_tool_that_meets_a_close_from_another_thread_says_the_runtime_is_closed(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: AssertionError (the pool gone between the bridge and the call).
    real = Runtime._direct_bridge

    def closed_meanwhile(self: Runtime) -> Any:
        bridge = real(self)
        done, _ = in_thread(self.close)
        assert done.wait(30)
        return bridge

    before = pool_threads()
    monkeypatch.setattr(Runtime, "_direct_bridge", closed_meanwhile)
    with pytest.raises(SandboxError, match="the runtime is closed"):
        runtime.call_tool("raw", "echo", {})
    assert pool_threads() == before


def test_a_call_tool_in_flight_when_another_thread_closes_the_runtime_says_the_runtime_closed(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: concurrent.futures.CancelledError (the pool's loop cancelled the call as it ended).
    running = threading.Event()

    class Waits:
        def begin_execution(self) -> None:
            pass

        async def call_tool(self, server: str, tool: str, arguments: dict[str, Any], **hooks: Any) -> dict[str, Any]:
            running.set()
            await asyncio.Event().wait()  # until the loop ends and cancels it
            raise AssertionError("not reached")

    monkeypatch.setattr(Runtime, "_direct_bridge", lambda self: (Waits(), None))  # the bridge, and no pool counted
    runtime.open()
    called, outcome = in_thread(lambda: runtime.call_tool("raw", "echo", {}))
    assert running.wait(30)
    runtime.close()
    assert called.wait(30)
    assert [type(e) for e in outcome] == [SandboxError]
    assert "the runtime was closed during the call" in str(outcome[0])
