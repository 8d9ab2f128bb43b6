"""The start of a server of a `tool_tree.pool.ServerPool` (`_ensure`), and the task that owns its session (`_own`).

Each server is owned by one background task that opens the connection, keeps it open and closes it (the SDK's
transports are anyio context managers and must be entered and left by the same task). A stdio server's process group
is killed when the pool closes.

Servers start on their first call, at most ``start_jobs`` at once (`tool_tree.starts.StartGate`, default the number of
cores; a gate given as ``start_gate`` is shared with other pools, as `tooltree serve`'s client sessions share one): a
call to a server that is queued behind others waits its turn, and the server's start-up timeout runs from its own
start. A start that runs out of it fails at its timeout; its process is ended (and reaped) in the background, which
may take seconds more for a server that does not exit as its stdin closes.

Restarts of a server that keeps ending or failing to start back off (`tool_tree.restarts`): a call meanwhile is
refused at once, naming why it ended last and when it may start again. A start that failed is said in the
`tool_tree.pool_errors.upstream` log.
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import mcp
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from tool_tree.config import ServerConfig
from tool_tree.connect import connect, list_tools_raw
from tool_tree.http_errors import status_named
from tool_tree.output_check import OutputCheck
from tool_tree.pool_errors import PoolError, ServerUnavailable, _first, _reason, _told, _unavailable, upstream
from tool_tree.pool_follow import _forgotten, _listen, _may_have_changed, _missed, _subscribe_again, _updated
from tool_tree.pool_relist import heard
from tool_tree.pool_settings import told_of
from tool_tree.pool_slot import _client_of
from tool_tree.starts import StartSlot
from tool_tree.stderr_log import StderrLog
from tool_tree.unreachable import to_check

if TYPE_CHECKING:
    from tool_tree.pool import ServerPool
    from tool_tree.pool_slot import _Slot

logger = logging.getLogger("tool_tree.pool")  # the pool's log, as before its parts had modules of their own


@dataclass
class _Start:
    """One start of a server, as its owner task (`_own`) holds it: its start slot, the events that stop it
    and say it ended, when its start-up times out, and its stderr's log."""

    slot: StartSlot
    stop: anyio.Event
    closed: anyio.Event
    deadline: float
    stderr: StderrLog | None

    def release(self) -> None:
        self.slot.release()


async def _ensure(pool: ServerPool, slot: _Slot) -> mcp.Client:
    """The client of ``slot``'s session (`ServerPool._ensure`): its server is started first when none runs, through
    the start gate, by an owner task (`_own`), within its start-up timeout; a start that failed is said and backs off.

    Raises:
        PoolError: the pool is not open, or closed while the server started.
        ServerUnavailable: the server cannot be started now (it failed to, or its restart back-off holds it).
    """
    async with slot.lock:
        if slot.client is not None:
            return slot.client
        if pool._tg is None:
            raise PoolError("the pool is not open (use `async with ServerPool(...)`)")
        if (unset := slot.config.unresolved) is not None:  # a variable of its settings is not set: never started
            raise ServerUnavailable(slot.config.name, str(unset))  # its values are references as written: no secret
        if (held := slot.backoff.refusal()) is not None:
            raise _unavailable(slot, held)
        slot.queued = True
        try:
            start = await pool._gate.acquire()  # behind other starting servers: no deadline runs yet
        finally:
            slot.queued = False
        try:
            # Checked with no await between here and start_soon: a pool that began closing must
            # not get a new owner task its __aexit__ would never stop.
            if pool._closing or pool._tg is None:
                raise PoolError("the pool is closing")
            if slot.stderr is not None:
                slot.stderr.close()
            slot.stderr = StderrLog(slot.config) if slot.config.command is not None else None
            slot.stop, slot.closed = anyio.Event(), anyio.Event()
            ready = anyio.Event()
            box: list[BaseException] = []
            deadline = anyio.current_time() + slot.config.timeout
            owned = _Start(start, slot.stop, slot.closed, deadline, slot.stderr)
            pool._tg.start_soon(_own, pool, slot, ready, box, owned)
        except BaseException:
            start.release()
            raise
        # Said at its deadline: the owner task ends the server meanwhile (before, the error waited for its end,
        # about 2 s more for a server that does not exit as its stdin closes).
        with anyio.move_on_at(deadline):
            await ready.wait()
        if not ready.is_set():
            start.release()  # its turn is over: the end of its server takes none
            slot.closed = None  # stopped, not starting, while its owner task ends it
            box = [TimeoutError()]
        client = _client_of(slot)  # set by the owner task meanwhile
        if (box or client is None) and pool._closing:  # not the server's failure: no back-off
            raise PoolError("the pool closed while the server started (its `with` block ended meanwhile)")
        if box or client is None:
            reason = (
                await _reason(box[0], http=slot.config.url is not None, stderr=slot.stderr)
                if box
                else "the connection closed"
            )
            if box and isinstance(_first(box[0]), TimeoutError):  # in generate-tree's terms: how long, which key
                reason = (
                    f"timed out after {slot.config.timeout:g} s while starting (its own start-up, not the wait "
                    f"for its turn; {pool._timeout_setting(slot)})"
                )
                if slot.stderr is not None and (noise := slot.stderr.noise_said()) is not None:
                    reason += f"; {noise}"
            if box and slot.config.url is not None and isinstance(_first(box[0]), ConnectionError | TimeoutError):
                reason += f"; no call was sent: {pool._check_url(slot, to_check(_first(box[0])))}"
            elif box:
                reason += status_named(_first(box[0]), slot.config, pool._source)
            slot.backoff.failed(reason)
            failure = _unavailable(slot, reason)
            upstream.warning(
                "%s", _told(f"server {slot.config.name!r} could not start: {failure.reason}", failure.stderr_tail)
            )
            raise failure
        slot.backoff.ended = None
        return client


async def _own(pool: ServerPool, slot: _Slot, ready: anyio.Event, box: list[BaseException], start: _Start) -> None:
    """The task that owns one connection from open to close; gives back its start slot once listed. Its start-up
    ends at ``start.deadline``. It touches the events and scopes of its own start alone (``start``'s, and the
    slot's while they are these): a start that timed out is said at once (`_ensure`) while this task still ends
    its server, and a later start may have begun."""
    stop, closed, deadline = start.stop, start.closed, start.deadline
    scope: anyio.CancelScope | None = None
    try:
        # The start-up deadline covers opening and listing, then is lifted for the session's life.
        with anyio.CancelScope(deadline=deadline) as scope:
            slot.starting = scope
            if pool._closing:  # the close began before this task ran: it found no start-up to stop
                scope.cancel()
            hurry = lambda: pool._interrupted  # noqa: E731  # read at the close
            async with connect(
                slot.config, stderr=start.stderr, asks=slot.in_flight, hurry=hurry, source=pool._source
            ) as conn:
                listened = _listen(pool, slot, conn)  # opened before the listing: a change after it is told
                try:
                    # The listing of the session before, of no use to this one, is let go first: it is not
                    # counted twice.
                    slot.tools = []
                    slot.share.release()
                    conn.changes.heard = functools.partial(heard, slot)  # a change from now on may not be listed
                    slot.listed_at = slot.changed
                    slot.tools = await list_tools_raw(conn.client, slot.share)
                    OutputCheck(slot.config.name, slot.tools).install(conn.client)  # bounded, off the loop
                    slot.left_out = {left.name: left.reason for left in conn.left_out if left.name}
                    for left in conn.left_out:  # said by generate-tree; a call of one says it too
                        logger.info("%s: left out %s", conn.server.name, left)
                    if _sends_tool_headers(conn.client, slot.config, slot.tools):
                        await conn.client.list_tools()
                    if (told := pool._on_tools_changed) is not None:  # a change before now is in the listing
                        conn.changes.listener = told_of(told, slot.config.name)
                    conn.changes.missed = functools.partial(_missed, pool, slot)
                    conn.changes.updated = functools.partial(_updated, pool, slot)
                    scope.deadline = math.inf
                    slot.starting = None
                    start.release()
                    if not pool._closing:  # closing began while this server started: stop now
                        slot.client, slot.connection = conn.client, conn
                        conn.changes.forgotten = functools.partial(_forgotten, pool, slot, conn.client)
                        conn.changes.ended = functools.partial(pool._ended_alone, slot, conn.client)
                        if conn.changes.unknown:  # its stream was answered 404 while it opened
                            _forgotten(pool, slot, conn.client)
                        if conn.changes.closed:  # it ended before it was published: no one else was told
                            pool._ended_alone(slot, conn.client)
                        if slot.listed:  # it replaces a session that ended: the server may list others now
                            _may_have_changed(pool, slot)
                            if slot.subscribed and pool._tg is not None:  # and knows none of its subscriptions
                                pool._tg.start_soon(_subscribe_again, pool, slot, conn.client)
                        slot.listed = True
                        ready.set()
                        await stop.wait()
                finally:
                    if slot.client is conn.client:
                        slot.client, slot.connection = None, None
                    slot.in_flight.forget(conn.client)  # its URL elicitations told no more; its id may recur
                    await listened()
        if scope.cancelled_caught and not ready.is_set():
            raise TimeoutError
    except BaseException as e:
        box.append(e)
        ready.set()
        if not isinstance(e, Exception):
            raise
    finally:
        if slot.starting is scope:
            slot.starting = None
        start.release()
        ready.set()  # never leave the starting call waiting
        closed.set()


def _sends_tool_headers(client: mcp.Client, server: ServerConfig, tools: list[dict[str, Any]]) -> bool:
    """Whether the SDK must list the server's tools itself before calls: only a 2026 session over HTTP needs it, and
    only when a tool of ``tools`` (tooltree's listing) declares ``x-mcp-header``, to mirror a call's arguments into
    the ``Mcp-Param-*`` headers its listing declares.

    Before, every session listed twice, the second time for the SDK alone: its other use of its listing, the output
    schemas, is `OutputCheck`'s (which replaced the SDK's check and reads tooltree's listing), and a stdio session
    sends no headers. For a server of 20,000 tools that second listing was half a session's start-up (the server's
    work, the answer's reading and the protocol's check of every tool twice). A 2026 session over HTTP listed twice
    still, though a listing without ``x-mcp-header`` gives the SDK no header to send.
    """
    if server.url is None or client.session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    return any(_declares_header(tool.get("inputSchema")) for tool in tools)


def _declares_header(schema: object) -> bool:
    """Whether ``x-mcp-header`` is a key anywhere in ``schema`` (a tool's input schema, as its server sent it): where
    the SDK looks for the annotations, and more (a property of that name), so that none is missed."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "x-mcp-header" in node:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False
