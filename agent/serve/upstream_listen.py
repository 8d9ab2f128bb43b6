"""``subscriptions/listen`` streams of `tooltree serve`: how a client of the 2026-07-28 protocol (over stdio: serve
refuses it over HTTP, and over stdio when a server may ask the client) is told that a list changed, and follows a
server's resource, which that protocol does only there (it has no ``resources/subscribe``).

**Lists.** A reload that changes the prompts or resources offered publishes ``PromptsListChanged`` or
``ResourcesListChanged`` on `UpstreamExtras.bus`, and each stream that asked for it gets
``notifications/prompts/list_changed`` or ``.../resources/list_changed``; one that changes a passthrough tool's
definition publishes ``ToolsListChanged`` (``notifications/tools/list_changed``: `UpstreamExtras.tools_changed`). The
four tools of code mode never change (without a passthrough tool, ``tools.listChanged`` is false,
`agent.serve.upstream_extras.ExtrasServer`, and a stream that asks for them is never told).

**Resources.** Each URI of a stream's ``resourceSubscriptions`` is checked and subscribed to as a
``resources/subscribe`` is (`agent.serve.upstream_subscriptions`: the server that owns it, or whose passthrough
result in the client session linked to it, which must declare
subscriptions, a clean URI of at most `upstream_offer.URI_CHARS` characters, through the client session's own server
pool with its start on first use, timeouts and audit line, within the session's `MAX_SUBSCRIPTIONS`), before the
stream is acknowledged; the acknowledgement's ``resourceSubscriptions`` lists the URIs followed, in the order asked.
One that is not (refused, failed, past the bound) is left out of it and said in serve's log, a warning naming it and
why (the client learns which were followed from the acknowledgement). The server's ``notifications/resources/updated``
of a URI followed reach each stream of this client that follows it, stamped with its subscription id (the SDK's
`ListenHandler`, on a bus of this server's own: `_Bus`), coalesced as the handshake era's
(`agent.serve.upstream_followed.Followed`); one sent while the stream's other URIs are still being subscribed to
(before it is acknowledged, so before it is on the bus) is sent to it again once it is (`_Opening`); a replaced
server session subscribed again tells each stream once, and so does a client session replaced after a regeneration of
the tree (`agent.serve.upstream_subscriptions.carry`). When a stream ends (its client cancels it, or leaves), each
URI that no other stream of the session follows, nor its ``resources/subscribe``, is unsubscribed from on its server
(in the background, by one task for all the streams that ended meanwhile, `Releases`: the stream's end waits for
nothing; a new stream's subscribe of it waits for the unsubscribe,
`agent.serve.upstream_subscriptions.unsubscribe_on`, and one it follows by then is not unsubscribed from). A
session whose streams follow a resource is not ended for being idle (`agent.serve.upstream_subscriptions.follows`), as
one that subscribed.

**Bounds.** At most `MAX_LISTEN_STREAMS` streams open or being opened at once (one more is refused before it
subscribes to anything), each at most `MAX_LISTEN_BACKLOG` events behind; a stream follows at most `MAX_SUBSCRIPTIONS`
URIs (those asked past them are left out, said in one line), the client session as many in all, however many streams
follow each; a stream that ended counts no more at once, before its URIs are unsubscribed from; one background task
at a time releases the streams that ended, however fast a client opens and cancels them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourceUpdated,
    ServerEvent,
    SubscriptionBus,
)
from mcp.shared.exceptions import MCPError

from agent.serve.upstream_followed import MAX_SUBSCRIPTIONS, Follower
from agent.serve.upstream_lists import RESOURCE_NOT_FOUND, Spawn, UpstreamExtras, quoted
from agent.serve.upstream_subscriptions import (
    Forward,
    InSession,
    Linked,
    Subscriptions,
    followable,
    followed_link,
    subscribe_on,
    unsubscribe_on,
)

if TYPE_CHECKING:
    from sandbox.bridge import CallCancel
    from sandbox.host import Runtime

logger = logging.getLogger(__name__)

MAX_LISTEN_STREAMS = 8
"""``subscriptions/listen`` streams open at once in one serve process (one client over stdio); one more is refused
(the SDK's ``INTERNAL_ERROR`` "Subscription limit reached"). A client needs one."""
MAX_LISTEN_BACKLOG = 16
"""Events one listen stream holds unsent; a stream whose client stopped reading is ended there (the client listens
again and lists again, or reads again: an event only says "read again"). A burst of updates (a server session replaced
tells of each of 100 resources at once) is sent as it comes: each is published from its own task."""

ListenHandlerT = Callable[[Any, types.SubscriptionsListenRequestParams], Awaitable[types.SubscriptionsListenResult]]


class _Bus:
    """The listen streams' bus: what `UpstreamExtras.bus` publishes (the lists changed, for every client of this serve
    process) and what is published here (the resources this server's client follows: `Followed.bus`)."""

    def __init__(self, shared: SubscriptionBus) -> None:
        self._shared = shared
        self._own = InMemorySubscriptionBus()

    async def publish(self, event: ServerEvent) -> None:
        await self._own.publish(event)

    def watch(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        """``listener`` called with each event published here (not the lists'), until the callable returned is."""
        return self._own.subscribe(listener)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        ends = (self._shared.subscribe(listener), self._own.subscribe(listener))

        def unsubscribe() -> None:
            for end in ends:
                end()

        return unsubscribe


class _Opening(Follower):
    """A listen stream of this client, and, until it is put on the bus (`watched`), the URIs of ``owners`` it asked
    for whose update was published meanwhile (``missed``: at most `MAX_SUBSCRIPTIONS`). Before, such an update was
    lost: sent once the URI was subscribed to for the stream, before its acknowledgement, it reached no stream."""

    def __init__(self, bus: _Bus, owners: dict[str, str | None]) -> None:
        super().__init__()
        self.missed: set[str] = set()
        self.watched = bus.watch(self._published(owners))

    def _published(self, owners: dict[str, str | None]) -> Callable[[ServerEvent], None]:
        def listener(event: ServerEvent) -> None:
            if isinstance(event, ResourceUpdated) and event.uri in owners:
                self.missed.add(event.uri)

        return listener


def listen_handler(
    extras: UpstreamExtras,
    spawn: Spawn,
    subscriptions: Subscriptions | None,
    in_session: InSession,
    forward: Forward,
    linked: Linked | None = None,
) -> ListenHandlerT:
    """The ``subscriptions/listen`` handler (see the module): the SDK's `ListenHandler`, bounded, on the lists' changes
    and the resources its streams follow, through ``subscriptions`` (those of ``resources/subscribe``; None: serve
    offers no resources, and a stream follows none), ``in_session`` and ``forward``
    (`agent.serve.upstream_extras.forward`); a URI no server claims is followed on the server whose passthrough result
    in the client session linked to it (``linked``), as a ``resources/subscribe`` of it is (`followed_link`).

    Before, the acknowledgement honoured no resource subscription and ``resources.subscribe`` was not declared to this
    protocol's clients: a 2026-07-28 client could not follow a resource through serve."""
    bus = _Bus(extras.bus)
    handler = ListenHandler(bus, max_subscriptions=MAX_LISTEN_STREAMS, max_buffered_events=MAX_LISTEN_BACKLOG)
    # The streams from their request to their end, counted against `MAX_LISTEN_STREAMS` before a URI is subscribed
    # to. Before, only by ``handler``, after the subscribes: one too many subscribed first, and requests in flight at
    # once were not bounded.
    streams: set[Follower] = set()

    async def listen(ctx: Any, params: types.SubscriptionsListenRequestParams) -> types.SubscriptionsListenResult:
        if len(streams) >= MAX_LISTEN_STREAMS:
            raise MCPError(types.INTERNAL_ERROR, "Subscription limit reached")  # as ``handler`` says it
        extras.listening(spawn)
        refused: list[tuple[str, str]] = []
        asked = params.notifications.resource_subscriptions or []
        if subscriptions is None and asked:  # before, each said "no server lists the resource", as if one might
            logger.warning(
                "tooltree serve: a subscriptions/listen stream does not follow the %s resources it asked for: serve "
                "offers no resources (`serve: resources: false`)", f"{len(set(asked)):,}",
            )  # fmt: skip
            asked = []
        unknown: dict[str, MCPError] | None = {} if linked is not None else None  # resolved in the session
        owners = _owners(extras, asked, refused, unknown)
        stream = _Opening(bus, owners)
        subscribing = subscriptions is not None and (any(owners.values()) or bool(unknown))
        streams.add(stream)
        try:
            followed = await follow(ctx, owners, unknown or {}, stream, refused) if subscribing else []
            _say_refused(refused)
            stream.watched()  # ``handler`` puts it on the bus before it yields
            # An update of one followed published meanwhile reached no listener of this stream (it is put on the bus
            # by ``handler``): published again, once it is (a task runs only after ``handler`` has subscribed).
            for uri in stream.missed.intersection(followed):
                spawn(functools.partial(bus.publish, ResourceUpdated(uri=uri)))
            notifications = params.notifications.model_copy(update={"resource_subscriptions": followed or None})
            return await handler(ctx, params.model_copy(update={"notifications": notifications}))
        finally:
            stream.watched()
            streams.discard(stream)
            stream.ended = True  # a subscribe still answering for it follows nothing (`Followed.settle`)
            if subscribing:
                releases.ended(ctx, stream)

    async def follow(
        ctx: Any,
        owners: dict[str, str | None],
        unknown: dict[str, MCPError],
        stream: Follower,
        refused: list[tuple[str, str]],
    ) -> list[str]:
        """The URIs of ``owners`` (each with its server, None: refused, or one of ``unknown``, which no server claims,
        followed where a resource link of the session's came from) that ``stream`` follows, each subscribed to (all
        at once, each on a worker thread of the client session); those that are not, added to ``refused``."""
        if subscriptions is None:
            return []
        honoured: set[str] = set()
        loop = asyncio.get_running_loop()

        async def one(uri: str, owner: str | None) -> None:
            def work(runtime: Runtime, cancel: CallCancel) -> bool:
                server = owner or followed_link(extras, linked, runtime, uri, unknown[uri])
                followed = subscriptions.of(runtime.bridge.pool, None, loop, bus)
                kept = subscribe_on(followed, forward, runtime, server, uri, cancel, by=(stream,))
                if not kept:  # its stream ended meanwhile
                    unsubscribe_on(followed, forward, runtime, [(server, uri)])
                return kept

            try:
                if await in_session(ctx, work):
                    honoured.add(uri)
            except MCPError as e:
                refused.append((uri, e.message))

        async with anyio.create_task_group() as tasks:
            for uri, owner in owners.items():
                if owner is not None or uri in unknown:
                    tasks.start_soon(one, uri, owner)
        return [uri for uri in owners if uri in honoured]

    async def release(ctx: Any, ended: list[Follower]) -> None:
        """The streams of ``ended`` (of ``ctx``'s session) ended: the resources no one of the session follows now are
        unsubscribed from."""

        def work(runtime: Runtime, cancel: CallCancel) -> None:
            followed = subscriptions.get(runtime.bridge.pool) if subscriptions is not None else None
            if followed is not None:
                left = {key for stream in ended for key in followed.leave(stream)}
                unsubscribe_on(followed, forward, runtime, sorted(left), cancel)

        try:
            await in_session(ctx, work)
        except MCPError as e:  # the session could not start again (the client left meanwhile)
            logger.info(
                "the resources of %s listen streams that ended were not unsubscribed from: %s",
                f"{len(ended):,}", e.message[:300],
            )  # fmt: skip

    releases = Releases(spawn, release)
    return listen


class Releases:
    """The listen streams that ended, whose resources are still to be released (``release``: unsubscribed from), in
    one background task at a time (started by ``spawn``): the streams that end while it runs are released together
    by its next round, one `InSession` hand-off for each session among them. Before, each stream's end started a task
    of its own: a client that opened and cancelled streams in a tight loop started as many tasks, each waiting for a
    worker thread of the session, with no bound on their number."""

    def __init__(self, spawn: Spawn, release: Callable[[Any, list[Follower]], Awaitable[None]]) -> None:
        self._spawn, self._release = spawn, release
        self._ended: list[tuple[Any, Follower]] = []
        self._started = False
        self.rounds = 0
        """How many times ``release`` was called (one a session a round)."""

    @property
    def pending(self) -> int:
        """The streams that ended and are not yet handed to ``release``."""
        return len(self._ended)

    def ended(self, ctx: Any, stream: Follower) -> None:
        """``stream``, of ``ctx``'s request, ended: released in the background (on serve's loop; it waits for
        nothing)."""
        self._ended.append((ctx, stream))
        if not self._started:
            self._started = True
            self._spawn(self._drain)

    async def _drain(self) -> None:
        from agent.serve.server import session_key  # (a cycle at import: the server installs this module's handler)

        try:
            while self._ended:
                batch, self._ended = self._ended, []
                by_session: dict[str | None, tuple[Any, list[Follower]]] = {}
                for ctx, stream in batch:
                    by_session.setdefault(session_key(ctx), (ctx, []))[1].append(stream)
                for ctx, streams in by_session.values():
                    self.rounds += 1
                    await self._release(ctx, streams)
        finally:  # all released, or serve's tasks cancelled as it ends
            self._started = False


def _owners(
    extras: UpstreamExtras,
    asked: list[str],
    refused: list[tuple[str, str]],
    unknown: dict[str, MCPError] | None = None,
) -> dict[str, str | None]:
    """The URIs of ``asked``, once each, at most `MAX_SUBSCRIPTIONS`, each with the server it is followed on (None: it
    cannot be followed, added to ``refused``, or, with ``unknown``, no server claims it: put there with why, to be
    followed where a resource link of the session's came from, `followed_link`; those past the bound are said in
    serve's log)."""
    owners: dict[str, str | None] = {}
    past = 0
    for uri in asked:
        if uri in owners:
            continue
        if len(owners) == MAX_SUBSCRIPTIONS:
            past += 1
            continue
        try:
            owners[uri] = followable(extras, uri)
        except MCPError as e:
            owners[uri] = None
            if unknown is not None and e.code == RESOURCE_NOT_FOUND:
                unknown[uri] = e
            else:
                refused.append((uri, e.message))
    if past:
        logger.warning(
            "tooltree serve: a subscriptions/listen stream does not follow %s more of the resources it asked for, past "
            "the first %s (the most one stream follows): they are left out of its acknowledgement",
            f"{past:,}", MAX_SUBSCRIPTIONS,
        )  # fmt: skip
    return owners


REFUSALS_SHOWN = 5
"""The resources a listen stream does not follow named in serve's log, each with why (the rest counted), at most."""


def _say_refused(refused: list[tuple[str, str]]) -> None:
    """Say in serve's log, in one warning, which resources of ``refused`` a listen stream does not follow and why: the
    first `REFUSALS_SHOWN`, each reason cut at 300 characters. Before, one warning each, with the server's stderr: a
    stream that asked for 100 resources of a server that failed to start wrote about 60 KB, each time it was opened."""
    if not refused:
        return
    shown = "; ".join(f"{quoted(uri)}: {why[:300]}" for uri, why in refused[:REFUSALS_SHOWN])
    more = f"; and {len(refused) - REFUSALS_SHOWN:,} more" if len(refused) > REFUSALS_SHOWN else ""
    logger.warning(
        "tooltree serve: a subscriptions/listen stream does not follow %s of the resources it asked for (left out "
        "of its acknowledgement): %s%s", f"{len(refused):,}", shown, more,
    )  # fmt: skip
