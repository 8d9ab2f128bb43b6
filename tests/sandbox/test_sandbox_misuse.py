"""Mistakes in using the Python API are refused at once, by name, before anything runs or changes.

`Sandbox.execute`'s ``code``, ``timeout`` and ``filename``; a ``tools`` that is no bridge; an `McpBridge`
without its pool's loop; a session whose tool loop was closed under it; an interrupt while a session
restores its workspace. (In a real container: tests/sandbox/test_sandbox_interrupts.py.)
"""

from __future__ import annotations

import asyncio
import math
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from sandbox import Sandbox, SandboxConfig, SessionError
from sandbox.backend import Connection, SandboxBackend
from sandbox.bridge import LOOP_CLOSED, FunctionBridge, ToolBridge, ToolCallRefused, resolve
from sandbox.calls import CallServer
from sandbox.config import MAX_TIMEOUT
from sandbox.errors import SandboxError
from sandbox.mcp_bridge import McpBridge
from tests.sandbox.conftest import write_sample_tree
from tests.sandbox.test_calls import Answers, AsyncTools, call
from tests.sandbox.test_config import section_error
from tests.security.test_bridge_input import CONFIG, PipeBackend, PipeSupervisor
from tests.support import TEST_OWNER
from tool_tree.pool import ServerPool


class NeverLaunched(SandboxBackend):
    """A backend for sessions that must not get as far as a container."""

    def __init__(self) -> None:
        self.config = SandboxConfig(owner=TEST_OWNER)
        self.launches = 0

    def prepare(self) -> None:
        pass

    def launch(self, session_id: str) -> Connection:
        self.launches += 1
        raise AssertionError("no container should be launched")

    def verify_ready(self, connection: Connection, status: Mapping[str, Any]) -> None:
        pass


@pytest.fixture
def closed_loop() -> asyncio.AbstractEventLoop:
    """An event loop that ran and was closed, as a BackgroundPool's is once its ``with`` block is left."""
    loop = asyncio.new_event_loop()
    loop.close()
    return loop


# ---- execute's arguments -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("timeout", "error", "message"),
    [
        (0, ValueError, "timeout must be more than 0 and at most 604800 seconds (a week), got 0"),
        (-1, ValueError, "timeout must be more than 0 and at most 604800 seconds (a week), got -1"),
        (math.nan, ValueError, "timeout must be more than 0 and at most 604800 seconds (a week), got nan"),
        (math.inf, ValueError, "timeout must be more than 0 and at most 604800 seconds (a week), got inf"),
        (1e10, ValueError, "timeout must be more than 0 and at most 604800 seconds (a week), got 10000000000.0"),
        (10**12, ValueError, "timeout must be more than 0 and at most 604800 seconds (a week), got 1000000000000"),
        ("5", TypeError, "timeout must be a number of seconds (int or float) or None, got str '5'"),
        (True, TypeError, "timeout must be a number of seconds (int or float) or None, got bool True"),
    ],
    ids=["zero", "negative", "nan", "inf", "1e10", "10**12", "str", "bool"],
)
def test_a_bad_timeout_is_refused_by_name_before_the_session_is_touched(
    timeout: Any, error: type[Exception], message: str
) -> None:
    # Not even started: the argument is refused before the session is looked at (a started one would have
    # run the code with no time at all, lost its state, or been left saying an execution was running).
    sb = Sandbox(NeverLaunched())
    with pytest.raises(error) as info:
        sb.execute("print('ran')", timeout=timeout)
    assert str(info.value) == message


def test_the_longest_timeout_is_a_week() -> None:
    assert MAX_TIMEOUT == 7 * 24 * 3600
    with pytest.raises(SessionError, match="not started"):  # accepted: on to the session
        Sandbox(NeverLaunched()).execute("print('ran')", timeout=MAX_TIMEOUT)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (None, "code must be a str (the Python source to run), got NoneType None"),
        (5, "code must be a str (the Python source to run), got int 5"),
        (b"print(1)", "code must be a str (the Python source to run), got bytes b'print(1)'"),
    ],
)
def test_code_that_is_not_a_str_is_refused(code: Any, message: str) -> None:
    with pytest.raises(TypeError) as info:
        Sandbox(NeverLaunched()).execute(code)
    assert str(info.value) == message


def test_a_filename_that_is_not_a_str_is_refused() -> None:
    with pytest.raises(TypeError, match=r"^filename must be a str or None, got PosixPath"):
        Sandbox(NeverLaunched()).execute("print(1)", filename=Path("job.py"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("timeout", 1e10, "timeout: expected at most 604800 seconds (a week), got 10000000000.0"),
        ("start_timeout", 10**12, "start_timeout: expected at most 604800 seconds (a week), got 1000000000000"),
    ],
)
def test_the_config_refuses_timeouts_past_a_week_too(field: str, value: float, expected: str) -> None:
    with pytest.raises(SandboxError) as info:
        SandboxConfig(**{field: value})  # type: ignore[arg-type]
    assert str(info.value) == expected


def test_a_config_file_timeout_past_a_week_is_named_with_file_and_line() -> None:
    assert section_error("  timeout: 10000000000\n") == (
        "tooltree.yaml:3: sandbox.timeout: expected at most 604800 seconds (a week), got 10000000000.0"
    )


# ---- tools ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("tools", ["tooltree.yaml", 42, {"crm": "list_leads"}], ids=["str", "int", "dict"])
def test_tools_that_are_no_bridge_nor_function_are_refused_at_construction(tools: Any) -> None:
    backend = NeverLaunched()
    with pytest.raises(TypeError) as info:
        Sandbox(backend, tools=tools)
    assert str(info.value).startswith(
        "tools must be a ToolBridge (such as sandbox.mcp_bridge.McpBridge), a function "
        f"(server, tool, arguments) -> result, or None; got {type(tools).__name__} "
    )
    assert backend.launches == 0


def test_a_pool_refuses_bad_arguments_without_spending_a_warm_sandbox(tmp_path: Path) -> None:
    from sandbox.errors import WorkspaceError
    from sandbox.pool import SandboxPool

    class Pipes(PipeBackend):
        """A fresh pipe supervisor for every launch."""

        def __init__(self) -> None:  # no peer until the first launch
            self.config = CONFIG
            self.peers: list[PipeSupervisor] = []

        def launch(self, session_id: str) -> PipeSupervisor:
            self.peer = PipeSupervisor()
            self.peers.append(self.peer)
            return super().launch(session_id)

    backend = Pipes()
    (tmp_path / "a-file").write_text("not a folder", encoding="utf-8")
    pool = SandboxPool(backend, size=1).start()
    try:
        pool.wait_ready(timeout=10)
        warm = backend.peers[0]
        with pytest.raises(TypeError, match=r"^tools must be a ToolBridge"):
            pool.acquire(tools="tooltree.yaml")  # type: ignore[arg-type]
        with pytest.raises(WorkspaceError, match="not a folder"):
            pool.acquire(workspace=tmp_path / "a-file")  # was refused after the warm sandbox was taken: lost
        sb = pool.acquire(timeout=10)
        assert sb._channel is not None and sb._channel.connection is warm and not warm.killed.is_set()
        sb.kill()
    finally:
        pool.close()


def test_waiting_on_a_pool_that_cannot_warm_says_why_at_once() -> None:
    import time

    from sandbox.errors import EngineError
    from sandbox.pool import SandboxPool

    class Refused(PipeBackend):
        def __init__(self) -> None:
            self.config = CONFIG

        def launch(self, session_id: str) -> PipeSupervisor:
            raise EngineError("unknown runtime specified bogus", command=["create"], returncode=400)

    pool = SandboxPool(Refused(), size=1)
    started = time.monotonic()
    with pytest.raises(SessionError, match=r"^the pool is not started: call start\(\)"):
        pool.wait_ready(timeout=60)  # before: waited the whole 60 s, then "did not warm 1 sandboxes ...: None"
    pool.start()
    try:
        with pytest.raises(SessionError, match=r"no pooled sandbox can start: .*unknown runtime specified bogus"):
            pool.wait_ready(timeout=60)  # before: 60 s of retries of the same refusal
    finally:
        pool.close()
    with pytest.raises(SessionError, match=r"^the pool is closed$"):
        pool.wait_ready(timeout=60)
    assert time.monotonic() - started < 30


def test_an_mcp_bridge_without_its_pools_loop_is_refused_naming_tool_loop(tmp_path: Path) -> None:
    # Its calls would run on the shared background loop: they worked, but the servers they started were
    # tied to that loop, so leaving the BackgroundPool waited 60 s for them and they ran on until exit.
    bridge = McpBridge(write_sample_tree(tmp_path), ServerPool([]))
    with pytest.raises(ValueError) as info:
        Sandbox(NeverLaunched(), tools=bridge)
    assert str(info.value) == (
        "tools: McpBridge calls servers whose sessions live on its pool's event loop; pass that loop too: "
        "Sandbox(..., tools=bridge, tool_loop=pool.loop) with pool the BackgroundPool"
    )
    loop = asyncio.new_event_loop()
    try:
        assert Sandbox(NeverLaunched(), tools=bridge, tool_loop=loop).tool_loop is loop
    finally:
        loop.close()


def test_other_async_bridges_may_still_use_the_shared_loop() -> None:
    assert not AsyncTools.loop_bound
    assert Sandbox(NeverLaunched(), tools=AsyncTools()).tool_loop is None


# ---- a tool loop closed under the session -----------------------------------------------------------


def test_a_call_after_the_tool_loop_closed_says_so_and_is_ledgered_as_refused(
    closed_loop: asyncio.AbstractEventLoop,
) -> None:
    tools, channel = AsyncTools(), Answers()
    calls = CallServer(tools, closed_loop)
    calls.begin()
    calls.on_request(channel, "c1", "tool_call", call())
    assert channel.wait("c1")[:2] == (None, {"code": "tools_closed", "message": LOOP_CLOSED})
    assert "event loop is closed" in LOOP_CLOSED and "BackgroundPool" in LOOP_CLOSED
    ledger = calls.end()
    assert [(r.server, r.tool, r.ok, r.error) for r in ledger] == [("crm", "list", False, LOOP_CLOSED)]
    assert ledger[0].request_bytes > 0 and tools.threads == []
    assert calls.arguments_in_flight.nodes == 0
    calls.close()


def test_an_async_handler_on_a_closed_loop_is_refused_the_same_way(closed_loop: asyncio.AbstractEventLoop) -> None:
    async def handler(server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("never run")

    channel = Answers()
    calls = CallServer(FunctionBridge(handler), closed_loop)
    calls.begin()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no coroutine is left "never awaited"
        calls.on_request(channel, "c1", "tool_call", call())
        assert channel.wait("c1")[:2] == (None, {"code": "tools_closed", "message": LOOP_CLOSED})
    assert [(r.ok, r.error) for r in calls.end()] == [(False, LOOP_CLOSED)]
    calls.close()


def test_resolve_on_a_closed_loop_refuses_the_call(closed_loop: asyncio.AbstractEventLoop) -> None:
    class Late(ToolBridge):
        async def call_tool(self, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            return {"content": []}

    with pytest.raises(ToolCallRefused) as info:
        resolve(Late().call_tool("s", "t", {}), closed_loop)
    assert (info.value.code, info.value.message) == ("tools_closed", LOOP_CLOSED)


# ---- interrupts while a session starts --------------------------------------------------------------


def test_an_interrupt_while_the_workspace_is_restored_destroys_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sandbox.session as session_module

    def interrupted(*args: Any, **kwargs: Any) -> Iterator[Any]:
        raise KeyboardInterrupt
        yield  # a generator, as the real one is

    monkeypatch.setattr(session_module, "iter_restore_batches", interrupted)
    (tmp_path / "ws").mkdir()
    peer = PipeSupervisor()
    sb = Sandbox(PipeBackend(peer), workspace=tmp_path / "ws")
    with pytest.raises(KeyboardInterrupt):
        sb.start()  # `with Sandbox(...)` would never reach __exit__: start must clean up itself
    assert peer.killed.is_set()
    with pytest.raises(SessionError, match="closed"):
        sb.execute("print(1)")


def test_start_after_close_launches_nothing() -> None:
    backend = NeverLaunched()
    sb = Sandbox(backend)
    sb.close()
    with pytest.raises(SessionError, match=r"^the sandbox session is closed$"):
        sb.start()
    assert backend.launches == 0


def test_a_session_closed_before_it_started_says_it_is_closed_not_to_start_it() -> None:
    # Before: "the sandbox session is not started (use it as a context manager or call start())", and start()
    # then said it was closed.
    sb = Sandbox(NeverLaunched())
    sb.close()
    for use in (lambda: sb.execute("print(1)"), lambda: sb.list_files(), lambda: sb.read_file("a"), sb.reset):
        with pytest.raises(SessionError, match=r"^the sandbox session is closed$"):
            use()
    with pytest.raises(SessionError, match=r"^the sandbox session is not started \(use it as a context manager"):
        Sandbox(NeverLaunched()).execute("print(1)")


def test_an_interrupt_between_launch_and_the_channel_destroys_the_container(monkeypatch: pytest.MonkeyPatch) -> None:
    import sandbox.session as session_module

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(session_module, "SupervisorChannel", interrupted)
    peer = PipeSupervisor()
    with pytest.raises(KeyboardInterrupt):
        session_module.open_channel(PipeBackend(peer), "s1")
    assert peer.killed.is_set()
    peer.stdin.close()  # a channel would have closed them; a container's socket goes with the container
    peer.stdout.close()
