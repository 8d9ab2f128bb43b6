"""A server's ``subscriptions/listen`` stream: where a server of the session-less 2026-07-28 protocol says its lists
changed.

Over that protocol a server sends ``notifications/tools/list_changed`` (of prompts and resources too, and
``notifications/resources/updated`` of the URIs subscribed to) only on the stream that answers a
``subscriptions/listen`` request; the SDK's server drops them otherwise, and has no ``resources/subscribe``. `Listening`
keeps one such stream open on a session for its life, through the SDK's ``Client.listen``, subscribed to the three lists
and to the URIs ``resources`` gives as it opens; `Listening.follow` opens it again at once with other URIs and waits for
the server's acknowledgment (the URIs it honored), or its refusal. Its notices are read as every other message of the
session is (`tool_tree.changes.Watching` counts them and tells the pool, in the order they are read), so the events the
SDK queues for the stream are only drained here. They are bounded as the session's other messages are: one message by
its transport's caps, notifications by the session's budget (`tool_tree.budget.NotificationBudget`), the SDK's queue by
its 1,024 distinct events (drained as they come); the acknowledgment is awaited for the server's ``timeout`` (the
session's read timeout).

Over HTTP each stream is held `HELD_SECONDS` at most (``held``): the next is opened, and acknowledged, before it is
closed, so nothing the server says between them is missed, and a server told to stop is held no longer. The SDK's server
waits for its open responses as it stops (uvicorn's ``shutdown`` waits for every connection, with no timeout unless
``timeout_graceful_shutdown`` is set, which ``run_streamable_http_async`` does not set) and, unlike the stream of
unasked messages of the protocol with sessions (``sse_starlette``'s ``EventSourceResponse``, which ends on uvicorn's
``should_exit``), its listen stream (``mcp.server._streamable_http_modern``, written by hand) ends only when the client
leaves: held for the session, a server sent SIGTERM ran on until tooltree ended. Over stdio a stream is kept for the
session: the server ends with its stdin.

A stream that ends (the server closed it, an HTTP stream was cut or stayed quiet past its read timeout) is opened
again after `FIRST_WAIT`, doubled for each stream in a row that ended within `STEADY_SECONDS`, up to `LONGEST_WAIT`;
a `Listening.follow` meanwhile ends that wait and opens it at once (before, the subscription waited for the reopening,
up to a minute, past its timeout).
One that could not be opened again at once (an attempt failed, a later one opened) may have missed a notice:
``missed`` is told then, as for an HTTP server's stream of unasked messages (`tool_tree.get_streams`); so may one lost
without the server's close (the SDK's word: "re-listen and refetch"), as an HTTP stream is that was cut, or quiet past
the read timeout (5 minutes): the SDK's server sends a keep-alive every 15 s, so only a server that sends none loses a
quiet stream so, and ``missed`` is told as it opens again (before, what it said in the gap was lost, untold). The read
timeout stays: without it a server gone without closing the connection (a host down, a cut network) would hold a stream
that never ends, its notices lost for good. A server that
refuses the first request (an error answer: no such method, a limit reached) or leaves it unanswered for its
``timeout`` is left unlistened, said at debug: it is no error, only its changes are not followed, until a `follow`
asks again: the stream that opens then is kept (``missed`` told: its changes were not followed till then), and one
refused again is the `follow`'s error (before, the session stayed unlistened, and `follow` opened a stream only to hear
its answer: a subscription succeeded with nothing kept listening, its updates never told). With URIs to follow as it
refuses (the session that replaced one subscribed to them), it is asked again, paced, as after a failed attempt (before,
those URIs were not followed on the new session, without a word). One that took a stream before and refuses a later
one (a limit, a 503 while it is redeployed) is asked again, paced, as after a failed attempt. It ends once the session
reads no more (the SDK settles the stream lost as the session's reading ends) or when cancelled.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from contextlib import AsyncExitStack

import anyio
import mcp
from mcp.client.subscriptions import Subscription, SubscriptionLost
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from tool_tree.changes import Changes
from tool_tree.get_streams import FIRST_WAIT, LONGEST_WAIT  # paced as the HTTP stream of unasked messages is
from tool_tree.text import one_line

logger = logging.getLogger(__name__)

HELD_SECONDS = 5.0
"""Seconds a stream to an HTTP server is held at most, the next opened before it closes: the SDK's server (uvicorn),
told to stop, waits for its open responses, a listen stream among them, for as long as they last."""
STEADY_SECONDS = 60.0
"""A stream open this long before it ended sets the wait back to `FIRST_WAIT`."""


def speaks_listen(client: mcp.Client) -> bool:
    """Whether ``client``'s session was negotiated at a protocol of ``subscriptions/listen`` (2026-07-28)."""
    return client.session.protocol_version in MODERN_PROTOCOL_VERSIONS


class Listening:
    """A ``subscriptions/listen`` stream kept open on ``client``'s session of ``server`` (`run`) until the session
    reads no more (``changes.closed``); nothing on a session of another protocol. ``resources`` gives the URIs to
    subscribe to as each stream opens; ``missed`` is told when one opened after an attempt failed. `follow` opens it
    again with other URIs: how ``resources/subscribe`` and ``resources/unsubscribe`` are served at that protocol."""

    def __init__(
        self,
        client: mcp.Client,
        changes: Changes,
        *,
        server: str,
        resources: Callable[[], Iterable[str]],
        missed: Callable[[], None],
        held: float = math.inf,
    ) -> None:
        self.client = client
        self._held = held
        """Seconds each stream is held at most, the next opened before it closes (`HELD_SECONDS` over HTTP)."""
        self._changes = changes
        self._server = server
        self._resources = resources
        self._missed = missed
        self.started = False
        """Whether `run` was started (set by its starter, at once)."""
        self._running = False
        self._asked = 0
        """How many times `follow` asked for a stream of other URIs; a stream opened after the n-th answers it."""
        self._answered: tuple[int, frozenset[str] | Exception] = (0, frozenset())
        self._news = anyio.Event()
        self._stream = anyio.CancelScope()
        self._extra: list[str] = []
        """The URIs of the `follow` calls waiting: each stream opened before their answer subscribes to them too."""

    def _answer(self, asked: int, answer: frozenset[str] | Exception) -> None:
        """Tell the `follow` calls waiting that the stream opened at ``asked`` was acknowledged (the URIs honored) or
        refused."""
        if asked >= self._answered[0]:
            self._answered = (asked, answer)
        self._news.set()
        self._news = anyio.Event()

    async def follow(self, uris: Iterable[str]) -> frozenset[str]:
        """Open the stream again subscribed to ``resources`` and ``uris``; returns the URIs the server acknowledged.
        With no stream kept (not started), one is opened only to hear the answer; one the server refused before is
        asked for again and kept.

        Raises:
            mcp.MCPError: the server refused the stream or the connection failed.
            TimeoutError: it was not acknowledged within the session's read timeout.
        """
        extra = list(uris)
        if not self._running:
            try:
                wanted = sorted({*self._resources(), *extra})
                async with self.client.listen(resource_subscriptions=wanted) as subscription:
                    return frozenset(subscription.honored.resource_subscriptions or ())
            except SubscriptionLost as e:
                raise mcp.MCPError(INTERNAL_ERROR, str(e)) from None
        self._asked += 1
        asked = self._asked
        self._extra += extra
        self._stream.cancel()
        try:
            while self._answered[0] < asked:
                if not self._running:
                    raise mcp.MCPError(INTERNAL_ERROR, f"server {self._server!r}: its subscriptions/listen ended")
                await self._news.wait()
        finally:
            for uri in extra:  # the caller keeps those it subscribed to before its next await
                self._extra.remove(uri)
        answer = self._answered[1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def run(self) -> None:
        """Keep the stream open, as the module says (run once: ``started`` says it was)."""
        self.started = True
        if not speaks_listen(self.client):
            return
        self._running = True
        try:
            await self._keep()
        finally:
            self._running = False
            self._news.set()

    async def _open(self) -> tuple[AsyncExitStack, Subscription]:
        """Open one stream, subscribed to the three lists and the URIs followed; returns it with what closes it."""
        stack = AsyncExitStack()  # left empty when it fails to open
        subscription = await stack.enter_async_context(
            self.client.listen(
                tools_list_changed=True,
                prompts_list_changed=True,
                resources_list_changed=True,
                resource_subscriptions=sorted({*self._resources(), *self._extra}),
            )
        )
        return stack, subscription

    async def _keep(self) -> None:
        server = self._server
        wait = FIRST_WAIT
        failed = ever = refused = False
        handed: tuple[AsyncExitStack, Subscription, int] | None = None  # the next stream, open before the last closed
        try:
            while True:
                opened: float | None = None
                again = False
                try:
                    renewal = handed is not None
                    if handed is None:
                        asked = self._asked
                        stack, subscription = await self._open()
                    else:
                        (stack, subscription, asked), handed = handed, None
                    async with stack:
                        opened = anyio.current_time()
                        ever = True
                        self._answer(asked, frozenset(subscription.honored.resource_subscriptions or ()))
                        if not renewal:  # not said every `held` seconds
                            logger.debug("server %r: subscriptions/listen stream open", server)
                        if failed:
                            failed = False
                            self._missed()
                        with anyio.CancelScope() as self._stream, anyio.move_on_after(self._held) as held:
                            if self._asked == asked:
                                async for _event in subscription:  # told as read (`Watching`): the SDK's queue drained
                                    pass
                        again = self._asked != asked
                        if held.cancelled_caught and not again:  # held its time: the next opened before it closes
                            renewed = self._asked
                            handed = (*await self._open(), renewed)
                            continue
                    if not again:
                        logger.debug("server %r ended its subscriptions/listen stream; it is opened again", server)
                except TimeoutError as e:
                    self._answer(asked, e)
                    if not ever:
                        logger.debug(
                            "server %r did not acknowledge subscriptions/listen: its changes are not followed till a "
                            "subscription asks again",
                            server,
                        )
                    refused = not ever
                    failed = True
                except SubscriptionLost as e:
                    if opened is None:
                        self._answer(asked, mcp.MCPError(INTERNAL_ERROR, str(e)))
                    logger.debug("server %r: subscriptions/listen stream lost: %s", server, one_line(str(e)))
                    failed = True  # not closed by the server (cut, quiet past the read timeout): what it said is lost
                except mcp.MCPError as e:
                    self._answer(asked, e)
                    refused = e.error.code != CONNECTION_CLOSED and not ever
                    if refused:
                        logger.debug(
                            "server %r refused subscriptions/listen: its changes are not followed till a subscription "
                            "asks again: %s",
                            server,
                            one_line(e.error.message),
                        )
                    failed = True  # one that took a stream before may refuse a moment (a limit, a 503): asked again
                if self._changes.closed:
                    return
                if again:  # opened again at once with the URIs `follow` asked
                    continue
                if refused and not any(True for _ in self._resources()):  # only a `follow` (a subscription) asks again
                    refused = False
                    if self._asked == asked:
                        with anyio.CancelScope() as self._stream:
                            await anyio.sleep_forever()
                    continue
                refused = False  # with URIs to follow (a new session's), asked again, paced
                if opened is not None and anyio.current_time() - opened >= STEADY_SECONDS:
                    wait = FIRST_WAIT
                if self._asked == asked:  # a `follow` asked meanwhile is not left to wait (up to `LONGEST_WAIT`)
                    with anyio.CancelScope() as self._stream:  # `follow` ends the wait: opened again at once
                        await anyio.sleep(wait)
                wait = min(wait * 2, LONGEST_WAIT)
        finally:
            if handed is not None:  # cancelled as it was handed on
                await handed[0].aclose()
