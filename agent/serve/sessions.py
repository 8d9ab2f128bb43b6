"""One sandbox session per MCP client session, and the end of idle ones.

A `ClientSession` owns one `Runtime`: the upstream servers (started on their first call), the bridge, and a sandbox
session taken from the warm pool on first use. Its variables persist between ``execute_python`` calls of that client
and of no other. It ends when the client disconnects (stdio: stdin closes; HTTP: ``DELETE``), when it has been idle
for ``idle_timeout`` seconds (one whose client follows a resource and can be told of it is not idle:
`SessionRegistry`; its sandbox alone is stopped then), when its HTTP client's ``GET`` stream closed and nothing came
from it for ``gone_grace`` seconds (Claude Code exits without a ``DELETE``; its stream's close is the one sign it
left), or when the server stops; ending it stops its container and upstream servers and saves the workspace (one save
at a time, so two sessions of one workspace never write it at once); the workspace is saved after each script that
changed it too, also after a save that failed (`ClientSession._save_workspace`). A client that calls again after its
session ended gets a new one, and its first result says so.

Runtimes are synchronous (threads); everything here runs them in worker threads so the MCP
event loop never blocks. Each client session has worker threads of its own (`CALL_THREADS` for its
calls, two more for its executions' waits and cancels), and ending sessions has its own: a client
whose calls block (a slow upstream tool, a flood of calls) makes only its own later calls wait, never
another client's nor the end of a session. A workspace read while the session's script runs is
answered at once (the sandbox reads files only between executions) instead of waiting for the script.

A cancel that arrives while the sandbox of an execution is still starting is kept: the script is
never handed to the sandbox. A cancelled script that ignores its interrupt has its interpreter restarted, and the
session's next result says so (`CANCEL_RESTARTED`).

(Over 400 lines: a client session's executions, their cancels and workspace saves, and the registry that starts
and ends the sessions, share the sessions' state and the one lock for saves.)
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from agent.serve.content import new_session_hint
from agent.serve.renewal import (
    RENEWED,
    RENEWING,
    RENEWING_CHANGED,
    RENEWING_PASSTHROUGH,
    RENEWS,
    STALE_IMPORT,
    STALE_TREE,
    STALE_TREE_RENEWED,
)
from agent.serve.upstream_subscriptions import carry, follows
from agent.toolsets.base import ToolOutcome, error, with_note

if TYPE_CHECKING:
    from agent.toolsets.code import CodeToolset
    from sandbox import Sandbox
    from sandbox.host import Runtime
    from tool_tree.server_asks import Asker

logger = logging.getLogger(__name__)

STDIO_SESSION = "stdio"
"""The session key over stdio, where the process serves exactly one client."""
CANCEL_WAIT = 15.0
"""Seconds a cancelled call waits for its execution to stop (the sandbox's grace is 3 s) before moving on."""
CLOSE_WAIT = 60.0
"""Seconds the server waits for its sessions to close when it stops."""
CALL_THREADS = 8
"""Worker threads one client session's tool calls hold at most; its further calls wait for one of them."""
CLOSE_THREADS = 4
"""Worker threads that end sessions (disconnects, idle ones, the server stopping)."""
QUEUED_EXECUTIONS = 8
"""``execute_python`` calls of one client session that may wait behind its running one; more are refused at once
(each held its script meanwhile: 150 of 3.9 MB took serve from 83 to 662 MiB)."""
RESTARTED = "the interpreter was restarted: variables and imports are gone; files remain"
"""The words in brackets that end an execution's output when its interpreter was restarted
(`agent.content.execution_blocks`)."""
CANCEL_RESTARTED = f"a cancelled script did not stop when interrupted, so {RESTARTED}"
"""Said once, in front of the session's next result, after a cancelled execution whose interpreter was restarted
(before: its result, which said so, was dropped with the cancel, and the next script found its variables gone
without a word)."""
RESTED = (
    "this session's sandbox was stopped after {idle} s without a call (the session and its servers stayed, for the "
    "resources its client follows): variables and imports are gone, {files}; the next script starts a new sandbox"
)
"""Said once, in front of the next result of a session whose idle sandbox was stopped (`SessionRegistry._rest`)."""
HANDOVER_RETRY = 0.05
"""Seconds between tries to stop a script handed to the sandbox that has not begun there yet."""
GONE_GRACE = 60.0
"""Seconds a client whose ``GET`` stream closed (and that sent nothing since) may take to come back before its
sandbox session ends: a client that lost its connection reopens the stream within seconds."""
NOTES_SHOWN = 20
"""Notes of one workspace save a result lists (a count says how many more there were)."""
NOTE_CHARS = 2_000
"""Characters of one such note a result shows (a note names paths the script made, up to 4,096 bytes each)."""
_EXPIRED_KEPT = 1024
_WORKSPACE_READS = ("list_files", "read_file")

Progress = Callable[[float, str | None], Awaitable[None]]
"""Called with the seconds a script has been running and the last line it printed (None: none yet), every
``progress_interval`` seconds."""
Queued = Callable[[float], Awaitable[None]]
"""Called with the seconds an ``execute_python`` has waited for the session's running one, every
``progress_interval`` seconds while it waits."""


async def heartbeat(interval: float, beat: Callable[[float], Awaitable[None]], what: str) -> None:
    """Call ``beat`` with the seconds since this began, every ``interval`` seconds, until cancelled. A beat that fails
    (its client gone meanwhile) ends the heartbeat, logged at debug: ``what`` it beats for goes on."""
    started = time.monotonic()
    while True:
        await anyio.sleep(interval)
        try:
            await beat(time.monotonic() - started)
        except Exception:
            logger.debug("%s's progress could not be sent", what, exc_info=True)
            return


class SessionLimitError(Exception):
    """``max_sessions`` client sessions are open already."""


@dataclass
class _FailedSave:
    """The last save after a script, when it failed."""

    sandbox: Sandbox
    """Whose save it was (a sandbox that replaced it, after a crash, saves afresh)."""
    reason: str
    retry: bool
    """The folder was left as it was and nothing beside it: the next script tries again. A merge that failed
    midway keeps the rest of its copy beside the folder, and so would each later try: only the session's end
    tries again."""


class _Execution:
    """One ``execute_python`` of a session, from before its sandbox is up until its script has ended."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.cancelled = False
        """A cancel arrived: the script is not handed to the sandbox, or is stopped there."""
        self.handed_over = False
        """The script went to the sandbox: from now on a cancel has to stop it there."""
        self.outcome: ToolOutcome | None = None
        """Its result, once it has ended."""
        self.dropped = False
        """The call was cancelled: its result is never returned, so a restart of the interpreter it reports is told
        at the session's next call instead."""


class ClientSession:
    """The runtime of one MCP client session.

    Args:
        key: what identifies the client session (``"stdio"``, or the ``Mcp-Session-Id``).
        runtime: its runtime, not yet opened.
    """

    def __init__(self, key: str, runtime: Runtime, *, saves: threading.Lock | None = None) -> None:
        self.key = key
        self.runtime = runtime
        self._saves = saves or threading.Lock()  # the registry's: one workspace save at a time
        self._failed_save: _FailedSave | None = None
        self.last_used = time.monotonic()
        self.busy = 0
        self.gone_since: float | None = None
        """When its client's ``GET`` stream closed, if it has not come back since."""
        self.note = ""
        """Said once, in front of the first result (e.g. that an earlier session of this client ended)."""
        self.executions = anyio.Lock()
        self._queued = 0  # execute_python calls waiting for `executions` (touched on the event loop only)
        self.limiter = anyio.CapacityLimiter(CALL_THREADS)
        """The worker threads of this client's tool calls (pass it to ``anyio.to_thread.run_sync``)."""
        self._waits = anyio.CapacityLimiter(2)  # an execution's wait for its script, and its cancel
        self._open_lock = threading.Lock()
        self._bridge: Any = None  # the runtime's bridge once opened, whose pool `follows` asks
        self._state = threading.Lock()
        self._execution: _Execution | None = None
        self._scripts = 0  # scripts handed to the sandbox so far
        self.tree_generation = 0
        """The registry's `SessionRegistry.tree_generation` this session's tree belongs to."""
        self.stale_tree = False
        """Its sandbox mounts a tree that was regenerated since."""
        self.renew = False
        """A script failed to import what the regenerated tree added, or a call was refused as the regeneration changed
        its tool: the next call ends this session for a new one (`RENEWING`, `RENEWING_CHANGED`,
        `RENEWING_PASSTHROUGH`; only with a workspace folder, which keeps the files)."""
        self.ended = False
        """It was closed (`close`): its servers have stopped."""
        self.resting: anyio.Event | None = None
        """Set once its idle sandbox is stopped, while that is done (`SessionRegistry.expire_idle`): a call waits."""
        self.kept_since: float | None = None
        """The `last_used` at which stopping its idle sandbox failed (its workspace could not be saved): not tried
        again until it is used."""

    def opened(self) -> Runtime:
        """The runtime, opened (from a worker thread): its server pool runs, servers start on first call."""
        with self._open_lock:
            runtime = self.runtime.open()
            self._bridge = runtime.bridge
            if runtime.workspace is not None:  # a call refused as the regeneration's renews the session
                self._bridge.stale.advice = RENEWS
            return runtime

    def stale_refused(self) -> int:
        """How many calls its bridges refused so far because the tree was regenerated since the session began (0 before
        the runtime opened)."""
        return self._bridge.stale.count if self._bridge is not None else 0

    def renews_after_passthrough(self, refused: int, stub: str) -> str | None:
        """After a passthrough call of the tool whose stub is ``stub`` (``refused``: `stale_refused` before it): the
        words to add to its result when the call was refused as the regeneration's and the next call renews this
        session (`RENEWING_PASSTHROUGH`; only with a workspace folder), else None."""
        folder = self.runtime.workspace
        if folder is None or self.stale_refused() == refused:
            return None
        self.renew = True
        return RENEWING_PASSTHROUGH.format(folder=folder, stub=stub)

    @property
    def pool(self) -> Any:
        """Its server pool once its runtime was opened (kept after it closed), else None; never opens the runtime."""
        return self._bridge.pool if self._bridge is not None else None

    @property
    def follows(self) -> bool:
        """Whether its client follows a resource of its servers (``resources/subscribe``,
        `agent.serve.upstream_subscriptions`); never opens the runtime."""
        return follows(self.pool)

    def _with_note(self, outcome: ToolOutcome) -> ToolOutcome:
        note, self.note = self.note, ""
        return with_note(outcome, note)

    def call(self, toolset: CodeToolset, name: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        """One of the four tools, from a worker thread; a server or sandbox that cannot start is an error outcome.

        A workspace read while this session's script runs or starts is answered at once: the sandbox
        would serve it only once the script has ended.
        """
        from sandbox.errors import SandboxError
        from tool_tree.pool import PoolError

        if name in _WORKSPACE_READS and self._execution is not None and _reads_workspace(arguments):
            return error(
                f"{name} {arguments.get('path') or '/workspace'}: busy, a script of this session is running "
                "(execute_python) and the workspace can be read when it has ended; servers/ can be read meanwhile"
            )
        try:
            return self._with_note(toolset.call(name, arguments, self.opened()))
        except (SandboxError, PoolError) as e:
            return error(f"{name} failed: the sandbox or the servers could not start: {e}")

    async def execute(
        self,
        toolset: CodeToolset,
        arguments: Mapping[str, Any],
        progress: Progress,
        interval: float,
        queued: Queued | None = None,
        asks: Callable[[str], Asker | None] | None = None,
    ) -> ToolOutcome:
        """``execute_python``: one at a time per session, ``progress`` every ``interval`` s while it runs, and
        ``queued`` every ``interval`` s while it waits for the session's running one. ``asks``: who answers what a
        server asks during the script's calls, by server (`sandbox.mcp_bridge.McpBridge.script_asks`), else refused.

        Before, a call that waited (a client's parallel calls of one turn) sent nothing until its script began: a
        client whose timeout restarts at each progress notification (the TypeScript SDK's ``resetTimeoutOnProgress``,
        on by default in the MCP Inspector, 60 s) gave up on it behind a longer script, although the heartbeat was
        promised.

        Cancelled (the client's ``notifications/cancelled``, or its disconnect), it stops the
        script and waits for it to end, so the next execution of this session never overlaps it;
        cancelled while the sandbox is still starting, the script never runs. A script that ignored the
        interrupt was stopped by restarting the interpreter: the session's next result says so.
        """
        if self._queued >= QUEUED_EXECUTIONS:
            return error(
                f"execute_python: busy, {self._queued} executions of this session are already waiting for the one "
                "running; wait for their results (a session runs one script at a time)"
            )
        self._queued += 1
        try:
            await self._wait_turn(interval, queued)
        finally:
            self._queued -= 1
        try:
            return await self._execute_held(toolset, arguments, progress, interval, asks)
        finally:
            self.executions.release()

    async def _wait_turn(self, interval: float, queued: Queued | None) -> None:
        """Acquire ``executions`` (in the order the calls came), calling ``queued`` every ``interval`` s while another
        execution holds it."""
        try:
            self.executions.acquire_nowait()
            return
        except anyio.WouldBlock:
            pass
        acquired = False
        try:
            async with anyio.create_task_group() as beats:
                if queued is not None:
                    beats.start_soon(heartbeat, interval, queued, "a waiting execution")
                try:
                    await self.executions.acquire()
                    acquired = True
                finally:
                    beats.cancel_scope.cancel()
        except BaseException:
            if acquired:  # cancelled while the beats ended: `execute` would not release it
                self.executions.release()
            raise

    async def _execute_held(
        self,
        toolset: CodeToolset,
        arguments: Mapping[str, Any],
        progress: Progress,
        interval: float,
        asks: Callable[[str], Asker | None] | None = None,
    ) -> ToolOutcome:
        """`execute`, holding ``executions``."""
        run = _Execution()
        with self._state:
            self._execution = run

        def work() -> None:
            outcome = None
            try:
                outcome = self._execute(toolset, arguments, run, asks)
            finally:
                with self._state:
                    if self._execution is run:
                        self._execution = None
                    run.outcome, dropped = outcome, run.dropped
                if dropped:  # it ended after its call was cancelled (the call may no longer wait for it)
                    self._note_restart(outcome)
                run.done.set()

        threading.Thread(target=work, name=f"serve-execute-{self.key[:8]}", daemon=True).start()
        started = time.monotonic()
        try:
            while not await anyio.to_thread.run_sync(
                run.done.wait, interval, abandon_on_cancel=True, limiter=self._waits
            ):
                await progress(time.monotonic() - started, self._last_printed())
        except anyio.get_cancelled_exc_class():
            with self._state:  # at once, before any wait for a thread
                run.cancelled = run.dropped = True
                ended = run.outcome  # else `work` tells of a restart when the script ends
            self._note_restart(ended)
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.cancel, limiter=self._waits)
                stopped = await anyio.to_thread.run_sync(
                    run.done.wait, CANCEL_WAIT, abandon_on_cancel=True, limiter=self._waits
                )
                if not stopped:
                    logger.warning("session %s: a cancelled execution is still running", self.key[:16])
            raise
        return run.outcome if run.outcome is not None else error("the execution ended without a result")

    def _last_printed(self) -> str | None:
        """The last line the running script printed so far (`sandbox.Sandbox.last_printed`); on the event loop, so it
        never starts a sandbox (`Runtime.sandbox` would, in place of one that ended)."""
        sandbox = self.runtime.running_sandbox
        return sandbox.last_printed() if sandbox is not None else None

    def _note_restart(self, dropped: ToolOutcome | None) -> None:
        """Keep `CANCEL_RESTARTED` for the next result when the dropped result of a cancelled execution says its
        interpreter was restarted."""
        if dropped is not None and _restarted(dropped):
            with self._state:
                self.note = "; ".join(filter(None, [self.note, CANCEL_RESTARTED]))

    def _execute(
        self,
        toolset: CodeToolset,
        arguments: Mapping[str, Any],
        run: _Execution,
        asks: Callable[[str], Asker | None] | None = None,
    ) -> ToolOutcome:
        """``execute_python`` in its own thread: the sandbox is started first, so that a cancel that
        arrives while it starts is applied before the script would be handed over."""
        from agent.toolsets.code import unknown_arguments
        from agent.toolsets.tree_changed import missed_servers
        from sandbox.errors import SandboxError
        from tool_tree.pool import PoolError

        code = arguments.get("code")
        if unknown_arguments("execute_python", arguments) is not None or not (isinstance(code, str) and code.strip()):
            # The toolset's refusal, before a sandbox starts or a script is counted (before: an unknown argument
            # beside good code started the sandbox first).
            return self.call(toolset, "execute_python", arguments)
        try:
            runtime = self.opened()
            runtime.sandbox.start()  # a no-op once started
            bridge = runtime.bridge  # one execution at a time: the script's calls are this one's
        except (SandboxError, PoolError) as e:
            return error(f"execute_python failed: the sandbox or the servers could not start: {e}")
        with self._state:
            if run.cancelled:
                return error("execute_python was cancelled before its script started; nothing ran")
            run.handed_over = True
            first = self._scripts == 0 and not self.note  # a note says already that the session is new
            self._scripts += 1
        bridge.script_asks = asks
        refused = self.stale_refused()
        try:
            executed = self.call(toolset, "execute_python", arguments)
        finally:
            if bridge.script_asks is asks:  # not the next execution's, when this one outlived its cancel
                bridge.script_asks = None
        outcome = self._save_workspace(executed)
        changed = self.stale_refused() != refused  # the bridge's words said so already: serve renews it, or reconnect
        if changed or (self.stale_tree and missed_servers(outcome)):
            folder = self.runtime.workspace
            if folder is not None:  # before: "reconnect the client", which a model cannot do
                self.renew = True
                said = (RENEWING_CHANGED if changed else RENEWING).format(folder=folder)
                outcome.content.append({"type": "text", "text": said})
            elif not changed:
                outcome.content.append({"type": "text", "text": STALE_IMPORT})
        return new_session_hint(outcome) if first else outcome

    def _save_workspace(self, outcome: ToolOutcome) -> ToolOutcome:
        """After a script: the workspace saved into its host folder if the script changed it, so that what it wrote
        is there at once (before: only when the session ended, after the client left); what the save had to say
        (a file both sides changed, kept beside; a save that failed; one that works again) follows the output.

        After a failed save each script tries again, and the first that succeeds says so (before: none did, and the
        result promised a save at the session's end, which the client may kill midway: a momentary file over the
        cap lost all the later work, without a word). A failure is told in full when its reason is new, else in a
        line. A merge that failed midway is the exception (`_FailedSave.retry`)."""
        from sandbox.errors import SandboxError

        sandbox = self.runtime.running_sandbox
        if sandbox is None or sandbox.workspace is None:
            return outcome
        failed = self._failed_save if self._failed_save is not None and self._failed_save.sandbox is sandbox else None
        if failed is not None and not failed.retry:
            return outcome
        said = sandbox.workspace_notes_total
        # A script that outlived its session (cancelled, then its client left) leaves the save to the session's end,
        # which stopped it first. Before: its save found the sandbox closed, and serve warned that the save failed
        # and that each later script would try again.
        try:
            with self._saves:
                if self.ended:
                    return outcome
                sandbox.save_workspace_if_changed()
        except SandboxError as e:
            if self.ended:  # closed during this save
                return outcome
            notes, more = [self._save_failed(sandbox, str(e), failed)], 0
        else:
            self._failed_save = None
            given = sandbox.workspace_notes_total - said  # the sandbox keeps the latest `NOTES_KEPT` of them
            notes = sandbox.workspace_notes[-given:] if given else []
            more = given - len(notes)
            if failed is not None:
                logger.warning("session %s: the workspace is saved into %s again", self.key[:16], sandbox.workspace)
                notes[:0] = [f"saved into {sandbox.workspace}: the save works again, the folder holds what the "
                             "scripts wrote"]  # fmt: skip
        if notes:
            outcome.content.append({"type": "text", "text": _notes_text(notes, more)})
        return outcome

    def _save_failed(self, sandbox: Sandbox, reason: str, before: _FailedSave | None) -> str:
        """Keep a failed save after a script (``before``: the one before it, if that failed too); what to tell."""
        # The sandbox's word that the save failed before anything reached the folder (`Sandbox.save_workspace`).
        retry = f"({sandbox.workspace} is left as it was)" in reason
        self._failed_save = _FailedSave(sandbox, reason, retry)
        if before is not None and before.reason == reason:
            return f"still not saved into {sandbox.workspace}, for the reason above; the next script tries again"
        logger.warning("session %s: %s", self.key[:16], reason)
        if retry:
            return f"{reason}; each later script tries again, and says when the save works"
        return (f"{reason}; not tried again after each script (each failed merge keeps one more copy beside the "
                "folder): the session's end tries once more, and until then what later scripts write is only in "
                "the sandbox")  # fmt: skip

    def cancel(self) -> bool:
        """Stop this session's execution (the session stays), from any thread: one whose sandbox is still
        starting never hands its script over; a running script is interrupted. False when there is none.
        """
        with self._state:
            run = self._execution
            handed_over = run is not None and run.handed_over
            if run is not None:
                run.cancelled = True
        if run is None or not handed_over:
            # A script outliving an earlier cancel may still hold the sandbox.
            return self._cancel_in_sandbox() or run is not None
        # Handed over, but perhaps not begun in the sandbox yet (whose cancel then finds nothing to stop).
        deadline = time.monotonic() + CANCEL_WAIT
        while not self._cancel_in_sandbox():
            if run.done.wait(HANDOVER_RETRY) or time.monotonic() > deadline:
                return False
        return True

    def _cancel_in_sandbox(self) -> bool:
        sandbox = self.runtime.running_sandbox  # never one started (or one that ended replaced) only to cancel
        return sandbox is not None and sandbox.cancel()

    def save_workspace(self) -> None:
        """Save the workspace if anything changed since its last save (from a worker thread; hold the save lock).

        Raises:
            SandboxError: the save failed (the registry then ends the sandbox without saving: `drop_sandbox`).
        """
        sandbox = self.runtime.running_sandbox
        if sandbox is None or sandbox.workspace is None:
            return
        failed = self._failed_save is not None and self._failed_save.sandbox is sandbox
        if failed:  # said before the save: a client that kills this process midway leaves this line at least
            logger.warning("session %s: saving the workspace into %s at the session's end, after a save that "
                           "failed", self.key[:16], sandbox.workspace)  # fmt: skip
        sandbox.save_workspace_if_changed()
        if failed:
            logger.warning("session %s: the workspace is saved into %s", self.key[:16], sandbox.workspace)

    def drop_sandbox(self) -> None:
        """Destroy the sandbox without saving its workspace (a save at the end failed: `close` would only try it
        again)."""
        sandbox = self.runtime.running_sandbox
        if sandbox is not None:
            sandbox.kill()

    def close(self) -> None:
        """Stop the sandbox and the upstream servers; save the workspace (from a worker thread)."""
        self.ended = True
        self.runtime.close()


class SessionRegistry:
    """The open client sessions, by key.

    Args:
        make_runtime: a new (unopened) runtime for a client session key.
        idle_timeout: seconds without a call after which a session ends, unless its client follows a resource and
            can be told of it (`_told`).
        max_sessions: the most sessions at once.
        gone_grace: seconds after its client's ``GET`` stream closed (with nothing from it since) that a session
            ends, if sooner than ``idle_timeout``.

    A session whose client follows a resource (``resources/subscribe``) is not idle while the client can be told of a
    change: over stdio while it is connected (until stdin closes), over HTTP while its ``GET`` stream is open, where the
    SDK sends it (an HTTP client without one would be told nothing, and the SDK ends its session after ``idle_timeout``
    all the same). MCP has no notice that a subscription ended: before, such a client was sent no
    ``notifications/resources/updated`` after ``idle_timeout`` without a word. Its sandbox, if one was started, is
    stopped after ``idle_timeout`` seconds without a call, its workspace saved (`_rest`; before, it stayed with the
    session for as long as the client followed), and its next script starts a new one. The bound stays ``max_sessions``
    sessions in all (over stdio, one): over HTTP such a session has no request in flight, so a new client that finds
    every place taken may be given its place (`agent.serve.http_gate.SessionGate` ends the one gone longest without a
    request), and one whose ``GET`` stream closed ends ``gone_grace`` seconds later.
    """

    def __init__(
        self,
        make_runtime: Callable[[str], Runtime],
        *,
        idle_timeout: float,
        max_sessions: int,
        gone_grace: float = GONE_GRACE,
    ) -> None:
        self._make_runtime = make_runtime
        self.idle_timeout = idle_timeout
        self.gone_grace = gone_grace
        self.max_sessions = max_sessions
        self._sessions: dict[str, ClientSession] = {}
        self._expired: OrderedDict[str, str] = OrderedDict()
        self._streams: dict[str, int] = {}
        """The ``GET`` streams of each HTTP client session open now (`stream`), whether it has a session here yet or
        not (a client opens its stream before its first call)."""
        self._close_lock = threading.Lock()
        self.tree_generation = 0
        """How many times the tree was regenerated while serving (`tree_refreshed`)."""
        self._closing = anyio.CapacityLimiter(CLOSE_THREADS)

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, key: str) -> ClientSession | None:
        return self._sessions.get(key)

    @asynccontextmanager
    async def use(self, key: str) -> AsyncIterator[ClientSession]:
        """The session of ``key`` (created on first use), marked busy while in use so it does not expire.

        A session replaced here after the tree was regenerated (renewed, or one without a sandbox yet:
        `_on_refreshed_tree`) hands the resources its client follows to the new one before the call goes on
        (`agent.serve.upstream_subscriptions.carry`): before, they ended with its servers, unsaid.

        Raises:
            SessionLimitError: it would be one session too many.
        """
        session = self._sessions.get(key)
        if session is not None and session.resting is not None:  # its idle sandbox is being stopped: saved first
            await session.resting.wait()
            session = self._sessions.get(key)
        renewed = replaced = None
        if session is not None and session.renew and session.busy == 0:  # for the tools the regenerated tree added
            session.renew = False
            del self._sessions[key]
            await self._close(session)  # its workspace saved, its sandbox and servers ended
            renewed, replaced = session.runtime.workspace, session
            session = self._sessions.get(key)  # another call of this client's may have made the new one meanwhile
        if (
            session is not None
            and session.tree_generation != self.tree_generation
            and session.busy == 0
            and await self._on_refreshed_tree(key, session) is None
        ):
            replaced, session = session, self._sessions.get(key)  # as above: perhaps made meanwhile
        if session is None:
            if len(self._sessions) >= self.max_sessions:
                raise SessionLimitError(f"{self.max_sessions} client sessions are open (serve.max_sessions)")
            session = ClientSession(key, self._make_runtime(key), saves=self._close_lock)
            session.tree_generation = self.tree_generation
            ended = self._expired.pop(key, None)
            if renewed is not None:
                session.note = RENEWED.format(folder=renewed)
            elif ended is not None:
                session.note = (
                    f"a new sandbox session: the previous one ended {ended}; variables and imports are gone, "
                    f"{_files_kept(session.runtime)}"
                )
            self._sessions[key] = session
        session.gone_since = None
        session.busy += 1
        session.last_used = time.monotonic()
        try:
            if replaced is not None:
                await carry(replaced, session)
            yield session
        finally:
            session.busy -= 1
            session.last_used = time.monotonic()

    def tree_refreshed(self) -> None:
        """The tree was regenerated (from any thread): each session learns it at its next call (`use`)."""
        self.tree_generation += 1

    async def _on_refreshed_tree(self, key: str, session: ClientSession) -> ClientSession | None:
        """A session opened before the tree was regenerated, at a call that finds it idle: without a sandbox yet, it
        ends (None), so that a new one takes the regenerated tree (its manifest, its servers, a sandbox that mounts
        it, the resources its client followed: `use`); with one, it goes on with the tree its sandbox mounted and is
        told so once."""
        if not session.runtime.sandbox_started:
            del self._sessions[key]
            await self._close(session)
            return None
        session.tree_generation = self.tree_generation
        session.stale_tree = True
        folder = session.runtime.workspace
        stale = STALE_TREE if folder is None else STALE_TREE_RENEWED.format(folder=folder)
        session.note = "; ".join(filter(None, [session.note, stale]))
        return session

    def stream(self, key: str, *, opened: bool) -> None:
        """The HTTP client of ``key`` opened (it is there) or closed (it may have gone) its ``GET`` stream."""
        if opened:
            self._streams[key] = self._streams.get(key, 0) + 1
        elif (left := self._streams.pop(key, 0) - 1) > 0:
            self._streams[key] = left
        session = self._sessions.get(key)
        if session is not None:
            session.gone_since = None if opened else time.monotonic()

    async def end(self, key: str) -> None:
        """End one session (the client disconnected); nothing when there is none."""
        self._streams.pop(key, None)
        session = self._sessions.pop(key, None)
        if session is not None:
            await self._close(session)

    async def _close(self, session: ClientSession) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._close_one, session, limiter=self._closing)

    def _close_one(self, session: ClientSession) -> None:
        from sandbox.errors import SandboxError

        session.cancel()  # a running script would hold the sandbox until its timeout
        try:
            with self._close_lock:  # one workspace save at a time, only the save: not the container's removal or
                session.save_workspace()  # the servers' stop (before: a slow one held every session's results)
        except (SandboxError, OSError) as e:
            logger.warning("session %s ended without saving its workspace: %s", session.key[:16], e)
            session.drop_sandbox()  # its close would try the same save again, outside the lock of saves
        try:  # also after a failed save (before: skipped, its container and servers stayed until serve stopped)
            session.close()
        except (SandboxError, OSError) as e:
            logger.warning("session %s did not close cleanly: %s", session.key[:16], e)

    async def expire_idle(self) -> None:
        """End sessions idle for ``idle_timeout`` seconds, forever (run it as a task); stop the sandbox of those kept
        because their client follows a resource (`_rest`)."""
        check = max(0.05, min(30.0, self.idle_timeout / 4, self.gone_grace / 4))
        while True:
            await anyio.sleep(check)
            now = time.monotonic()
            ended = [(s, why) for s in list(self._sessions.values()) if (why := self._why_end(s, now)) is not None]
            for session, why in ended:
                if self._sessions.get(session.key) is session:
                    del self._sessions[session.key]
                    self._expired[session.key] = why
                    while len(self._expired) > _EXPIRED_KEPT:
                        self._expired.popitem(last=False)
                    logger.info("session %s ended %s", session.key[:16], why)
                    await self._close(session)
            for session in [s for s in list(self._sessions.values()) if self._rests(s, now)]:
                # Asked again: a call may have come while another session was closed or rested.
                if self._sessions.get(session.key) is session and self._rests(session, time.monotonic()):
                    await self._rest(session)

    def _why_end(self, session: ClientSession, now: float) -> str | None:
        """Why ``session`` ends now (the words the client's next result is told), or None: it stays."""
        if session.busy:
            return None
        if now - session.last_used >= self.idle_timeout and not self._told(session):
            return f"after {self.idle_timeout:g} s without a call"
        gone = session.gone_since
        if gone is not None and now - max(gone, session.last_used) >= self.gone_grace:
            return f"{self.gone_grace:g} s after its client's connection closed"
        return None

    def _rests(self, session: ClientSession, now: float) -> bool:
        """Whether ``session`` is kept though idle for ``idle_timeout`` seconds (its client follows a resource and can
        be told of it: `_told`) with a sandbox running, which is then stopped (`_rest`)."""
        return (
            session.busy == 0
            and session.resting is None
            and now - session.last_used >= self.idle_timeout
            and session.kept_since != session.last_used
            and session.runtime.running_sandbox is not None
            and self._told(session)
        )

    async def _rest(self, session: ClientSession) -> None:
        """Stop the sandbox of ``session``, idle and kept for the resources its client follows, and keep the session
        and its servers (they send what the client follows): its workspace is saved first, and its next result says
        what is gone. A call of its client meanwhile waits for that (`use`).

        Before, such a session held its container (up to its memory limit) for as long as its client followed a
        resource, though an idle session that follows none ends after ``idle_timeout`` seconds."""
        session.resting = rested = anyio.Event()
        try:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._rest_one, session, limiter=self._closing)
        finally:
            session.resting = None
            rested.set()

    def _rest_one(self, session: ClientSession) -> None:
        from sandbox.errors import SandboxError

        try:
            with self._close_lock:  # one workspace save at a time, as a session's end saves
                session.save_workspace()
        except (SandboxError, OSError) as e:  # kept, and not tried again until it is used: its files are not lost
            session.kept_since = session.last_used
            logger.warning("session %s: its idle sandbox is kept: its workspace could not be saved: %s",
                           session.key[:16], e)  # fmt: skip
            return
        try:
            stopped = session.runtime.stop_sandbox()  # saves again only what changed since (nothing ran meanwhile)
        except (SandboxError, OSError) as e:
            stopped = True
            logger.warning("session %s: its idle sandbox was stopped, but not cleanly: %s", session.key[:16], e)
        if not stopped:
            return
        logger.info("session %s: its sandbox was stopped after %g s without a call; the session stays (its client "
                    "follows resources)", session.key[:16], self.idle_timeout)  # fmt: skip
        rested = RESTED.format(idle=f"{self.idle_timeout:g}", files=_files_kept(session.runtime))
        with session._state:
            session.note = "; ".join(filter(None, [session.note, rested]))

    def _told(self, session: ClientSession) -> bool:
        """Whether ``session``'s client follows a resource and can be told of a change: over stdio (it is connected
        while the session lasts), or over HTTP with its ``GET`` stream open, or closed since (one that stays closed
        ends `gone_grace` seconds later: `_why_end`)."""
        reachable = (
            session.key == STDIO_SESSION or bool(self._streams.get(session.key)) or session.gone_since is not None
        )
        return reachable and session.follows

    async def aclose(self) -> None:
        """End every session (the server stops): running scripts are cancelled first."""
        sessions, self._sessions = list(self._sessions.values()), {}
        with anyio.move_on_after(CLOSE_WAIT, shield=True):
            async with anyio.create_task_group() as tg:
                for session in sessions:
                    tg.start_soon(self._close, session)


def _files_kept(runtime: Runtime) -> str:
    """What a new sandbox of ``runtime`` keeps of the old one's files, in the words of a session's note. Without a
    workspace folder nothing of the old sandbox's /workspace is kept (before: "saved workspace files remain",
    whatever the setting)."""
    if runtime.workspace is not None:
        return f"files saved into {runtime.workspace} remain"
    return "so are the files in /workspace (serve runs without --workspace: nothing is saved)"


def _notes_text(notes: list[str], more: int = 0) -> str:
    """A save's notes as the result tells them: the first `NOTES_SHOWN`, each at most `NOTE_CHARS`, and a count of
    the rest (``more``: those the sandbox no longer kept, counted too; serve's log has the first
    `sandbox.session.NOTES_KEPT` of a save).

    Before: every one, whole: a script that deleted a folder of 3,000 read-only files (a ``.git/objects``) put 218 KB
    of notes into the model's context, and one at the entry cap about 2.4 MB (more with long names)."""
    shown = [
        f"[workspace: {note if len(note) <= NOTE_CHARS else note[: NOTE_CHARS - 1] + '…'}]"
        for note in notes[:NOTES_SHOWN]
    ]
    if (rest := len(notes) - len(shown) + more) > 0:
        shown.append(f"[workspace: … and {rest:,} more notes of this save (tooltree serve's log has them)]")
    return "\n".join(shown)


def _reads_workspace(arguments: Mapping[str, Any]) -> bool:
    """Whether a ``list_files`` or ``read_file`` call reads the sandbox's workspace (not the tree on the host)."""
    from agent.files import TREE_DIR, FileAccessError, normalize

    path = arguments.get("path") or ""
    if not isinstance(path, str):
        return False  # the toolset says what is wrong with it
    try:
        parts = normalize(path)
    except FileAccessError:
        return False
    return not parts or parts[0] != TREE_DIR


def _restarted(outcome: ToolOutcome) -> bool:
    """Whether an execution's result says its interpreter was restarted (a paragraph of its own in its text)."""
    marker = f"[{RESTARTED}]"
    return any(marker in b.get("text", "").split("\n\n") for b in outcome.content if b.get("type") == "text")
