"""A session's requests: refused at once where no bridge is needed, else served with few hand-offs."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from sandbox.bridge import FunctionBridge, ToolBridge, ToolCallRefused
from sandbox.calls import CallServer
from sandbox.request_budget import RequestBudget


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


class Searches(ToolBridge):
    """A synchronous search (as `McpBridge`'s) that burns ``cpu`` seconds of its thread's CPU, or waits for
    ``release`` when one is given; it records each query that ran and the CPU it measured itself."""

    def __init__(self, *, cpu: float = 0.0, release: threading.Event | None = None) -> None:
        self.cpu, self.release = cpu, release
        self.ran: list[str] = []
        self.measured: list[float] = []
        self.entered = threading.Event()
        self.running = 0
        self.most_at_once = 0
        self._lock = threading.Lock()

    def call_tool(self, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"content": []}

    def search_tools(self, query: str, *, detail: str = "summary", limit: int = 5, regex: bool = False) -> str:
        with self._lock:
            self.ran.append(query)
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        self.entered.set()
        started = time.thread_time()
        try:
            while time.thread_time() - started < self.cpu:
                pass
            if self.release is not None:
                assert self.release.wait(10), "the test never released the search"
            return f"found {query}"
        finally:
            self.measured.append(time.thread_time() - started)
            with self._lock:
                self.running -= 1


class RecordingBudget(RequestBudget):
    def __init__(self, *, burst: float) -> None:
        super().__init__(burst=burst, rate=0.01, clock=lambda: 0.0)  # a stopped clock: nothing refills
        self.charges: list[float] = []

    def charge(self, seconds: float) -> float:
        self.charges.append(seconds)
        return super().charge(seconds)


def search(query: str) -> dict[str, Any]:
    return {"query": query, "detail": "name", "limit": 3}


def test_a_search_is_charged_at_least_the_cpu_it_took_and_past_the_budget_searches_are_refused() -> None:
    tools, channel, budget = Searches(cpu=0.05), Answers(), RecordingBudget(burst=0.04)
    calls = CallServer(tools, None, search_budget=budget)
    calls.begin()
    calls.on_request(channel, "s1", "search_tools", search("leads"))
    assert channel.wait("s1")[:2] == ({"text": "found leads"}, None)
    assert sum(budget.charges) >= tools.measured[0] >= 0.05
    calls.on_request(channel, "s2", "search_tools", search("chart"))
    result, error, _ = channel.wait("s2")
    assert result is None and error is not None and error["code"] == "budget_exhausted"
    assert "budget exhausted: tool searches may take 0.04 s of host CPU at once" in error["message"]
    assert tools.ran == ["leads"]  # the refused search never reached the bridge
    calls.close()


def test_a_scripts_search_embeds_its_query_on_the_charged_thread_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: on a machine below full load, OpenBLAS's helper threads embedded the query, and their CPU
    # was not on the thread the search budget charges.
    import os

    from tool_tree.search import _blas

    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # an idle machine: OpenBLAS's own threads
    seen: list[int | None] = []

    class Policy(Searches):
        def search_tools(self, query: str, *, detail: str = "summary", limit: int = 5, regex: bool = False) -> str:
            seen.append(_blas.query_threads())
            return super().search_tools(query, detail=detail, limit=limit, regex=regex)

    tools, channel = Policy(), Answers()
    calls = CallServer(tools, None)
    calls.begin()
    calls.on_request(channel, "s1", "search_tools", search("leads"))
    assert channel.wait("s1")[:2] == ({"text": "found leads"}, None)
    assert seen == [1] and _blas.query_threads() is None  # one thread inside; the host's own searches unchanged
    calls.close()


def test_a_sessions_second_search_waits_for_its_first_while_another_sessions_search_runs() -> None:
    release = threading.Event()
    tools, channel = Searches(release=release), Answers()
    calls = CallServer(tools, None)
    calls.begin()
    calls.on_request(channel, "s1", "search_tools", search("first"))
    assert tools.entered.wait(10)
    calls.on_request(channel, "s2", "search_tools", search("second"))

    other_tools, other_channel = Searches(), Answers()
    other = CallServer(other_tools, None)
    other.begin()
    other.on_request(other_channel, "o1", "search_tools", search("elsewhere"))
    assert other_channel.wait("o1")[0] == {"text": "found elsewhere"}  # not held up by the first session's search

    assert "s2" not in channel.answers and tools.ran == ["first"]
    release.set()
    assert channel.wait("s1")[0] == {"text": "found first"}
    assert channel.wait("s2")[0] == {"text": "found second"}
    assert tools.ran == ["first", "second"] and tools.most_at_once == 1
    calls.close()
    other.close()


@pytest.mark.parametrize("next_execution", [False, True], ids=["ended", "next_execution_begun"])
def test_a_search_still_waiting_when_its_execution_ends_is_dropped_unrun(next_execution: bool) -> None:
    release = threading.Event()
    tools, channel = Searches(release=release), Answers()
    calls = CallServer(tools, None)
    calls.begin()
    calls.on_request(channel, "s1", "search_tools", search("running"))
    assert tools.entered.wait(10)
    calls.on_request(channel, "s2", "search_tools", search("queued"))
    calls.end()
    if next_execution:
        calls.begin()
    release.set()
    assert channel.wait("s1")[0] == {"text": "found running"}  # a search already running finishes
    result, error, _ = channel.wait("s2")
    assert result is None and error == {
        "code": "no_execution",
        "message": "the execution that asked for this search has ended",
    }
    assert tools.ran == ["running"]
    calls.close()
