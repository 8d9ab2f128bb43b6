"""`ServerPool`: one live MCP session per configured server, for the life of the pool.

Each server is owned by one background task that opens the connection, keeps it open and closes
it (the SDK's transports are anyio context managers and must be entered and left by the same
task). Calls come from any task. A server whose connection died is re-opened on the next call (one with
resources subscribed to, at once: below): before that call is sent when the session already knew the connection
had closed (a server killed between calls), else after the call that found it dead fails (it may have reached the
server, and tools act for real, so it is never sent again). An HTTP server that answers a call with 404 for its session
(it restarted, or let the session expire) did not run it: its session is re-opened and the call sent once more
(`tool_tree.http_errors`); a second 404 fails it, saying it ran neither time. A 400 naming the session (as many
servers answer instead) fails the call, not sent again, and the next call opens a new session. A 404 answering the
stream of messages the server sends unasked is checked with a ``tools/list``: answered 404 too, the session is retired
at once (the calls in flight on it answered first), and opened again at once when the pool has an ``on_tools_changed``
listener (so its notices reach it again), else at the next call; answered, the server has no such stream, and the
session goes on without it. An HTTP server that
cannot be reached when a call is sent (connection refused, host name not resolved, connect timed out) fails it
saying so, and that it was not sent; the calls sent on that session before are left to finish (a server shutting
down refuses new connections and answers what it took), and once they have, the next call opens a new session.
Restarts of a server that keeps ending or failing to start back off (`tool_tree.restarts`): a call meanwhile is
refused at once, naming why it ended last and when it may start again. A stdio server's process group is killed
when the pool closes. Each server has a concurrency limit and a per-call timeout; a call that runs out of the
server's own timeout says which setting it was (``servers.NAME.timeout`` in the config file).

`ServerPool.request` forwards the requests of prompts and resources (`FORWARDED`) the same way, with the same timeouts,
restarts and failures (`tooltree serve` offers the servers' prompts and resources through it). A resource subscribed to
through it (``resources/subscribe``) is remembered until it is unsubscribed: the server's notices that it changed are
told to the pool's ``on_resource_updated`` listener, and a new session that replaces one that ended (a restart, a
session the server no longer knows) is subscribed to it again, the listener told once of each (a change may have
been missed meanwhile), as it is when the stream of unasked messages opened again after it was lost. Such a server
is not left for a call to start again, as its client may only follow resources: when its session ends on its own (its
process exits, between calls too: the session reads no more, `tool_tree.changes.Changes.end`; a call finds it dead or
cannot write to it; the server forgets the session or cannot be reached), not when the pool ends it (its close, a
server that hung), a new session is opened in the background through the path a call takes (`ServerPool._follow`):
at once, or once the restarts' back-off lets a call start it. One that ends soon after each restart is given up once
the back-off would hold its next restart the longest (`tool_tree.restarts.MAX_DELAY`), in one warning naming it and
the URIs told of no more; a call or a request then starts it again. With no URI of it subscribed to, nothing is done
in the background: the next call starts it.

Servers start on their first call, at most ``start_jobs`` at once (`tool_tree.starts.StartGate`,
default the number of cores; a gate given as ``start_gate`` is shared with other pools, as `tooltree serve`'s
client sessions share one): a call to a server that is queued behind others waits its turn, and the server's
start-up timeout runs from its own start. A start that runs out of it fails at its timeout; its process is ended (and
reaped) in the background, which may take seconds more for a server that does not exit as its stdin closes.

`BackgroundPool` (`tool_tree.background_pool`, imported from here as documented) runs one on its own thread
for synchronous callers.

(Over 400 lines: a server's start, its calls, their failures and restarts change one slot's state under
one lock, and the checks of who may await the pool (the loop that entered it) guard them all.)

Errors::

    PoolError               base
    ├── UnknownServerError  no server of that name in the pool
    └── ServerUnavailable   the server could not be started or died; ``stderr_tail`` says why

A call that got no usable answer from the tool (it timed out, the server answered a protocol error or ended the
session, its reply was cut, the SDK refused the result) is no exception: it returns an ``isError: true`` result, as
a tool's own error does, but of its own type, `CallFailure`, whose ``code`` says what failed and whose ``message``
says whether the tool may have run.

Their texts leave the host process (to the script in the sandbox, serve's clients, logs), so the
secrets of the server's configuration are redacted from the reason and the stderr tail
(`tool_tree.redact`).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import logging
import math
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
import mcp
import mcp.types as mt
import pydantic_core
from anyio.abc import TaskGroup
from mcp import InputRequiredRoundsExceededError
from mcp.shared.dispatcher import ProgressFnT
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, ValidationError

import tool_tree.restarts
from tool_tree.changes import LISTS_CHANGED, Changes
from tool_tree.config import Config, ServerConfig, setting_named
from tool_tree.connect import Connection, connect, list_tools_raw
from tool_tree.held_values import HeldValues, Share, checked_within
from tool_tree.http_errors import resendable, session_ended, status_named, stream_cut, unreached, unreached_check
from tool_tree.in_flight import InFlight
from tool_tree.ledgers import closed_here
from tool_tree.listeners import refuse_async
from tool_tree.listens import Listening, speaks_listen
from tool_tree.output_check import OutputCheck
from tool_tree.redact import redact
from tool_tree.restarts import RestartBackoff
from tool_tree.server_asks import ROUNDS_PROBLEM, URL_ELICITATION_REQUIRED, Asker, asked, unanswered, url_required
from tool_tree.starts import StartGate, StartSlot, default_start_jobs
from tool_tree.starts import start_jobs as configured_start_jobs
from tool_tree.stderr_log import StderrLog
from tool_tree.text import one_line
from tool_tree.unreachable import CHECK_URL, to_check

logger = logging.getLogger(__name__)
upstream = logging.getLogger("tool_tree.upstream")
"""Why a server could not start, or ended under the pool: one ``WARNING`` each time (its back-off bounds how often),
redacted, with its stderr's tail. `tooltree serve` leaves it on: its stderr is the log an MCP client keeps, and
before, nothing there said that a server failed during a session (only the model saw it). `tooltree exec` and
`tooltree agent` turn it off: the script's error and the agent's view say the same."""

DEFAULT_CONCURRENCY = 16
PING_TIMEOUT = 5.0
"""After a call times out, how long the server has to answer a request before it counts as hung."""
SDK_TIMEOUT_MARGIN = 1.0
"""How much later than the pool's own deadline the SDK's read timeout of a call is set, so the pool's fires
first (and the SDK's default, the server's ``timeout``, never cuts short a longer ``timeout`` of a call)."""


ServerState = Literal["stopped", "queued", "starting", "running"]
ProgressListener = Callable[[float, float | None, str | None], None]
"""Told ``(progress, total, message)`` of each ``notifications/progress`` a server sends for a call (`ServerPool.call`'s
``progress``), as the SDK read them; on the pool's event loop, so it must be thread-safe and never block."""


class PoolError(Exception):
    """Base of the errors a `ServerPool` raises."""


class UnknownServerError(PoolError):
    pass


class ServerUnavailable(PoolError):
    """The server could not be reached: the call did not happen, or (``the server died before answering the call``)
    it was sent and its outcome is unknown."""

    def __init__(self, server: str, reason: str, stderr_tail: str = "") -> None:
        super().__init__(f"server {server!r} is unavailable: {reason}")
        self.server = server
        self.reason = reason
        self.stderr_tail = stderr_tail

    def __reduce__(self) -> tuple[Any, ...]:
        """Made again from its own arguments (pickle and `copy` call the class with ``args``, the message alone:
        before, TypeError, so a `multiprocessing` pool waited for ever for the result of a task that raised it, and a
        `ProcessPoolExecutor` said its process had been "terminated abruptly")."""
        return type(self), (self.server, self.reason, self.stderr_tail), self.__dict__


class CallFailure(dict[str, Any]):
    """The result `ServerPool.call` returns for a call that got no usable answer from the tool: an ``isError: true``
    result whose text says what failed (so a caller that reads it as a tool's error still sees why), of its own
    type so that a caller can tell it from the tool's own error (`sandbox.mcp_bridge.McpBridge` fails the call
    with ``code`` and ``message``, which the script sees as ``ToolCallError``).

    A type, not a key of the result: a result's ``_meta`` is the server's to write, so a server could make its own
    errors pass for the pool's.

    Attributes:
        code: ``timeout`` (no answer within the call's timeout), ``server_unavailable`` (the server ended the
            session, or its reply ended before the answer), ``server_error`` (the server answered with a JSON-RPC
            error, not a result), ``invalid_result`` (the result does not match the tool's output schema, or is not
            a result the protocol allows: no content, an unknown content type, …).
        message: the text, and whether the tool may have run.
    """

    def __init__(self, text: str, code: str, ran: str = "") -> None:
        super().__init__(content=[{"type": "text", "text": text}], isError=True)
        self.code = code
        self.message = f"{text}; {ran}" if ran else text
        self._parts = (text, ran)

    def of_request(self) -> CallFailure:
        """The same failure of a request that runs no tool (`ServerPool.request`): said without the tool."""
        text, ran = self._parts
        return CallFailure(text, self.code, _REQUEST_RAN.get(ran, ran))


_NEXT_CALL = "the next call starts it again"
"""What follows a server's end, in the log, unless it is started again at once."""
_FOLLOWED = "resources of it are subscribed to: it is started again now, or once its restart back-off allows"
"""What follows the end of a server with resources subscribed to, in the log (`ServerPool._follow`)."""
_NOT_SENT = "it was not sent: the tool did not run"
_SENT = "it was sent: the tool may have run, or be running still"
_PROTOCOL_ERROR = "the server answered the call with an error of the protocol, not a result of the tool"
_REQUEST_RAN = {
    _NOT_SENT: "it was not sent",
    _SENT: "it was sent, and no answer came",
    _PROTOCOL_ERROR: "the server answered the request with an error",
    "the tool may have run": "",
    "the tool ran": "",
    "the tool ran until it asked": "",
    "the server did not say whether the tool ran": "",
}
"""What a failed call says of its tool, said of a request that runs none (a prompt's get, a resource's read)."""


@dataclass
class _Start:
    """One start of a server, as its owner task (`ServerPool._own`) holds it: its start slot, the events that stop it
    and say it ended, when its start-up times out, and its stderr's log."""

    slot: StartSlot
    stop: anyio.Event
    closed: anyio.Event
    deadline: float
    stderr: StderrLog | None

    def release(self) -> None:
        self.slot.release()


@dataclass
class _Slot:
    config: ServerConfig
    limiter: anyio.CapacityLimiter
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    client: mcp.Client | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    share: Share = field(default_factory=Share)
    """The values of ``tools``, counted against the pool's (`tool_tree.held_values`)."""
    left_out: dict[str, str] = field(default_factory=dict)
    """The tools its listing held malformed, by name: why each was left out (`tool_tree.listing_check`)."""
    stop: anyio.Event | None = None
    closed: anyio.Event | None = None
    stderr: StderrLog | None = None
    restarts: int = 0
    backoff: RestartBackoff = field(default_factory=RestartBackoff)
    queued: bool = False
    """Waiting for a start slot (other servers are starting)."""
    starting: anyio.CancelScope | None = None
    """The start-up of its owner task while it runs (opening and listing): the pool's close cancels it."""
    in_flight: InFlight = field(default_factory=InFlight)
    listed: bool = False
    """Whether a session of it was listed: a later one replaces it, and the server may list other tools then."""
    subscribed: set[str] = field(default_factory=set)
    """The URIs subscribed to through `ServerPool.request`, not unsubscribed since: its new sessions subscribe again."""
    listening: tuple[Listening, Callable[[], None]] | None = None
    """The ``subscriptions/listen`` stream of its session of the 2026-07-28 protocol, and what starts it."""
    following: anyio.CancelScope | None = None
    """While a task opens a new session of it in the background (`ServerPool._follow`): the pool's close cancels it."""
    suspect: mcp.Client | None = None
    """A session on which a call was cut off by its caller (the end of its execution) after `PING_TIMEOUT` seconds
    unanswered: the next call to the server asks it a request first, and restarts a server that answers none."""


def _pool_settings(
    servers: Sequence[ServerConfig] | Config, concurrency: int, start_jobs: int | None, source: str | None
) -> tuple[list[ServerConfig], int, str | None]:
    """The servers, the start limit and the config file a pool is given, checked; a `Config` gives its enabled
    servers, its ``pool:`` section's ``start_jobs`` and (unless ``source`` is given) its file.

    Raises:
        TypeError: ``servers`` is not a Config or a sequence of `ServerConfig`, or a number is not a whole number.
        ValueError: ``concurrency`` or ``start_jobs`` is less than 1.
        ConfigError: the Config's ``pool:`` section is invalid.
    """
    if source is not None and not isinstance(source, str):
        raise TypeError(f"source: expected the config file's path as a string (or None), got {type(source).__name__}")
    for name, value in (("concurrency", concurrency), ("start_jobs", start_jobs)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name}: expected a whole number, at least 1, got {value!r}")
        if value < 1:
            raise ValueError(f"{name}: expected at least 1, got {value}")
    if isinstance(servers, Config):
        source = servers.file if source is None else source
        return list(servers.offered_servers), configured_start_jobs(servers, start_jobs), source
    if isinstance(servers, str | bytes | Mapping) or not isinstance(servers, Iterable):
        raise TypeError(
            f"servers: expected a Config or a list of ServerConfig (config.servers), got {type(servers).__name__}"
        )
    listed = list(servers)
    for s in listed:
        if not isinstance(s, ServerConfig):
            raise TypeError(
                f"servers: expected a Config or a list of ServerConfig (config.servers), got a list holding "
                f"{type(s).__name__} {s!r:.60}"
            )
    return listed, start_jobs if start_jobs is not None else default_start_jobs(), source


def checked_gate(gate: object, start_jobs: int | None) -> None:
    """Refuse a ``start_gate`` that is not a `StartGate`, or one given with ``start_jobs``.

    Raises:
        TypeError: ``gate`` is neither None nor a `StartGate`.
        ValueError: both ``gate`` and ``start_jobs`` are given.
    """
    if gate is None:
        return
    if not isinstance(gate, StartGate):
        raise TypeError(f"start_gate: expected a StartGate or None, got {type(gate).__name__}")
    if start_jobs is not None:
        raise ValueError("give start_jobs or start_gate, not both (a shared gate has its own limit: StartGate(jobs))")


ResourceListener = Callable[[str, str], None]
"""An ``on_resource_updated`` listener: called with a server's name and the URI of a resource of it subscribed to."""
ChangeListener = Callable[..., None]
"""An ``on_tools_changed`` listener: called with a server's name, and with ``kind=`` the list that changed
(``"tools"``, ``"prompts"`` or ``"resources"``) when it has a parameter named ``kind`` (`told_of`)."""


def checked_listener(on_tools_changed: object) -> ChangeListener | None:
    """``on_tools_changed`` as given, once it is callable or None.

    Raises:
        TypeError: it is neither, or it is an ``async def`` function (`refuse_async`).
    """
    if on_tools_changed is not None and not callable(on_tools_changed):
        raise TypeError(f"on_tools_changed: expected a callable or None, got {type(on_tools_changed).__name__}")
    refuse_async(on_tools_changed, "on_tools_changed")
    return on_tools_changed


def takes_kind(listener: ChangeListener) -> bool:
    """Whether ``listener`` has a parameter named ``kind`` that a keyword can give (one whose signature cannot be
    read, such as a builtin's, has none)."""
    try:
        parameter = inspect.signature(listener).parameters.get("kind")
    except (TypeError, ValueError):
        return False
    return parameter is not None and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)


def told_of(listener: ChangeListener, server: str) -> Callable[[str], None]:
    """What a session of ``server`` calls with the kind of each list its server says changed
    (`tool_tree.changes.Changes.listener`): ``listener`` with the server's name, and the kind when it takes one.
    A listener without ``kind`` (all there were before the kind was told) is called as it always was."""
    with_kind = takes_kind(listener)

    def told(kind: str) -> None:
        try:
            listener(server, kind=kind) if with_kind else listener(server)
        except Exception:  # the listener's fault: the session goes on (raised in the session's read stream, it ended
            # the session, and the call in flight was said to have died with its server, which was backed off)
            logger.exception("the on_tools_changed listener raised when told that %r changed its %s", server, kind)

    return told


def _check_call(tool: str, arguments: dict[str, Any], timeout: float | None) -> None:
    """Check a call's arguments before anything waits, so a mistake is reported where it was made.

    Raises:
        TypeError: ``tool`` is not a string, ``arguments`` not a dict, or ``timeout`` not a number.
        ValueError: ``timeout`` is not a positive, finite number of seconds.
    """
    if not isinstance(tool, str):
        raise TypeError(f"tool: expected the tool's name as a string, got {type(tool).__name__} {tool!r:.60}")
    if not isinstance(arguments, dict):
        raise TypeError(
            f"arguments: expected a dict of the tool's arguments by name (e.g. {{'limit': 3}}; {{}} for none), "
            f"got {type(arguments).__name__} {arguments!r:.60}"
        )
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"timeout: expected a positive number of seconds (or None), got {type(timeout).__name__}")
    if not 0 < timeout < math.inf:
        raise ValueError(f"timeout: expected a positive number of seconds (or None), got {timeout!r}")


_SUBSCRIPTIONS = ("resources/subscribe", "resources/unsubscribe")
"""The requests of the protocol with sessions a session of the 2026-07-28 protocol serves on its listen stream."""


def _nothing() -> None:
    """Told of nothing."""


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
        on_tools_changed: called with a server's name when, once its session is open and listed, the server says
            its tools, prompts or resources changed (``notifications/tools/list_changed``, ``.../prompts/...``,
            ``.../resources/...``: `tool_tree.changes.LISTS_CHANGED`); on the pool's event loop, so it must not
            block. A listener with a parameter named ``kind`` is told which list changed too, as ``kind="tools"``,
            ``"prompts"`` or ``"resources"`` (`ChangeListener`); one without it is called with the name alone. The
            pool itself goes on with the listing it read (`tooltree serve` regenerates the tree, for prompts and
            resources only when it offers them). Named for the tools, of which alone it was first told. It is also
            told, as if the server had said each of its lists changed (one without ``kind`` once), when such a
            notice may have been missed: an HTTP server's stream of unasked messages opened again after it was lost
            (a 503, a connection refused), and a new session listed that replaced one that ended (a restart, a
            session the server no longer knows); not on a server's first session. A server of the session-less
            2026-07-28 protocol says a list changed only on a ``subscriptions/listen`` stream: the pool keeps one open
            on each of its sessions while a listener is set (`tool_tree.listens`), told as if a list changed when it
            opened after an attempt failed; a server that refuses it is not followed (said at debug) until a
            subscription to a resource of it asks for the stream again (kept once opened; refused, the subscription
            fails).
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

    async def _own(self, slot: _Slot, ready: anyio.Event, box: list[BaseException], start: _Start) -> None:
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
                if self._closing:  # the close began before this task ran: it found no start-up to stop
                    scope.cancel()
                async with connect(slot.config, stderr=start.stderr, asks=slot.in_flight) as conn:
                    listened = self._listen(slot, conn)  # opened before the listing: a change after it is told
                    try:
                        # The listing of the session before, of no use to this one, is let go first: it is not
                        # counted twice.
                        slot.tools = []
                        slot.share.release()
                        slot.tools = await list_tools_raw(conn.client, slot.share)
                        OutputCheck(slot.config.name, slot.tools).install(conn.client)  # bounded, off the loop
                        slot.left_out = {left.name: left.reason for left in conn.left_out if left.name}
                        for left in conn.left_out:  # said by generate-tree; a call of one says it too
                            logger.info("%s: left out %s", conn.server.name, left)
                        if _sends_tool_headers(conn.client, slot.config, slot.tools):
                            await conn.client.list_tools()
                        if (told := self._on_tools_changed) is not None:  # a change before now is in the listing
                            conn.changes.listener = told_of(told, slot.config.name)
                        conn.changes.missed = functools.partial(self._missed, slot)
                        conn.changes.updated = functools.partial(self._updated, slot)
                        scope.deadline = math.inf
                        slot.starting = None
                        start.release()
                        if not self._closing:  # closing began while this server started: stop now
                            slot.client = conn.client
                            conn.changes.forgotten = functools.partial(self._forgotten, slot, conn.client)
                            conn.changes.ended = functools.partial(self._ended_alone, slot, conn.client)
                            if conn.changes.unknown:  # its stream was answered 404 while it opened
                                self._forgotten(slot, conn.client)
                            if conn.changes.closed:  # it ended before it was published: no one else was told
                                self._ended_alone(slot, conn.client)
                            if slot.listed:  # it replaces a session that ended: the server may list others now
                                self._may_have_changed(slot)
                                if slot.subscribed and self._tg is not None:  # and knows none of its subscriptions
                                    self._tg.start_soon(self._subscribe_again, slot, conn.client)
                            slot.listed = True
                            ready.set()
                            await stop.wait()
                    finally:
                        if slot.client is conn.client:
                            slot.client = None
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

    def _listen(self, slot: _Slot, conn: Connection) -> Callable[[], Awaitable[None]]:
        """Keep a ``subscriptions/listen`` stream open on ``conn``, a session of ``slot``'s server, when it speaks the
        2026-07-28 protocol and a listener of the pool may be told what it says (`tool_tree.listens`), or once a
        resource of it is subscribed to (`_follow_listened`); returns what ends it and waits until it ended."""
        ended = anyio.Event()
        scope = anyio.CancelScope()
        listening = Listening(
            conn.client,
            conn.changes,
            server=slot.config.name,
            resources=lambda: slot.subscribed,
            missed=functools.partial(self._missed, slot),
        )

        async def run() -> None:
            try:
                with scope:
                    await listening.run()
            finally:
                ended.set()

        def start() -> None:
            if self._tg is not None and not listening.started:
                listening.started = True  # started once
                self._tg.start_soon(run)

        wanted = self._on_tools_changed is not None or self.on_resource_updated is not None
        if speaks_listen(conn.client):
            slot.listening = (listening, start)
            if wanted:
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

    async def _follow_listened(self, slot: _Slot, client: mcp.Client, method: str, uri: str) -> _Raw:
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
            if self.on_resource_updated is not None:
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

    async def _ensure(self, slot: _Slot) -> mcp.Client:
        async with slot.lock:
            if slot.client is not None:
                return slot.client
            if self._tg is None:
                raise PoolError("the pool is not open (use `async with ServerPool(...)`)")
            if (unset := slot.config.unresolved) is not None:  # a variable of its settings is not set: never started
                raise ServerUnavailable(slot.config.name, str(unset))  # its values are references as written: no secret
            if (held := slot.backoff.refusal()) is not None:
                raise _unavailable(slot, held)
            slot.queued = True
            try:
                start = await self._gate.acquire()  # behind other starting servers: no deadline runs yet
            finally:
                slot.queued = False
            try:
                # Checked with no await between here and start_soon: a pool that began closing must
                # not get a new owner task its __aexit__ would never stop.
                if self._closing or self._tg is None:
                    raise PoolError("the pool is closing")
                if slot.stderr is not None:
                    slot.stderr.close()
                slot.stderr = StderrLog(slot.config) if slot.config.command is not None else None
                slot.stop, slot.closed = anyio.Event(), anyio.Event()
                ready = anyio.Event()
                box: list[BaseException] = []
                deadline = anyio.current_time() + slot.config.timeout
                owned = _Start(start, slot.stop, slot.closed, deadline, slot.stderr)
                self._tg.start_soon(self._own, slot, ready, box, owned)
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
            if (box or client is None) and self._closing:  # not the server's failure: no back-off
                raise PoolError("the pool closed while the server started (its `with` block ended meanwhile)")
            if box or client is None:
                reason = (
                    _reason(box[0], http=slot.config.url is not None, stderr=slot.stderr)
                    if box
                    else "the connection closed"
                )
                if box and isinstance(_first(box[0]), TimeoutError):  # in generate-tree's terms: how long, which key
                    reason = (
                        f"timed out after {slot.config.timeout:g} s while starting (its own start-up, not the wait "
                        f"for its turn; {self._timeout_setting(slot)})"
                    )
                if box and slot.config.url is not None and isinstance(_first(box[0]), ConnectionError | TimeoutError):
                    reason += f"; no call was sent: {self._check_url(slot, to_check(_first(box[0])))}"
                elif box:
                    reason += status_named(_first(box[0]), slot.config, self._source)
                slot.backoff.failed(reason)
                failure = _unavailable(slot, reason)
                upstream.warning(
                    "%s", _told(f"server {slot.config.name!r} could not start: {failure.reason}", failure.stderr_tail)
                )
                raise failure
            slot.backoff.ended = None
            return client

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
        """Forget a dead connection (ended for ``reason``) so the next call re-opens it, once its owner task ends.
        Not ``ended``: the server did not end it (it could not be reached at all), so re-opening it is a first
        start, not a restart that backs off. ``then`` says in the log what comes next. When resources of the server
        are subscribed to, a new session is opened in the background once the owner task ended (`_follow`), unless
        not ``follow`` (the pool ended the session itself: a hung server); returns whether."""
        followed = False
        async with slot.lock:
            if slot.client is client and slot.stop is not None:
                slot.stop.set()
                slot.client = None
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
            self._tg.start_soon(self._follow, slot)
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

    async def _follow(self, slot: _Slot) -> None:
        """Open a new session of ``slot``'s server, whose session ended on its own while resources of it are
        subscribed to: its client would hear of no change until a call came. Through `_ensure`, as a call would, so
        a restart its back-off holds is tried once the hold ends; the new session subscribes again and the listener
        is told (`_own`). Given up, in one warning naming the URIs followed no more, once the back-off would hold the
        next restart its longest (`tool_tree.restarts.MAX_DELAY`: the server ended soon after each restart); a call
        or a request then starts it again. Ends too once a call opened a session, nothing is subscribed to any more,
        or the pool closes (which cancels it)."""
        with anyio.CancelScope() as slot.following:
            try:
                while slot.subscribed and slot.client is None and not self._closing:
                    try:
                        await self._ensure(slot)
                        continue  # its session may have ended already: `_discard` left it to this task
                    except PoolError:  # a start that failed is said (`upstream`); a restart held back is waited out
                        pass
                    backoff = slot.backoff
                    if backoff.delay(backoff.streak + 1) >= tool_tree.restarts.MAX_DELAY:
                        self._follow_given_up(slot)
                        return
                    await anyio.sleep(copy.copy(backoff).admit())  # asked of a copy: asking records a restart
            finally:
                slot.following = None

    def _follow_given_up(self, slot: _Slot) -> None:
        """Say that ``slot``'s server is no longer started again for the resources subscribed to, and which."""
        uris = sorted(slot.subscribed)
        named = ", ".join(repr(uri[:200]) for uri in uris[:10]) + (
            f" and {len(uris) - 10} more" if len(uris) > 10 else ""
        )
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

    async def _retire(self, slot: _Slot, client: mcp.Client, reason: str, within: float, *, ended: bool = True) -> None:
        """`_discard` a session the server ended, once the other calls sent on it have their answers (at most
        ``within`` seconds): closing it first would cut them off before their 404 says they never ran."""
        await slot.in_flight.drained(client, within)
        await self._discard(slot, client, reason, ended=ended)

    async def _drop_unreached(self, slot: _Slot, client: mcp.Client, reason: str) -> None:
        """`_discard` a session whose server a call could not reach, once the calls sent on it before have their
        answers, in the background (the call that could not connect fails at once). A server shutting down, or a
        proxy at its connection limit, refuses new connections and finishes the requests it took: closed at once,
        the session cut them off, and they failed as if the server had died under them."""
        if slot.limiter.borrowed_tokens <= 1 or self._tg is None or self._closing:  # no other call in flight
            await self._discard(slot, client, reason, ended=False)
            return
        within = max(slot.config.timeout, PING_TIMEOUT)  # the calls in flight end by then
        self._tg.start_soon(functools.partial(self._retire, slot, client, reason, within, ended=False))

    def _may_have_changed(self, slot: _Slot) -> None:
        """Tell the listener that ``slot``'s server may have changed its lists, as if it had said so of each (a
        listener without ``kind`` is called once): a notice of it may have been missed (its stream of unasked messages
        opened again after it was lost), or a new session replaced one that ended (the server may have been
        redeployed). `tooltree serve` regenerates the server at most once in 30 s, however often it is told."""
        name = slot.config.name
        if (listener := self._on_tools_changed) is None or self._closing:
            return
        try:
            if takes_kind(listener):
                for kind in LISTS_CHANGED.values():
                    listener(name, kind=kind)
            else:
                listener(name)
        except Exception:  # the listener's fault: the session goes on (raised here, it would end it)
            logger.exception("the on_tools_changed listener raised when told that server %r may have changed", name)

    def _missed(self, slot: _Slot) -> None:
        """A notice of ``slot``'s server may have been missed (its stream of unasked messages opened again after it was
        lost): tell both listeners, as if its lists and each resource subscribed to had changed."""
        self._may_have_changed(slot)
        for uri in sorted(slot.subscribed):
            self._updated(slot, uri)

    def _updated(self, slot: _Slot, uri: str) -> None:
        """``slot``'s server said the resource ``uri`` changed: the ``on_resource_updated`` listener is told, when it
        is subscribed to (a notice of another URI is dropped)."""
        if (listener := self.on_resource_updated) is None or uri not in slot.subscribed or self._closing:
            return
        try:
            listener(slot.config.name, uri)
        except Exception:  # the listener's fault: the session goes on (raised here, it would end it)
            logger.exception("the on_resource_updated listener raised when told of server %r", slot.config.name)

    async def _subscribe_again(self, slot: _Slot, client: mcp.Client) -> None:
        """Subscribe the new session ``client`` of ``slot``'s server to the resources subscribed to on the one it
        replaces, then tell the listener once of each (a change may have been missed). One that fails is said in the
        log (a warning): the server says nothing more of it, unless it is subscribed to again."""
        name = slot.config.name
        for uri in sorted(slot.subscribed):
            if slot.client is not client or self._closing:
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
            self._updated(slot, uri)

    def _forgotten(self, slot: _Slot, client: mcp.Client) -> None:
        """``client``'s server answered its stream of unasked messages 404: its session is checked in the background
        (`_renew`). Called in the SDK's task for that stream, on the pool's loop."""
        if self._tg is not None and not self._closing and slot.client is client:
            self._tg.start_soon(self._renew, slot, client)

    async def _renew(self, slot: _Slot, client: mcp.Client) -> None:
        """Check the session of ``client``, whose server answered its stream of unasked messages 404, with a
        ``tools/list``. Answered 404 too (or a 400 naming the session), the server no longer knows the session: it is
        retired once the calls in flight on it have their answers, as a call's 404 retires it, and, when the pool has
        a listener (``on_tools_changed``: a new session brings a stream of unasked messages again) or the server has
        resources subscribed to (the new session subscribes to them again: `_subscribe_again`; opened by `_follow`,
        as for any session that ended), a new one is opened now, the listener told once it is listed (`_own`);
        otherwise the next call opens it. Answered, the server has no such stream (it answered 404 for 405): the
        session goes on without it. Any other failure is left to the next call to meet."""
        if slot.client is not client or self._closing:
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
        reopen = self._on_tools_changed is not None or bool(slot.subscribed)
        await slot.in_flight.drained(client, PING_TIMEOUT)
        reason = (
            "it no longer knows its session (it answered its stream of unasked messages 404, and a tools/list too: it "
            "restarted or let the session expire)"
        )
        followed = await self._discard(
            slot, client, reason, then="a new session is opened now" if reopen else _NEXT_CALL
        )
        if not reopen or followed or self._closing:  # followed: `_follow` opens it
            return
        try:
            await self._ensure(slot)
        except PoolError as e:  # a start that failed is said (`upstream`); a restart held back is not
            logger.info("server %r: no new session now (%s); the next call opens one", name, e)

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

    async def live_tool(self, server: str, tool: str) -> dict[str, Any] | None:
        """The tool's raw definition as the running server lists it now (None: not listed).

        Raises:
            UnknownServerError, ServerUnavailable, PoolError: as `call`.
        """
        self._check_loop()
        slot = self._slot(server)
        await self._ensure(slot)
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

        Raises:
            UnknownServerError: ``server`` is not in the pool.
            ServerUnavailable: the server cannot be started or died before answering the call.
            PoolError: the pool closed during the call (its outcome is unknown), or this is not the event loop that
                entered the pool.
            TypeError, ValueError: ``tool`` is not a string, ``arguments`` not a dict (or not JSON: nothing is
                sent), or ``timeout`` not positive.
        """
        _check_call(tool, arguments, timeout)
        refuse_async(progress, "progress")
        self._check_loop()
        slot = self._slot(server)

        async def send(client: mcp.Client, remaining: float) -> mt.CallToolResult:
            return await _send(slot, client, tool, arguments, remaining, progress, asker)

        return await self._forward(slot, timeout, send)

    async def request(
        self, server: str, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """Forward one request that is not a tool call (`FORWARDED`: ``prompts/get``, ``resources/read``, the lists
        of prompts and resources, ``resources/subscribe`` and ``resources/unsubscribe``); returns its raw result (wire
        format, every field the server sent kept). A URI subscribed to is remembered (``on_resource_updated`` is told
        of it, and a new session of the server subscribes to it again) once the server answered, until a
        ``resources/unsubscribe`` of it is forwarded, whatever the server answers to that. A session of the
        2026-07-28 protocol has neither request: its ``subscriptions/listen`` stream is opened again with the URIs
        subscribed to instead, answered as the server acknowledged it (`_follow_listened`).

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
        slot = self._slot(server)

        async def send(client: mcp.Client, remaining: float) -> _Raw:
            with slot.in_flight.call(client), anyio.fail_after(remaining):
                if method in _SUBSCRIPTIONS and speaks_listen(client):  # not at 2026-07-28: its listen stream serves it
                    return await self._follow_listened(slot, client, method, message.params.uri)
                return await client.session.send_request(
                    message, _Raw, request_read_timeout_seconds=remaining + SDK_TIMEOUT_MARGIN
                )

        if method == "resources/unsubscribe":  # its notices are told no more, whatever the server answers
            slot.subscribed.discard(message.params.uri)
        result = await self._forward(slot, timeout, send)
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

    async def _forward(
        self, slot: _Slot, timeout: float | None, send: Callable[[mcp.Client, float], Awaitable[BaseModel]]
    ) -> dict[str, Any]:
        """One request to ``slot``'s server (``send`` it on a client within the seconds left), as `call` says."""
        server = slot.config.name
        limit = timeout if timeout is not None else slot.config.timeout
        queued = anyio.current_time()
        with anyio.move_on_after(limit) as turn:
            await slot.limiter.acquire()
        setting = "" if timeout is not None else self._timeout_setting(slot)
        if turn.cancelled_caught:
            busy = f"{slot.limiter.total_tokens:g} call(s) in flight to {server!r}"
            busy += f"; {setting}" if setting else ""
            return CallFailure(
                f"the call timed out after {limit:g} s waiting for its turn ({busy})", "timeout", _NOT_SENT
            )
        waited = anyio.current_time() - queued
        client: mcp.Client | None = None
        try:
            client = await self._ensure(slot)
            if _closed(client):
                # It died since its last call (killed, crashed idle): nothing is sent on a closed session, so
                # restart it and send the call once, rather than fail a call the server never saw.
                await self._discard(slot, client, "its connection closed while no call was in flight")
                client = await self._ensure(slot)
            if slot.suspect is client:
                client = await self._unless_hung(slot, client, limit)
            log = slot.stderr  # this session's: a call meanwhile may start the server again, with a log of its own
            remaining = max(0.0, limit - waited)
            sent, noise = anyio.current_time(), (log.noise_count if log is not None else 0)
            try:
                resent = False
                try:
                    result = await send(client, remaining)
                except mcp.MCPError as e:
                    if not resendable(e):
                        raise
                    # The server restarted or let the session expire (HTTP 404 to its id): it did not run the call.
                    # Open a new session, as the MCP spec says, and send the call once more on it.
                    await self._retire(slot, client, e.message, max(0.0, remaining - (anyio.current_time() - sent)))
                    remaining = max(0.0, remaining - (anyio.current_time() - sent))  # the start is not counted
                    client, resent = await self._ensure(slot), True
                    log = slot.stderr
                    noise = log.noise_count if log is not None else 0
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
                self._ask_if_hung(slot, client, limit)
                timed_out = f"the call timed out after {limit:g} s" + (f" ({setting})" if setting else "")
                if isinstance(e, _AnswerAwaited):
                    timed_out += f" while the client was still answering a question of the server ({e})"
                if log is not None and (written := log.noise_since(noise)) is not None:
                    timed_out += f"; {written}"
                return CallFailure(timed_out, "timeout", _SENT)
            except mcp.MCPError as e:
                if (question := asked(e)) is not None:  # the server asked tooltree for sampling, elicitation, roots
                    return CallFailure(unanswered(server, *question), "server_error", "the tool ran until it asked")
                if unreached(e):  # no connection was made: the call was not sent, and this session is of no use
                    await self._drop_unreached(slot, client, e.message)
                    check = self._check_url(slot, unreached_check(e))
                    raise _unavailable(slot, f"{e.message}; the call was not sent: {check}") from None
                lost = await _connection_lost(e, client)
                if lost and self._closing:
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
                    await self._discard(slot, client, f"{ended} a call ({e})")  # its exit status is read
                    how = log.how_exited() if log is not None and not closed_here(e.data) else None
                    raise _unavailable(slot, f"{what} ({e})" + (f": {how}" if how else ""), log) from None
                if session_ended(e):  # not to be sent again, or again on the new session: the next call opens one
                    await self._retire(slot, client, e.message, PING_TIMEOUT)
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
                said = f"server error {e.code}: {_said(e, slot)}{status_named(e, slot.config, self._source)}"
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
                if self._closing:
                    raise _closed_during_call() from None
                await self._discard(slot, client, f"the connection closed ({type(e).__name__})")
                raise _unavailable(slot, f"the connection closed ({type(e).__name__})", log) from None
            dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
            dumped.pop("resultType", None)
            return dumped
        finally:
            slot.limiter.release()
            if client is not None and slot.client is client and _closed(client):
                # It ended while calls were in flight, none of which met its end: the last one to leave says so.
                self._ended_alone(slot, client)

    def _ask_if_hung(self, slot: _Slot, client: mcp.Client, limit: float) -> None:
        """After a call of ``client`` timed out: whether its server still answers (`_answers_ping`) is asked in the
        background, and a server that does not is hung: its session is ended, and the next call starts it again.
        Before, the call's caller waited for the question (up to `PING_TIMEOUT` seconds more) and the hung server's
        end (about 2 s): a call of a 3 s timeout answered after 8 s, of the default 30 s after about 37 s."""
        if self._tg is None or self._closing:
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
            await self._discard(slot, client, "it stopped answering (hung)", follow=False)

        self._tg.start_soon(ask)

    async def _unless_hung(self, slot: _Slot, client: mcp.Client, limit: float) -> mcp.Client:
        """``client``, when its server answers a request (`_answers_ping`) within `PING_TIMEOUT` seconds (at most
        ``limit``); else the server is hung: its session is ended and a new one started, returned."""
        slot.suspect = None
        if await _answers_ping(client, min(PING_TIMEOUT, limit)):
            return client
        await self._discard(slot, client, "it stopped answering (hung) a call its caller gave up on", follow=False)
        return await self._ensure(slot)


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


def _refused(e: ValidationError) -> str:
    """What a validation of a server's result found, in one line of at most a few hundred characters."""
    errors = e.errors()
    if not errors:
        return "malformed"
    loc = [str(part) for part in errors[0]["loc"]]
    member = next((i for i, part in enumerate(loc) if part[:1].isupper()), None)  # a model of a union: none fit
    if member is not None:
        value = errors[0]["input"]
        kind = f" (type {value.get('type')!r})" if isinstance(value, dict) and "type" in value else ""
        found = f"{'.'.join(loc[:member]) or 'the result'}: none of the shapes the protocol allows there{kind}"
    else:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        found = f"{'.'.join(loc) or 'the result'}: {errors[0]['msg']}{more}"
    return one_line(found, 300)


SAID_CHARS = 2_000
"""The most of a server's JSON-RPC error message a call's failure quotes (before: all of it, 8 MB for an error of
2,000,000 emoji, into the script's exception at each call)."""


def _said(e: mcp.MCPError, slot: _Slot) -> str:
    """The server's error message, redacted of its configuration's secrets (a server refusing a key quotes it), at
    most `SAID_CHARS` characters (how many more were left out said)."""
    text = redact(str(e), slot.config)
    return text if len(text) <= SAID_CHARS else f"{text[:SAID_CHARS]}… ({len(text) - SAID_CHARS:,} characters more)"


def _told(said: str, tail: str) -> str:
    """``said``, with a server's stderr ``tail`` under it when there is one."""
    return f"{said}\n{tail}" if tail else said


def _unavailable(slot: _Slot, reason: str, log: StderrLog | None = None) -> ServerUnavailable:
    """The error for a server that cannot be reached, without the secrets of its configuration; with the tail of
    ``log`` (default: the log of the server's latest start)."""
    log = log if log is not None else slot.stderr
    tail = log.tail() if log else ""  # redacted by the log, which knows the server
    return ServerUnavailable(slot.config.name, redact(reason, slot.config), tail)


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


def _current_loop() -> object:
    """The running asyncio loop (another anyio backend's: the thread running it)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return threading.get_ident()


def _client_of(slot: _Slot) -> mcp.Client | None:
    return slot.client


def _closed(client: mcp.Client) -> bool:
    """Whether the session already knows its connection closed (the server's stdout ended, the HTTP stream
    broke), so the SDK would fail a request unsent. Read from the SDK's dispatcher, which has no public
    flag for it; an SDK release that renames it reads as open: the call then fails as "died before answering the call"
    and the next one restarts the server, as before."""
    dispatcher = getattr(client.session, "_dispatcher", None)
    return getattr(dispatcher, "_closed", False) is True


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


def _is_connection_loss(e: mcp.MCPError) -> bool:
    text = str(e).lower()
    return "connection closed" in text or ("closed" in text and "connection" in text)


def _first(e: BaseException) -> BaseException:
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


def _reason(e: BaseException, *, http: bool = False, stderr: StderrLog | None = None) -> str:
    e = _first(e)
    if isinstance(e, TimeoutError):
        return "timed out while starting (its own start-up, not the wait for its turn)"
    if http and isinstance(e, ConnectionError):  # `connect` says "cannot connect to host:port: why"
        return f"could not reach the server at its URL ({str(e).removeprefix('cannot connect to ')})"
    if isinstance(e, OSError):
        return f"cannot start: {e}"
    if isinstance(e, mcp.MCPError) and _is_connection_loss(e) and not closed_here(e.data):
        said = "the server exited during start-up"
        return stderr.exited_said(said) if stderr is not None else said
    return str(e) or type(e).__name__


def _closed_during_call() -> PoolError:
    return PoolError(
        "the pool closed during the call (its `with` block ended meanwhile); the call may have reached the server"
    )


if TYPE_CHECKING:
    from tool_tree.background_pool import BackgroundPool as BackgroundPool


def __getattr__(name: str) -> Any:
    """``from tool_tree.pool import BackgroundPool``, the documented import, of a class in its own module
    (imported on first use: that module builds on this one)."""
    if name == "BackgroundPool":
        from tool_tree.background_pool import BackgroundPool

        return BackgroundPool
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
