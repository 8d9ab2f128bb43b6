"""Resource subscriptions through `tooltree serve`: a client of the handshake era follows a server's resource.

``resources/subscribe {uri}`` goes to the one server that owns the URI, as a ``resources/read`` does
(`UpstreamExtras.owner`: the server that lists it, else the one whose template matches it, else the one whose
passthrough result in this client session linked to it, `followed_link`; a URI two servers claim, or none, is
refused, saying so), through the client session's own server pool (same start on first use, timeouts,
restarts and words of failure, and an audit line with ``method`` and ``uri``: `agent.serve.upstream_extras.forward`).
A server whose snapshot does not record that it declares ``resources.subscribe``
(`tool_tree.snapshot_lists.subscribes`) is refused, named. The pool remembers the URI
(`tool_tree.pool.ServerPool.request`): its ``notifications/resources/updated`` reach its ``on_resource_updated``
listener, which is this client session's `Followed`, and it sends them on to its client: never to another client
session, whose servers are its own. When the server's session is replaced (a restart, a session the server no longer
knows), the pool subscribes the new one again and the client is sent one ``updated`` for each URI (a change may have
been missed). ``resources/unsubscribe {uri}`` forwards the unsubscribe to the server it was subscribed on and ends
the forwarding at once; a URI this session does not follow is answered at once, without error.

A client session that follows a resource is not ended for being idle while its client can be told of a change (over
stdio while it is connected, over HTTP while its ``GET`` stream is open: `agent.serve.sessions.SessionRegistry`, which
asks `follows`): MCP has no notice that a subscription ended, so before, a client that only followed resources was
sent nothing more after ``idle_timeout`` (30 minutes), without a word. When the client session ends (the client
leaves; over HTTP also a new client given its place), its server pool stops its servers, and their subscriptions end
with them; its `Followed` goes with the pool (held weakly).

When serve regenerates its tree (`tooltree_cli.serve_follow`, its background refresh), a client session is replaced at
its client's next call (`agent.serve.sessions.SessionRegistry.use`: one without a sandbox yet, or one renewed), and its
servers stop. Before, its subscriptions ended with them, unsaid. Now they carry over (`carry`), as part of that call, on
the new session's worker thread: each (server, URI) the regenerated tree still offers from the same server, which still
declares subscriptions, is subscribed to on the new session's servers (starting them), its updates sent to the same
connection and listen streams, which are sent one ``updated`` of it (a change may have been missed; coalesced as any
other). One that can no longer be followed (its server gone or no longer declaring subscriptions, the URI no longer
offered by it, its server refusing or failing, or a resource link's URI no server lists: the new session's servers,
started again, returned no link to it, and its read is refused there too) is dropped, said in serve's log as a warning
naming the URI and why (MCP has no notice for it). Done before the call goes on, so that the client's later
``resources/subscribe`` or ``unsubscribe`` act on what was carried, never raced by it; the call waits for those servers'
start and answers (each within its timeout). A session whose runtime moves to the regenerated tree as its sandbox starts
(a ``generate-tree`` that ended after `SessionRegistry.use` let its call in: `sandbox.host.Runtime._follow_tree`, which
stops its servers) carries them over the same way, from the thread that starts the sandbox (`carry_followed`).

**Bounds**, against a hostile client or server: at most `MAX_SUBSCRIPTIONS` URIs followed per client session (one
more is refused, saying so); a URI followed is a clean string of at most `upstream_offer.URI_CHARS` characters, sent
back exactly (`upstream_offer.exact`); the notices of one URI are coalesced, at most one sent per `UPDATE_INTERVAL`
seconds, the last one never lost (one that comes meanwhile is sent at the interval's end); a notice of a URI not
followed is dropped. The server's notices are bounded in number before they are read (`tool_tree.budget`).

The 2026-07-28 protocol has no ``resources/subscribe``: its clients follow resources on ``subscriptions/listen``
streams (`agent.serve.upstream_listen`), through the same `Subscriptions`, checks (`followable`) and bounds; what a
client session follows, and how it is told, is `agent.serve.upstream_followed.Followed`.

(Over 400 lines: the subscribe and unsubscribe of a URI, and their carrying over to the servers of a regenerated tree,
share the same checks, bounds and serialisation.)
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.exceptions import MCPError

from agent.serve.upstream_followed import MAX_SUBSCRIPTIONS as MAX_SUBSCRIPTIONS
from agent.serve.upstream_followed import SUBSCRIBED, Followed, Follower
from agent.serve.upstream_followed import UPDATE_INTERVAL as UPDATE_INTERVAL
from agent.serve.upstream_lists import RESOURCE_NOT_FOUND, Spawn, UpstreamExtras, quoted
from agent.serve.upstream_offer import URI_CHARS, NotKept, exact

if TYPE_CHECKING:
    from agent.serve.client_session import ClientSession
    from sandbox.bridge import CallCancel
    from sandbox.host import Runtime

logger = logging.getLogger(__name__)

InSession = Callable[[Any, Callable[["Runtime", "CallCancel"], Any]], Awaitable[Any]]
Linked = Callable[["Runtime", str], "str | None"]
"""`agent.serve.passthrough.Passthrough.linked`: the server a client session's resource link to a URI came from."""
Forward = Callable[..., dict[str, Any]]
"""`agent.serve.upstream_extras.forward`."""


class Subscriptions:
    """The `Followed` of each client session, by its server pool (held weakly: it ends with the session).

    Args:
        spawn: starts a task in serve's task group.
        extras, forward: what is offered, and how a subscribe is sent (`agent.serve.upstream_extras.forward`): with
            them, the subscriptions of a session that is replaced carry over to the new one (`carry`).
        linked: where a resource link of a client session's passthrough results came from (`followed_link`).
    """

    def __init__(
        self,
        spawn: Spawn,
        extras: UpstreamExtras | None = None,
        forward: Forward | None = None,
        linked: Linked | None = None,
    ) -> None:
        self._spawn = spawn
        self._extras = extras
        self._forward = forward
        self._linked = linked
        self._lock = threading.Lock()
        self._of: weakref.WeakKeyDictionary[Any, Followed] = weakref.WeakKeyDictionary()

    def of(
        self, pool: Any, connection: Any, loop: asyncio.AbstractEventLoop, bus: SubscriptionBus | None = None
    ) -> Followed:
        """The `Followed` of the client session whose server pool is ``pool`` (made, and made the pool's
        ``on_resource_updated`` listener, on first use), sending to ``connection`` and ``bus`` (None: as before)."""
        with self._lock:
            followed = self._of.get(pool)
            if followed is None:
                followed = self._of[pool] = Followed(connection, loop, self._spawn, self)
                pool.on_resource_updated = followed
            if connection is not None:
                followed.connection = connection
            if bus is not None:
                followed.bus = bus
            return followed

    def get(self, pool: Any) -> Followed | None:
        with self._lock:
            return self._of.get(pool)

    def carry(
        self,
        old: Followed,
        taken: dict[tuple[str, str], tuple[float | None, set[Follower]]],
        new: ClientSession,
        before: Runtime | None = None,
    ) -> None:
        """Follow what ``old`` followed (``taken``: `Followed.take`) on the servers of ``new``, the client session
        that replaced ``old``'s (whose runtime was ``before``), for the same followers, sending to the same connection
        and listen streams (from one of ``new``'s worker threads; see the module). Each URI is subscribed to through
        `forward` (audited as the client's own subscribe), then the client is sent one ``updated`` of it; one that
        cannot be followed is dropped, said in the log (`_dropped`)."""
        from sandbox.bridge import CallCancel
        from sandbox.errors import SandboxError
        from tool_tree.pool import PoolError

        extras, forward = self._extras, self._forward
        if extras is None or forward is None:  # made without them (a test of the bounds): nothing is carried
            return
        kept = {}
        for (server, uri), (sent, by) in sorted(taken.items(), key=lambda item: item[0]):
            linked = before is not None and self._linked is not None and self._linked(before, uri) == server
            if (why := _unfollowable(extras, server, uri, linked=linked)) is not None:
                _dropped(new, uri, why)
            else:
                kept[server, uri] = sent, by
        if not kept:
            return
        try:
            runtime = new.opened()  # starts its server pool; the servers start at their first subscribe
        except (SandboxError, PoolError) as e:
            for _, uri in kept:
                _dropped(new, uri, f"the client session's servers could not start: {e}")
            return
        followed = self.of(runtime.bridge.pool, old.connection, old.loop, old.bus)
        for (server, uri), (sent, by) in kept.items():
            if new.ended:  # the client left meanwhile: its servers have stopped
                logger.debug("a resource was not followed again: its client session ended")
                return
            sent_now = subscribed = False
            with followed.serial(server, uri):
                try:
                    followed.ask(server, uri)  # the bound: the client may have subscribed to others meanwhile
                except MCPError as e:
                    _dropped(new, uri, e.message)
                    continue
                try:
                    forward(runtime, server, "resources/subscribe", {"uri": uri}, CallCancel(),
                            f"{server}: subscribing to {quoted(uri)} again")  # fmt: skip
                    sent_now = True
                except MCPError as e:
                    _dropped(new, uri, f"its server did not subscribe to it again: {e.message}")
                finally:
                    subscribed = followed.settle(server, uri, sent_now, sent, by)  # not for a stream ended meanwhile
            if subscribed:
                followed.updated(server, uri)  # a change may have been missed meanwhile
            elif sent_now:
                # Its streams ended while it was subscribed to again, after their own release ran: before, it stayed
                # subscribed on the server with no one to tell.
                unsubscribe_on(followed, forward, runtime, [(server, uri)])


def _unfollowable(extras: UpstreamExtras, server: str, uri: str, *, linked: bool = False) -> str | None:
    """Why ``uri``, followed on ``server`` (``linked``: as a resource link of the session's passthrough results),
    cannot be followed on the tree as it is now; None: it can."""
    try:
        owner = extras.owner(uri)
    except MCPError as e:
        if e.code != RESOURCE_NOT_FOUND:  # two servers claim it now
            return f"the regenerated tree cannot tell its server: {e.message}"
        if server not in extras.found:
            return f"its server {server!r} is not in the regenerated tree"
        if linked:  # the new session's servers are new processes, which returned no link to it (a read is refused)
            return (
                f"it is a resource a passthrough result of its server {server!r} linked to, which no server lists: "
                "a link is followed, and read, only in the client session whose servers returned it, and the session "
                "was replaced, its servers started again, for the regenerated tree (call the tool again, and follow "
                "the link it returns)"
            )
        return f"its server {server!r} no longer lists it or a resource template that matches it"
    if owner != server:
        return f"server {owner!r} offers it in the regenerated tree, not {server!r}, on which it was followed"
    if owner not in extras.offer.subscribing:
        return f"its server {server!r} no longer declares resource subscriptions (resources.subscribe)"
    return None


def _dropped(session: ClientSession, uri: str, why: str) -> None:
    logger.warning(
        "tooltree serve: session %s follows the resource %s no more, after the tree was regenerated: %s (its client "
        "is not told: MCP has no notice that a subscription ended)",
        session.key[:16], quoted(uri), why,
    )  # fmt: skip


def listener(pool: Any) -> Followed | None:
    """The `Followed` of the client session whose server pool is ``pool`` (its ``on_resource_updated`` listener,
    `Subscriptions.of`), or None: it was never asked to follow one."""
    found = getattr(pool, "on_resource_updated", None)
    return found if isinstance(found, Followed) else None


def follows(pool: Any) -> bool:
    """Whether the client session whose server pool is ``pool`` follows a resource."""
    followed = listener(pool)
    return followed is not None and followed.following


async def carry(old: ClientSession, new: ClientSession) -> None:
    """``new`` replaced ``old`` (`agent.serve.sessions.SessionRegistry.use`, after the tree was regenerated): the
    resources ``old``'s client followed are followed on ``new``'s servers (`Subscriptions.carry`), on one of
    ``new``'s worker threads, never on serve's event loop. Nothing when it followed none. Cancelled (the client's
    cancel of the call, serve stopping), it goes on in its thread: a subscription taken from ``old`` is not lost
    for it."""
    followed = listener(old.pool)
    if followed is None or followed.subscriptions is None:
        return
    if taken := followed.take():
        await anyio.to_thread.run_sync(
            followed.subscriptions.carry, followed, taken, new, old.runtime, limiter=new.limiter, abandon_on_cancel=True
        )


def carry_followed(left: Any, session: ClientSession) -> None:
    """``session``'s runtime moved to the regenerated tree as its sandbox started, and stopped its server pool ``left``
    (`sandbox.host.Runtime._follow_tree`: a ``generate-tree`` that ended after the session's call was let in,
    `agent.serve.sessions.SessionRegistry.use`): the resources its client followed on ``left`` are followed on the
    runtime's new servers (`Subscriptions.carry`), from the thread that starts the sandbox. Before, they ended with
    ``left``'s servers, unsaid, and the session went on looking as if it followed them."""
    followed = listener(left)
    if followed is None or followed.subscriptions is None:
        return
    if taken := followed.take():
        followed.subscriptions.carry(followed, taken, session, session.runtime)


def subscribe_on(
    followed: Followed,
    forward: Forward,
    runtime: Runtime,
    server: str,
    uri: str,
    cancel: CallCancel,
    by: Collection[Follower] = (SUBSCRIBED,),
) -> bool:
    """Subscribe to ``uri`` on ``server`` for the followers ``by`` (within the session's bound: `Followed.ask`, which
    raises `MCPError` past it), through ``forward`` (audited; raises `MCPError` when the server refuses or fails);
    whether it is followed now (not when a follower ``by`` it ended meanwhile: `Followed.settle`). From a worker
    thread of the client session."""
    with followed.serial(server, uri):  # never while an unsubscribe of it is in flight (`unsubscribe_on`)
        followed.ask(server, uri)
        subscribed = False
        try:
            forward(runtime, server, "resources/subscribe", {"uri": uri}, cancel,
                    f"{server}: subscribing to {quoted(uri)}")  # fmt: skip
            subscribed = True
        finally:
            kept = followed.settle(server, uri, subscribed, by=by)
    return kept


def unsubscribe_on(
    followed: Followed,
    forward: Forward,
    runtime: Runtime,
    keys: Collection[tuple[str, str]],
    cancel: CallCancel | None = None,
) -> None:
    """Unsubscribe from each (server, URI) of ``keys`` that no one follows now, nor is subscribing to
    (`Followed.wanted`), through ``forward`` (audited; ``cancel`` None: a new one, for a request that ended), each while
    holding its `Followed.serial` lock: no subscribe of it is sent meanwhile. A failure is said in serve's log (its
    notices are sent no more). From a worker thread of the client session.

    Before, an unsubscribe of a listen stream that ended could race a new stream's subscribe of the same URI, and then
    subscribe to it again for that stream: when the stream's own subscribe failed, the server stayed subscribed with
    no one following."""
    from sandbox.bridge import CallCancel

    for server, uri in keys:
        with followed.serial(server, uri):
            if followed.wanted(server, uri):
                continue
            try:
                forward(runtime, server, "resources/unsubscribe", {"uri": uri}, cancel or CallCancel(),
                        f"{server}: unsubscribing")  # fmt: skip
            except MCPError as e:  # its notices are sent no more: said in serve's log and the audit log
                logger.info("%s: the unsubscribe of a resource failed: %s", server, e.message[:300])


def install_subscriptions(
    server: Server[Any],
    extras: UpstreamExtras,
    in_session: InSession,
    spawn: Spawn,
    forward: Callable[..., dict[str, Any]],
    linked: Linked | None = None,
) -> Subscriptions:
    """Add the ``resources/subscribe`` and ``resources/unsubscribe`` handlers to ``server`` (`in_session` runs each
    in the client's session; ``forward``: `agent.serve.upstream_extras.forward`; ``linked``: the server a resource
    link of the client session's passthrough results came from, where a URI no server claims is followed, as a read
    of it goes); the `Subscriptions` they keep, which the listen streams share (`agent.serve.upstream_listen`)."""
    subscriptions = Subscriptions(spawn, extras, forward, linked)

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        try:
            owner: str | None = followable(extras, uri)
        except MCPError as e:
            if e.code != RESOURCE_NOT_FOUND or linked is None:
                raise
            owner, unknown = None, e
        connection = getattr(ctx.session, "_connection", ctx.session)  # as `install`'s ``listed`` finds it
        loop = asyncio.get_running_loop()

        def work(runtime: Runtime, cancel: CallCancel) -> None:
            server = owner or followed_link(extras, linked, runtime, uri, unknown)
            subscribe_on(subscriptions.of(runtime.bridge.pool, connection, loop), forward, runtime, server, uri, cancel)

        await in_session(ctx, work)
        return types.EmptyResult()

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        if len(uri) > URI_CHARS:  # never followed
            return types.EmptyResult()

        def work(runtime: Runtime, cancel: CallCancel) -> None:
            followed = subscriptions.get(runtime.bridge.pool)
            if followed is not None:
                unsubscribe_on(followed, forward, runtime, [(owner, uri) for owner in followed.drop(uri)], cancel)

        await in_session(ctx, work)
        return types.EmptyResult()

    server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)
    return subscriptions


def followable(extras: UpstreamExtras, uri: str) -> str:
    """The server on which ``uri`` is followed (a read of it goes there).

    Raises:
        MCPError: it cannot be followed: not a clean string of at most `URI_CHARS` characters, no server (or two)
            claims it, or its server does not declare subscriptions.
    """
    try:
        exact(uri, URI_CHARS)
    except NotKept:
        raise MCPError(
            code=types.INVALID_PARAMS,
            message=f"the resource {quoted(uri)} cannot be followed: a URI followed is a clean string of at most "
            f"{URI_CHARS:,} characters (no control, escape or invisible character)",
        ) from None
    owner = extras.owner(uri)  # refused as a read is: no server, or two, claim it
    _subscribing(extras, owner, uri)
    return owner


def followed_link(extras: UpstreamExtras, linked: Linked | None, runtime: Runtime, uri: str, unknown: MCPError) -> str:
    """The server on which ``uri``, a clean URI no server lists or has a template for (`followable` raised
    ``unknown``), is followed: the one whose passthrough result in ``runtime``'s client session linked to it, as a
    read of it goes (`agent.serve.passthrough.Passthrough.linked`). From a worker thread of the client session.

    Raises:
        MCPError: ``unknown``, when no passthrough result of the session linked to it (as a read is refused), or: that
            server does not declare subscriptions.
    """
    server = linked(runtime, uri) if linked is not None else None
    if server is None:
        raise unknown
    _subscribing(extras, server, uri)
    return server


def _subscribing(extras: UpstreamExtras, server: str, uri: str) -> None:
    if server not in extras.offer.subscribing:
        raise MCPError(
            code=types.INVALID_PARAMS,
            message=f"server {server!r} does not declare resource subscriptions (resources.subscribe), so "
            f"{quoted(uri)} cannot be followed through tooltree: read it again to see a change",
        )
