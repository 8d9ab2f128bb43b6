"""The seam between a sandbox session and the real tools: `ToolBridge`.

A script's ``call_tool`` (every stub's body) travels worker → supervisor → host, where the
session hands it to its bridge. The bridge decides everything about the call — allowlist,
argument validation, budgets, timeouts, audit — and returns the MCP ``tools/call`` result as
a wire-format dict (``{"content": [...], "structuredContent": ..., "isError": ...}``), or
raises `ToolCallRefused` to fail the call with a message the script sees as ``ToolCallError``.

A bridge method may be synchronous or ``async``. Async ones run on the event loop the session
was given (``tool_loop=``, typically the loop holding the MCP sessions) or else on one shared
background loop.

A plain function ``(server, tool, arguments) -> result`` works wherever a bridge is expected.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar, cast

from sandbox.errors import SandboxError
from tool_tree.run_loop import wait_handed

T = TypeVar("T")

ToolHandler = Callable[[str, str, dict[str, Any]], dict[str, Any] | Awaitable[dict[str, Any]]]
"""``(server, tool, arguments) -> tools/call result`` (sync or async)."""


class ToolCallRefused(SandboxError):
    """Raised by a bridge to fail one call; the script gets ``ToolCallError(message, code)``."""

    def __init__(self, message: str, code: str = "refused") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class ToolBridge(ABC):
    """Carries a script's tool calls to real tools.

    Attributes:
        loop_bound: the bridge's async methods use what lives on one event loop (`McpBridge`: the MCP
            sessions of its pool), so a session must be given that loop as ``tool_loop``; with none,
            they would run on the shared background loop, where those things cannot work.
    """

    loop_bound = False

    @abstractmethod
    def call_tool(
        self, server: str, tool: str, arguments: dict[str, Any]
    ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        """Call one tool; return the wire-format ``tools/call`` result.

        Raises:
            ToolCallRefused: the call is not allowed or cannot be made.
        """

    def search_tools(
        self, query: str, *, detail: str = "summary", limit: int = 5, regex: bool = False
    ) -> str | Awaitable[str]:
        """The tools matching ``query``, rendered at ``detail`` (``name``, ``summary`` or ``full``).

        Raises:
            ToolCallRefused: this bridge offers no search (the default), or the query is bad.
        """
        raise ToolCallRefused(
            f"tool search is not available in this session: its bridge ({type(self).__name__}) offers none (an "
            "McpBridge over a tree does)",
            "unsupported",
        )

    def begin_execution(self) -> None:  # noqa: B027 - an optional hook, empty by default
        """Called before each execution starts (a bridge resets per-execution budgets here)."""

    def end_execution(self) -> None:  # noqa: B027 - an optional hook, empty by default
        """Called once an execution ended (its ledger taken): a bridge writes what it kept for the end here."""

    def refused(self, server: str, tool: str, code: str, message: str) -> None:  # noqa: B027 - optional, empty
        """A call of the script's that its session refused before handing it on (a name too long, arguments past the
        limits): recorded as the bridge records the calls it refuses itself (`McpBridge`: an audit line). ``server``
        and ``tool`` come cut and cleaned (`sandbox.results.ledger_name`), ``message`` too (`ledger_error`)."""

    def waiting_on(self, server: str, *, timed_out: bool = False) -> str:
        """Why a call of ``server`` still waited when its execution ended, when the bridge knows ("" otherwise):
        said after the ledger's "cancelled" (`sandbox.calls`). ``timed_out``: the script's timeout ended it (advice on
        a longer one fits then; not after a Ctrl-C, a cancel, or a script that ended on its own)."""
        return ""


class FunctionBridge(ToolBridge):
    """A bridge made of a plain function (and optionally a search function)."""

    def __init__(
        self,
        handler: ToolHandler,
        search: Callable[[str, str, int], str | Awaitable[str]] | None = None,
    ) -> None:
        self._handler = handler
        self._search = search

    def call_tool(
        self, server: str, tool: str, arguments: dict[str, Any]
    ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        return self._handler(server, tool, arguments)

    def search_tools(
        self, query: str, *, detail: str = "summary", limit: int = 5, regex: bool = False
    ) -> str | Awaitable[str]:
        if self._search is None:
            return super().search_tools(query, detail=detail, limit=limit, regex=regex)
        return self._search(query, detail, limit)


class NoToolsBridge(ToolBridge):
    """The bridge of a session without tools: every call is refused."""

    def call_tool(self, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        raise ToolCallRefused("this session has no tools", "no_tools")


def as_bridge(tools: ToolBridge | ToolHandler | None) -> ToolBridge:
    """A `ToolBridge` for a bridge, a handler function, or None (no tools).

    Raises:
        TypeError: ``tools`` is none of these (a config file's name, say), which would fail every call.
    """
    if tools is None:
        return NoToolsBridge()
    if isinstance(tools, ToolBridge):
        return tools
    if not callable(tools):
        raise TypeError(
            f"tools must be a ToolBridge (such as sandbox.mcp_bridge.McpBridge), a function "
            f"(server, tool, arguments) -> result, or None; got {type(tools).__name__} {_shown(tools)}"
        )
    return FunctionBridge(tools)


def _shown(value: object) -> str:
    """``value`` as an error message quotes it: its repr, cut at 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


_loop_lock = threading.Lock()
_background_loop: asyncio.AbstractEventLoop | None = None


def shared_loop() -> asyncio.AbstractEventLoop:
    """The background event loop that async bridge methods run on when a session was given none."""
    global _background_loop
    with _loop_lock:
        if _background_loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="tooltree-bridge-loop", daemon=True).start()
            _background_loop = loop
        return _background_loop


async def _await(value: Awaitable[T]) -> T:
    return await value


LOOP_CLOSED = (
    "the tools' event loop is closed (the session's tool_loop): the server pool it ran has ended, as when "
    "its `with BackgroundPool(...)` block is left; use the sandbox inside that block"
)
"""Why a tool call (or search) is refused when ``tool_loop`` was closed under a session (code ``tools_closed``)."""


class CallCancel:
    """Cancels a `Runtime.call_tool` in flight from another thread: ``cancel()`` cancels the call on the server
    pool's loop, which tells its server (``notifications/cancelled``) and frees its place; a cancel before the
    call was handed to the loop cancels it as it is. ``tooltree serve`` uses it when a client cancels a passthrough
    call: before, the call ran on to its end (a 10 s call cancelled after 2 s held a worker thread and the server's
    place for 10 s, and the audit log said ``ok``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._future: concurrent.futures.Future[Any] | None = None
        self.cancelled = False

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            future = self._future
        if future is not None:
            future.cancel()  # a no-op once the call is done

    def started(self, future: concurrent.futures.Future[Any]) -> None:
        """The call was handed to the loop as ``future`` (`sandbox.bridge.resolve`)."""
        with self._lock:
            self._future = future
            cancelled = self.cancelled
        if cancelled:
            future.cancel()


def resolve(
    value: T | Awaitable[T],
    loop: asyncio.AbstractEventLoop | None,
    *,
    started: Callable[[concurrent.futures.Future[T]], None] | None = None,
) -> T:
    """The value itself, or the result of awaiting it on ``loop`` (or the shared loop).

    Must be called from a thread that is not running ``loop``. Interrupted while waiting (Ctrl-C: a
    ``KeyboardInterrupt``), it cancels the call on ``loop`` before the interrupt goes on. ``started`` is given the
    future of a call handed to ``loop``, for another thread to cancel it (`CallCancel`).

    Raises:
        ToolCallRefused: ``loop`` is closed (`LOOP_CLOSED`, code ``tools_closed``).
    """
    if not isinstance(value, Awaitable):
        return value
    target = loop or shared_loop()
    coroutine = _await(cast(Awaitable[T], value))
    try:
        future = asyncio.run_coroutine_threadsafe(coroutine, target)
    except RuntimeError:
        if not target.is_closed():
            raise
        coroutine.close()  # never run, so neither awaited: no "never awaited" warnings
        if inspect.iscoroutine(value):
            value.close()
        raise ToolCallRefused(LOOP_CLOSED, "tools_closed") from None
    if started is not None:
        started(future)

    def refuse() -> NoReturn:  # the loop closed after taking the call, before running it: it dropped it
        coroutine.close()
        if inspect.iscoroutine(value):
            value.close()
        raise ToolCallRefused(LOOP_CLOSED, "tools_closed") from None

    try:
        return wait_handed(future, target.is_closed, refuse)
    except BaseException:
        # Ctrl-C (or any error) while waiting: nobody waits for the call any more, so it is cancelled on its loop
        # (the server is told) rather than run on to its end (a no-op once it is done).
        future.cancel()
        raise
