"""The GETs of a Streamable HTTP client: the stream of messages a server sends unasked, and a request's stream resumed.

Over the session-based protocol (``protocol: legacy``, and ``auto`` with a server of that era) the SDK opens a GET
stream once the session is open, on which the server sends what is tied to no call of tooltree's: its requests
(``ping``, ``roots/list``, sampling) and notifications (``notifications/tools/list_changed``, which ``tooltree
serve`` refreshes its tree on). The SDK reopens that stream whenever the server ends it, after the wait the server
asks for (its ``retry``: a server answering with ``retry: 0`` and ending the stream at once had it reopened 22 times
a second, for good), and gives it up after two failures in a row (``handle_get_stream`` in
``mcp.client.streamable_http``: any exception while the GET is sent or its stream read counts, a status of 400 or
more included; only a stream the server ended sets the count back to 0). Left to it, a server answering 503 or
refusing connections during a redeploy, or a stream cut twice or quiet past the read timeout (5 minutes) twice, lost
tooltree its ``tools/list_changed`` for the rest of the session, and serve its tree went stale, silently.

`GetStreams` paces the reopening, whatever ``retry`` says: each after `FIRST_WAIT`, doubled for each stream in a row
that ended within `STEADY_SECONDS`, up to `LONGEST_WAIT`, and at most `OPENINGS_PER_MINUTE` in any minute (besides
the SDK's own wait: ``retry``, or 1 s). The waits run in the SDK's task for the stream, so no call waits on them. Its
events are bounded as a request's are (`tool_tree.http_client.bounding`), but none is taken for the answer to a
request (which is not charged to the reader's budget): none belongs on it.

A failure that may pass is not one to the SDK (`KeepingClient`'s ``send`` asks `GetStreams.unreached` and
`GetStreams.answered`; the SDK's loop is left as it is), so the stream is reopened, paced, for as long as the connection
lives: a GET of it that gets no answer (`TRANSIENT_ERRORS`: a connection refused, reset or closed before the answer, a
timeout) or a 5xx, 408 or 429 (`transient`) is handed to the SDK as a stream that the server ended at once; a stream cut
or quiet past the read timeout once open ends as if the server had ended it (`_Kept`). The first GET that fails so is
logged as a warning naming the server (the stream lost), the next that opens as info (open again); none between. What
the server sent meanwhile never arrives (a ``tools/list_changed`` of a redeploy among it), so that opening is told
(`reopened`: `tool_tree.changes.Changes.reopened`, the pool's listener told its lists may have changed); a stream cut
or timed out once open whose next GET opens is no loss (a proxy ending quiet streams would have every quiet server
regenerated), nor is a stream the server ended. The stream is given up at once, its next GET refused unsent
(`StreamRefused`) so that one GET reaches the server, on a ``405`` (the spec's word for "no such stream": logged at
debug, as a server may well have none), a ``404`` (the server no longer knows the session, or has no such stream: told
to `forgotten`; `tool_tree.pool.ServerPool` checks the session and replaces it if the server no longer knows it), any
other status of 400 or more (a 401 or 403: the credentials in ``headers`` refused; the same GET would be refused again)
and an answer that is not an event stream; each but the 405 is logged once, a warning naming the server and why.
Should the SDK give the stream up of its own (two streams in a row failed on what they held, such as an event past a
cap, or a redirect it does not follow, of which it warns itself), a warning says so once.

The stream is told from a resumed request's stream by its task: the SDK's first GET without ``Last-Event-ID`` is it,
and so is every later GET of that task (a reopening carries the ``Last-Event-ID`` of the stream's last event). A
request's stream resumed (``Last-Event-ID``, from the request's own task) is sent `RESUMES_AT_ONCE` at once, then
one a second.

Once the connection is closed or ended (`GetStreams.close`: the session or the client closed, or the server broke a
limit) no GET is sent: a wait under way ends at once, and the GET is refused unsent (before, the SDK's task for the
stream, left running until the pool dropped the connection, sent one more GET to a server tooltree had ended).
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx2

from tool_tree.budget import TokenBucket
from tool_tree.http_errors import ReachingClient, status_key, status_problem
from tool_tree.text import one_line
from tool_tree.unreachable import reason

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
TRANSIENT_ERRORS = (httpx2.TimeoutException, httpx2.NetworkError, httpx2.RemoteProtocolError, httpx2.ProxyError)
"""Failures of the stream's GET, or of its stream once open, that say nothing of what the server wants: no connection
(refused, reset: a server restarting), no answer (the connection closed before it), a timeout, a proxy failing."""
_NO_STREAM = "it answered 405"
"""Why the stream of a server that has none is given up: the spec's answer, logged at debug (a server may well have
none)."""
NOTICES = "its notices tied to no call (tools/list_changed among them)"
"""What a server's stream of unasked messages brings, in the log."""


def transient(status: int) -> bool:
    """Whether an HTTP status answering the stream's GET may pass: the server (or a proxy before it) failing or
    unavailable (5xx), or busy (408, 429)."""
    return status >= 500 or status in (408, 429)


class StreamRefused(httpx2.RequestError):
    """A GET refused before it is sent: for the stream of unasked messages once given up (the server said it has
    none, 405, or the stream cannot be had: `GetStreams.given_up`), or any GET once the connection is closed or
    ended (`GetStreams.close`)."""


class GetStreams:
    """The GETs of one client: the stream of unasked messages paced (`FIRST_WAIT` doubling to `LONGEST_WAIT`,
    `OPENINGS_PER_MINUTE`), kept through failures that may pass and given up at once on the others; a request's
    stream resumed, paced apart.

    `request_hook` is the client's request hook, `unreached` and `answered` its ``send``'s word on each GET's
    failure or answer; `unasked` tells whether a response is the stream's (from a response hook). ``server`` names
    the server in the log; ``clock`` is in seconds.
    """

    def __init__(self, server: str | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._server, self._clock = server, clock
        self._resumes = TokenBucket(RESUMES_AT_ONCE, 1.0, clock)
        self._opened: deque[float] = deque(maxlen=OPENINGS_PER_MINUTE)  # when the stream's last GETs were sent
        self._early = 0  # streams in a row that ended within STEADY_SECONDS
        self._task: weakref.ref[object] | None = None  # the coroutine of the SDK's task for the stream
        self.given_up: str | None = None
        """Why the stream of unasked messages is given up (None while it is kept): none is asked for again."""
        self.lost = False
        """Whether the stream's last GET failed in a way that may pass (it is reopened, paced)."""
        self.reopened: Callable[[], None] | None = None
        """Called (in the SDK's task for the stream: it must not block) when the stream opens again after it was
        `lost`: what the server sent meanwhile never arrives."""
        self.forgotten: Callable[[], None] | None = None
        """Called (as `reopened`) when the server answers the stream's GET 404: it no longer knows the session, or
        has no such stream."""
        self.setting: Callable[[str], str] | None = None
        """Names a key of the server's entry as its file writes it (`tool_tree.config.setting_named`), for the error of
        a GET refused with an HTTP status; None: ``servers.NAME.KEY``."""
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
            StreamRefused: a GET for the stream of unasked messages once given up, or any once the connection is
                closed.
        """
        if request.method != "GET":
            return
        self._refuse_closed(request)
        if "last-event-id" not in request.headers and self._task is None:
            self._task = weakref.ref(anyio.get_current_task().coro)
            self._watch()
        if not self.unasked():
            if wait := self._resumes.charge(1.0):
                await self._pause(wait)
            self._refuse_closed(request)
            return
        if self.given_up is not None:
            logger.debug(
                "server %s: its stream of unasked messages is given up; the SDK's GET refused unsent", self._named
            )
            raise StreamRefused(
                f"the server's stream of unasked messages is given up ({self.given_up})", request=request
            )
        if wait := self.wait():
            logger.debug("server %s ended its stream of unasked messages; reopened in %g s", self._named, wait)
            await self._pause(wait)
            self._refuse_closed(request)

    def unreached(self, request: httpx2.Request, error: httpx2.TransportError) -> httpx2.Response | None:
        """What the SDK is handed for the stream's GET that failed for ``error``, if that may pass
        (`TRANSIENT_ERRORS`) and the connection is open: a stream the server ended at once (the SDK reopens it,
        paced), the loss logged once. None for any other GET or error: it is raised as it was."""
        if self.closed or not self.unasked() or not isinstance(error, TRANSIENT_ERRORS):
            return None
        self._lose(reason(error))
        return _ended_at_once(request)

    async def answered(self, response: httpx2.Response) -> httpx2.Response:
        """What the SDK is handed for a GET answered ``response``: the stream's, kept or given up as `GetStreams`
        says (a status that may pass: a stream the server ended at once; one that opened: ended as if by the server
        when cut or quiet past the read timeout); any other GET's, as it came."""
        if response.request.method != "GET" or self.closed or not self.unasked():
            return response
        status = response.status_code
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if status == 405:
            self._give_up(_NO_STREAM, "it has no stream of unasked messages (it answered 405): not asked again")
        elif transient(status):
            await response.aclose()
            self._lose(f"HTTP {status} {response.reason_phrase}".rstrip())
            return _ended_at_once(response.request)
        elif status == 404:
            self._give_up(
                "HTTP 404: the server no longer knows the session, or has no such stream",
                "its stream of unasked messages is given up (it answered 404: the server no longer knows the session, "
                f"as after a restart, or has no such stream): {NOTICES} reach tooltree again only in a new session",
            )
            if self.forgotten is not None:
                self.forgotten()
        elif status >= 400:  # named with its setting (the configuration's file is not known here)
            key, server = status_key(status), one_line(self._server or "", 80)
            named = f" ({self.setting(key)})" if self.setting else f" (servers.{server}.{key})" if self._server else ""
            self._give_up(status_problem(response) + named)
        elif 200 <= status < 300 and kind != "text/event-stream":
            self._give_up(f"the server answered it with {kind or 'no content type'}, not an event stream")
        elif 200 <= status < 300:
            if self.lost:
                self.lost = False
                said = "its stream of unasked messages is open again (what the server sent meanwhile may never arrive)"
                logger.info("server %s: %s", self._named, said)
                if self.reopened is not None:
                    self.reopened()
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            response.stream = _Kept(response.stream, self._named)
        return response  # a redirect: the SDK follows it within the server's origin, or gives the stream up

    def _lose(self, why: str) -> None:
        if self.lost:
            logger.debug("server %s: its stream of unasked messages is still lost (%s)", self._named, why)
            return
        self.lost = True
        logger.warning(
            "server %s: its stream of unasked messages is lost (%s): %s do not reach tooltree until it opens again; "
            "tried again %g s apart, doubling up to %g s, at most %d times a minute",
            self._named, why, NOTICES, FIRST_WAIT, LONGEST_WAIT, OPENINGS_PER_MINUTE,
        )  # fmt: skip

    def _give_up(self, why: str, said: str | None = None) -> None:
        """Give the stream up for ``why``, logged once: ``said``, or that it is given up and why."""
        if self.given_up is not None:
            return
        self.given_up = why
        if said is None:
            said = (
                f"its stream of unasked messages is given up ({why}): {NOTICES} do not reach tooltree in this session"
            )
        logger.log(logging.DEBUG if why == _NO_STREAM else logging.WARNING, "server %s: %s", self._named, said)

    def _watch(self) -> None:
        """Have the end of the SDK's task for the stream logged if the SDK gave the stream up of its own."""
        try:
            task = asyncio.current_task()
        except RuntimeError:  # not asyncio: the SDK giving up of its own goes unsaid
            return
        if task is not None:
            task.add_done_callback(self._task_ended)

    def _task_ended(self, task: asyncio.Task[object]) -> None:
        if task.cancelled() or self.closed or self.given_up is not None:
            return
        self.given_up = "the SDK gave it up"
        logger.warning(
            "server %s: the SDK gave up its stream of unasked messages (two streams in a row failed on what they "
            "held, such as an event past a cap, or a redirect it does not follow; the log of "
            "mcp.client.streamable_http says which): %s do not reach tooltree in this session",
            self._named, NOTICES,
        )  # fmt: skip

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

    @property
    def _named(self) -> str:
        return repr(one_line(self._server, 80)) if self._server is not None else "(unnamed)"


class KeepingClient(ReachingClient):
    """A `ReachingClient` whose GETs' failures and answers `GetStreams` has its word on before the SDK sees them: the
    stream of unasked messages kept through a failure that may pass (handed on as a stream the server ended at once,
    which the SDK does not count as one), given up at once on the others.

    In ``send``, not a hook: a connection that fails raises before any response hook runs; and not a transport (see
    `tool_tree.http_client.bounding`). The SDK's loop for the stream is left as it is: it counts an exception as a
    failure and gives the stream up after two in a row, and sets the count back to 0 when a stream ends cleanly."""

    def __init__(self, streams: GetStreams, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.streams = streams
        """Its GETs' pacing, and what they tell (`GetStreams.reopened`, `GetStreams.forgotten`)."""

    async def send(self, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
        if request.method != "GET":
            return await super().send(request, **kwargs)
        try:
            response = await super().send(request, **kwargs)
        except httpx2.TransportError as e:  # not `StreamRefused`, a refusal of tooltree's
            if (ended := self.streams.unreached(request, e)) is None:
                raise
            return ended
        return await self.streams.answered(response)

    async def aclose(self) -> None:
        self.streams.close()
        await super().aclose()

    async def __aexit__(self, *exc: Any) -> None:
        self.streams.close()  # closed, the client sends no GET: nor does its stream end as if the SDK gave it up
        await super().__aexit__(*exc)


def _ended_at_once(request: httpx2.Request) -> httpx2.Response:
    """A stream the server ended at once, as the SDK is handed a GET of the stream that failed in a way that may
    pass: a clean end, which the SDK does not count as a failure (it sets its count back to 0 and reopens)."""
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=b"", request=request)


class _Kept(httpx2.AsyncByteStream):
    """The stream of unasked messages once open, ended as if by the server when its connection is cut or it is
    quiet past the read timeout (`TRANSIENT_ERRORS`): not a failure to the SDK, which reopens it, paced."""

    def __init__(self, stream: httpx2.AsyncByteStream, named: str) -> None:
        self._stream, self._named = stream, named

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._stream:
                yield chunk
        except TRANSIENT_ERRORS as e:
            logger.debug("server %s: its stream of unasked messages was cut (%s); reopened", self._named, reason(e))

    async def aclose(self) -> None:
        await self._stream.aclose()
