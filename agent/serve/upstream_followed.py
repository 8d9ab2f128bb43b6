"""What one client session of `tooltree serve` follows of its servers' resources, and the sending of their
``notifications/resources/updated`` to its client: `Followed`, its server pool's ``on_resource_updated`` listener.

A resource is followed by (server, URI), each by one or more `Follower`: the client's ``resources/subscribe``
(`SUBSCRIBED`, the handshake era: `agent.serve.upstream_subscriptions`) or its ``subscriptions/listen`` streams (the
2026-07-28 protocol: `agent.serve.upstream_listen`). It is subscribed to on its server while one follows it. Its
updates go to the client's connection when it subscribed, and on the listen streams' bus when one of them follows
it (each stream that asked for it is sent it, stamped with its subscription id: the SDK's ``ListenHandler``).
**Bounds**: at most `MAX_SUBSCRIPTIONS` (server, URI) followed per client session, however many follow each; the
notices of one URI are coalesced, at most one sent per `UPDATE_INTERVAL` seconds to every follower, the last one never
lost (one that comes meanwhile is sent at the interval's end); a notice of a URI not followed is dropped.

**One at a time.** A subscribe or an unsubscribe of one (server, URI) is sent while holding its lock (`serial`), and
an unsubscribe only once no one follows it or is subscribing to it (`agent.serve.upstream_subscriptions.subscribe_on`,
`unsubscribe_on`). Before, a stream's subscribe could be sent while an ended stream's unsubscribe of the same URI was
in flight: the unsubscribe subscribed again for it, and when that stream's own subscribe failed, the server stayed
subscribed with no one following.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Callable, Collection, Coroutine
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.subscriptions import ResourceUpdated, SubscriptionBus
from mcp.shared.exceptions import MCPError

from agent.serve.upstream_lists import Spawn, quoted
from agent.serve.upstream_offer import URI_CHARS

if TYPE_CHECKING:
    from agent.serve.upstream_subscriptions import Subscriptions

logger = logging.getLogger(__name__)

MAX_SUBSCRIPTIONS = 100
"""URIs one client session follows at most (each a subscription held on its server)."""
UPDATE_INTERVAL = 1.0
"""Seconds between two ``notifications/resources/updated`` of one URI sent to one client session, at least."""
SERIAL_LOCKS = 64
"""The locks one client session's subscribes and unsubscribes are serialised on (`Followed.serial`): those of one
(server, URI) wait for one another, and those of URIs sharing a lock too (each holds one lock at a time)."""


class Follower:
    """Who follows a resource in a client session: its client's ``resources/subscribe`` (`SUBSCRIBED`), or one of its
    ``subscriptions/listen`` streams (`agent.serve.upstream_listen`), which follows nothing more once ``ended``."""

    def __init__(self) -> None:
        self.ended = False


SUBSCRIBED = Follower()
"""The client's ``resources/subscribe`` of a URI (the handshake era), not unsubscribed since."""


class Followed:
    """The resources one client session follows, by (server, URI), each with who follows it (`Follower`), and the
    sending of their ``notifications/resources/updated`` to its client (`updated`; the instance itself is the
    ``on_resource_updated`` listener of the session's server pool, so that `follows` finds it there): on its
    connection when it subscribed, on ``bus`` (its listen streams', `agent.serve.upstream_listen`) when one follows it.

    Args:
        connection: the client's connection (with ``send_resource_updated``), on serve's event loop ``loop``.
        spawn: starts a task in serve's task group.
        subscriptions: the `Subscriptions` it belongs to, which carries it over to a session that replaces its own
            (`carry`).
    """

    def __init__(
        self,
        connection: Any,
        loop: asyncio.AbstractEventLoop,
        spawn: Spawn,
        subscriptions: Subscriptions | None = None,
    ) -> None:
        self.connection = connection
        self.loop = loop
        self._spawn = spawn
        self.subscriptions = subscriptions
        self.bus: SubscriptionBus | None = None
        self._lock = threading.Lock()
        self.followers: dict[tuple[str, str], set[Follower]] = {}
        self._asked: dict[tuple[str, str], int] = {}  # subscribes in flight, counted against the bound
        self._last: dict[tuple[str, str], float] = {}
        self._pending: set[tuple[str, str]] = set()
        self._serial = tuple(threading.Lock() for _ in range(SERIAL_LOCKS))

    def serial(self, server: str, uri: str) -> threading.Lock:
        """The lock held while a subscribe or an unsubscribe of ``uri`` on ``server`` is sent and settled (see the
        module), from a worker thread of the client session."""
        return self._serial[hash((server, uri)) % SERIAL_LOCKS]

    def ask(self, server: str, uri: str) -> None:
        """A subscribe of ``uri`` on ``server`` is about to be sent (`settle` it once answered).

        Raises:
            MCPError: the session follows `MAX_SUBSCRIPTIONS` URIs already (with those being subscribed).
        """
        key = (server, uri)
        with self._lock:
            # A URI only streams that have ended follow (their release, `leave`, still to run in the background) is
            # not counted. Before, it was until that release ran: a stream opened just after another ended, within
            # the bound, could be refused for the URIs of the one that ended.
            live = {each for each, by in self.followers.items() if any(not follower.ended for follower in by)}
            if key not in live and key not in self._asked and len(live | self._asked.keys()) >= MAX_SUBSCRIPTIONS:
                raise MCPError(
                    code=types.INVALID_PARAMS,
                    message=f"this client session follows {MAX_SUBSCRIPTIONS} resources already, the most it may: "
                    f"stop following one (resources/unsubscribe, or end a subscriptions/listen stream that follows "
                    f"it) before following {quoted(uri)}",
                )
            self._asked[key] = self._asked.get(key, 0) + 1

    def settle(
        self,
        server: str,
        uri: str,
        subscribed: bool,
        sent: float | None = None,
        by: Collection[Follower] = (SUBSCRIBED,),
    ) -> bool:
        """The subscribe of `ask` was answered: ``subscribed`` or not, for the followers ``by``. ``sent``: when an
        update of it was last sent to the client by the session this one replaced (`carry`), so that the coalescing
        spans the two. Whether it is followed now (not when a follower ``by`` it has ended meanwhile)."""
        key = (server, uri)
        with self._lock:
            if (left := self._asked.pop(key, 1) - 1) > 0:
                self._asked[key] = left
            live = {follower for follower in by if not follower.ended}
            if not (subscribed and live):
                return False
            self.followers.setdefault(key, set()).update(live)
            if sent is not None:
                self._last[key] = max(sent, self._last.get(key, sent))
            return True

    @property
    def following(self) -> bool:
        """Whether it follows a resource (one subscribed to, and not unsubscribed since, or of a listen stream)."""
        with self._lock:
            return bool(self.followers)

    def wanted(self, server: str, uri: str) -> bool:
        """Whether ``uri`` on ``server`` is followed, or being subscribed to (`ask`)."""
        with self._lock:
            return (server, uri) in self.followers or (server, uri) in self._asked

    def take(self) -> dict[tuple[str, str], tuple[float | None, set[Follower]]]:
        """Follow nothing more (its session was replaced: `carry`); what it followed, each with when an update of it
        was last sent (None: never) and who follows it. An update of it still waiting to be sent is dropped: the
        carry sends one. A listen stream that has ended follows nothing."""
        with self._lock:
            taken = {key: (self._last.get(key), {f for f in by if not f.ended}) for key, by in self.followers.items()}
            self.followers.clear()
            self._last.clear()
        return {key: (sent, by) for key, (sent, by) in taken.items() if by}

    def drop(self, uri: str, follower: Follower = SUBSCRIBED) -> list[str]:
        """``follower`` follows ``uri`` no more; the servers on which no one follows it now (none: it was not, or is
        still, followed: its listen streams, `agent.serve.upstream_listen`)."""
        with self._lock:
            return sorted(server for server, _ in self._unfollow(follower, lambda key: key[1] == uri))

    def leave(self, follower: Follower) -> list[tuple[str, str]]:
        """``follower``, a listen stream that ended, follows nothing more; the (server, URI) no one follows now."""
        with self._lock:
            follower.ended = True
            return sorted(self._unfollow(follower, lambda key: True))

    def _unfollow(self, follower: Follower, which: Callable[[tuple[str, str]], bool]) -> list[tuple[str, str]]:
        left = []
        for key, by in list(self.followers.items()):
            if which(key) and follower in by:
                by.discard(follower)
                if not by:
                    del self.followers[key]
                    self._last.pop(key, None)
                    left.append(key)
        return left

    def updated(self, server: str, uri: str) -> None:
        """``server`` said the resource ``uri`` changed (`tool_tree.pool.ServerPool`'s ``on_resource_updated``, on
        the pool's thread: it must not block). Sent to the client when it is followed, at once or, within
        `UPDATE_INTERVAL` of the last one sent, at the interval's end (one send for all the notices meanwhile)."""
        key = (server, uri)
        with self._lock:
            if len(uri) > URI_CHARS or key not in self.followers or key in self._pending:
                return
            self._pending.add(key)
            wait = max(0.0, self._last.get(key, -UPDATE_INTERVAL) + UPDATE_INTERVAL - time.monotonic())
        # Not waited for (the pool's thread must not block); started in a task of serve's loop, which starts the send
        # in serve's task group (anyio starts a task only from a task).
        start = self._start(functools.partial(self._send, key, wait))
        try:
            asyncio.run_coroutine_threadsafe(start, self.loop)
        except RuntimeError:  # serve's loop has ended
            start.close()
            logger.debug("a resource update was not sent: serve's loop has ended")

    __call__ = updated

    async def _start(self, send: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._spawn(send)

    async def _send(self, key: tuple[str, str], wait: float) -> None:
        if wait > 0:
            await anyio.sleep(wait)
        with self._lock:
            self._pending.discard(key)  # a notice from now on is sent after this one
            by = self.followers.get(key)
            if not by:
                return
            self._last[key] = time.monotonic()
            subscribed, listened = SUBSCRIBED in by, any(follower is not SUBSCRIBED for follower in by)
        try:
            if subscribed:
                await self.connection.send_resource_updated(key[1])
            if listened and self.bus is not None:  # each stream that follows it is sent it (`ListenHandler`)
                await self.bus.publish(ResourceUpdated(uri=key[1]))
        except Exception:  # the client's connection has ended meanwhile
            logger.debug("a resource update was not sent", exc_info=True)
