"""What one MCP server's messages may cost the host before and after they are parsed: the limits, and the
budgets that charge against them.

Budgets, each per connection, each enforced by the transports (`tool_tree.stdio` on a server's raw
stdout lines, `tool_tree.http_client` on a Streamable HTTP server's reply bytes and on its parsed
messages through `tool_tree.guard.guard`):

- values: `tool_tree.unparsed.count_values` bounds how many JSON values parsing a message would build, in C-speed passes
  over its bytes, so a message under the 32 MiB cap cannot inflate to gigabytes of objects when parsed
  (`MAX_MESSAGE_VALUES`);
- requests from the server to the client: the SDK starts one task per request and keeps it until the
  answer is written, so a server that sends requests and never reads the answers grows the host without
  end; `tool_tree.ledgers.ServerRequests` counts those not answered yet (`MAX_SERVER_REQUESTS`). tooltree
  declares no client capability (sampling, elicitation, roots), so a request it can take (``ping``) is small:
  one of more than `MAX_REQUEST_VALUES` is refused unread (answered with an error naming the limit: `refusal`);
- answers: `tool_tree.ledgers.Outstanding` keeps the client's requests in flight and those it gave up on (timed
  out, cancelled: their late answers are honest); any other answer (an unknown id, a duplicate) is dropped, unread
  where `tool_tree.unparsed.peek` reads its id, and past a small allowance (`STRAY_ANSWERS`) ends the connection;
- notifications (and stdout lines that are not JSON-RPC): each costs the host about 20 times what it
  costs its sender, and tooltree uses none of them; `NotificationBudget` lets a burst through, then a rate,
  each charged by its size (`notification_cost`), and drops the rest unread;
- CPU: `ReaderBudget` charges a connection's reader the time it spends on what the server sent unasked
  (counting, parsing, dropping, handing on: everything but the answers to the client's own requests); past
  it the reader waits before it reads on, so a flood slows its own server, not the others.

What can be told of a message from its bytes, unparsed (its values, its id), is `tool_tree.unparsed`; the
requests in flight each way, `tool_tree.ledgers`; the guard that applies these budgets to messages the SDK's
transports parsed, `tool_tree.guard`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

import mcp_types as types
from mcp.shared.message import SessionMessage

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
        "the limit for a request to tooltree (a ping, or a question it may pass on to a client: a form, a sampling "
        "request of at most about 190 short messages)"
    )


def request_too_deep(server: str) -> str:
    """The error answering a request nested deeper than the parser takes, naming the server and the limit."""
    return (
        f"tooltree refused a request of server {server!r}: it is nested more than 200 levels deep, the limit of the "
        "JSON parser; it was not read"
    )


def refusal(request_id: types.RequestId, server: str, why: str | None = None) -> SessionMessage:
    """The error answering a request tooltree does not read: ``why``, else it holds more than `MAX_REQUEST_VALUES`."""
    error = types.ErrorData(code=types.INVALID_REQUEST, message=why or request_too_large(server))
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


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

    def could(self, cost: float) -> bool:
        """Whether notifications of ``cost`` in all may go on now (nothing is charged)."""
        return self._refill() >= min(cost, float(self.burst))

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
