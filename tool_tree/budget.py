"""What one MCP server's messages may cost the host before and after they are parsed.

Budgets, each per connection, each enforced by the transports (`tool_tree.stdio` on a server's raw
stdout lines, `tool_tree.http_client` on a Streamable HTTP server's reply bytes and on its parsed
messages through `guard`):

- values: `tool_tree.unparsed.count_values` bounds how many JSON values parsing a message would build, in C-speed passes
  over its bytes, so a message under the 32 MiB cap cannot inflate to gigabytes of objects when parsed
  (`MAX_MESSAGE_VALUES`);
- requests from the server to the client: the SDK starts one task per request and keeps it until the
  answer is written, so a server that sends requests and never reads the answers grows the host without
  end; `ServerRequests` counts those not answered yet (`MAX_SERVER_REQUESTS`). tooltree declares no client
  capability (sampling, elicitation, roots), so a request it can take (``ping``) is small: one of more than
  `MAX_REQUEST_VALUES` is refused unread (answered with an error naming the limit);
- answers: `Outstanding` keeps the client's requests in flight and those it gave up on (timed out,
  cancelled: their late answers are honest); any other answer (an unknown id, a duplicate) is dropped, unread
  where `tool_tree.unparsed.peek` reads its id, and past a small allowance (`STRAY_ANSWERS`) ends the connection;
- notifications (and stdout lines that are not JSON-RPC): each costs the host about 20 times what it
  costs its sender, and tooltree uses none of them; `NotificationBudget` lets a burst through, then a rate,
  each charged by its size (`notification_cost`), and drops the rest unread;
- CPU: `ReaderBudget` charges a connection's reader the time it spends on what the server sent unasked
  (counting, parsing, dropping, handing on: everything but the answers to the client's own requests); past
  it the reader waits before it reads on, so a flood slows its own server, not the others.

What can be told of a message from its bytes, unparsed (its values, its id), is `tool_tree.unparsed`.

Over 400 lines: the budgets, and the guard that applies them to messages the SDK's transports parsed, share
their ledgers and limits; ``tool_tree.connect`` imports both from here.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from types import TracebackType
from typing import Literal, Self

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from mcp.client._transport import ReadStream, TransportStreams, WriteStream
from mcp.shared.dispatcher import coerce_request_id
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

MAX_REQUEST_VALUES = 1_000
"""The most values a request from a server may hold to be handed to the SDK. tooltree declares no client
capability, so the only request it serves is ``ping`` (a handful of values, with ``_meta``); it refuses
the others (sampling, elicitation, roots: `tool_tree.server_asks`) whatever they hold. A larger one is
answered with an error naming this limit, unread (before: a server pinging with a million values in its params,
reading each answer, cost the host a second of CPU per ping, forever)."""

NOTIFICATION_BURST = 2_000
"""Notifications a server may send at once before `NOTIFICATION_RATE` applies (a progress report per item of
a two-thousand-item job passes whole)."""
NOTIFICATION_RATE = 100.0
"""Notifications a second a server may send past its burst: about 1% of a core, at ~100 µs of the host's CPU
each (200,000 small ``notifications/progress`` took the host 22 s of CPU, their sender 1.1 s)."""
NOTIFICATION_VALUES = 1_000
"""Values of a notification charged as one notification more (`notification_cost`): parsing a thousand costs
about what handing on a small notification does (0.2–1 ms), so a notification of a million values is charged
1,001: the budget lets one through at once, then one every 10 s (before: 2,000, then 100 a second, each a
second of the host's CPU)."""

STRAY_ANSWERS = 16
"""Answers to no request in flight (an unknown id, a duplicate) a server may send at once before
`STRAY_ANSWER_RATE` applies; past it the connection is ended, as for a protocol violation. Late answers to
requests the client gave up on (timed out, cancelled) are honest and not counted (`GIVEN_UP_KEPT`)."""
STRAY_ANSWER_RATE = 1.0
"""Stray answers a second past the burst: a server answering every call twice, at a call a second, goes on;
a flood of them (the SDK parsed and dropped each: 1,300 a second kept the loop at 93% of a core, and one of a
million values cost a second) ends it."""
GIVEN_UP_KEPT = 1_024
"""Requests given up on whose late answers are still taken as honest (the most recent ones)."""

READER_BURST_SECONDS = 2.0
"""Host CPU seconds a connection's reader may spend at once on what its server sent unasked (`ReaderBudget`):
two of the costliest messages within the value cap (1.1 s each to parse), or a burst of 2,000 notifications
at 0.2–1 ms each, pass without a wait."""
READER_RATE = 0.05
"""Host CPU seconds a second a reader may keep spending past its burst: 5% of a core (as a sandbox's requests,
`sandbox.request_budget`), five times what an honest server at the notification budget's rate costs (100 small
notifications a second, 1%); twenty hostile servers take a core, where before one took it."""
LEAST_WAIT = 0.05
"""The shortest wait `ReaderBudget` asks for: a smaller debt is carried to the next message."""
HANDED_ON_SECONDS = 0.00015
"""What a message handed to the SDK unasked (a notification, a request from the server) costs the host after
the reader is done with it, estimated: the SDK's dispatch took 50 µs of the loop's CPU for a notification and
140 µs for a ping (its answer written), beyond the reader's own 10 µs, in floods of 20,000 and 5,000 on the
shared 2-core machine."""


def too_many_values(server: str | None, limit: int = MAX_MESSAGE_VALUES) -> str:
    """Why a message over the value budget is refused, naming the server (if known) and the limit."""
    sender = f"server {server!r}" if server is not None else "the server"
    return f"{sender} sent a message of more than {limit:,} JSON values, the limit for one message (counted unparsed)"


def request_too_large(server: str) -> str:
    """The error answering a request of more than `MAX_REQUEST_VALUES` values, naming the server and the limit."""
    return (
        f"tooltree refused a request of server {server!r}: it holds more than {MAX_REQUEST_VALUES:,} JSON values, "
        "the limit for a request to tooltree (it declares no client capability: only ping is served)"
    )


def too_deep(server: str | None) -> str:
    """Why an answer the parser refused for its nesting fails its request, naming the server and the limit."""
    sender = f"server {server!r}" if server is not None else "the server"
    return f"{sender} sent an answer nested more than 200 levels deep, the limit of the JSON parser; it was not read"


def notification_cost(values: int) -> int:
    """What a notification of ``values`` values is charged to its server's `NotificationBudget`: one, and one more
    for each full `NOTIFICATION_VALUES`."""
    return 1 + values // NOTIFICATION_VALUES


def more_values_than(value: object, limit: int) -> bool:
    """Whether a parsed value holds more than ``limit`` values (keys not counted), looking at no more than that."""
    stack, seen = [value], 0
    while stack:
        seen += 1
        if seen > limit:
            return True
        item = stack.pop()
        if isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


class TokenBucket:
    """A token bucket: ``burst`` at once, refilled at ``rate`` a second (``clock`` in seconds)."""

    def __init__(self, burst: float, rate: float, clock: Callable[[], float]) -> None:
        self.burst, self.rate = burst, rate
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def _refill(self) -> float:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate)
        self._at = now
        return self._tokens

    def _take(self, cost: float) -> bool:
        """Whether ``cost`` tokens were there (and are spent); False leaves the bucket as it was."""
        if self._refill() < cost:
            return False
        self._tokens -= cost
        return True

    def charge(self, cost: float) -> float:
        """Spend ``cost``, into debt if need be; the seconds until the debt is paid (0 while within the bucket)."""
        self._tokens = self._refill() - cost
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate


class SharedBucket(TokenBucket):
    """A `TokenBucket` several threads charge (a sandbox's channel reader and its searches; the checks of one
    server session's results, each in a worker thread)."""

    def __init__(self, burst: float, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(burst, rate, clock)
        self._lock = threading.Lock()

    def charge(self, cost: float) -> float:
        with self._lock:
            return super().charge(cost)


class NotificationBudget(TokenBucket):
    """A token bucket of notifications: ``burst`` at once, then ``rate`` a second; the rest are dropped.

    `take` is called for each notification (or stdout line that is not JSON-RPC) before it is dispatched, with
    its cost (`notification_cost`, where its values are counted); the first refusal is logged, naming the
    server and the budget.
    """

    def __init__(
        self, server: str, burst: int = NOTIFICATION_BURST, rate: float = NOTIFICATION_RATE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        super().__init__(burst, rate, clock)
        self.server = server
        self.dropped = 0
        self._said = [False]  # shared with a twin: the server's first refusal is logged, once

    def twin(self) -> NotificationBudget:
        """A budget of the same size and log: for a second point of the same connection where notifications
        are charged (over HTTP, unparsed events and parsed messages: each notification is charged at most
        twice, so at most twice the budget is parsed and once the budget dispatched)."""
        other = NotificationBudget(self.server, int(self.burst), self.rate, self._clock)
        other._said = self._said
        return other

    def take(self, cost: float = 1.0) -> bool:
        """Whether one more notification of ``cost`` may go on (and is charged); False: drop it."""
        if self._take(min(cost, float(self.burst))):
            return True
        if not self._said[0]:
            self._said[0] = True
            logger.warning(
                "server %r sent more than %s notifications at once (then %g a second), the budget for one server: "
                "tooltree drops the rest unread (it uses none of them)",
                self.server, f"{int(self.burst):,}", self.rate,
            )  # fmt: skip
        self.dropped += 1
        return False


class ReaderBudget(TokenBucket):
    """Host CPU seconds a connection's reader may spend on what its server sent unasked: ``burst`` at once, then
    ``rate`` a second. `charge` says how long to wait before reading on; the first wait is logged."""

    def __init__(
        self, server: str | None, burst: float = READER_BURST_SECONDS, rate: float = READER_RATE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        super().__init__(burst, rate, clock)
        self.server = server
        self.charged = self.waited = 0.0  # seconds, in all
        self._said = False

    def charge(self, seconds: float) -> float:
        """Spend ``seconds``; how long the reader should wait before it reads on: 0 while within the budget, and
        while the debt is under `LEAST_WAIT` (a sleep per small message would cost the loop more than it saves)."""
        self.charged += seconds
        wait = super().charge(seconds)
        if wait < LEAST_WAIT:
            return 0.0
        self.waited += wait
        if not self._said:
            self._said = True
            logger.warning(
                "server %s sent more than %g s of the host's CPU of messages tooltree did not ask for (then %g%% of "
                "a core), the budget for one server: tooltree reads it more slowly",
                repr(self.server) if self.server is not None else "(unnamed)", self.burst, self.rate * 100,
            )  # fmt: skip
        return wait


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


Answer = Literal["awaited", "late", "stray"]


class Outstanding:
    """The client's requests a server may answer: those in flight, and the last `GIVEN_UP_KEPT` given up on.

    Ids are kept as the SDK correlates them (``"7"`` answers ``7``). `answer` settles one answer: ``awaited``
    (its request was in flight), ``late`` (given up on: dropped, honestly), or ``stray`` (anything else: dropped,
    and `stray` charges it to the allowance of `STRAY_ANSWERS`, then `STRAY_ANSWER_RATE` a second).

    One per connection, shared by the parts of it that see its answers (over HTTP: the guard, on what the SDK
    parsed, and the reader of the stream of unasked messages, on what it drops unparsed), so they charge one
    allowance; `end` ends the connection for all of them (`on_end`).
    """

    def __init__(
        self, server: str | None, burst: int = STRAY_ANSWERS, rate: float = STRAY_ANSWER_RATE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self.server = server
        self._in_flight: dict[types.RequestId, types.RequestId] = {}  # as correlated -> as sent
        self._given_up: OrderedDict[types.RequestId, None] = OrderedDict()
        self._strays = TokenBucket(burst, rate, clock)
        self.ended = False
        self._told: list[Callable[[str | None], None]] = []

    def on_end(self, told: Callable[[str | None], None]) -> None:
        """Have ``told`` called once the connection ends (`end`): with the reason of a limit broken, or None."""
        self._told.append(told)

    def end(self, reason: str | None = None) -> None:
        """End the connection, for ``reason`` (a limit its server broke) or None (it is closed); those listening
        (`on_end`: the guard, which fails the requests in flight with the reason and ends the session; an HTTP
        client's GETs, which are sent no more) are told the first time only."""
        if self.ended:
            return
        self.ended = True
        for told in self._told:
            told(reason)

    def sent(self, request_id: types.RequestId) -> None:
        self._in_flight[coerce_request_id(request_id)] = request_id

    def given_up(self, request_id: types.RequestId | None) -> None:
        """The client cancelled a request (or stopped waiting): its answer, if it comes, is late."""
        if request_id is None or self._in_flight.pop(coerce_request_id(request_id), None) is None:
            return
        self._given_up[coerce_request_id(request_id)] = None
        if len(self._given_up) > GIVEN_UP_KEPT:
            self._given_up.popitem(last=False)

    def awaits(self, request_id: types.RequestId) -> bool:
        """Whether an answer to ``request_id`` is awaited (nothing settled)."""
        return coerce_request_id(request_id) in self._in_flight

    def answer(self, request_id: types.RequestId | None) -> Answer:
        """Settle an answer that arrived for ``request_id`` (None: an error that names no request)."""
        if request_id is None:
            return "stray"
        key = coerce_request_id(request_id)
        if self._in_flight.pop(key, None) is not None:
            return "awaited"
        if key in self._given_up:
            del self._given_up[key]
            return "late"
        return "stray"

    def stray(self) -> str | None:
        """Charge a stray answer to the allowance; the reason to end the connection once past it."""
        if self._strays._take(1.0):
            return None
        sender = f"server {self.server!r}" if self.server is not None else "the server"
        return (
            f"{sender} sent more than {int(self._strays.burst)} answers to requests tooltree did not make or had "
            f"answered (then {self._strays.rate:g} a second), the limit for one server"
        )

    def pending(self) -> Sequence[types.RequestId]:
        """The requests in flight, as sent; forgotten (a failure answers them all)."""
        pending = list(self._in_flight.values())
        self._in_flight.clear()
        return pending


def connection_closed(reason: str) -> str:
    """``reason`` as the error of the requests it fails."""
    return f"{reason}; tooltree closed the connection"


_CLOSED_MARK = secrets.token_hex(16)
"""Marks the errors of the requests tooltree failed when it closed a connection; never sent anywhere, so no
server can write it."""


def closed_error(message: str) -> types.ErrorData:
    """The error of a request in flight on a connection tooltree closed (a server that broke a limit), marked so
    that `ServerPool` knows the connection is lost (`closed_here`) whatever a server writes in its own errors."""
    return types.ErrorData(code=types.CONNECTION_CLOSED, message=message, data={"tooltree": _CLOSED_MARK})


def closed_here(data: object) -> bool:
    """Whether an error's ``data`` is `closed_error`'s: tooltree closed the connection."""
    return isinstance(data, dict) and data.get("tooltree") == _CLOSED_MARK


def refusal(request_id: types.RequestId, server: str) -> SessionMessage:
    """The error answering a request of more than `MAX_REQUEST_VALUES` values."""
    error = types.ErrorData(code=types.INVALID_REQUEST, message=request_too_large(server))
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _shortened(error: types.ErrorData, server: str) -> types.ErrorData:
    """The SDK's error for an answer it could not parse, without pydantic's dump of it (a nesting past the
    parser's limit named as such)."""
    if error.code != types.PARSE_ERROR or not error.message.startswith("Failed to parse"):
        return error
    if "recursion limit exceeded" in error.message:
        return types.ErrorData(code=types.PARSE_ERROR, message=too_deep(server))
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
            self._state.outstanding.sent(message.id)  # before sending: the answer may come at once
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
    `MAX_SERVER_REQUESTS` requests from the server not answered yet, or stray answers past their allowance,
    end the session: the client's requests in flight fail naming the server and the limit, and the session
    reads the end of the stream; so does a limit broken where the guard does not read (``outstanding``, shared
    with the transport: `Outstanding.end`). The SDK's error for an answer it could not parse is shortened to one
    line.
    """
    read, write = streams
    state = _Guard(server, notifications, write, tasks, outstanding)
    return _GuardedRead(read, state), _GuardedWrite(write, state)
