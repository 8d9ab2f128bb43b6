"""What TCP connections may hold of ``tooltree serve --http``: their number, the time a request's head may take,
the process's file descriptors, and the log when they run out.

Uvicorn (0.54) closes a connection only after a response, when it stays idle for ``timeout_keep_alive``;
one that sends nothing, or a header line every few seconds, is kept for ever, and ``limit_concurrency``
answers requests ``503`` but still accepts every connection. So 2,000 idle connections were held, and at a
1024 descriptor limit serve ran out (``EMFILE``). Python 3.11's accept loop then logs the error with its
traceback once for each of ``backlog`` tries, and schedules a retry for each: 250,000 tracebacks (112 MB of
stderr) in 25 s, a core pegged. Here:

- `LimitedH11Protocol`: a connection whose request's head has not arrived `HEADER_TIMEOUT` seconds after it
  opened (or after its previous response) is closed; past `connection_cap` connections, a new one takes
  the place of the one that has waited longest for a head, or, when every one has a request under way, is
  answered ``503`` and closed. A request's body has a deadline of its own (`agent.serve.http_gate.BODY_TIMEOUT`).
- `raise_open_files_limit`: the soft limit of open files raised to the hard one at start.
- `quiet_accept_errors`: the accept loop's ``EMFILE`` logged as one line a minute, with the count.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from typing import Any, ClassVar

from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger(__name__)

HEADER_TIMEOUT = 10.0
"""Seconds a connection may take to send a request's head (request line and headers): a client sends it in
one packet; a slow-loris trickles a header line every few seconds to hold the connection."""
KEEP_ALIVE = 5
"""Seconds an idle connection is kept between requests (uvicorn's ``timeout_keep_alive``)."""
MAX_CONNECTIONS = 512
"""Connections at once, at most. Honest clients need far fewer: 16 sessions, each with its calls in flight
(each a connection) and one ``GET`` stream."""
BACKLOG = 128
"""Connections the system queues before they are accepted. Python 3.11's accept loop tries this many times
per wake-up, and on ``EMFILE`` logs and schedules a retry for each try (uvicorn's default, 2048)."""
_ACCEPT_ERROR = "socket.accept() out of system resource"
_LOG_EVERY = 60.0
_TOO_MANY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
    b"content-length: 56\r\n\r\ntooltree serve: too many connections; try again shortly\n"
)


def connection_cap(open_files: int) -> int:
    """The most connections at once for a process that may open ``open_files`` files: `MAX_CONNECTIONS`, or a
    quarter of the limit (the rest is for the sessions' upstream servers, containers and the engine's API)."""
    return max(8, min(MAX_CONNECTIONS, open_files // 4))


def raise_open_files_limit() -> int:
    """Raise the soft limit of open files to the hard one (an unlimited hard limit: to 65,536); the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as e:
            logger.warning("tooltree serve: could not raise the open files limit from %d to %d: %s", soft, target, e)
    return int(soft)


class LimitedH11Protocol(H11Protocol):
    """Uvicorn's h11 protocol with a cap on connections and a deadline for each request's head.

    A connection past the cap first takes the place of the connection that has waited longest for a request's
    head (a new one, or one idle between requests): a client that sends its request at once is served while
    connections that send nothing are held; only when every connection has a request under way is it
    answered ``503`` and closed.
    """

    max_connections = MAX_CONNECTIONS
    header_timeout = HEADER_TIMEOUT
    _waiting: ClassVar[dict[LimitedH11Protocol, None]] = {}  # awaiting a request's head, oldest first
    _refused_said: ClassVar[list[float]] = [-_LOG_EVERY]  # when a refusal was last logged

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._waiting_after: object = None  # the request cycle after which a head is awaited

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            oldest = next(iter(self._waiting), None)
            if oldest is not None:
                oldest._close()
            else:
                self._say("refused connections past %d at once: every one has a request under way")
                transport.write(_TOO_MANY)
                transport.close()
                return
        self._await_head()

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._await_head()
        super().data_received(data)
        if self._head_timer is not None and self.cycle is not self._waiting_after:
            self._stop_waiting()  # a request's head arrived

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._head_timer is None and self.cycle is not None and self.cycle.response_complete:
            self._await_head()  # idle between requests: uvicorn closes it after KEEP_ALIVE, but it waits

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def _await_head(self) -> None:
        self._waiting_after = self.cycle
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_late)
        self._waiting[self] = None

    def _stop_waiting(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        self._waiting.pop(self, None)

    def _head_late(self) -> None:
        self._head_timer = None
        if self.cycle is self._waiting_after:
            self._close()
        self._waiting.pop(self, None)

    def _close(self) -> None:
        self._stop_waiting()
        if not self.transport.is_closing():
            self.transport.close()

    def _say(self, text: str) -> None:
        now = time.monotonic()
        if now - self._refused_said[0] >= _LOG_EVERY:
            self._refused_said[0] = now
            logger.warning("tooltree serve: " + text + " (said once a minute)", self.max_connections)


def limited_protocol(max_connections: int) -> type[LimitedH11Protocol]:
    """`LimitedH11Protocol` capped at ``max_connections``, with its own connections (uvicorn takes a class)."""
    attributes = {"max_connections": max_connections, "_waiting": {}, "_refused_said": [-_LOG_EVERY]}
    return type("LimitedH11Protocol", (LimitedH11Protocol,), attributes)


class AcceptErrors:
    """The accept loop's out-of-descriptors errors a loop has had (`refused`: one a try), counted by
    `quiet_accept_errors`."""

    def __init__(self) -> None:
        self.refused = 0
        self.since = 0  # since the last report
        self.said = -_LOG_EVERY  # when the last report was made


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> AcceptErrors:
    """Log the accept loop's out-of-descriptors errors as one line a minute (with how many there were), not
    a traceback each; every other error goes to the handler there was. Returns their count."""
    previous = loop.get_exception_handler()
    state = AcceptErrors()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != _ACCEPT_ERROR:
            if previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        state.refused += 1
        state.since += 1
        now = time.monotonic()
        if now - state.said >= _LOG_EVERY:
            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
            logger.warning(
                "tooltree serve: cannot accept connections: %s (open files limit %d; %d time(s) since the last "
                "report; said once a minute)", context.get("exception"), soft, state.since,
            )  # fmt: skip
            state.said, state.since = now, 0

    loop.set_exception_handler(handler)
    return state
