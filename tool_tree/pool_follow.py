"""The following of the servers of a `tool_tree.pool.ServerPool` while their sessions run: the changes they tell of,
the resources subscribed to, and the sessions opened again in the background so that the pool's listeners go on
being told.

A resource subscribed to through `ServerPool.request` (``resources/subscribe``) is remembered until it is
unsubscribed: the server's notices that it changed are told to the pool's ``on_resource_updated`` listener
(`_updated`), and a new session that replaces one that ended (a restart, a session the server no longer knows) is
subscribed to it again (`_subscribe_again`), the listener told once of each (a change may have been missed
meanwhile), as it is when the stream of unasked messages opened again after it was lost (`_missed`). Such a server
is not left for a call to start again, as its client may only follow resources: when its session ends on its own (its
process exits, between calls too: the session reads no more, `tool_tree.changes.Changes.end`; a call finds it dead or
cannot write to it; the server forgets the session or cannot be reached), not when the pool ends it (its close, a
server that hung), a new session is opened in the background through the path a call takes (`_follow`): at once, or
once the restarts' back-off lets a call start it. One that ends soon after each restart is given up once the back-off
would hold its next restart the longest (`tool_tree.restarts.MAX_DELAY`), in one warning naming it and the URIs told
of no more (`_follow_given_up`); a call or a request then starts it again. With no URI of it subscribed to, nothing
is done in the background: the next call starts it.

A 404 answering the stream of messages an HTTP server sends unasked is checked with a ``tools/list`` (`_forgotten`,
`_renew`): answered 404 too, the session is retired at once (the calls in flight on it answered first), and opened
again at once when the pool has an ``on_tools_changed`` listener (so its notices reach it again), else at the next
call; answered, the server has no such stream, and the session goes on without it.

A server of the session-less 2026-07-28 protocol tells of changes only on a ``subscriptions/listen`` stream, which
the pool keeps open on its session (`_listen`, `tool_tree.listens`); its ``resources/subscribe`` and
``resources/unsubscribe`` open that stream again with the URIs subscribed to (`_follow_listened`).
"""

from __future__ import annotations

import copy
import functools
import logging
import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio
import mcp
import mcp.types as mt
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND
from pydantic import ValidationError

import tool_tree.restarts
from tool_tree.changes import LISTS_CHANGED, Changes
from tool_tree.connect import Connection, list_tools_raw
from tool_tree.http_errors import session_ended
from tool_tree.listens import HELD_SECONDS, Listening, speaks_listen
from tool_tree.pool_errors import PoolError, upstream
from tool_tree.pool_forward import PING_TIMEOUT, _Raw
from tool_tree.pool_settings import takes_kind
from tool_tree.redact import redact
from tool_tree.text import one_line

if TYPE_CHECKING:
    from tool_tree.pool import ServerPool
    from tool_tree.pool_slot import _Slot

logger = logging.getLogger("tool_tree.pool")  # the pool's log, as before its parts had modules of their own

_NEXT_CALL = "the next call starts it again"
"""What follows a server's end, in the log, unless it is started again at once."""
_FOLLOWED = "resources of it are subscribed to: it is started again now, or once its restart back-off allows"
"""What follows the end of a server with resources subscribed to, in the log (`_follow`)."""


def _nothing() -> None:
    """Told of nothing."""


def _listen(pool: ServerPool, slot: _Slot, conn: Connection) -> Callable[[], Awaitable[None]]:
    """Keep a ``subscriptions/listen`` stream open on ``conn``, a session of ``slot``'s server, when it speaks the
    2026-07-28 protocol (`tool_tree.listens`), listener of the pool or not: its notices have the pool read its listing
    again before a tool of it is next checked (`tool_tree.pool_relist`), under `tooltree agent` and `exec` too (before,
    it was opened only for a listener, `tooltree serve`'s). Over HTTP each stream is held `HELD_SECONDS` at most, the
    next opened before it closes, so that a server told to stop (SIGTERM) is not held: the SDK's server waits for an
    open listen stream as it stops. Returns what ends it and waits until it ended."""
    ended = anyio.Event()
    scope = anyio.CancelScope()
    listening = Listening(
        conn.client,
        conn.changes,
        server=slot.config.name,
        resources=lambda: slot.subscribed,
        missed=functools.partial(_missed, pool, slot),
        held=HELD_SECONDS if slot.config.url is not None else math.inf,
    )

    async def run() -> None:
        try:
            with scope:
                await listening.run()
        finally:
            ended.set()

    def start() -> None:
        if pool._tg is not None and not listening.started:
            listening.started = True  # started once
            pool._tg.start_soon(run)

    if speaks_listen(conn.client):
        slot.listening = (listening, start)
        start()

    async def stop() -> None:
        if slot.listening is not None and slot.listening[0] is listening:
            slot.listening = None  # started no more
        if not listening.started:
            ended.set()
        scope.cancel()
        with anyio.CancelScope(shield=True):  # its end has no await: it is over at its next step
            await ended.wait()

    return stop


async def _follow_listened(pool: ServerPool, slot: _Slot, client: mcp.Client, method: str, uri: str) -> _Raw:
    """``resources/subscribe`` or ``resources/unsubscribe`` of ``uri`` on ``client``, a session of the 2026-07-28
    protocol, which has neither: its ``subscriptions/listen`` stream is opened again with the URIs subscribed to
    now, and the subscription answered as the server acknowledged it (an error when it did not honor ``uri``).

    Raises:
        mcp.MCPError: the server declared no resource subscriptions, refused the stream or did not honor ``uri``.
        TimeoutError: the stream was not acknowledged within the session's read timeout.
    """
    name = slot.config.name
    declared = client.server_capabilities
    if method == "resources/subscribe" and not (declared and declared.resources and declared.resources.subscribe):
        raise mcp.MCPError(METHOD_NOT_FOUND, f"server {name!r} declared no resource subscriptions")
    kept = slot.listening
    if kept is not None and kept[0].client is client:
        listening, start = kept
        if pool.on_resource_updated is not None:
            start()  # its notices may be told now
        await anyio.lowlevel.checkpoint()  # a stream started here is running before it is asked
    else:  # a session not the slot's (it is being replaced): only its answer is heard
        listening = Listening(client, Changes(), server=name, resources=lambda: slot.subscribed, missed=_nothing)
    honored = await listening.follow([uri] if method == "resources/subscribe" else [])
    if method == "resources/subscribe":
        if uri not in honored:
            raise mcp.MCPError(INVALID_PARAMS, f"server {name!r} did not accept a subscription to {uri[:200]!r}")
        slot.subscribed.add(uri)  # before the next await: the stream opened next keeps it
    return _Raw()


async def _follow(pool: ServerPool, slot: _Slot) -> None:
    """Open a new session of ``slot``'s server, whose session ended on its own while resources of it are subscribed to:
    its client would hear of no change until a call came. Through `ServerPool._ensure`, as a call would, so a restart
    its back-off holds is tried once the hold ends; the new session subscribes again and the listener is told
    (`tool_tree.pool_start._own`). Given up, in one warning naming the URIs followed no more, once the back-off would
    hold the next restart its longest (`tool_tree.restarts.MAX_DELAY`: the server ended soon after each restart); a call
    or a request then starts it again. Ends too once a call opened a session, nothing is subscribed to any more, or the
    pool closes (which cancels it)."""
    with anyio.CancelScope() as slot.following:
        try:
            while slot.subscribed and slot.client is None and not pool._closing:
                try:
                    await pool._ensure(slot)
                    continue  # its session may have ended already: `_discard` left it to this task
                except PoolError:  # a start that failed is said (`upstream`); a restart held back is waited out
                    pass
                backoff = slot.backoff
                if backoff.delay(backoff.streak + 1) >= tool_tree.restarts.MAX_DELAY:
                    _follow_given_up(slot)
                    return
                await anyio.sleep(copy.copy(backoff).admit())  # asked of a copy: asking records a restart
        finally:
            slot.following = None


def _follow_given_up(slot: _Slot) -> None:
    """Say that ``slot``'s server is no longer started again for the resources subscribed to, and which."""
    uris = sorted(slot.subscribed)
    named = ", ".join(repr(uri[:200]) for uri in uris[:10]) + (f" and {len(uris) - 10} more" if len(uris) > 10 else "")
    why = redact((slot.backoff.ended or "it ended")[:300], slot.config)
    upstream.warning(
        "server %r is not started again for the resources of it subscribed to: it ended soon after each of its "
        "last %d restarts (the last time because %s), and its restart back-off reached its longest wait; until a "
        "call or a request to it starts it, no change is told of %s",
        slot.config.name,
        slot.backoff.streak,
        why,
        named,
    )


def _may_have_changed(pool: ServerPool, slot: _Slot) -> None:
    """Tell the listener that ``slot``'s server may have changed its lists, as if it had said so of each (a
    listener without ``kind`` is called once): a notice of it may have been missed (its stream of unasked messages
    opened again after it was lost), or a new session replaced one that ended (the server may have been
    redeployed). `tooltree serve` regenerates the server at most once in 30 s, however often it is told."""
    name = slot.config.name
    if (listener := pool._on_tools_changed) is None or pool._closing:
        return
    try:
        if takes_kind(listener):
            for kind in LISTS_CHANGED.values():
                listener(name, kind=kind)
        else:
            listener(name)
    except Exception:  # the listener's fault: the session goes on (raised here, it would end it)
        logger.exception("the on_tools_changed listener raised when told that server %r may have changed", name)


def _missed(pool: ServerPool, slot: _Slot) -> None:
    """A notice of ``slot``'s server may have been missed (its stream of unasked messages opened again after it was
    lost): tell both listeners, as if its lists and each resource subscribed to had changed; its listing is read again
    before a tool of it is next checked (`tool_tree.pool_relist`)."""
    slot.changed += 1
    _may_have_changed(pool, slot)
    for uri in sorted(slot.subscribed):
        _updated(pool, slot, uri)


def _updated(pool: ServerPool, slot: _Slot, uri: str) -> None:
    """``slot``'s server said the resource ``uri`` changed: the ``on_resource_updated`` listener is told, when it
    is subscribed to (a notice of another URI is dropped)."""
    if (listener := pool.on_resource_updated) is None or uri not in slot.subscribed or pool._closing:
        return
    try:
        listener(slot.config.name, uri)
    except Exception:  # the listener's fault: the session goes on (raised here, it would end it)
        logger.exception("the on_resource_updated listener raised when told of server %r", slot.config.name)


async def _subscribe_again(pool: ServerPool, slot: _Slot, client: mcp.Client) -> None:
    """Subscribe the new session ``client`` of ``slot``'s server to the resources subscribed to on the one it
    replaces, then tell the listener once of each (a change may have been missed). One that fails is said in the
    log (a warning): the server says nothing more of it, unless it is subscribed to again."""
    name = slot.config.name
    for uri in sorted(slot.subscribed):
        if slot.client is not client or pool._closing:
            return
        try:
            with anyio.fail_after(slot.config.timeout):
                if not speaks_listen(client):  # else its listen stream opened subscribed to them
                    await client.session.send_request(
                        mt.SubscribeRequest(params=mt.SubscribeRequestParams(uri=uri)), _Raw
                    )
        except (mcp.MCPError, TimeoutError, ValidationError, anyio.ClosedResourceError, anyio.BrokenResourceError,
                anyio.EndOfStream) as e:  # fmt: skip
            said = redact(one_line(str(e) or type(e).__name__, 300), slot.config)
            upstream.warning("server %r: its new session was not subscribed to %r again: %s", name, uri[:200], said)
        _updated(pool, slot, uri)


def _forgotten(pool: ServerPool, slot: _Slot, client: mcp.Client) -> None:
    """``client``'s server answered its stream of unasked messages 404: its session is checked in the background
    (`_renew`). Called in the SDK's task for that stream, on the pool's loop."""
    if pool._tg is not None and not pool._closing and slot.client is client:
        pool._tg.start_soon(_renew, pool, slot, client)


async def _renew(pool: ServerPool, slot: _Slot, client: mcp.Client) -> None:
    """Check the session of ``client``, whose server answered its stream of unasked messages 404, with a ``tools/list``.
    Answered 404 too (or a 400 naming the session), the server no longer knows the session: it is retired once the calls
    in flight on it have their answers, as a call's 404 retires it, and, when the pool has a listener
    (``on_tools_changed``: a new session brings a stream of unasked messages again) or the server has resources
    subscribed to (the new session subscribes to them again: `_subscribe_again`; opened by `_follow`, as for any session
    that ended), a new one is opened now, the listener told once it is listed (`tool_tree.pool_start._own`); otherwise
    the next call opens it. Answered, the server has no such stream (it answered 404 for 405): the session goes on
    without it. Any other failure is left to the next call to meet."""
    if slot.client is not client or pool._closing:
        return
    name = slot.config.name
    try:
        with anyio.fail_after(max(PING_TIMEOUT, slot.config.timeout)):  # not a call: no question is its
            await list_tools_raw(client)
    except mcp.MCPError as e:
        if not session_ended(e):
            return
    except (TimeoutError, ValueError, anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
        return
    else:
        logger.info("server %r answers on its session: it has no stream of unasked messages (its 404)", name)
        return
    reopen = pool._on_tools_changed is not None or bool(slot.subscribed)
    await slot.in_flight.drained(client, PING_TIMEOUT)
    reason = (
        "it no longer knows its session (it answered its stream of unasked messages 404, and a tools/list too: it "
        "restarted or let the session expire)"
    )
    followed = await pool._discard(slot, client, reason, then="a new session is opened now" if reopen else _NEXT_CALL)
    if not reopen or followed or pool._closing:  # followed: `_follow` opens it
        return
    try:
        await pool._ensure(slot)
    except PoolError as e:  # a start that failed is said (`upstream`); a restart held back is not
        logger.info("server %r: no new session now (%s); the next call opens one", name, e)
