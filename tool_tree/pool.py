"""`ServerPool`: one live MCP session per configured server, for the life of the pool.

Calls come from any task (`ServerPool.call`); `ServerPool.request` forwards the requests of prompts and resources the
same way. The pool's parts, each in its module (their public names, the errors among them, are imported from
here too):

- `tool_tree.pool_start`: a server's start on its first call, at most ``start_jobs`` at once, its start-up timeout and
  restart back-off, and the task that owns its session;
- `tool_tree.pool_forward`: one call or request: its turn, its timeout, its failures (a server that died, forgot its
  session, cannot be reached or hung) and the restarts they lead to;
- `tool_tree.pool_follow`: the servers followed while their sessions run: the changes they tell of, the resources
  subscribed to, and the sessions opened again in the background while resources of them are subscribed to;
- `tool_tree.pool_slot`: what the pool holds of one server;
- `tool_tree.pool_settings`: the checks of a pool's settings and listeners and of a call's arguments;
- `tool_tree.pool_errors`: `PoolError` and the errors under it, `CallFailure`, and their words.

Here: the pool's life (entered once, on the event loop that awaits it, closed with its servers), its public methods,
and the methods through which the parts reach one another without importing one another in a cycle: a server's
start (`ServerPool._ensure`) and the end of a session (`ServerPool._discard`, `ServerPool._ended_alone`).

`BackgroundPool` (`tool_tree.background_pool`, imported from here as documented) runs one on its own thread
for synchronous callers.

(Over 400 lines: `ServerPool` is the pool's public surface, each method documented where it is defined, and the
methods the parts call to change a slot's state under its lock: moved out, they would have the parts import one
another in a cycle.)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import anyio
import mcp
import mcp.types as mt
from anyio.abc import TaskGroup
from pydantic import ValidationError

from tool_tree import pool_start
from tool_tree.config import Config, ServerConfig, setting_named
from tool_tree.held_values import HeldValues, Share, checked_within
from tool_tree.listeners import refuse_async
from tool_tree.listens import speaks_listen
from tool_tree.pool_errors import SAID_CHARS as SAID_CHARS
from tool_tree.pool_errors import CallFailure as CallFailure
from tool_tree.pool_errors import PoolError as PoolError
from tool_tree.pool_errors import ServerUnavailable as ServerUnavailable
from tool_tree.pool_errors import UnknownServerError as UnknownServerError
from tool_tree.pool_errors import _refused, _told
from tool_tree.pool_errors import upstream as upstream
from tool_tree.pool_follow import _FOLLOWED, _NEXT_CALL, _follow, _follow_listened
from tool_tree.pool_forward import _SUBSCRIPTIONS, _forward, _Raw, _send
from tool_tree.pool_forward import FORWARDED as FORWARDED
from tool_tree.pool_forward import PING_TIMEOUT as PING_TIMEOUT
from tool_tree.pool_forward import SDK_TIMEOUT_MARGIN as SDK_TIMEOUT_MARGIN
from tool_tree.pool_forward import ProgressListener as ProgressListener
from tool_tree.pool_relist import relisted
from tool_tree.pool_settings import DEFAULT_CONCURRENCY as DEFAULT_CONCURRENCY
from tool_tree.pool_settings import ChangeListener as ChangeListener
from tool_tree.pool_settings import ResourceListener as ResourceListener
from tool_tree.pool_settings import _check_call, _pool_settings
from tool_tree.pool_settings import checked_gate as checked_gate
from tool_tree.pool_settings import checked_listener as checked_listener
from tool_tree.pool_settings import takes_kind as takes_kind
from tool_tree.pool_settings import told_of as told_of
from tool_tree.pool_slot import _closed, _Slot
from tool_tree.redact import redact
from tool_tree.sendable import checked
from tool_tree.server_asks import Asker
from tool_tree.starts import StartGate
from tool_tree.unreachable import CHECK_URL

ServerState = Literal["stopped", "queued", "starting", "running"]


class ServerPool:
    """Live sessions to many servers. Use as ``async with ServerPool(servers) as pool:``.

    Args:
        servers: the servers (``config.servers``), or a `Config`: its enabled servers, and its ``pool:``
            section's ``start_jobs`` unless ``start_jobs`` is given.
        concurrency: calls in flight to one server at most (at least 1), unless the server's own
            ``concurrency`` says otherwise; a call waiting for its turn counts against its timeout.
        start_jobs: servers starting at once at most (default: the number of cores).
        source: the config file the servers come from, named when a call runs out of a server's ``timeout``
            (default: a `Config`'s own file).
        on_tools_changed: called with a server's name when, once its session is open and listed, the server says its
            tools, prompts or resources changed (``notifications/tools/list_changed``, ``.../prompts/...``,
            ``.../resources/...``: `tool_tree.changes.LISTS_CHANGED`); on the pool's event loop, so it must not block. A
            listener with a parameter named ``kind`` is told which list changed too, as ``kind="tools"``, ``"prompts"``
            or ``"resources"`` (`ChangeListener`); one without it is called with the name alone (`tooltree serve`
            regenerates the tree, for prompts and resources only when it offers them). The pool itself, listener or not,
            reads the server's tools again before it next checks one (`live_tool`). Named for the tools, of which alone
            it was first told. It is also told, as if the server had said each of its lists changed (one without
            ``kind`` once), when such a notice may have been missed: an HTTP server's stream of unasked messages opened
            again after it was lost (a 503, a connection refused), and a new session listed that replaced one that ended
            (a restart, a session the server no longer knows); not on a server's first session. A server of the
            session-less 2026-07-28 protocol says a list changed only on a ``subscriptions/listen`` stream: the pool
            keeps one open on each of its sessions, listener or not (`tool_tree.listens`; over HTTP renewed every
            `tool_tree.listens.HELD_SECONDS`, so that the server can stop when told to), told as if a list
            changed when it opened after an attempt failed; a server that refuses it is not followed (said at debug)
            until a subscription to a resource of it asks for the stream again (kept once opened; refused, the
            subscription fails).
        on_resource_updated: called with a server's name and a URI when the server says the resource of that URI
            changed (``notifications/resources/updated``), for the URIs subscribed to through `request`
            (``resources/subscribe``) and not unsubscribed since; also once for each of them when such a notice may
            have been missed (as ``on_tools_changed`` is told then: its stream of unasked messages opened again, or a
            new session replaced one that ended, which is subscribed to them again first). A server whose session
            ended on its own (not by the pool: its close, a hung server) while URIs of it are subscribed to is
            started again in the background, not at the next call, as soon as its restarts' back-off allows, so the
            listener goes on being told; given up, with a warning (``tool_tree.upstream``) naming the server and the
            URIs, once the back-off would hold its next restart the longest. On the pool's event loop: it must not
            block. A public attribute, which may be set once the pool runs (`sandbox.host.Runtime` makes
            its pool; `tooltree serve` sets it on the pool of each client session).
        start_gate: a `StartGate` shared with other pools, on any event loop (`tooltree serve` gives its client
            sessions one): servers start through it, at most its ``jobs`` at once in all the pools, and
            ``start_jobs`` is not given then.
        held_within: a count of listings shared with other pools (`tool_tree.held_values.HeldValues.shared`): its
            servers' listings are bounded by it as well as by the pool's own bound, and given back as the pool
            closes. `tooltree serve` shares one among its client sessions.

    A pool runs once: entering it again, inside its block or after, raises `PoolError` (make a new one), and
    leaving it twice does nothing the second time. Its methods are awaited on the event loop that entered it; on
    another, they raise `PoolError` (from another thread, use a `BackgroundPool`).

    Raises:
        TypeError, ValueError: a wrong argument, named.
        ConfigError: the Config's ``pool:`` section is invalid.
    """

    def __init__(
        self,
        servers: Sequence[ServerConfig] | Config,
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        start_jobs: int | None = None,
        source: str | None = None,
        on_tools_changed: ChangeListener | None = None,
        on_resource_updated: ResourceListener | None = None,
        held_within: HeldValues | None = None,
        start_gate: StartGate | None = None,
    ) -> None:
        listed, jobs, self._source = _pool_settings(servers, concurrency, start_jobs, source)
        checked_gate(start_gate, start_jobs)
        self._on_tools_changed = checked_listener(on_tools_changed)
        if on_resource_updated is not None and not callable(on_resource_updated):
            raise TypeError(
                f"on_resource_updated: expected a callable or None, got {type(on_resource_updated).__name__}"
            )
        refuse_async(on_resource_updated, "on_resource_updated")
        self.on_resource_updated: ResourceListener | None = on_resource_updated
        held = HeldValues(within=checked_within(held_within))  # each server's listing is kept for the pool's life
        self._slots = {
            s.name: _Slot(s, anyio.CapacityLimiter(s.concurrency or concurrency), share=Share(held)) for s in listed
        }
        self._gate = start_gate if start_gate is not None else StartGate(jobs)
        self._tg: TaskGroup | None = None
        self._closing = False
        self._entered = False
        self._interrupted = False
        """Left by an interrupt (Ctrl-C): a stdio server still at a call gets SIGTERM as its stdin closes
        (`tool_tree.stdio.stdio_client`), not after the SDK's 2 s of grace for it to leave."""
        self._home: object = None
        """The event loop that entered the pool: its sessions, streams and task group belong to it."""

    async def __aenter__(self) -> ServerPool:
        if self._entered:
            # Before: a second task group replaced the first, which was never left (its servers' owner tasks were
            # orphaned), and leaving the outer block was an AssertionError.
            which = "is running" if self._tg is not None else "has run"
            raise PoolError(
                f"this ServerPool was already entered (it {which}): a pool runs once; make a new ServerPool(...)"
            )
        self._entered = True
        self._home = _current_loop()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._tg is None:  # left already
            return
        self._closing = True
        if isinstance(exc[1] if len(exc) > 1 else None, KeyboardInterrupt):
            self._interrupted = True
        for slot in self._slots.values():
            if slot.stop is not None:
                slot.stop.set()
            if slot.starting is not None:  # before: the close waited for its start-up to end or time out (30 s)
                slot.starting.cancel()
            if slot.following is not None:  # it may be waiting out a restart's back-off
                slot.following.cancel()
        # Each owner task closes its connection (and kills its process group) and ends.
        try:
            await self._tg.__aexit__(None, None, None)
        finally:
            self._tg = None
            for slot in self._slots.values():
                slot.tools = []  # and given back: a count shared with other pools goes on
                slot.share.release()
                if slot.stderr is not None:
                    slot.stderr.close()
                    slot.stderr = None

    @property
    def names(self) -> list[str]:
        return list(self._slots)

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The asyncio loop that entered the pool, on which its methods are awaited (None before it was entered, or
        under another anyio backend)."""
        return self._home if isinstance(self._home, asyncio.AbstractEventLoop) else None

    def state(self, server: str) -> ServerState:
        """Where ``server`` is: ``stopped`` (not started, or its connection ended), ``queued`` (waiting
        for its turn to start; no timeout runs), ``starting`` (its start-up timeout runs), ``running``.

        Raises:
            UnknownServerError: no server of that name.
        """
        slot = self._slot(server)
        if slot.client is not None:
            return "stopped" if _closed(slot.client) else "running"
        if slot.queued:
            return "queued"
        if slot.closed is not None and not slot.closed.is_set():
            return "starting"
        return "stopped"

    def restarts(self, server: str) -> int:
        """How many times ``server`` was re-opened after its connection died."""
        return self._slot(server).restarts

    def _slot(self, server: str) -> _Slot:
        try:
            return self._slots[server]
        except KeyError:
            raise UnknownServerError(f"no server named {server!r} in the pool") from None

    @property
    def start_jobs(self) -> int:
        """How many servers may be starting at once."""
        return self._gate.jobs

    async def _ensure(self, slot: _Slot) -> mcp.Client:
        """The client of ``slot``'s session, its server started first when none runs (`tool_tree.pool_start._ensure`).
        The parts of the pool start a server through this method."""
        return await pool_start._ensure(self, slot)

    async def _discard(
        self,
        slot: _Slot,
        client: mcp.Client,
        reason: str,
        *,
        ended: bool = True,
        then: str = _NEXT_CALL,
        follow: bool = True,
    ) -> bool:
        """Forget a dead connection (ended for ``reason``) so the next call re-opens it, once its owner task ends. Not
        ``ended``: the server did not end it (it could not be reached at all), so re-opening it is a first start, not a
        restart that backs off. ``then`` says in the log what comes next. When resources of the server are subscribed
        to, a new session is opened in the background once the owner task ended (`tool_tree.pool_follow._follow`),
        unless not ``follow`` (the pool ended the session itself: a hung server); returns whether."""
        followed = False
        async with slot.lock:
            if slot.client is client and slot.stop is not None:
                slot.stop.set()
                slot.client, slot.connection = None, None
                slot.backoff.ended = reason if ended else None
                slot.restarts += 1
                followed = follow and bool(slot.subscribed) and not self._closing
                tail = slot.stderr.tail() if slot.stderr else ""
                then = _FOLLOWED if followed else then
                said = f"server {slot.config.name!r} ended: {redact(reason, slot.config)}; {then}"
                upstream.warning("%s", _told(said, tail))
            # The owner task of this connection, not of one another call has started since.
            closed = slot.closed if slot.client is None else None
        if closed is not None:
            with anyio.move_on_after(10):
                await closed.wait()
        if followed and slot.following is None and self._tg is not None and not self._closing:
            self._tg.start_soon(_follow, self, slot)
        return followed

    def _ended_alone(self, slot: _Slot, client: mcp.Client) -> None:
        """``client``'s session stopped reading, not ended by the pool (`tool_tree.changes.Changes.end`: its read
        stream ended as its process exited or its transport gave up, between calls too). Nothing unless resources of
        its server are subscribed to: then no call may come to find it dead, so it is ended as a call would end it
        (`_discard`, which opens a new one: `_follow`). With a call in flight, that call meets the end and says how it
        ended; the last call to leave looks again (`_forward`). Called in the session's reading task, on the pool's
        loop: it must not block."""
        if slot.client is not client or not slot.subscribed or self._tg is None or self._closing:
            return
        if slot.limiter.borrowed_tokens == 0:
            self._tg.start_soon(self._discard, slot, client, "its connection closed while no call was in flight")

    def _timeout_setting(self, slot: _Slot) -> str:
        """Where a server's call timeout is set, for the message of a call that ran out of it."""
        return setting_named(slot.config, "timeout", self._source, default=True)

    def _check_url(self, slot: _Slot, check: str = CHECK_URL) -> str:
        """What to check when an HTTP server cannot be reached (``check``: `tool_tree.unreachable.to_check`)."""
        return f"{check} ({setting_named(slot.config, 'url', self._source)})"

    def _check_loop(self) -> None:
        """Raises: PoolError: this is not the event loop that entered the pool."""
        if self._home is not None and _current_loop() != self._home:
            # Before: a call from another loop hung past its own timeout on streams of the pool's loop, and a
            # server it started was an owner task begun from the wrong thread; the pool then refused every call.
            raise PoolError(
                "this ServerPool runs on the event loop that entered it (`async with`), not on this one: from "
                "another thread, use a BackgroundPool's call, or asyncio.run_coroutine_threadsafe(pool.call(...), "
                "background_pool.loop)"
            )

    async def start(self, server: str) -> list[dict[str, Any]]:
        """Open the server now (instead of on its first call); returns its raw tool list.

        Raises:
            ServerUnavailable: it cannot be started.
            PoolError: not on the event loop that entered the pool.
        """
        self._check_loop()
        slot = self._slot(server)
        await self._ensure(slot)
        return slot.tools

    def listing(self, server: str) -> tuple[int, int]:
        """What changes when ``server``'s tools may have: how many times it was started again, and how many times it
        said its tools changed (or may have said so unheard). A check of a tool against `live_tool` holds while this
        is what `listed` was just after it."""
        slot = self._slot(server)
        return slot.restarts, slot.changed

    def listed(self, server: str) -> tuple[int, int]:
        """`listing` as of the listing `live_tool` reads: behind it when the server said its tools changed since that
        listing was read (and reading it again failed, or the server said so again meanwhile)."""
        slot = self._slot(server)
        return slot.restarts, slot.listed_at

    async def live_tool(self, server: str, tool: str) -> dict[str, Any] | None:
        """The tool's raw definition as the running server lists it now (None: not listed): its listing is read again
        first when the server said its tools changed since it was read (`tool_tree.pool_relist`), and a server whose
        session ended since its last call is started again first (before: its listing before the end was read).

        Raises:
            UnknownServerError, ServerUnavailable, PoolError: as `call`.
        """
        self._check_loop()
        slot = self._slot(server)
        client = await self._ensure(slot)
        if _closed(client):  # it ended since its last call: started again now, as its call would, and listed anew
            await self._discard(slot, client, "its connection closed while no call was in flight")
            client = await self._ensure(slot)
        await relisted(slot, client)
        return next((t for t in slot.tools if t.get("name") == tool), None)

    def malformed(self, server: str, tool: str) -> str | None:
        """Why the running server's listing of ``tool`` was left out as malformed (None: it was not)."""
        slot = self._slots.get(server)
        return None if slot is None else slot.left_out.get(tool)

    async def call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        timeout: float | None = None,
        progress: ProgressListener | None = None,
        asker: Asker | None = None,
    ) -> dict[str, Any]:
        """Call a tool; returns the ``tools/call`` result in wire format (camelCase keys).

        A tool that fails returns ``isError: true`` (not an exception); so does a call that got no usable answer
        from the tool (a protocol error the server sends for the call, such as an unknown tool or invalid params;
        a call timeout; a session the server ended or a reply it cut): a `CallFailure`, whose ``code`` says which.

        ``timeout`` (default: the server's) runs while the call waits for its turn (``concurrency``
        calls in flight to the server) and while the server answers; not while the server starts,
        which has its own start-up timeout.

        ``progress``: the call asks the server for progress (a ``progressToken``), and each notification it sends
        for the call is told to this listener (`ProgressListener`); one that raises is logged at debug, and the
        call goes on. Without it, the server is given no token and sends none.

        ``asker``: answers what the server asks during the call, of the capabilities its ``client_capabilities``
        declare (`tool_tree.server_asks`); without it, such a question is refused. The call's timeout runs meanwhile.

        The arguments are checked for what a server cannot read, and refused as `Unsendable` (nothing is sent).

        Raises:
            UnknownServerError: ``server`` is not in the pool.
            ServerUnavailable: the server cannot be started or died before answering the call.
            PoolError: the pool closed during the call (its outcome is unknown), or this is not the event loop that
                entered the pool.
            TypeError, ValueError: ``tool`` is not a string, ``arguments`` not a dict (or not JSON, or what a
                server cannot be sent, `tool_tree.sendable.Unsendable`: nothing is sent), or ``timeout`` not positive.
        """
        return await self._call_measured(
            server, tool, arguments, timeout=timeout, progress=progress, asker=asker, sendable=False
        )

    async def _call_measured(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        timeout: float | None,
        progress: ProgressListener | None,
        asker: Asker | None,
        sendable: bool,
    ) -> dict[str, Any]:
        """`call`, for `sandbox.mcp_bridge.McpBridge` alone: ``sendable``, its measure of the arguments found them to
        hold nothing `tool_tree.sendable.unsendable` refuses, in its own pass over them
        (`sandbox.call_limits.CallSize.sendable`), and they are not walked again. Before, ``sendable`` was a keyword of
        `call`, with which any caller skipped the check.

        Raises:
            as `call`.
        """
        _check_call(tool, arguments, timeout)
        refuse_async(progress, "progress")
        self._check_loop()
        if not sendable:
            await checked(arguments)
        slot = self._slot(server)

        async def send(client: mcp.Client, remaining: float) -> mt.CallToolResult:
            return await _send(slot, client, tool, arguments, remaining, progress, asker)

        return await _forward(self, slot, timeout, send)

    async def request(
        self, server: str, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """Forward one request that is not a tool call (`FORWARDED`: ``prompts/get``, ``resources/read``, the lists
        of prompts and resources, ``resources/subscribe`` and ``resources/unsubscribe``); returns its raw result (wire
        format, every field the server sent kept). A URI subscribed to is remembered (``on_resource_updated`` is told
        of it, and a new session of the server subscribes to it again) once the server answered, until a
        ``resources/unsubscribe`` of it is forwarded, whatever the server answers to that. A session of the
        2026-07-28 protocol has neither request: its ``subscriptions/listen`` stream is opened again with the URIs
        subscribed to instead, answered as the server acknowledged it (`tool_tree.pool_follow._follow_listened`).

        It waits, times out, restarts the server and fails as `call` does, in the same words: a request that got no
        usable answer (a timeout, the server's JSON-RPC error, a session it ended) returns a `CallFailure`.

        Raises:
            UnknownServerError, ServerUnavailable, PoolError: as `call`.
            TypeError, ValueError: ``method`` is not one of `FORWARDED`, ``params`` not a dict of its parameters
                (nothing is sent), or ``timeout`` not positive.
        """
        kind = FORWARDED.get(method) if isinstance(method, str) else None
        if kind is None:
            raise ValueError(f"method: expected one of {', '.join(FORWARDED)}, got {method!r:.60}")
        _check_call(method, {} if params is None else params, timeout)
        try:
            message: Any = kind.model_validate({"method": method, "params": params}, by_name=False)
        except ValidationError as e:
            raise TypeError(f"params: not the parameters of {method} ({_refused(e)})") from None
        self._check_loop()
        await checked({} if params is None else params)
        slot = self._slot(server)

        async def send(client: mcp.Client, remaining: float) -> _Raw:
            with slot.in_flight.call(client), anyio.fail_after(remaining):
                if method in _SUBSCRIPTIONS and speaks_listen(client):  # not at 2026-07-28: its listen stream serves it
                    return await _follow_listened(self, slot, client, method, message.params.uri)
                return await client.session.send_request(
                    message, _Raw, request_read_timeout_seconds=remaining + SDK_TIMEOUT_MARGIN
                )

        if method == "resources/unsubscribe":  # its notices are told no more, whatever the server answers
            slot.subscribed.discard(message.params.uri)
        result = await _forward(self, slot, timeout, send)
        if isinstance(result, CallFailure):
            return result.of_request()
        if method == "resources/subscribe":
            slot.subscribed.add(message.params.uri)
        return result

    async def capabilities(self, server: str) -> dict[str, Any]:
        """What the server declared it offers (``prompts``, ``resources``, ``tools``, ...), in wire format; it is
        started first if it is not running.

        Raises:
            UnknownServerError, ServerUnavailable, PoolError: as `call`.
        """
        self._check_loop()
        client = await self._ensure(self._slot(server))
        declared = client.server_capabilities
        return {} if declared is None else declared.model_dump(by_alias=True, mode="json", exclude_none=True)


def _current_loop() -> object:
    """The running asyncio loop (another anyio backend's: the thread running it)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return threading.get_ident()


if TYPE_CHECKING:
    from tool_tree.background_pool import BackgroundPool as BackgroundPool


def __getattr__(name: str) -> Any:
    """``from tool_tree.pool import BackgroundPool``, the documented import, of a class in its own module
    (imported on first use: that module builds on this one)."""
    if name == "BackgroundPool":
        from tool_tree.background_pool import BackgroundPool

        return BackgroundPool
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
