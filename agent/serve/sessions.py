"""One sandbox session per MCP client session, and the end of idle ones.

A `ClientSession` owns one `Runtime`: the upstream servers (started on their first call), the
bridge, and a sandbox session taken from the warm pool on first use. Its variables persist
between ``execute_python`` calls of that client and of no other. It ends when the client
disconnects (stdio: stdin closes; HTTP: ``DELETE``), when it has been idle for
``idle_timeout`` seconds, or when the server stops; ending it stops its container and upstream
servers and saves the workspace (one save at a time, so two sessions of one workspace never
write it at once). A client that calls again after its session ended gets a new one, and its
first result says so.

Runtimes are synchronous (threads); everything here runs them in worker threads so the MCP
event loop never blocks.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio

from agent.toolsets.base import ToolOutcome, error

if TYPE_CHECKING:
    from agent.toolsets.code import CodeToolset
    from sandbox.host import Runtime

logger = logging.getLogger(__name__)

CANCEL_WAIT = 15.0
"""Seconds a cancelled call waits for its execution to stop (the sandbox's grace is 3 s) before moving on."""
CLOSE_WAIT = 60.0
"""Seconds the server waits for its sessions to close when it stops."""
_EXPIRED_KEPT = 1024

Progress = Callable[[float], Awaitable[None]]
"""Called with the seconds a script has been running, every ``progress_interval`` seconds."""


class SessionLimitError(Exception):
    """``max_sessions`` client sessions are open already."""


class ClientSession:
    """The runtime of one MCP client session.

    Args:
        key: what identifies the client session (``"stdio"``, or the ``Mcp-Session-Id``).
        runtime: its runtime, not yet opened.
    """

    def __init__(self, key: str, runtime: Runtime) -> None:
        self.key = key
        self.runtime = runtime
        self.last_used = time.monotonic()
        self.busy = 0
        self.note = ""
        """Said once, in front of the first result (e.g. that an earlier session of this client ended)."""
        self.executions = anyio.Lock()
        self._open_lock = threading.Lock()

    def opened(self) -> Runtime:
        """The runtime, opened (from a worker thread): its server pool runs, servers start on first call."""
        with self._open_lock:
            return self.runtime.open()

    def _with_note(self, outcome: ToolOutcome) -> ToolOutcome:
        note, self.note = self.note, ""
        if note and outcome.content and outcome.content[0].get("type") == "text":
            first = outcome.content[0]
            outcome.content[0] = {**first, "text": f"[{note}]\n\n{first['text']}"}
        return outcome

    def call(self, toolset: CodeToolset, name: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        """One of the four tools, from a worker thread; a server or sandbox that cannot start is an error outcome."""
        from sandbox.errors import SandboxError
        from tool_tree.pool import PoolError

        try:
            return self._with_note(toolset.call(name, arguments, self.opened()))
        except (SandboxError, PoolError) as e:
            return error(f"{name} failed: the sandbox or the servers could not start: {e}")

    async def execute(
        self, toolset: CodeToolset, arguments: Mapping[str, Any], progress: Progress, interval: float
    ) -> ToolOutcome:
        """``execute_python``: one at a time per session, ``progress`` every ``interval`` s while it runs.

        Cancelled (the client's ``notifications/cancelled``, or its disconnect), it stops the
        script and waits for it to end, so the next execution of this session never overlaps it.
        """
        async with self.executions:
            done = threading.Event()
            box: list[ToolOutcome] = []

            def work() -> None:
                try:
                    box.append(self.call(toolset, "execute_python", arguments))
                finally:
                    done.set()

            threading.Thread(target=work, name=f"serve-execute-{self.key[:8]}", daemon=True).start()
            started = time.monotonic()
            try:
                while not await anyio.to_thread.run_sync(done.wait, interval, abandon_on_cancel=True):
                    await progress(time.monotonic() - started)
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self.cancel)
                    if not await anyio.to_thread.run_sync(done.wait, CANCEL_WAIT, abandon_on_cancel=True):
                        logger.warning("session %s: a cancelled execution is still running", self.key[:16])
                raise
            return box[0] if box else error("the execution ended without a result")

    def cancel(self) -> bool:
        """Stop the running execution (the session stays)."""
        return self.runtime.sandbox_started and self.runtime.sandbox.cancel()

    def close(self) -> None:
        """Stop the sandbox and the upstream servers; save the workspace (from a worker thread)."""
        self.runtime.close()


class SessionRegistry:
    """The open client sessions, by key.

    Args:
        make_runtime: a new (unopened) runtime for a client session key.
        idle_timeout: seconds without a call after which a session ends.
        max_sessions: the most sessions at once.
    """

    def __init__(self, make_runtime: Callable[[str], Runtime], *, idle_timeout: float, max_sessions: int) -> None:
        self._make_runtime = make_runtime
        self.idle_timeout = idle_timeout
        self.max_sessions = max_sessions
        self._sessions: dict[str, ClientSession] = {}
        self._expired: OrderedDict[str, float] = OrderedDict()
        self._close_lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, key: str) -> ClientSession | None:
        return self._sessions.get(key)

    @asynccontextmanager
    async def use(self, key: str) -> AsyncIterator[ClientSession]:
        """The session of ``key`` (created on first use), marked busy while in use so it does not expire.

        Raises:
            SessionLimitError: it would be one session too many.
        """
        session = self._sessions.get(key)
        if session is None:
            if len(self._sessions) >= self.max_sessions:
                raise SessionLimitError(f"{self.max_sessions} client sessions are open (serve.max_sessions)")
            session = ClientSession(key, self._make_runtime(key))
            ended = self._expired.pop(key, None)
            if ended is not None:
                session.note = (
                    f"a new sandbox session: the previous one ended after {ended:g} s without a call; "
                    "variables and imports are gone, saved workspace files remain"
                )
            self._sessions[key] = session
        session.busy += 1
        session.last_used = time.monotonic()
        try:
            yield session
        finally:
            session.busy -= 1
            session.last_used = time.monotonic()

    async def end(self, key: str) -> None:
        """End one session (the client disconnected); nothing when there is none."""
        session = self._sessions.pop(key, None)
        if session is not None:
            await self._close(session)

    async def _close(self, session: ClientSession) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._close_one, session)

    def _close_one(self, session: ClientSession) -> None:
        from sandbox.errors import SandboxError

        session.cancel()  # a running script would hold the sandbox until its timeout
        with self._close_lock:  # one workspace save at a time
            try:
                session.close()
            except (SandboxError, OSError) as e:
                logger.warning("session %s did not close cleanly: %s", session.key[:16], e)

    async def expire_idle(self) -> None:
        """End sessions idle for ``idle_timeout`` seconds, forever (run it as a task)."""
        check = max(0.05, min(30.0, self.idle_timeout / 4))
        while True:
            await anyio.sleep(check)
            now = time.monotonic()
            idle = [s for s in self._sessions.values() if s.busy == 0 and now - s.last_used >= self.idle_timeout]
            for session in idle:
                if self._sessions.get(session.key) is session:
                    del self._sessions[session.key]
                    self._expired[session.key] = self.idle_timeout
                    while len(self._expired) > _EXPIRED_KEPT:
                        self._expired.popitem(last=False)
                    logger.info("session %s ended after %g s idle", session.key[:16], self.idle_timeout)
                    await self._close(session)

    async def aclose(self) -> None:
        """End every session (the server stops): running scripts are cancelled first."""
        sessions, self._sessions = list(self._sessions.values()), {}
        with anyio.move_on_after(CLOSE_WAIT, shield=True):
            async with anyio.create_task_group() as tg:
                for session in sessions:
                    tg.start_soon(self._close, session)
