"""A client that leaves over HTTP without a ``DELETE`` (Claude Code exits so, after every ``claude -p``): its
``GET`` stream's close is the sign, and its sandbox session ends `GONE_GRACE` seconds later unless the client came
back, instead of holding its container and servers for the whole ``idle_timeout``.

In process: the registry with runtimes that only record their close, and the gate with a stand-in for the SDK's app.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from starlette.types import Message

from agent.serve.http_gate import SessionGate
from agent.serve.sessions import ClientSession, SessionRegistry
from agent.toolsets.base import ToolOutcome
from tests.serve.test_soak_gate import App, request

pytestmark = pytest.mark.anyio

WAIT = 30.0
HOUR = 3600.0


class RecordedRuntime:
    """What a session needs of a runtime here: no sandbox started, and a close that is recorded."""

    running_sandbox = None
    workspace = None  # serve without --workspace

    def __init__(self, closed: list[str], key: str, event: anyio.Event) -> None:
        self.closed, self.key, self.event = closed, key, event

    def close(self) -> None:
        self.closed.append(self.key)
        self.event.set()


def registry(closed: list[str], event: anyio.Event, *, gone_grace: float) -> SessionRegistry:
    return SessionRegistry(
        lambda key: RecordedRuntime(closed, key, event),  # type: ignore[arg-type,return-value]
        idle_timeout=HOUR,
        max_sessions=4,
        gone_grace=gone_grace,
    )


async def test_a_session_whose_client_closed_its_stream_ends_after_the_grace_and_its_next_call_hears_why() -> None:
    closed: list[str] = []
    event = anyio.Event()
    sessions = registry(closed, event, gone_grace=0.2)
    for key in ("gone", "stays"):
        async with sessions.use(key):
            pass
        sessions.stream(key, opened=True)
    sessions.stream("gone", opened=False)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sessions.expire_idle)
        with anyio.fail_after(WAIT):
            await event.wait()
        tg.cancel_scope.cancel()
    assert closed == ["gone"]
    assert sessions.get("gone") is None and sessions.get("stays") is not None
    async with sessions.use("gone") as again:
        # Before: "saved workspace files remain", though without --workspace nothing of /workspace is kept.
        assert again.note == ("a new sandbox session: the previous one ended 0.2 s after its client's connection "
                              "closed; variables and imports are gone, so are the files in /workspace (serve runs "
                              "without --workspace: nothing is saved)")  # fmt: skip


def test_a_client_that_comes_back_or_calls_again_keeps_its_session() -> None:
    sessions = registry([], anyio.Event(), gone_grace=60)
    session = ClientSession("k", RecordedRuntime([], "k", anyio.Event()))  # type: ignore[arg-type]
    session.last_used = 1000.0
    assert sessions._why_end(session, 1000.0 + HOUR - 1) is None  # its stream is open: only idle_timeout ends it
    session.gone_since = 1010.0
    assert sessions._why_end(session, 1069.0) is None
    assert sessions._why_end(session, 1070.0) == "60 s after its client's connection closed"
    session.busy = 1  # a call in flight: the client is there
    assert sessions._why_end(session, 1070.0) is None
    session.busy, session.last_used = 0, 1050.0  # a call after the stream closed counts from that call
    assert sessions._why_end(session, 1070.0) is None
    sessions.stream("k", opened=True)  # not in the registry: nothing happens
    assert sessions._why_end(session, 1110.0) == "60 s after its client's connection closed"
    assert sessions._why_end(session, 1050.0 + HOUR) == f"after {HOUR:g} s without a call"


async def test_a_call_or_a_reopened_stream_clears_the_sign_that_the_client_left() -> None:
    sessions = registry([], anyio.Event(), gone_grace=60)
    async with sessions.use("k"):
        pass
    session = sessions.get("k")
    assert session is not None
    left = []
    for opened in (False, True, False):
        sessions.stream("k", opened=opened)
        left.append(session.gone_since is not None)
    async with sessions.use("k"):
        left.append(session.gone_since is not None)
    assert left == [True, False, True, False]


async def test_the_gate_tells_when_a_sessions_get_stream_opens_and_when_it_closes() -> None:
    heard: list[tuple[str, bool]] = []
    changed = anyio.Event()

    def on_stream(key: str, opened: bool) -> None:
        heard.append((key, opened))
        changed.set()

    async def on_end(key: str) -> None:
        pass

    gate = SessionGate(App(), max_sessions=4, idle_timeout=HOUR, on_end=on_end, on_stream=on_stream)
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}).encode()
    given = iter([{"type": "http.request", "body": body, "more_body": False}])

    async def receive_post() -> Message:
        return next(given)

    await gate(request("POST", {"content-length": str(len(body))}), receive_post, send)
    assert sent[0]["status"] == 200

    disconnect = anyio.Event()
    first = True

    async def receive_get() -> Message:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": b"", "more_body": False}
        await disconnect.wait()
        return {"type": "http.disconnect"}

    with anyio.fail_after(WAIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(gate, request("GET", {"mcp-session-id": "s1"}), receive_get, send)
            await changed.wait()
            assert heard == [("s1", True)]
            disconnect.set()
    assert heard == [("s1", True), ("s1", False)]
    # A GET of a session the gate does not know is not a sign of anything.
    await gate(request("GET", {"mcp-session-id": "other"}), receive_get, send)
    assert heard == [("s1", True), ("s1", False)]


class Scripted:
    """A toolset whose ``execute_python`` raises NameError in the script (as the sandbox reports it)."""

    def call(self, name: str, arguments: Any, runtime: Any) -> ToolOutcome:
        text = '[error]\nTraceback (most recent call last):\n  File "<cell-1>", line 1, in <module>\n'
        text += "NameError: name 'x' is not defined"
        return ToolOutcome([{"type": "text", "text": text}], is_error=True)


class Opened:
    """A runtime already open, whose sandbox starts at once (and has no workspace to save), and whose bridge takes the
    execution's askers (`sandbox.mcp_bridge.McpBridge.script_asks`)."""

    sandbox_started = True
    running_sandbox = None
    script_asks = None
    workspace = None

    class stale:  # the bridge's count of calls refused for a tree regenerated under the session: none
        count = 0

    def __init__(self) -> None:
        self.sandbox = self.bridge = self

    def open(self) -> Opened:
        return self

    def start(self) -> None:
        pass


def test_a_name_error_in_a_sessions_first_script_says_the_session_is_new() -> None:
    # Claude Code reconnects silently after serve restarted: before, its next script's NameError was all it saw.
    from agent.serve.client_session import _Execution
    from agent.serve.content import NEW_SESSION_HINT

    session = ClientSession("k", Opened())  # type: ignore[arg-type]
    first = session._execute(Scripted(), {"code": "print(x)"}, _Execution())  # type: ignore[arg-type]
    again = session._execute(Scripted(), {"code": "print(x)"}, _Execution())  # type: ignore[arg-type]
    assert first.is_error and first.content[1] == {"type": "text", "text": NEW_SESSION_HINT}
    assert "NameError" in first.content[0]["text"]
    assert again.is_error and len(again.content) == 1
