"""The GETs of a Streamable HTTP client: the stream of messages a server sends unasked, and a request's stream resumed.

Over the session-based protocol (``protocol: legacy``, and ``auto`` with a server of that era) the SDK opens a GET
stream once the session is open, on which the server sends what is tied to no call of tooltree's: its requests
(``ping``, ``roots/list``, sampling) and notifications (``notifications/tools/list_changed``, which ``tooltree
serve`` refreshes its tree on). The SDK reopens that stream whenever the server ends it, after the wait the server
asks for (its ``retry``: a server answering with ``retry: 0`` and ending the stream at once had it reopened 22 times
a second, for good), and gives it up after two failures in a row.

`GetStreams` paces the reopening, whatever ``retry`` says: each after `FIRST_WAIT`, doubled for each stream in a row
that ended within `STEADY_SECONDS`, up to `LONGEST_WAIT`, and at most `OPENINGS_PER_MINUTE` in any minute. A server
answering the GET ``405`` (the spec's word for "no such stream") is taken at its word: the SDK's second try is
refused unsent (`StreamRefused`), and so the stream is given up after one GET. The waits run in the SDK's task for
the stream, so no call waits on them. Its events are bounded as a request's are (`tool_tree.http_client.bounding`),
but none is taken for the answer to a request (which is not charged to the reader's budget): none belongs on it.

The stream is told from a resumed request's stream by its task: the SDK's first GET without ``Last-Event-ID`` is it,
and so is every later GET of that task (a reopening carries the ``Last-Event-ID`` of the stream's last event). A
request's stream resumed (``Last-Event-ID``, from the request's own task) is sent `RESUMES_AT_ONCE` at once, then
one a second.

Once the connection is closed or ended (`GetStreams.close`: the session closed, or the server broke a limit) no GET
is sent: a wait under way ends at once, and the GET is refused unsent (before, the SDK's task for the stream, left
running until the pool dropped the connection, sent one more GET to a server tooltree had ended).
"""

from __future__ import annotations

import logging
import time
import weakref
from collections import deque
from collections.abc import Callable

import anyio
import httpx2

from tool_tree.budget import TokenBucket
from tool_tree.text import one_line

logger = logging.getLogger(__name__)

FIRST_WAIT = 1.0
"""Seconds before the stream of unasked messages is reopened, besides the server's ``retry`` (which the SDK waits)."""
LONGEST_WAIT = 60.0
"""Seconds the wait before a reopening grows to at most (doubled for each stream in a row that ended early)."""
STEADY_SECONDS = 10.0
"""Seconds a stream must have been open (from its GET to the next) for the next wait to start again at `FIRST_WAIT`."""
OPENINGS_PER_MINUTE = 6
"""GETs of the stream of unasked messages in any 60 seconds at most, whatever the server's ``retry`` and however
long its streams stay open."""
RESUMES_AT_ONCE = 10
"""GETs resuming a request's stream sent without a wait; then one a second (the SDK waits what the server's
``retry`` says, 0 included)."""


class StreamRefused(httpx2.RequestError):
    """A GET refused before it is sent: for the stream of unasked messages of a server that said it has none (405),
    or any GET once the connection is closed or ended (`GetStreams.close`)."""


class GetStreams:
    """The GETs of one client: the stream of unasked messages paced (`FIRST_WAIT` doubling to `LONGEST_WAIT`,
    `OPENINGS_PER_MINUTE`) and given up once answered 405; a request's stream resumed, paced apart.

    `request_hook` and `response_hook` are the client's event hooks; `unasked` tells whether a response is the
    stream's (from a response hook). ``server`` names the server in the log; ``clock`` is in seconds.
    """

    def __init__(self, server: str | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._server, self._clock = server, clock
        self._resumes = TokenBucket(RESUMES_AT_ONCE, 1.0, clock)
        self._opened: deque[float] = deque(maxlen=OPENINGS_PER_MINUTE)  # when the stream's last GETs were sent
        self._early = 0  # streams in a row that ended within STEADY_SECONDS
        self._task: weakref.ref[object] | None = None  # the coroutine of the SDK's task for the stream
        self.refused = False
        """Whether the server answered the stream's GET 405: it has no such stream, and none is asked for again."""
        self.closed = False
        """Whether the connection is closed or ended (`close`): no GET is sent."""
        self._woken: anyio.Event | None = None  # set at `close`: the wait under way ends

    def close(self, reason: str | None = None) -> None:
        """The connection is closed or ended (for ``reason``, unused: the guard says it): no more GETs, and a
        wait before one ends at once (its GET refused)."""
        self.closed = True
        if self._woken is not None:
            self._woken.set()

    def unasked(self) -> bool:
        """Whether the GET being sent or answered now (in this task) is the stream of unasked messages."""
        return self._task is not None and self._task() is anyio.get_current_task().coro

    def wait(self) -> float:
        """Seconds to wait before the stream's GET is sent now; the GET is counted as sent after them."""
        now = self._clock()
        wait = 0.0
        if self._opened:
            if now - self._opened[-1] >= STEADY_SECONDS:
                self._early = 0
            wait = min(FIRST_WAIT * 2 ** min(self._early, 16), LONGEST_WAIT)
            self._early += 1
            if len(self._opened) == OPENINGS_PER_MINUTE:
                wait = max(wait, self._opened[0] + 60.0 - now)
        self._opened.append(now + wait)
        return wait

    async def request_hook(self, request: httpx2.Request) -> None:
        """Pace a GET as `GetStreams` says, or refuse it.

        Raises:
            StreamRefused: a GET for the stream of unasked messages of a server that answered it 405.
        """
        if request.method != "GET":
            return
        self._refuse_closed(request)
        if "last-event-id" not in request.headers and self._task is None:
            self._task = weakref.ref(anyio.get_current_task().coro)
        if not self.unasked():
            if wait := self._resumes.charge(1.0):
                await self._pause(wait)
            self._refuse_closed(request)
            return
        if self.refused:
            logger.debug("server %s has no stream of unasked messages: the SDK's GET refused unsent", self._named)
            raise StreamRefused("the server has no stream of unasked messages (it answered 405)", request=request)
        if wait := self.wait():
            logger.debug("server %s ended its stream of unasked messages; reopened in %g s", self._named, wait)
            await self._pause(wait)
            self._refuse_closed(request)

    async def _pause(self, seconds: float) -> None:
        """Wait ``seconds``, or until the connection is closed."""
        if self._woken is None:
            self._woken = anyio.Event()
        with anyio.move_on_after(seconds):
            await self._woken.wait()

    def _refuse_closed(self, request: httpx2.Request) -> None:
        if self.closed:
            logger.debug("server %s: the connection is closed; the SDK's GET refused unsent", self._named)
            raise StreamRefused("the connection to the server is closed", request=request)

    async def response_hook(self, response: httpx2.Response) -> None:
        """Note a server that answered the stream's GET 405: it has none (the MCP spec allows it)."""
        if response.request.method == "GET" and response.status_code == 405 and self.unasked():
            self.refused = True
            logger.debug("server %s has no stream of unasked messages (it answered 405): not asked again", self._named)

    @property
    def _named(self) -> str:
        return repr(one_line(self._server, 80)) if self._server is not None else "(unnamed)"
