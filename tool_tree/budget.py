"""What one MCP server's messages may cost the host before and after they are parsed.

Three budgets, each per connection, each enforced by the transports (`tool_tree.stdio` on a server's raw
stdout lines, `tool_tree.http_client` on a Streamable HTTP server's reply bytes and on its parsed
messages through `guard`):

- values: `count_values` bounds how many JSON values parsing a message would build, in C-speed passes
  over its bytes, so a message under the 32 MiB cap cannot inflate to gigabytes of objects when parsed
  (`MAX_MESSAGE_VALUES`);
- requests from the server to the client: the SDK starts one task per request and keeps it until the
  answer is written, so a server that sends requests and never reads the answers grows the host without
  end; `ServerRequests` counts those not answered yet (`MAX_SERVER_REQUESTS`);
- notifications (and stdout lines that are not JSON-RPC): each costs the host about 20 times what it
  costs its sender, and tooltree uses none of them; `NotificationBudget` lets a burst through, then a rate,
  and drops the rest unread.

`count_values` is the count of ``sandbox/_supervisor/wire.py``'s (it blanks strings by splitting at quotes a
window at a time instead of with a regular expression: three times faster on a message of short strings):
the container's supervisor keeps its own copy because it must be standard-library only and run standalone,
and tool_tree never imports sandbox.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Self

import anyio
import mcp_types as types
from mcp.client._transport import ReadStream, TransportStreams, WriteStream
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import ServerMessageMetadata, SessionMessage

logger = logging.getLogger(__name__)

MAX_MESSAGE_VALUES = 1_000_000
"""The most JSON values (objects, arrays, strings, numbers, booleans, nulls; keys not counted) one message of
a server may hold. The bridge's largest result, 8 MiB (`sandbox.calls.MAX_RESULT_BYTES`), of ordinary rows
(``{"id": 12345, "name": "Widget 12345", "price": 19.99, "in_stock": true, "tags": ["a", "b"]}``, 12 bytes a
value) holds about 700,000. A million values cost the SDK's parser at most about 1.1 s of CPU and 530 MiB,
measured on the shared 2-core machine: as 200,000 text blocks with annotations (each block and its
annotations a pydantic model), 1.1 s and 530 MiB; as 330,000 empty text blocks, 0.6 s and 470 MiB; as
rows like the one above, 0.9 s and 460 MiB; as empty objects in structured content, 0.35 s and 200 MiB; as
numbers, 0.15 s and 8 MiB. Uncounted, the 10 million empty objects 30 MB hold cost 3.4 GB and 8 s, blocking
every other server's calls on the pool's event loop for 6 s."""

MAX_SERVER_REQUESTS = 64
"""Requests from one server to the client (``ping``, ``sampling/createMessage``, …) not answered yet: a
well-behaved server waits for its answers (tooltree answers each at once); past this the server is ended
(stdio) or the session closed (HTTP), as for a protocol violation. Each costs the host a task and, for a
server that never reads its stdin, 10 KB (100,000 took 1 GB)."""

NOTIFICATION_BURST = 2_000
"""Notifications a server may send at once before `NOTIFICATION_RATE` applies (a progress report per item of
a two-thousand-item job passes whole)."""
NOTIFICATION_RATE = 100.0
"""Notifications a second a server may send past its burst: about 1% of a core, at ~100 µs of the host's CPU
each (200,000 small ``notifications/progress`` took the host 22 s of CPU, their sender 1.1 s)."""

_WINDOW = 1 << 20
"""Bytes blanked at a time by `_outside_strings`: what the pieces of one split may hold."""


def _structure(data: bytes | bytearray) -> int:
    """1 + commas + openings of non-empty objects and arrays: the values of compact JSON without strings."""
    opened = data.count(b"[") + data.count(b"{")
    return 1 + data.count(b",") + opened - data.count(b"[]") - data.count(b"{}")


def _outside_strings(body: bytes | bytearray, limit: int) -> int:
    """`_structure` of ``body`` with every string blanked to ``""``, a window of `_WINDOW` bytes at a time.

    Escaped backslashes and quotes are dropped first (``\\\\`` pairs, then ``\\"``: as the parser pairs them,
    from the left), so every quote left opens or closes a string. A body of more than ``2 * limit + 2``
    strings holds more than ``limit`` values (each value is at most one string and one key's), and is not
    split; any other has each window split at its quotes and the pieces outside strings joined with ``""``.
    A window's ``[]`` or ``{}`` cut by the window's edge counts as one value more; a backslash outside a
    string (where the parser stops) may miscount what follows it, which is never parsed.
    """
    cleaned = bytes(body).replace(b"\\\\", b"").replace(b'\\"', b"")
    strings = cleaned.count(b'"') // 2
    if strings > 2 * limit + 2:
        return strings // 2
    values, inside = 1, False
    for start in range(0, len(cleaned), _WINDOW):
        pieces = cleaned[start : start + _WINDOW].split(b'"')
        values += _structure(b'""'.join(pieces[1::2] if inside else pieces[::2])) - 1
        inside ^= len(pieces) % 2 == 0
    return values


def count_values(body: bytes | bytearray, limit: int) -> int:
    """How many values parsing ``body`` as JSON would build (keys not counted), as far as ``limit`` needs to know.

    At most ``limit`` means a parser builds at most that many, whatever the bytes (valid JSON or not): every
    value but the first follows a comma, the ``[`` of a non-empty array or the ``{`` of a non-empty object,
    outside strings. Counted first with the strings in (their ``,[{`` counted too: an upper bound, in C
    passes over the bytes); only a body over ``limit`` that way has its strings blanked and is counted
    again (`_outside_strings`: about 0.2 s for 30 MB at most). Over ``limit`` means the body holds more
    if it is compact, valid JSON; a server's message need not be compact (``[ ]`` with a space counts as
    an array holding one value), so the count stays an upper bound.
    """
    values = 1 + len(body) - len(body.translate(None, b",[{"))
    if values <= limit:
        return values
    return _outside_strings(body, limit)


def too_many_values(server: str | None, limit: int = MAX_MESSAGE_VALUES) -> str:
    """Why a message over the value budget is refused, naming the server (if known) and the limit."""
    sender = f"server {server!r}" if server is not None else "the server"
    return f"{sender} sent a message of more than {limit:,} JSON values, the limit for one message (counted unparsed)"


def unaddressed(message: bytes) -> bool:
    """Whether a message's bytes cannot be a request or a response: no ``"id"`` in them, and no backslash to
    write one with escapes (so a notification, or not JSON-RPC at all)."""
    return b'"id"' not in message and b"\\" not in message


class NotificationBudget:
    """A token bucket of notifications: ``burst`` at once, then ``rate`` a second; the rest are dropped.

    `take` is called for each notification (or stdout line that is not JSON-RPC) before it is dispatched;
    the first refusal is logged, naming the server and the budget.
    """

    def __init__(
        self, server: str, burst: int = NOTIFICATION_BURST, rate: float = NOTIFICATION_RATE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self.server = server
        self.burst, self.rate = burst, rate
        self.dropped = 0
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()
        self._said = [False]  # shared with a twin: the server's first refusal is logged, once

    def twin(self) -> NotificationBudget:
        """A budget of the same size and log: for a second point of the same connection where notifications
        are charged (over HTTP, unparsed events and parsed messages: each notification is charged at most
        twice, so at most twice the budget is parsed and once the budget dispatched)."""
        other = NotificationBudget(self.server, self.burst, self.rate, self._clock)
        other._said = self._said
        return other

    def take(self) -> bool:
        """Whether one more notification may go on (and is charged); False: drop it."""
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        if not self._said[0]:
            self._said[0] = True
            logger.warning(
                "server %r sent more than %s notifications at once (then %g a second), the budget for one server: "
                "tooltree drops the rest unread (it uses none of them)",
                self.server, f"{self.burst:,}", self.rate,
            )  # fmt: skip
        self.dropped += 1
        return False


class ServerRequests:
    """Requests a server sent the client that are not answered yet (answered: the answer handed on to be sent).

    `received` counts one as it arrives and says why to end the connection when there are more than
    ``limit``; the transport calls `answered` once an answer is written, and `metadata` gives the SDK a hook
    for a request it settles without an answer (the server cancelled it). Counted per arrival, not per id: a
    server that reuses an id still starts one task per request.
    """

    def __init__(self, server: str, limit: int = MAX_SERVER_REQUESTS) -> None:
        self.server, self.limit = server, limit
        self._waiting: Counter[types.RequestId] = Counter()
        self._total = 0

    def received(self, request_id: types.RequestId) -> str | None:
        """Count a request that arrived; the reason to end the connection if that makes too many."""
        self._waiting[request_id] += 1
        self._total += 1
        if self._total <= self.limit:
            return None
        return (
            f"server {self.server!r} sent more than {self.limit} requests to tooltree without taking their answers, "
            "the limit for one server"
        )

    def answered(self, request_id: types.RequestId | None) -> None:
        """Uncount a request whose answer was written (an unknown id is ignored)."""
        if request_id is None or not self._waiting[request_id]:  # a Counter: a missing id reads 0, unstored
            return
        self._waiting[request_id] -= 1
        self._total -= 1
        if not self._waiting[request_id]:
            del self._waiting[request_id]

    def metadata(self, request_id: types.RequestId) -> ServerMessageMetadata:
        """Metadata for the request's message: the SDK calls its hook if it settles the request unanswered."""

        async def unanswered() -> None:
            self.answered(request_id)

        return ServerMessageMetadata(on_request_unanswered=unanswered)


def connection_closed(reason: str) -> str:
    """``reason`` as the error of the requests it fails: the pool reads "closed the connection" as a loss."""
    return f"{reason}; tooltree closed the connection"


class _GuardedRead:
    """The read half of `guard`: drops notifications past the budget, counts requests, fails on a violation."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], state: _Guard) -> None:
        self._inner, self._state = inner, state

    @property
    def last_context(self) -> object:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        state = self._state
        while True:
            if state.failing is not None:
                if state.failing:
                    return state.failing.pop()
                raise anyio.EndOfStream
            item = await self._inner.receive()
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
                    continue
                return SessionMessage(message, metadata=state.requests.metadata(message.id))
            else:
                state.in_flight.discard(message.id)
                return item

    async def aclose(self) -> None:
        if self._state.failing is None:  # else left open: the transport, still sending, ends with the session
            await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class _GuardedWrite:
    """The write half of `guard`: notes the client's requests in flight and the answers it sends."""

    def __init__(self, inner: WriteStream[SessionMessage], state: _Guard) -> None:
        self._inner, self._state = inner, state

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if isinstance(message, types.JSONRPCRequest):
            self._state.in_flight.add(message.id)  # before sending: the answer may come at once
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            self._state.in_flight.discard(cancelled_request_id_from_params(message.params))
        await self._inner.send(item)
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self._state.requests.answered(message.id)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class _Guard:
    def __init__(self, server: str, notifications: NotificationBudget | None) -> None:
        self.notifications = notifications if notifications is not None else NotificationBudget(server)
        self.requests = ServerRequests(server)
        self.in_flight: set[types.RequestId | None] = set()
        self.failing: list[SessionMessage] | None = None  # set on a violation: the errors left to deliver

    def fail(self, reason: str) -> None:
        """Stop reading: the requests in flight fail with ``reason``, then the stream ends."""
        logger.warning("%s", reason)
        error = types.ErrorData(code=types.CONNECTION_CLOSED, message=connection_closed(reason))
        errors = (types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error) for request_id in self.in_flight)
        self.failing = [SessionMessage(message) for message in errors]
        self.in_flight.clear()


@asynccontextmanager
async def guarded(
    transport: AbstractAsyncContextManager[TransportStreams],
    server: str,
    notifications: NotificationBudget | None = None,
) -> AsyncIterator[TransportStreams]:
    """``transport`` (entered and left here) with its streams under `guard`."""
    async with transport as streams:
        yield guard(streams, server, notifications)


def guard(streams: TransportStreams, server: str, notifications: NotificationBudget | None = None) -> TransportStreams:
    """A transport's streams with the notification and request budgets of ``server`` applied to what it parsed.

    For a transport whose reader is not tooltree's (Streamable HTTP; the SDK's stdio transport when tooltree's
    cannot be used): notifications past the budget are dropped before the SDK dispatches them, and more than
    `MAX_SERVER_REQUESTS` requests from the server not answered yet end the session: the client's requests in
    flight fail naming the server and the limit, and the session reads the end of the stream.
    """
    read, write = streams
    state = _Guard(server, notifications)
    return _GuardedRead(read, state), _GuardedWrite(write, state)
