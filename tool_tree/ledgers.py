"""The ledgers of one MCP server's connection: its requests awaiting answers, both ways, and the error of those
failed when tooltree closes it.

`ServerRequests` counts the server's requests to the client not answered yet (`tool_tree.budget.MAX_SERVER_REQUESTS`);
`Outstanding` keeps the client's requests in flight and those it gave up on, settles each answer (awaited, late,
stray), charges stray answers to their allowance (`tool_tree.budget.STRAY_ANSWERS`) and ends the connection for
all its parts; `closed_error` marks the errors of the requests a closed connection failed (`closed_here`).
"""

from __future__ import annotations

import secrets
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from typing import Literal

import mcp_types as types
from mcp import MCPError
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import ServerMessageMetadata

from tool_tree.budget import GIVEN_UP_KEPT, MAX_SERVER_REQUESTS, STRAY_ANSWER_RATE, STRAY_ANSWERS, TokenBucket


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
        self._listings: set[types.RequestId] = set()  # of those, the ``tools/list`` requests (as correlated)
        self._given_up: OrderedDict[types.RequestId, None] = OrderedDict()
        self._strays = TokenBucket(burst, rate, clock)
        self._cut: OrderedDict[types.RequestId, dict[str, int]] = OrderedDict()
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

    def sent(self, request_id: types.RequestId, method: str = "") -> None:
        self._in_flight[coerce_request_id(request_id)] = request_id
        if method == "tools/list":
            self._listings.add(coerce_request_id(request_id))

    def given_up(self, request_id: types.RequestId | None) -> None:
        """The client cancelled a request (or stopped waiting): its answer, if it comes, is late."""
        if request_id is None or self._in_flight.pop(coerce_request_id(request_id), None) is None:
            return
        self._listings.discard(coerce_request_id(request_id))
        self._given_up[coerce_request_id(request_id)] = None
        if len(self._given_up) > GIVEN_UP_KEPT:
            self._given_up.popitem(last=False)

    def unanswered(self) -> bool:
        """Whether a request awaits its answer, in flight or given up on: its server may still be at work on it."""
        return bool(self._in_flight or self._given_up)

    def lists_tools(self, request_id: types.RequestId) -> bool:
        """Whether ``request_id`` is a ``tools/list`` request whose answer is awaited."""
        return coerce_request_id(request_id) in self._listings

    def awaits(self, request_id: types.RequestId) -> bool:
        """Whether an answer to ``request_id`` is awaited (nothing settled)."""
        return coerce_request_id(request_id) in self._in_flight

    def answer(self, request_id: types.RequestId | None) -> Answer:
        """Settle an answer that arrived for ``request_id`` (None: an error that names no request)."""
        if request_id is None:
            return "stray"
        key = coerce_request_id(request_id)
        self._listings.discard(key)
        if self._in_flight.pop(key, None) is not None:
            return "awaited"
        if key in self._given_up:
            del self._given_up[key]
            return "late"
        return "stray"

    def was_cut(self, request_id: types.RequestId, left: dict[str, int]) -> None:
        """The answer to ``request_id`` had the items ``left`` cut before it was parsed
        (`tool_tree.answer_items.cut_answer`), for `cut_from` to tell (the last `GIVEN_UP_KEPT` kept)."""
        self._cut[coerce_request_id(request_id)] = left
        if len(self._cut) > GIVEN_UP_KEPT:
            self._cut.popitem(last=False)

    def cut_from(self, request_id: types.RequestId) -> dict[str, int] | None:
        """What `was_cut` from the answer to ``request_id`` (None: nothing), once."""
        return self._cut.pop(coerce_request_id(request_id), None)

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
        self._listings.clear()
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


def closed_before(e: BaseException) -> MCPError | None:
    """The error (`closed_error`) tooltree failed a request with as it closed the connection, when ``e`` was raised
    while it was handled: a stdio server that broke a limit, or wrote a message across several lines, as the session
    opened failed the SDK's first question (``server/discover``) with it, then its fallback (``initialize``) with
    "Connection closed", which alone said no more than that the server exited."""
    cause = e.__context__
    for _ in range(8):
        if cause is None:
            return None
        if isinstance(cause, MCPError) and closed_here(cause.data):
            return MCPError(cause.code, cause.message, cause.data)
        cause = cause.__context__
    return None
