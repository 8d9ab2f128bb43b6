"""Listing the tools of every configured server, a bounded number starting at once.

Each server is connected in its own task. At most ``jobs`` are starting at a time (`StartGate`:
default the number of cores); the others wait in config order, and each server's timeout runs
from its own start, so a server that is merely queued never times out. One that fails to start,
crashes, hangs or sends garbage is reported with the last lines of its stderr, and the others
carry on. One out of time is reported at its timeout, its process ended meanwhile (seconds more for a server that
does not exit as its stdin closes). Every process started is stopped and reaped before this returns, also on Ctrl-C.

The reason and the stderr tail leave with the secrets of the server's configuration redacted
(`tool_tree.redact`): a server that refuses ``initialize`` often names the key it was given
("invalid API key sk-…"), and httpx names a header value it cannot send. generate-tree prints them,
serve's refresh too, and both come from here.

A server that says its tools changed (``notifications/tools/list_changed``, read between the ``tools/list`` request
and its answer, whenever the server sent it) is listed again, up to `MAX_RELISTS` more times; if it is still
changing then, the last listing is kept and `Discovery.warning` (also logged) names the server. A notice read
before the listing began needs none: the listing is newer. (One a server sends after its answer is not waited for.)

On the same connection, once its tools are listed, a server's prompts, resources and resource templates are listed
when it declares them (`tool_tree.snapshot_lists`), within what is left of its timeout: a list that fails or runs
out of time is said in a warning and marked (`Discovery.lists_failed`), the tree keeping what it recorded of it
before, and the server's tools are kept.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp
from anyio.abc import TaskGroup

from tool_tree.config import ServerConfig, setting_named
from tool_tree.connect import Connection, connect, list_tools_raw, server_info
from tool_tree.held_values import HeldValues, Share
from tool_tree.http_errors import status_named
from tool_tree.listing_check import LeftOut
from tool_tree.other_python import other_python
from tool_tree.redact import redact
from tool_tree.snapshot_lists import declared_keys, list_extras
from tool_tree.starts import StartGate, default_start_jobs
from tool_tree.stderr_log import StderrLog
from tool_tree.text import cut_name, quoted_name
from tool_tree.unreachable import to_check

logger = logging.getLogger(__name__)

MAX_RELISTS = 3
"""Listings of a server after the first, each because it said its tools changed during the one before."""


@dataclass
class Discovery:
    """The outcome of listing one server."""

    server: ServerConfig
    tools: list[dict[str, Any]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    stderr_tail: str = ""
    seconds: float = 0.0
    """From its own start until it was listed, failed or ran out of time (neither the wait for a start slot nor the
    stop is counted: before, a server timed out after 4 s showed 6.03, the SDK's wait for its exit included)."""
    queued_seconds: float = 0.0
    """How long it waited for a start slot."""
    warning: str | None = None
    """Listed, but maybe not as the server has its tools now (it kept changing them while listed)."""
    left_out: list[LeftOut] = field(default_factory=list)
    """The tools of the listing left out as malformed (`tool_tree.listing_check`), and how many more."""
    more_left_out: int = 0
    lists: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Its prompts, resources and resource templates, by snapshot key (`tool_tree.snapshot_lists`)."""
    list_warnings: list[str] = field(default_factory=list)
    """A list that failed or was cut (the tools are not affected)."""
    lists_failed: set[str] = field(default_factory=set)
    """The keys of `lists` whose listing failed or ran out of time: the tree keeps what it recorded of them."""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def warnings(self) -> list[str]:
        """`warning` and a line per tool `left_out` that the server's ``include``/``exclude`` would offer, each naming
        the server (one the filters leave out is not in the tree either way)."""
        lines = [self.warning] if self.warning is not None else []
        lines += self.list_warnings
        lines += [
            f"{cut_name(self.server.name)}: left out {left}"
            for left in self.left_out
            if left.name is None or self.server.leaves_out(left.name) is None
        ]
        more = self.more_left_out
        return [*lines, f"{cut_name(self.server.name)}: left out {more:,} more malformed tools"] if more else lines


async def discover_one(
    server: ServerConfig,
    *,
    gate: StartGate | None = None,
    on_start: Callable[[ServerConfig], None] | None = None,
    source: str | None = None,
    held: HeldValues | None = None,
    stopping: TaskGroup | None = None,
) -> Discovery:
    """Connect to one server, list its tools (all pages) and disconnect. Never raises for server faults.

    With a ``gate``, wait for a start slot first; the timeout runs from the moment it is taken
    (``on_start`` is told then), and the slot is given back as soon as the listing is done, has failed or has
    run out of time (stopping the server does not hold it: before, a timed-out server held it the ~2 s the SDK
    waits for a process to exit). ``error`` holds no secret of the server's configuration; a timeout names the
    phase and the setting (``servers.NAME.timeout``, in ``source``, the config file, when given). The values of its
    listings are counted against ``held``, the run's (`tool_tree.held_values`); a server that fails gives them back.
    One out of time is said at its timeout when ``stopping`` is given: its server is stopped (and its process reaped)
    in that task group, which may take seconds more for a server that does not exit as its stdin closes; without it,
    the server is stopped before this returns.
    """
    result = Discovery(server=server)
    tools, extras = Share(held), Share(held)
    queued_at = time.perf_counter()
    slot = await gate.acquire() if gate is not None else None
    start = time.perf_counter()
    result.queued_seconds = start - queued_at
    ended: list[float] = []

    def over() -> None:
        """The listing is over (listed, failed or out of time): what follows is the server's stop."""
        if not ended:
            ended.append(time.perf_counter())
        if slot is not None:
            slot.release()

    if on_start is not None:
        try:  # the caller's: what it raises is raised, not taken for the server's failure (it was, naming the server)
            on_start(server)
        except BaseException:
            over()
            raise
    stderr: StderrLog | None = None
    phase = "start-up"
    listed, finished = anyio.Event(), anyio.Event()
    deadline = anyio.current_time() + server.timeout

    async def listing() -> None:
        """The server started, listed and stopped, told in ``result`` (``listed`` once its tools are)."""
        nonlocal stderr, phase
        async with anyio.create_task_group() as watch:  # every error is handled inside: leaving, it would be wrapped
            watch.start_soon(_call_at, deadline, over)  # a sibling, so the deadline does not cancel it
            try:
                stderr = StderrLog() if server.command is not None else None
                with anyio.fail_after(deadline - anyio.current_time()) as scope:
                    async with connect(server, stderr=stderr, source=source) as conn:
                        phase = "listing tools"
                        try:
                            result.info = server_info(conn.client)
                            result.tools = await _settled_tools(conn, result, tools)
                            listed.set()  # a success now, whatever its prompts and resources do
                            await _extras(conn, result, scope, extras)
                        finally:
                            over()  # before `connect` stops the server
            except TimeoutError:
                result.error = _timed_out(server, phase, source, stderr)
            except mcp.MCPError as e:
                result.error = f"server error: {e}{status_named(e, server, source)}"
            except OSError as e:  # `connect` words it in the configuration's terms
                result.error = f"cannot start: {e}" if server.command is not None else _unreached(server, e, source)
            except Exception as e:
                result.error = _describe(e)
            finally:
                over()
                watch.cancel_scope.cancel()
                result.seconds = ended[0] - start
                if stderr is not None:
                    if result.error is not None:
                        result.stderr_tail = stderr.tail()
                    stderr.close()
        if result.error is not None and "connection closed" in result.error.lower() and server.command is not None:
            said = "the server exited during start-up" if phase == "start-up" else f"the server exited while {phase}"
            result.error = stderr.exited_said(said) if stderr is not None else said
            result.error += await other_python(server, result.stderr_tail)  # `python` on PATH another than tooltree's
        if result.error is not None:
            result.error = redact(result.error, server)  # the tail is redacted by its log, which knows the server
            result.tools, result.lists = [], {}
            tools.release()
            extras.release()
        finished.set()  # all it raises is handled but a cancellation, which ends the wait for it too

    async def reported(group: TaskGroup) -> Discovery:
        group.start_soon(listing)
        with anyio.move_on_at(deadline):
            await finished.wait()
        if finished.is_set() or listed.is_set():
            await finished.wait()
            return result
        # Out of time: said at its timeout, while `listing` stops its server in ``group`` (before, the error waited
        # for its end, ~2 s more for a server that does not exit as its stdin closes).
        over()
        return Discovery(
            server=server,
            error=redact(_timed_out(server, phase, source, stderr), server),
            stderr_tail=stderr.tail() if stderr is not None else "",
            seconds=ended[0] - start,
            queued_seconds=result.queued_seconds,
        )

    if stopping is not None:
        return await reported(stopping)
    async with anyio.create_task_group() as own:  # its server stopped before this returns
        found = await reported(own)
    return found


async def _call_at(deadline: float, call: Callable[[], None]) -> None:
    await anyio.sleep_until(deadline)
    call()


def _timed_out(server: ServerConfig, phase: str, source: str | None, stderr: StderrLog | None = None) -> str:
    """``timed out after 4 s listing its tools (servers.NAME.timeout in FILE)``: the phase and the setting, and what
    the server wrote to stdout that is not JSON-RPC (`StderrLog.noise_said`). Before: ``timed out after 4 s``, the same
    for a server that never started as for one that never listed."""
    doing = "starting up" if phase == "start-up" else "listing its tools"
    said = f"timed out after {server.timeout:g} s {doing} ({setting_named(server, 'timeout', source)})"
    noise = stderr.noise_said() if stderr is not None else None
    return said if noise is None else f"{said}; {noise}"


def _unreached(server: ServerConfig, e: OSError, source: str | None) -> str:
    """``cannot connect to host:port: why; check … (servers.NAME.url in FILE)``, as a call to it says (before: the
    setting to check was named in exec and serve, not here)."""
    return f"{e}; {to_check(e)} ({setting_named(server, 'url', source)})"


async def _settled_tools(conn: Connection, result: Discovery, share: Share) -> list[dict[str, Any]]:
    """The server's tools, listed again while it says they changed since the listing began (`MAX_RELISTS`)."""
    tools: list[dict[str, Any]] = []
    for _ in range(1 + MAX_RELISTS):
        before = conn.changes.tools
        tools = []  # the listing before, let go before the next is read: it is not counted twice
        share.release()
        tools = await list_tools_raw(conn.client, share)
        result.left_out, result.more_left_out = list(conn.left_out), conn.more_left_out
        if conn.changes.tools == before:  # counted as read: a notice sent before the answer is counted
            return tools
    result.warning = (
        f"server {quoted_name(conn.server.name)} said its tools changed during each of {1 + MAX_RELISTS} listings in "
        "a row; the last listing is used, and may be out of date (generate again once it settles)"
    )
    logger.warning(result.warning)
    return tools


async def _extras(conn: Connection, result: Discovery, scope: anyio.CancelScope, share: Share) -> None:
    """``result.lists``: the server's prompts and resources, within the time its tools left (``scope``: the
    timeout's). Running out of it leaves them out, with a warning, not the tools: meanwhile ``scope`` has no
    deadline, and after a timeout here the server's stop is given its timeout again."""
    end, scope.deadline = scope.deadline, math.inf
    with anyio.CancelScope(deadline=end) as own:
        result.lists, result.list_warnings, result.lists_failed = await list_extras(
            conn.client, conn.server.name, share
        )
    if own.cancelled_caught:
        name = cut_name(conn.server.name)
        result.lists_failed = set(declared_keys(conn.client)) - set(result.lists)
        result.list_warnings.append(
            f"{name}: its prompts and resources were not listed within its timeout ({conn.server.timeout:g} s in "
            f"all, {setting_named(conn.server, 'timeout')}): the tree keeps the ones it recorded before, if any"
        )
        scope.deadline = anyio.current_time() + conn.server.timeout
    else:
        scope.deadline = end
    for warning in result.list_warnings:
        logger.warning("%s", warning)


def _describe(e: BaseException) -> str:
    """What ended a listing. Raised inside the session's task group, an error comes wrapped in a group: a bad response
    is worded as `discover_one` words one raised outside it (before: "ValueError: tools/list holds more than …")."""
    if isinstance(e, BaseExceptionGroup):
        inner = e.exceptions[0] if e.exceptions else e
        return _describe(inner)
    if isinstance(e, ValueError):
        return f"bad response: {e}"
    text = str(e).strip() or type(e).__name__
    return f"{type(e).__name__}: {text}" if type(e).__name__ not in text else text


def alone(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception a group holds, through the groups it is nested in: an ``on_server`` or ``on_server_start``
    that raised, raised as it was (before: "ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)");
    a group of several is raised whole."""
    e: BaseException = group
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    return e


async def discover_all(
    servers: Sequence[ServerConfig],
    *,
    jobs: int | None = None,
    on_start: Callable[[ServerConfig], None] | None = None,
    on_done: Callable[[Discovery], None] | None = None,
    source: str | None = None,
) -> list[Discovery]:
    """Discover all servers, at most ``jobs`` starting at once (default: the number of cores).

    ``on_start`` is called when a server leaves the queue and starts, ``on_done`` when it is
    listed or has failed. Results come back in the order given. ``source``, the config file, is named in the
    error of a server that timed out.
    """
    gate = StartGate(jobs if jobs is not None else default_start_jobs())
    held = HeldValues()  # every server's listing is held until all are listed
    results: list[Discovery | None] = [None] * len(servers)

    async def run(i: int, server: ServerConfig) -> None:
        result = results[i] = await discover_one(
            server, gate=gate, on_start=on_start, source=source, held=held, stopping=tg
        )
        if on_done is not None:
            on_done(result)

    async with anyio.create_task_group() as tg:  # left once every server started is stopped
        for i, s in enumerate(servers):
            tg.start_soon(run, i, s)
    return [r for r in results if r is not None]
