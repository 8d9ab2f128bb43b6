"""The guard of a session's read and write streams: the budgets of `tool_tree.budget` applied to the messages an
SDK transport parsed, and the stream wrappers it is built on.

For a transport whose reader is not tooltree's (Streamable HTTP; the SDK's stdio transport when tooltree's cannot
be used), `guard` drops notifications past the server's `tool_tree.budget.NotificationBudget`, refuses requests
over `tool_tree.budget.MAX_REQUEST_VALUES`, counts the server's requests and the client's
(`tool_tree.ledgers`), and ends the session on a limit broken; `guarded` enters a transport with its streams
guarded. `ReadWrapper` and `WriteWrapper` wrap a transport's streams (also the base of `tool_tree.connect`'s
and `tool_tree.listing_check`'s wrappers).
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from types import TracebackType
from typing import Self

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from mcp.client._transport import ReadStream, TransportStreams, WriteStream
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import SessionMessage

from tool_tree.answer_items import trim
from tool_tree.budget import MAX_REQUEST_VALUES, NotificationBudget, more_values_than, refusal, too_deep
from tool_tree.ledgers import Outstanding, ServerRequests, closed_error, connection_closed

logger = logging.getLogger(__name__)


_INVALID_JSON = re.compile(r"Invalid JSON: ([^\[\n]{1,200}?) \[type=json_invalid")
"""Where pydantic says why a text is not JSON (``EOF while parsing a value at line 1 column 117``)."""


def _shortened(error: types.ErrorData, server: str) -> types.ErrorData:
    """The SDK's error for an answer it could not parse, without pydantic's dump of it: a nesting past the
    parser's limit, a text that is not JSON (cut off, as by a proxy or a server that failed midway) and JSON that
    is no JSON-RPC message, each named as such."""
    if error.code != types.PARSE_ERROR or not error.message.startswith("Failed to parse"):
        return error
    if "recursion limit exceeded" in error.message:
        return types.ErrorData(code=types.PARSE_ERROR, message=too_deep(server))
    ran = "it was not read, and the request may have run"
    if (invalid := _INVALID_JSON.search(error.message)) is not None:
        said = f"server {server!r} answered with JSON that is cut off or malformed ({invalid[1]}); {ran}"
        return types.ErrorData(code=types.PARSE_ERROR, message=said)
    if " validation error" in error.message.split("\n", 1)[0]:
        said = f"server {server!r} answered with JSON that is not a JSON-RPC message; {ran}"
        return types.ErrorData(code=types.PARSE_ERROR, message=said)
    lines = error.message.split("\n")
    return types.ErrorData(code=types.PARSE_ERROR, message=" ".join(line.strip() for line in lines[:2])[:300])


class _Closes:
    """A stream that is its own async context manager, closed (``aclose``) at its end."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class ReadWrapper(_Closes):
    """A transport's read stream wrapped: the stream protocol around a subclass's ``receive`` (which reads
    ``_inner``); ``aclose`` closes the stream wrapped."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception]) -> None:
        self._inner = inner

    @property
    def last_context(self) -> object:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        return await self._inner.receive()

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None


class _GuardedRead(ReadWrapper):
    """The read half of `guard`: drops notifications past the budget, counts requests, fails on a violation."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], state: _Guard) -> None:
        super().__init__(inner)
        self._state = state

    async def receive(self) -> SessionMessage | Exception:
        state = self._state
        while True:
            if state.failing is not None:
                if state.failing:
                    return state.failing.pop()
                raise anyio.EndOfStream
            item = await self._next()
            if item is None:  # the connection ended meanwhile: the loop's head says how
                continue
            if isinstance(item, Exception):
                if state.notifications.take():
                    return item
                continue
            message = item.message
            if isinstance(message, types.JSONRPCNotification):
                if state.notifications.take():
                    return item
            elif isinstance(message, types.JSONRPCRequest):
                if (reason := state.requests.received(message.id)) is not None:
                    state.fail(reason)
                elif more_values_than(message.params, MAX_REQUEST_VALUES - 3):  # its envelope: itself, id, method
                    await state.refuse(message.id)
                else:
                    return SessionMessage(message, metadata=state.requests.metadata(message.id))
            else:
                answer = state.outstanding.answer(message.id)
                if answer == "awaited":
                    if isinstance(message, types.JSONRPCError):
                        message.error = _shortened(message.error, state.server)
                    else:
                        # before the session validates it, with what the HTTP client cut before the SDK parsed it
                        trim(message.result, state.outstanding.cut_from(message.id))  # (`tool_tree.answer_items`)
                    return item
                if answer == "stray" and (reason := state.outstanding.stray()) is not None:
                    state.fail(reason)

    async def _next(self) -> SessionMessage | Exception | None:
        """The next item read, or None if the connection ended while it was awaited (`Outstanding.end`, called by
        another task: over HTTP, the reader of the stream of unasked messages)."""
        with anyio.CancelScope() as scope:
            self._state.reading = scope
            try:
                return await self._inner.receive()
            finally:
                self._state.reading = None
        return None

    async def aclose(self) -> None:
        if self._state.failing is None:  # else left open: the transport, still sending, ends with the session
            await self._inner.aclose()


class WriteWrapper(_Closes):
    """A transport's write stream wrapped: ``send`` hands on to ``_inner`` (a subclass's adds to it); ``aclose``
    closes the stream wrapped."""

    def __init__(self, inner: WriteStream[SessionMessage]) -> None:
        self._inner = inner

    async def send(self, item: SessionMessage, /) -> None:
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()


class _GuardedWrite(WriteWrapper):
    """The write half of `guard`: notes the client's requests in flight and the answers it sends."""

    def __init__(self, inner: WriteStream[SessionMessage], state: _Guard) -> None:
        super().__init__(inner)
        self._state = state

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if isinstance(message, types.JSONRPCRequest):
            self._state.outstanding.sent(message.id, message.method)  # before sending: the answer may come at once
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            self._state.outstanding.given_up(cancelled_request_id_from_params(message.params))
        await self._inner.send(item)
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self._state.requests.answered(message.id)


class _Guard:
    def __init__(
        self, server: str, notifications: NotificationBudget | None, write: WriteStream[SessionMessage],
        tasks: TaskGroup | None, outstanding: Outstanding | None = None,
    ) -> None:  # fmt: skip
        self.server = server
        self.notifications = notifications if notifications is not None else NotificationBudget(server)
        self.requests = ServerRequests(server)
        self.outstanding = outstanding if outstanding is not None else Outstanding(server)
        self.outstanding.on_end(self._ended)
        self.failing: list[SessionMessage] | None = None  # set on a violation: the errors left to deliver
        self.reading: anyio.CancelScope | None = None  # around the read awaited now: cancelled at an end
        self._write, self._tasks = write, tasks

    def fail(self, reason: str) -> None:
        """Stop reading: the requests in flight fail with ``reason``, then the stream ends."""
        self.outstanding.end(reason)
        if self.failing is None:  # the connection was closed already (`guarded`'s exit): stop reading all the same
            self._ended(reason)

    def _ended(self, reason: str | None) -> None:
        if reason is None or self.failing is not None:  # closed with the session: nothing more is read
            return
        logger.warning("%s", reason)
        error = closed_error(connection_closed(reason))
        pending = self.outstanding.pending()
        self.failing = [SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=i, error=error)) for i in pending]
        if self.reading is not None:
            self.reading.cancel()

    async def refuse(self, request_id: types.RequestId) -> None:
        """Answer a request (counted as received) with `request_too_large`, in a task of its own if there is a
        task group: the answer waits for the server to take it, and the session reads on meanwhile."""

        async def answer() -> None:
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await self._write.send(refusal(request_id, self.server))
            self.requests.answered(request_id)

        if self._tasks is not None:
            self._tasks.start_soon(answer)
        else:
            await answer()


@asynccontextmanager
async def guarded(
    transport: AbstractAsyncContextManager[TransportStreams],
    server: str,
    notifications: NotificationBudget | None = None,
    outstanding: Outstanding | None = None,
) -> AsyncIterator[TransportStreams]:
    """``transport`` (entered and left here) with its streams under `guard`; the answers to refused requests
    are written in tasks of their own, cancelled when the context exits. The connection is ended
    (``outstanding``'s `Outstanding.end`, None) as the context exits, before the transport is left: an HTTP
    client's GETs stop then, not only once the transport's tasks are cancelled (after it ends its session)."""
    outstanding = outstanding if outstanding is not None else Outstanding(server)
    async with transport as streams, anyio.create_task_group() as tasks:
        try:
            yield guard(streams, server, notifications, tasks, outstanding)
        finally:
            outstanding.end()
            tasks.cancel_scope.cancel()


def guard(
    streams: TransportStreams, server: str, notifications: NotificationBudget | None = None,
    tasks: TaskGroup | None = None, outstanding: Outstanding | None = None,
) -> TransportStreams:  # fmt: skip
    """A transport's streams with the budgets of ``server`` applied to what it parsed.

    For a transport whose reader is not tooltree's (Streamable HTTP; the SDK's stdio transport when tooltree's
    cannot be used): notifications past the budget are dropped before the SDK dispatches them; a request of
    more than `MAX_REQUEST_VALUES` values is answered with an error and never dispatched (in a task of
    ``tasks``, or inline without one); an answer to no request in flight is dropped; and more than
    `tool_tree.budget.MAX_SERVER_REQUESTS` requests from the server not answered yet, or stray answers past their
    allowance, end the session: the client's requests in flight fail naming the server and the limit, and the session
    reads the end of the stream; so does a limit broken where the guard does not read (``outstanding``, shared
    with the transport: `Outstanding.end`). The SDK's error for an answer it could not parse is shortened to one
    line.
    """
    read, write = streams
    state = _Guard(server, notifications, write, tasks, outstanding)
    return _GuardedRead(read, state), _GuardedWrite(write, state)
