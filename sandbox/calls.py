"""`CallServer`: a session's side of the requests its script makes — tool calls and tool searches.

The channel's reader hands each request from the container to `CallServer.on_request`, which decides
at once, on the reader, what can be decided without the bridge: no execution running, too many calls
in flight, an unknown method, a malformed call, arguments past the per-call or in-flight limits
(`sandbox.call_limits`). Those are answered there, a tool call's refusal recorded in the ledger and by the bridge
(`ToolBridge.refused`: `McpBridge` writes its audit line); nothing else runs for them.

The rest is served with as few hand-offs as the bridge allows. A tool call to a bridge whose
``call_tool`` is a coroutine function (`McpBridge`: its checks already run on the event loop that
holds the MCP sessions) becomes a task on that loop, and its answer is written from the loop — a
write that never blocks (`sandbox._supervisor.wire.FrameSender`) — unless the result is too large
to encode there without holding up every other session's calls (`sandbox.call_limits.SMALL`). A
call to a synchronous bridge, and a search, run on a small thread pool. Either way the host keeps
the ledger of the execution's calls itself, the names (the script's) and errors (which may quote them)
cleaned and cut short as they go in (`sandbox.results.ledger_name`, `ledger_error`). A result that says the call
got no usable answer (`tool_tree.pool.CallFailure`: a timeout, a protocol error) is answered as the failed call it is
(the script's ``ToolCallError``, with its code), not as the tool's own error, whichever bridge handed it on.

A search costs the host far more than its frame (up to about 0.5 s of CPU to embed a long query), so
a session runs one at a time, a search whose execution has ended by its turn is dropped unrun, and
the CPU each takes on its thread (its query embedded there alone: one BLAS thread) is charged to the
session's search budget (`sandbox.request_budget`) and to the sandbox's request budget, the account of all its
requests (`account`); once either is spent, searches are refused until it refills. A tool call is served with that
account as `sandbox.request_budget.ACCOUNT`, so the bridge charges its validation there too.

An admitted request's place in flight is given back just before its answer is written (`_Slot`): the
container's worker sends its next call as soon as it reads an answer, and must find the place free
(given back after, a script at the limit had calls refused as "too many" that it had not made).

When an execution ends (the script returned, timed out or was cancelled), the tool calls still
waiting for their server are cancelled (their answer has no reader any more, and a slow call must
not hold the server's slots for the next script) and go into the ledger as cancelled.

(Over 400 lines: one class, whose call, search and ledger paths share its lock and the state of the
execution running.)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple, Protocol

from sandbox._supervisor.limits import MAX_CALLS_IN_FLIGHT, too_many_values
from sandbox._supervisor.wire import MAX_FRAME_VALUES
from sandbox.bridge import LOOP_CLOSED, ToolBridge, ToolCallRefused, resolve, shared_loop
from sandbox.call_limits import MEASURED, ArgumentsRefused, CallSize, InFlight, Measured, is_small, measure
from sandbox.request_budget import ACCOUNT, SEARCH_BURST_SECONDS, SEARCH_RATE, RequestBudget
from sandbox.results import LEDGER_NAME_CHARS, ToolCallRecord, ledger_error, ledger_name
from tool_tree.pool import CallFailure
from tool_tree.search import on_this_thread

logger = logging.getLogger(__name__)

MAX_LEDGER = 2_000
"""Calls of one execution the ledger lists (the bridge's default budget of calls); the rest are only counted
(refused calls cost no budget: a script made 21,000 of them, about 1 KB each, in 30 s)."""
MAX_RESULT_BYTES = 8 * 1024 * 1024
NAME_CHARS = LEDGER_NAME_CHARS  # the longest server or tool name a call may give: a longer one is refused
_SEARCH_ANSWER_CHARS = 256 * 1024
"""tool_tree.search renders at most 64,000 characters; another bridge may not."""

WAIT_SAID = 1.0
"""Seconds a script's tool call has waited before what it waits on is said (serve's progress, `tooltree agent`'s
lines): a script making fast calls one after another was said to wait on one "for 0 s" at some beats."""

Refusal = tuple[str, str]
"""``(code, message)`` of an error answer."""


class Waiting(NamedTuple):
    """The tool calls of the running execution that wait for their answer (`CallServer.waiting`)."""

    calls: int
    longest: str
    """``server.tool`` of the call that has waited longest (the script's names, cleaned: `ledger_name`)."""
    seconds: float
    """How long it has waited."""

    def said(self) -> str:
        """``waiting on crm.search_leads for 12 s``; several: ``3 calls in flight, the longest crm.x for 12 s``."""
        if self.calls == 1:
            return f"waiting on {self.longest} for {self.seconds:.0f} s"
        return f"{self.calls} calls in flight, the longest {self.longest} for {self.seconds:.0f} s"


class Responder(Protocol):
    """Where answers go (a `sandbox.channel.SupervisorChannel`): ``respond`` never blocks, from any thread."""

    def respond(
        self, call_id: str, *, result: dict[str, Any] | None = None, error: dict[str, Any] | None = None
    ) -> None: ...


class _Slot:
    """The `Responder` of one admitted request: gives the request's place in flight back (``free``, once) just
    before its answer is written, then writes it; ``free`` also ends a request that is never answered."""

    def __init__(self, channel: Responder, free: Callable[[], None]) -> None:
        self._channel, self._free, self._lock, self._held = channel, free, threading.Lock(), True

    def free(self) -> None:
        with self._lock:
            held, self._held = self._held, False
        if held:
            self._free()

    def respond(
        self, call_id: str, *, result: dict[str, Any] | None = None, error: dict[str, Any] | None = None
    ) -> None:
        self.free()
        self._channel.respond(call_id, result=result, error=error)


class CallServer:
    """Serves one session's tool calls and searches through its bridge, and keeps the execution's ledger.

    Args:
        bridge: where the calls go.
        tool_loop: the event loop on which the bridge's async methods run (None: a shared background loop).
        search_budget: the host CPU the session's searches may take (None: `SEARCH_BURST_SECONDS`, then
            `SEARCH_RATE`). A search is charged the CPU time of the thread that served it: all of it for a
            synchronous bridge such as `McpBridge`, whose search runs on that thread.
        account: the sandbox's request budget, which its channel's reader charges (None: none yet; its session
            sets the channel's as it attaches it): each search is charged to it too, and each tool call is served
            with it as `sandbox.request_budget.ACCOUNT`.
    """

    def __init__(
        self,
        bridge: ToolBridge,
        tool_loop: asyncio.AbstractEventLoop | None,
        *,
        search_budget: RequestBudget | None = None,
        account: RequestBudget | None = None,
    ) -> None:
        self.bridge = bridge
        self.tool_loop = tool_loop
        self.search_budget = search_budget or RequestBudget(burst=SEARCH_BURST_SECONDS, rate=SEARCH_RATE)
        self.account = account
        self._on_loop = asyncio.iscoroutinefunction(bridge.call_tool)
        self._executor = ThreadPoolExecutor(max_workers=32, thread_name_prefix="sandbox-tool")
        self._lock = threading.Lock()
        self._searching = threading.Lock()  # one search of this session at a time
        self._executing = False
        self._ends_at: float | None = None
        self._execution = 0  # counts executions: a search queued in one is not run in the next
        self._in_flight = 0
        self.arguments_in_flight = InFlight()
        self._ledger: list[ToolCallRecord] = []
        self._omitted = 0  # calls of this execution past `MAX_LEDGER`, not in the ledger
        self._tasks: set[asyncio.Task[None]] = set()  # touched on the loop only; keeps running calls referenced
        self._waiting: dict[int, tuple[str, str, int, float]] = {}
        """Tool calls of this execution not answered yet, by the identity of their params (a call id comes
        from the script, which may give two calls the same): server, tool, request bytes, start."""

    # ---- executions ---------------------------------------------------------------------------

    @property
    def executing(self) -> bool:
        with self._lock:
            return self._executing

    def begin(self, ends_at: float | None = None) -> None:
        """An execution starts: calls are accepted, into a fresh ledger, until its script is stopped at ``ends_at``
        (`time.monotonic`; None: until `end`). A request read after it was left in the stream by a script that is gone:
        it is refused (``no_execution``), never served (before, a tool its script called just before its timeout ran
        after the script was stopped, its answer read by nobody)."""
        with self._lock:
            self._executing, self._ledger, self._omitted = True, [], 0
            self._ends_at = ends_at
            self._execution += 1

    def waiting(self, at_least: float = 0.0) -> Waiting | None:
        """The running execution's tool calls that wait for their answer, from any thread; None when none does (or no
        execution runs), or when the longest has waited less than ``at_least`` seconds (a script making fast calls one
        after another is not said to wait on each, "for 0 s")."""
        with self._lock:
            calls = list(self._waiting.values()) if self._executing else []
        if not calls:
            return None
        server, tool, _, started = min(calls, key=lambda call: call[3])
        waited = time.monotonic() - started
        return Waiting(len(calls), f"{server}.{tool}", waited) if waited >= at_least else None

    def _waiting_on(self, server: str, timed_out: bool) -> str:
        """What the bridge says of a call of ``server`` still waiting as its execution ended
        (`ToolBridge.waiting_on`)."""
        try:
            return self.bridge.waiting_on(server, timed_out=timed_out)
        except Exception:  # a bridge's hook never keeps the ledger from being made
            return ""

    @property
    def omitted(self) -> int:
        """Calls of the execution (the one running, or the last) past `MAX_LEDGER`: counted, not listed."""
        with self._lock:
            return self._omitted

    def end(self, *, timed_out: bool = False) -> list[ToolCallRecord]:
        """The execution ended: calls are refused from now on, those still waiting for their server are
        cancelled; the ledger of its calls (the first `MAX_LEDGER`, see `omitted`), the cancelled ones last.
        ``timed_out``: its script was stopped by its timeout (not interrupted, cancelled or ended on its own), which
        the bridge's word on a call left waiting may advise on (`ToolBridge.waiting_on`)."""
        now = time.monotonic()
        with self._lock:
            self._executing = False
            waiting, self._waiting = self._waiting, {}
            ledger = list(self._ledger)
        for server, tool, request_bytes, started in waiting.values():
            elapsed = round((now - started) * 1000, 1)
            why = _CANCELLED + self._waiting_on(server, timed_out)
            ledger.append(ToolCallRecord(server, tool, False, request_bytes, 0, elapsed, why))
        if waiting and self._on_loop:
            loop = self.tool_loop or shared_loop()
            with contextlib.suppress(RuntimeError):  # a closed loop runs nothing any more
                loop.call_soon_threadsafe(self._cancel_tasks)
        try:
            self.bridge.end_execution()
        except Exception:  # the bridge is foreign code: its bug must not kill the session
            logger.exception("the bridge failed to end an execution")
        return ledger

    def _cancel_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    def close(self) -> None:
        """Stop serving: queued calls are dropped (the channel is going away)."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    # ---- requests ----------------------------------------------------------------------------

    def on_request(self, channel: Responder, call_id: str, method: str, params: dict[str, Any] | None) -> None:
        """A request from the container (on the channel's reader): refuse it at once, or hand it on."""
        refusal, size, execution = self._admit(method, params)
        if refusal is not None:
            channel.respond(call_id, error={"code": refusal[0], "message": refusal[1]})
            return
        slot = _Slot(channel, functools.partial(self._release, size))
        assert params is not None  # refused above
        if method == "tool_call":
            server, tool = ledger_name(params["server"]), ledger_name(params["tool"])
            with self._lock:
                request_bytes = size.bytes if size is not None else 0  # as they travel: UTF-8 JSON
                self._waiting[id(params)] = (server, tool, request_bytes, time.monotonic())
        on_loop = method == "tool_call" and self._on_loop
        loop = (self.tool_loop or shared_loop()) if on_loop else None
        try:
            if loop is not None:
                loop.call_soon_threadsafe(self._start_call, loop, slot, call_id, params, size)
            else:
                self._executor.submit(self._serve_in_thread, slot, call_id, method, params, execution, size)
        except RuntimeError:  # the loop is closed (its pool has ended), or the thread pool shut down (closing)
            slot.free()
            if loop is not None and loop.is_closed():
                error = {"code": "tools_closed", "message": LOOP_CLOSED}
            else:
                error = {"code": "closed", "message": "the session is closing"}
            self._answer(slot, call_id, params, time.monotonic(), None, error)  # into the ledger, refused

    def _admit(self, method: str, params: dict[str, Any] | None) -> tuple[Refusal | None, CallSize | None, int]:
        """A refusal, or the call counted in flight (with its arguments' size for a tool call); and the
        number of the execution it belongs to."""
        with self._lock:
            execution = self._execution
            if not self._executing:
                return ("no_execution", "no execution is running"), None, execution
            if self._ends_at is not None and time.monotonic() >= self._ends_at:
                return ("no_execution", "the execution's time is up"), None, execution
            if self._in_flight >= MAX_CALLS_IN_FLIGHT:
                return ("too_many_calls", f"more than {MAX_CALLS_IN_FLIGHT} tool calls in flight"), None, execution
            if method not in ("tool_call", "search_tools"):
                return ("unknown_method", "unknown request"), None, execution
            if params is None:  # refused unparsed by the channel: more values than any frame may hold
                if method == "tool_call":
                    unparsed = ("arguments_too_large", too_many_values(self.arguments_in_flight.limits.nodes))
                else:
                    unparsed = ("invalid_arguments", f"the request holds more than {MAX_FRAME_VALUES:,} values")
                return unparsed, None, execution
            self._in_flight += 1
        if method != "tool_call":
            return None, None, execution
        refusal = _malformed(params)
        if refusal is None:
            # Measured here, on the channel's reader, before the call is queued: arguments past the
            # limits are dropped at once, before validation and before anything reaches a server.
            try:
                size = measure(params["arguments"], self.arguments_in_flight.limits)
                self.arguments_in_flight.reserve(size)
                return None, size, execution
            except ArgumentsRefused as e:
                refusal = (e.code, e.message)
        with self._lock:
            self._in_flight -= 1
        self._record_refused(params, refusal)
        return refusal, None, execution

    def _record_refused(self, params: dict[str, Any], refusal: Refusal) -> None:
        """A tool call refused before the bridge, into the ledger and the bridge's record (`ToolBridge.refused`), its
        names cut (`ledger_name`: before, none was made, and a name of a megabyte would have gone in whole)."""
        names = (params.get("server"), params.get("tool"))
        server, tool = (ledger_name(name) if isinstance(name, str) else "" for name in names)
        error = ledger_error(refusal[1])
        with self._lock:
            if not self._executing:
                return
            if len(self._ledger) < MAX_LEDGER:
                self._ledger.append(ToolCallRecord(server, tool, False, 0, 0, 0.0, error))
            else:
                self._omitted += 1
        try:
            self.bridge.refused(server, tool, refusal[0], error)
        except Exception:  # the bridge is foreign code: its bug must not kill the session
            logger.exception("the bridge failed to record a refused call")

    def _release(self, size: CallSize | None) -> None:
        with self._lock:
            self._in_flight -= 1
        if size is not None:
            self.arguments_in_flight.release(size)

    # ---- tool calls on the bridge's event loop ----------------------------------------------------

    def _start_call(
        self,
        loop: asyncio.AbstractEventLoop,
        slot: _Slot,
        call_id: str,
        params: dict[str, Any],
        size: CallSize | None = None,
    ) -> None:
        task = loop.create_task(self._call_on_loop(loop, slot, call_id, params, size))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        # Also when the task is cancelled before its first step (the execution ended just as the call
        # arrived), which runs none of the coroutine: its place in flight was never given back.
        task.add_done_callback(lambda _: slot.free())

    async def _call_on_loop(
        self,
        loop: asyncio.AbstractEventLoop,
        slot: _Slot,
        call_id: str,
        params: dict[str, Any],
        size: CallSize | None = None,
    ) -> None:
        started = time.monotonic()
        ACCOUNT.set(self.account)  # this task's own context, and the worker threads it hands work to
        if size is not None:  # the bridge takes it rather than measure the arguments again
            MEASURED.set(Measured(params["arguments"], size))
        try:
            value: Any = None
            error: dict[str, Any] | None = None
            try:
                called = self.bridge.call_tool(params["server"], params["tool"], params["arguments"])
                value = await called if inspect.isawaitable(called) else called
            except ToolCallRefused as e:
                error = {"code": e.code, "message": e.message}
            except Exception:  # the bridge is foreign code: its bug must not kill the session
                logger.exception("tool call %r.%r failed in the bridge", params["server"], params["tool"])
                error = {"code": "internal", "message": "the tool call failed on the host"}
            answer = functools.partial(self._answer, slot, call_id, params, started, value, error)
            if error is None and not (isinstance(value, dict) and is_small(value)):
                await loop.run_in_executor(self._executor, answer)  # encoding it would hold up the loop
            else:
                answer()
        except RuntimeError:  # the thread pool is shut down: the session is closing, nobody to answer
            pass

    # ---- calls on the thread pool ---------------------------------------------------------------

    def _serve_in_thread(
        self,
        slot: _Slot,
        call_id: str,
        method: str,
        params: dict[str, Any],
        execution: int,
        size: CallSize | None = None,
    ) -> None:
        try:
            if method == "search_tools":
                self._serve_search(slot, call_id, params, execution)
                return
            started = time.monotonic()
            value: Any = None
            error: dict[str, Any] | None = None
            charged = ACCOUNT.set(self.account)
            carried = MEASURED.set(Measured(params["arguments"], size) if size is not None else None)
            try:
                called = self.bridge.call_tool(params["server"], params["tool"], params["arguments"])
                value = resolve(called, self.tool_loop)
            except ToolCallRefused as e:
                error = {"code": e.code, "message": e.message}
            except Exception:  # the bridge is foreign code: its bug must not kill the session
                logger.exception("tool call %r.%r failed in the bridge", params["server"], params["tool"])
                error = {"code": "internal", "message": "the tool call failed on the host"}
            finally:
                MEASURED.reset(carried)
                ACCOUNT.reset(charged)
            self._answer(slot, call_id, params, started, value, error)
        finally:
            slot.free()

    def _serve_search(self, channel: Responder, call_id: str, params: dict[str, Any], execution: int) -> None:
        # Whatever its outcome, a search is charged the CPU this thread spent on it, the search itself
        # included (a synchronous bridge searches on this thread; waiting for a turn costs nothing).
        started = time.thread_time()
        try:
            with on_this_thread():
                self._search_in_turn(channel, call_id, params, execution)
        finally:
            took = time.thread_time() - started
            self.search_budget.charge(took)
            if self.account is not None:
                self.account.charge(took)

    def _search_in_turn(self, channel: Responder, call_id: str, params: dict[str, Any], execution: int) -> None:
        query, limit = params.get("query"), params.get("limit", 5)
        detail, regex = params.get("detail", "summary"), params.get("regex", False)
        problem = _search_arguments_problem(query, detail, limit, regex)
        if problem is not None or not isinstance(query, str):  # (a query not a str has its problem said)
            message = f"{problem}: search_tools(query: str, detail: 'name'|'summary'|'full', limit: int, regex: bool)"
            channel.respond(call_id, error={"code": "invalid_arguments", "message": message})
            return
        # One at a time: the host runs only a few searches at once in all (`tool_tree.search`), and one
        # script's searches must not take every turn. The others of this session wait here.
        with self._searching:
            refusal = self._search_refusal(execution)
            if refusal is not None:
                channel.respond(call_id, error={"code": refusal[0], "message": refusal[1]})
                return
            self._search(channel, call_id, query, detail, limit, regex)

    def _search_refusal(self, execution: int) -> Refusal | None:
        """Why a search whose turn has come is not run: its execution ended, or the search budget is spent."""
        with self._lock:
            if not (self._executing and self._execution == execution):
                return "no_execution", "the execution that asked for this search has ended"
        wait = self.search_budget.charge(0.0)
        if wait > 0:
            budget = self.search_budget
            return "budget_exhausted", (
                f"budget exhausted: tool searches may take {budget.burst:g} s of host CPU at once, then "
                f"{budget.rate:.0%} of a core; retry in {wait:.1f} s"
            )
        if self.account is not None and (wait := self.account.charge(0.0)) > 0:
            budget = self.account
            return "budget_exhausted", (
                f"budget exhausted: the script's requests may cost the host {budget.burst:g} s of CPU at once, then "
                f"{budget.rate:.0%} of a core, tool searches included; retry in {wait:.1f} s"
            )
        return None

    def _search(self, channel: Responder, call_id: str, query: str, detail: str, limit: int, regex: bool) -> None:
        try:
            text = resolve(self.bridge.search_tools(query, detail=detail, limit=limit, regex=regex), self.tool_loop)
        except ToolCallRefused as e:
            channel.respond(call_id, error={"code": e.code, "message": e.message})
            return
        except Exception:  # the bridge is foreign code: its bug must not kill the session
            logger.exception("tool search failed")
            channel.respond(call_id, error={"code": "internal", "message": "tool search failed on the host"})
            return
        text, cap = str(text), _SEARCH_ANSWER_CHARS
        if len(text) > cap:
            text = text[:cap] + f"\n[… cut at {cap} characters]\n"
        channel.respond(call_id, result={"text": text})

    # ---- answers ----------------------------------------------------------------------------------

    def _answer(
        self,
        channel: Responder,
        call_id: str,
        params: dict[str, Any],
        started: float,
        value: Any,
        error: dict[str, Any] | None,
    ) -> None:
        """Check the bridge's result, record the call in the ledger and answer it (any thread)."""
        result: dict[str, Any] | None = None
        response_bytes = 0
        if error is None and isinstance(value, CallFailure):  # a bridge that hands on `ServerPool.call`'s result
            error = {"code": value.code, "message": value.message}  # a timeout, say: not the tool's error
        if error is None:
            error, response_bytes = _check_result(value)
            result = value if error is None else None
            if error is not None:
                response_bytes = 0  # refused here: none of it reached the sandbox (the message says how big)
        elapsed_ms = round((time.monotonic() - started) * 1000, 1)
        ok = error is None and not (result or {}).get("isError")
        message = ledger_error(error["message"]) if error else (None if ok else "the tool reported an error")
        with self._lock:  # server, tool and request bytes as the call arrived: its names already cleaned
            if self._executing and (waiting := self._waiting.pop(id(params), None)) is not None:
                server, tool, sent, _ = waiting
                if len(self._ledger) < MAX_LEDGER:
                    self._ledger.append(ToolCallRecord(server, tool, ok, sent, response_bytes, elapsed_ms, message))
                else:
                    self._omitted += 1
        channel.respond(call_id, result=result, error=error)


_CANCELLED = "cancelled: the execution ended before the server answered"
_UNSENT = "the tool result cannot be sent as UTF-8 JSON (a non-finite number, a lone surrogate or too deep nesting)"


def _search_arguments_problem(query: Any, detail: Any, limit: Any, regex: Any) -> str | None:
    """Which argument of a script's `search_tools` is wrong, and how; None when none is. Before: the signature alone,
    so ``detail="signature"`` read as if the call were right."""
    if not isinstance(query, str):
        return f"query must be a str, got {_shown(query)}"
    if len(query) > 1000:
        return f"query must be at most 1,000 characters, got {len(query):,}"
    if detail not in ("name", "summary", "full"):
        return f"detail must be 'name', 'summary' or 'full', got {_shown(detail)}"
    if not isinstance(limit, int) or isinstance(limit, bool):
        return f"limit must be an int, got {_shown(limit)}"
    if not isinstance(regex, bool):
        return f"regex must be True or False, got {_shown(regex)}"
    return None


def _shown(value: Any) -> str:
    """A value a script sent, for a message back to it: its type, and a short repr."""
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:40] + '…'}"


def _malformed(params: dict[str, Any]) -> Refusal | None:
    server, tool, arguments = params.get("server"), params.get("tool"), params.get("arguments")
    if not (isinstance(server, str) and isinstance(tool, str) and isinstance(arguments, dict)):
        return "invalid_arguments", "malformed tool call"
    if len(server) > NAME_CHARS or len(tool) > NAME_CHARS:
        return "invalid_arguments", "server or tool name too long"
    return None


def too_large(size: int) -> str:
    """What a script is told of a tool result of ``size`` bytes, over `MAX_RESULT_BYTES`. Before, the bare numbers:
    "the result is 9090099 bytes (limit 8388608)", for a server that sends a file's text twice (as text and as
    structured content), with no word of what counts or what to do."""
    return (
        f"the result is {size:,} bytes as JSON, over the {MAX_RESULT_BYTES:,} one tool result may take (its text "
        "and structured content count together); ask the tool for less at a time (a range, a page, a filter)"
    )


def _check_result(value: Any) -> tuple[dict[str, Any] | None, int]:
    """``(error or None, size in bytes as UTF-8 JSON)`` of what the bridge returned."""
    if not isinstance(value, dict):
        logger.error("the bridge returned %s, not a dict", type(value).__name__)
        return {"code": "internal", "message": "the tool call failed on the host"}, 0
    try:
        size = len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    except TypeError as e:  # a value JSON has no form for: the bridge's bug
        logger.error("the bridge returned a result that is not JSON: %s", e)
        return {"code": "internal", "message": "the tool call failed on the host"}, 0
    except (ValueError, RecursionError):  # NaN, a lone surrogate, absurd nesting: from a hostile server
        return {"code": "invalid_result", "message": _UNSENT}, -1
    if size > MAX_RESULT_BYTES:
        return {"code": "result_too_large", "message": too_large(size)}, size
    return None, size
