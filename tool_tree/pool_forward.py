"""The forwarding of one call or request to a server of a `tool_tree.pool.ServerPool` (`_forward`, which
`ServerPool.call` and `ServerPool.request` go through): its turn, its timeout, its failures, and the restarts they
lead to.

Calls come from any task. A server whose connection died is re-opened on the next call (one with resources subscribed
to, at once: `tool_tree.pool_follow`): before that call is sent when the session already knew the connection had
closed (a server killed between calls), else after the call that found it dead fails (it may have reached the server,
and tools act for real, so it is never sent again). An HTTP server that answers a call with 404 for its session (it
restarted, or let the session expire) did not run it: its session is re-opened and the call sent once more
(`tool_tree.http_errors`); a second 404 fails it, saying it ran neither time. A 400 naming the session (as many
servers answer instead) fails the call, not sent again, and the next call opens a new session. An HTTP server that
cannot be reached when a call is sent (connection refused, host name not resolved, connect timed out) fails it saying
so, and that it was not sent; the calls sent on that session before are left to finish (a server shutting down
refuses new connections and answers what it took), and once they have, the next call opens a new session. Each
server has a concurrency limit and a per-call timeout; a call that runs out of the server's own timeout says which
setting it was (``servers.NAME.timeout`` in the config file). A server a call timed out on is asked in the background
whether it still answers, and one a call was cut off on by its caller after `PING_TIMEOUT` seconds is asked before
the next call: one that answers none is hung, and its session is ended (`_ask_if_hung`, `_unless_hung`).

`ServerPool.request` forwards the requests of prompts and resources (`FORWARDED`) the same way, with the same
timeouts, restarts and failures (`tooltree serve` offers the servers' prompts and resources through it).

A call or request that got no usable answer returns a `tool_tree.pool_errors.CallFailure`; one that did not reach the
server, or whose server died before answering, raises `tool_tree.pool_errors.ServerUnavailable`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import mcp
import mcp.types as mt
import pydantic_core
from mcp import InputRequiredRoundsExceededError
from mcp.shared.dispatcher import ProgressFnT
from pydantic import BaseModel, ConfigDict, ValidationError

from tool_tree.connect import list_tools_raw
from tool_tree.http_errors import resendable, session_ended, status_named, stream_cut, unreached, unreached_check
from tool_tree.ledgers import closed_here
from tool_tree.pool_errors import (
    _NOT_SENT,
    _PROTOCOL_ERROR,
    _SENT,
    CallFailure,
    _closed_during_call,
    _is_connection_loss,
    _refused,
    _said,
    _unavailable,
)
from tool_tree.pool_slot import _closed
from tool_tree.redact import redact
from tool_tree.server_asks import ROUNDS_PROBLEM, URL_ELICITATION_REQUIRED, Asker, asked, unanswered, url_required

if TYPE_CHECKING:
    from tool_tree.pool import ServerPool
    from tool_tree.pool_slot import _Slot

logger = logging.getLogger("tool_tree.pool")  # the pool's log, as before its parts had modules of their own

PING_TIMEOUT = 5.0
"""After a call times out, how long the server has to answer a request before it counts as hung."""
SDK_TIMEOUT_MARGIN = 1.0
"""How much later than the pool's own deadline the SDK's read timeout of a call is set, so the pool's fires
first (and the SDK's default, the server's ``timeout``, never cuts short a longer ``timeout`` of a call)."""


ProgressListener = Callable[[float, float | None, str | None], None]
"""Told ``(progress, total, message)`` of each ``notifications/progress`` a server sends for a call (`ServerPool.call`'s
``progress``), as the SDK read them; on the pool's event loop, so it must be thread-safe and never block."""


_SUBSCRIPTIONS = ("resources/subscribe", "resources/unsubscribe")
"""The requests of the protocol with sessions a session of the 2026-07-28 protocol serves on its listen stream."""


class _Raw(BaseModel):
    """A result that keeps every field the server sent (the SDK's typed models drop unknown ones, and refuse what
    they do not know: the caller bounds and checks it)."""

    model_config = ConfigDict(extra="allow")


FORWARDED: dict[str, type[BaseModel]] = {
    "prompts/list": mt.ListPromptsRequest,
    "prompts/get": mt.GetPromptRequest,
    "resources/list": mt.ListResourcesRequest,
    "resources/templates/list": mt.ListResourceTemplatesRequest,
    "resources/read": mt.ReadResourceRequest,
    "resources/subscribe": mt.SubscribeRequest,
    "resources/unsubscribe": mt.UnsubscribeRequest,
}
"""The requests `ServerPool.request` forwards, with the SDK's model of each (``tooltree serve`` offers the servers'
prompts and resources through them: `agent.serve.upstream_extras`)."""


async def _forward(
    pool: ServerPool, slot: _Slot, timeout: float | None, send: Callable[[mcp.Client, float], Awaitable[BaseModel]]
) -> dict[str, Any]:
    """One request to ``slot``'s server (``send`` it on a client within the seconds left), as `ServerPool.call` says."""
    server = slot.config.name
    limit = timeout if timeout is not None else slot.config.timeout
    queued = anyio.current_time()
    with anyio.move_on_after(limit) as turn:
        await slot.limiter.acquire()
    setting = "" if timeout is not None else pool._timeout_setting(slot)
    if turn.cancelled_caught:
        busy = f"{slot.limiter.total_tokens:g} call(s) in flight to {server!r}"
        busy += f"; {setting}" if setting else ""
        return CallFailure(f"the call timed out after {limit:g} s waiting for its turn ({busy})", "timeout", _NOT_SENT)
    waited = anyio.current_time() - queued
    client: mcp.Client | None = None
    try:
        client = await pool._ensure(slot)
        if _closed(client):
            # It died since its last call (killed, crashed idle): nothing is sent on a closed session, so
            # restart it and send the call once, rather than fail a call the server never saw.
            await pool._discard(slot, client, "its connection closed while no call was in flight")
            client = await pool._ensure(slot)
        if slot.suspect is client:
            client = await _unless_hung(pool, slot, client, limit)
        log = slot.stderr  # this session's: a call meanwhile may start the server again, with a log of its own
        remaining = max(0.0, limit - waited)
        sent, noise = anyio.current_time(), (log.noise_count if log is not None else 0)
        unaddressed = log.unaddressed_count if log is not None else 0
        try:
            resent = False
            try:
                result = await send(client, remaining)
            except mcp.MCPError as e:
                if not resendable(e):
                    raise
                # The server restarted or let the session expire (HTTP 404 to its id): it did not run the call.
                # Open a new session, as the MCP spec says, and send the call once more on it.
                await _retire(pool, slot, client, e.message, max(0.0, remaining - (anyio.current_time() - sent)))
                remaining = max(0.0, remaining - (anyio.current_time() - sent))  # the start is not counted
                client, resent = await pool._ensure(slot), True
                log = slot.stderr
                noise = log.noise_count if log is not None else 0
                unaddressed = log.unaddressed_count if log is not None else 0
                result = await send(client, remaining)
        except pydantic_core.PydanticSerializationError as e:  # nothing was sent: the session is as it was
            raise TypeError(f"arguments: cannot be sent as JSON ({e})") from None
        except anyio.get_cancelled_exc_class():
            # Its caller gave up (the execution ended first: with the defaults, both take 30 s, so the call's own
            # timeout, which asks a hung server, never came; before, every later call waited the whole time too).
            if anyio.current_time() - sent >= PING_TIMEOUT and slot.client is client:
                slot.suspect = client
            raise
        except TimeoutError as e:
            _ask_if_hung(pool, slot, client, limit)
            timed_out = f"the call timed out after {limit:g} s" + (f" ({setting})" if setting else "")
            if isinstance(e, _AnswerAwaited):
                timed_out += f" while the client was still answering a question of the server ({e})"
            if log is not None and (written := log.noise_since(noise)) is not None:
                timed_out += f"; {written}"
            if log is not None and (error := log.unaddressed_since(unaddressed)) is not None:
                timed_out += f"; {error}"
            return CallFailure(timed_out, "timeout", _SENT)
        except mcp.MCPError as e:
            if (question := asked(e)) is not None:  # the server asked tooltree for sampling, elicitation, roots
                return CallFailure(unanswered(server, *question), "server_error", "the tool ran until it asked")
            if unreached(e):  # no connection was made: the call was not sent, and this session is of no use
                await _drop_unreached(pool, slot, client, e.message)
                check = pool._check_url(slot, unreached_check(e))
                raise _unavailable(slot, f"{e.message}; the call was not sent: {check}") from None
            lost = await _connection_lost(e, client)
            if lost and pool._closing:
                raise _closed_during_call() from None
            if lost:
                # Before, "died" too when tooltree had ended it, for a message past a limit: it had not. Nor
                # "during the call": a server killed between calls whose stdout end the session had not read yet
                # was sent the call too, and was said to have died during it.
                what = (
                    "tooltree ended the server during the call"
                    if closed_here(e.data)
                    else "the server died before answering the call"
                )
                ended = "tooltree ended it during" if closed_here(e.data) else "it died before answering"
                await pool._discard(slot, client, f"{ended} a call ({e})")  # its exit status is read
                how = log.how_exited() if log is not None and not closed_here(e.data) else None
                raise _unavailable(slot, f"{what} ({e})" + (f": {how}" if how else ""), log) from None
            if session_ended(e):  # not to be sent again, or again on the new session: the next call opens one
                await _retire(pool, slot, client, e.message, PING_TIMEOUT)
                again = " (nor on a new session: it was sent twice, run neither time)" if resent else ""
                # A 404 says the server did not run it (its message says so); a 400 naming the session, nothing.
                ran = "" if resendable(e) else "the server did not say whether the tool ran"
                return CallFailure(e.message + again, "server_unavailable", ran)
            if stream_cut(e):
                return CallFailure(
                    f"the server's reply ended before its answer ({e.message}): the call may have run",
                    "server_unavailable",
                )
            if e.code == mt.REQUEST_TIMEOUT:  # the SDK's read timeout, set to fire after the pool's own
                return CallFailure(f"server error {e.code}: {_said(e, slot)}", "timeout", _SENT)
            said = f"server error {e.code}: {_said(e, slot)}{status_named(e, slot.config, pool._source)}"
            if e.code == URL_ELICITATION_REQUIRED:  # what to open, which only its data says
                said += f"; {redact(url_required(e.data), slot.config)}"
            return CallFailure(said, "server_error", _PROTOCOL_ERROR)
        except InputRequiredRoundsExceededError as e:  # a RuntimeError too: not the output-schema check's
            problem = ROUNDS_PROBLEM.format(server=server, rounds=e.max_rounds)
            return CallFailure(problem, "server_error", "the tool may have run")
        except RuntimeError as e:  # the output-schema check (`OutputCheck`)
            return CallFailure(f"invalid result from the server: {e}", "invalid_result", "the tool ran")
        except ValidationError as e:  # a result the SDK's model refuses (no content, an unknown block type, …)
            return CallFailure(f"invalid result from the server: {_refused(e)}", "invalid_result", "the tool ran")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as e:
            if pool._closing:
                raise _closed_during_call() from None
            await pool._discard(slot, client, f"the connection closed ({type(e).__name__})")
            raise _unavailable(slot, f"the connection closed ({type(e).__name__})", log) from None
        dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        dumped.pop("resultType", None)
        return dumped
    finally:
        slot.limiter.release()
        if client is not None and slot.client is client and _closed(client):
            # It ended while calls were in flight, none of which met its end: the last one to leave says so.
            pool._ended_alone(slot, client)


def _ask_if_hung(pool: ServerPool, slot: _Slot, client: mcp.Client, limit: float) -> None:
    """After a call of ``client`` timed out: whether its server still answers (`_answers_ping`) is asked in the
    background, and a server that does not is hung: its session is ended, and the next call starts it again.
    Before, the call's caller waited for the question (up to `PING_TIMEOUT` seconds more) and the hung server's
    end (about 2 s): a call of a 3 s timeout answered after 8 s, of the default 30 s after about 37 s."""
    if pool._tg is None or pool._closing:
        return
    slot.suspect = client  # a call meanwhile asks first too (`_unless_hung`), rather than go to a hung server

    async def ask() -> None:
        if slot.client is not client:
            return
        if await _answers_ping(client, min(PING_TIMEOUT, limit)):
            if slot.suspect is client:
                slot.suspect = None
            return
        # Not just a slow call: every later call would time out too.
        await pool._discard(slot, client, "it stopped answering (hung)", follow=False)

    pool._tg.start_soon(ask)


async def _unless_hung(pool: ServerPool, slot: _Slot, client: mcp.Client, limit: float) -> mcp.Client:
    """``client``, when its server answers a request (`_answers_ping`) within `PING_TIMEOUT` seconds (at most
    ``limit``); else the server is hung: its session is ended and a new one started, returned."""
    slot.suspect = None
    if await _answers_ping(client, min(PING_TIMEOUT, limit)):
        return client
    await pool._discard(slot, client, "it stopped answering (hung) a call its caller gave up on", follow=False)
    return await pool._ensure(slot)


async def _retire(
    pool: ServerPool, slot: _Slot, client: mcp.Client, reason: str, within: float, *, ended: bool = True
) -> None:
    """`ServerPool._discard` a session the server ended, once the other calls sent on it have their answers (at most
    ``within`` seconds): closing it first would cut them off before their 404 says they never ran."""
    await slot.in_flight.drained(client, within)
    await pool._discard(slot, client, reason, ended=ended)


async def _drop_unreached(pool: ServerPool, slot: _Slot, client: mcp.Client, reason: str) -> None:
    """`ServerPool._discard` a session whose server a call could not reach, once the calls sent on it before have their
    answers, in the background (the call that could not connect fails at once). A server shutting down, or a
    proxy at its connection limit, refuses new connections and finishes the requests it took: closed at once,
    the session cut them off, and they failed as if the server had died under them."""
    if slot.limiter.borrowed_tokens <= 1 or pool._tg is None or pool._closing:  # no other call in flight
        await pool._discard(slot, client, reason, ended=False)
        return
    within = max(slot.config.timeout, PING_TIMEOUT)  # the calls in flight end by then
    pool._tg.start_soon(functools.partial(_retire, pool, slot, client, reason, within, ended=False))


async def _send(
    slot: _Slot,
    client: mcp.Client,
    tool: str,
    arguments: dict[str, Any],
    timeout: float,
    progress: ProgressListener | None = None,
    asker: Asker | None = None,
) -> mt.CallToolResult:
    """The call, within ``timeout`` seconds (the SDK's own read timeout set a little later, so this one fires); with
    a progress token when there is a ``progress`` listener, and ``asker`` answering the server's questions."""
    told = None if progress is None else _telling(progress, slot.config.name)
    try:
        with slot.in_flight.call(client, asker) as asking, anyio.fail_after(timeout):
            return await client.call_tool(
                tool, arguments, read_timeout_seconds=timeout + SDK_TIMEOUT_MARGIN, progress_callback=told
            )
    except TimeoutError:
        if asking is not None and asking.was_asking:  # the user's time counts against the call's
            raise _AnswerAwaited("the user's time counts: give a server that asks a longer timeout") from None
        raise


class _AnswerAwaited(TimeoutError):
    """A call's timeout that came while a question of its server was with the client."""


def _telling(listener: ProgressListener, server: str) -> ProgressFnT:
    """The SDK's progress callback of a call, telling ``listener``."""

    async def told(progress: float, total: float | None, message: str | None) -> None:
        try:
            listener(progress, total, message)
        except Exception:  # the listener's fault, not the call's: it goes on (the SDK would log a traceback)
            logger.debug("a progress listener of a call to %r raised", server, exc_info=True)

    return told


async def _answers_ping(client: mcp.Client, timeout: float) -> bool:
    """Whether the server still answers a request within ``timeout`` seconds.

    The request is ``tools/list`` (``ping`` is deprecated by the protocol's newer revisions).
    """
    try:
        with anyio.fail_after(timeout):
            await list_tools_raw(client)
    except (TimeoutError, mcp.MCPError, anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
        return False
    return True


async def _connection_lost(e: mcp.MCPError, client: mcp.Client) -> bool:
    """Whether the error ``e`` of a call on ``client`` means its connection is lost: tooltree closed it
    (`closed_here`), or ``e`` reads as the SDK's word that it closed and the session knows it closed, or the
    server does not answer a request now. A server may write the SDK's words as its own error (before, an error
    saying "Connection closed" had the pool kill the live server and fail its other calls in flight)."""
    if closed_here(e.data):
        return True
    if e.code != mt.CONNECTION_CLOSED or not _is_connection_loss(e):
        return False
    return _closed(client) or not await _answers_ping(client, PING_TIMEOUT)
