"""The runtime of one MCP client session (`ClientSession`): its calls, its executions and their cancels, and the
saves of its workspace; `agent.serve.sessions.SessionRegistry` starts and ends the sessions.

A `ClientSession` owns one `Runtime`: the upstream servers (started on their first call), the bridge, and a sandbox
session taken from the warm pool on first use. Its variables persist between ``execute_python`` calls of that client
and of no other. Its workspace is saved after each script that changed it, also after a save that failed
(`ClientSession._save_workspace`), and when the session ends (`ClientSession.save_workspace`, one save at a time).

Runtimes are synchronous (threads); everything here runs them in worker threads so the MCP
event loop never blocks. Each client session has worker threads of its own (`CALL_THREADS` for its
calls, two more for its executions' waits and cancels): a client whose calls block (a slow upstream tool, a flood of
calls) makes only its own later calls wait, never another client's nor the end of a session. A workspace read while
the session's script runs is answered at once (the sandbox reads files only between executions) instead of waiting
for the script.

A cancel that arrives while the sandbox of an execution is still starting is kept: the script is
never handed to the sandbox. A cancelled script that ignores its interrupt has its interpreter restarted, and the
session's next result says so (`CANCEL_RESTARTED`).

(Over 400 lines: a client session's executions, their cancels and its workspace saves share the session's state.)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from agent.serve.content import new_session_hint
from agent.serve.renewal import RENEWING, RENEWING_CHANGED, RENEWING_PASSTHROUGH, RENEWS, restored
from agent.serve.upstream_subscriptions import carry_followed, follows
from agent.toolsets.base import ToolOutcome, error, with_note
from sandbox.calls import WAIT_SAID

if TYPE_CHECKING:
    from agent.toolsets.code import CodeToolset
    from sandbox import Sandbox
    from sandbox.host import Runtime
    from sandbox.mcp_bridge import McpBridge
    from tool_tree.server_asks import Asker

# The sessions' log, as before a client session had a module of its own.
logger = logging.getLogger("agent.serve.sessions")

CANCEL_WAIT = 15.0
"""Seconds a cancelled call waits for its execution to stop (the sandbox's grace is 3 s) before moving on."""
CALL_THREADS = 8
"""Worker threads one client session's tool calls hold at most; its further calls wait for one of them."""
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
NO_ENGINE_RETRIED = "the next execute_python tries the engine again; list_files, read_file and search_tools need none"
"""After the engine's error (how to start it) in the result of an ``execute_python`` that found no engine."""
NO_ENGINE_TREE = "the tree needs none: list_files servers, read_file servers/<server>/<tool>.py and search_tools work"
"""After the engine's error in the result of a read of /workspace that found no engine (list_files' default path: a
model's first call, which said only that the sandbox could not start)."""
HANDOVER_RETRY = 0.05
"""Seconds between tries to stop a script handed to the sandbox that has not begun there yet."""
NOTES_SHOWN = 20
"""Notes of one workspace save a result lists (a count says how many more there were)."""
NOTE_CHARS = 2_000
"""Characters of one such note a result shows (a note names paths the script made, up to 4,096 bytes each)."""
_WORKSPACE_READS = ("list_files", "read_file")

Progress = Callable[[float, str | None, str | None], Awaitable[None]]
"""Called with the seconds a script has been running, the last line it printed (None: none yet) and the tool calls it
waits on (`sandbox.calls.Waiting.said`: ``waiting on crm.search_leads for 12 s``; None: none), every
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
        self._notes_told: tuple[Sandbox, int] | None = None
        """The sandbox whose workspace notes were told, and how many of them (`_save_workspace`)."""
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
        `RENEWING_PASSTHROUGH`; its files kept only in a workspace folder)."""
        self.ended = False
        """It was closed (`close`): its servers have stopped."""
        self.resting: anyio.Event | None = None
        """Set once its idle sandbox is stopped, while that is done (`SessionRegistry.expire_idle`): a call waits."""
        self.kept_since: float | None = None
        """The `last_used` at which stopping its idle sandbox failed (its workspace could not be saved): not tried
        again until it is used."""
        runtime.on_tree_followed = self._tree_followed

    def opened(self) -> Runtime:
        """The runtime, opened (from a worker thread): its server pool runs, servers start on first call."""
        with self._open_lock:
            runtime = self.runtime.open()
            self._bridge = runtime.bridge
            self._bridge.stale.advice = RENEWS  # a call refused as the regeneration's renews the session
            return runtime

    def _tree_followed(self, left: McpBridge, bridge: McpBridge) -> None:
        """Its runtime moved to the regenerated tree as its sandbox started (`sandbox.host.Runtime.on_tree_followed`):
        its pool is the new bridge's at once (before: the stopped one until the next `opened`, so that `follows` asked
        it), and the resources its client followed on the stopped one are followed on the new one
        (`agent.serve.upstream_subscriptions.carry_followed`)."""
        with self._open_lock:
            self._bridge = bridge
            bridge.stale.advice = RENEWS
        carry_followed(left.pool, self)

    def stale_refused(self) -> int:
        """How many calls its bridges refused so far because the tree was regenerated since the session began (0 before
        the runtime opened)."""
        return self._bridge.stale.count if self._bridge is not None else 0

    def renews_after_passthrough(self, refused: int, stub: str) -> str | None:
        """After a passthrough call of the tool whose stub is ``stub`` (``refused``: `stale_refused` before it): the
        words to add to its result when the call was refused as the regeneration's and the next call renews this
        session (`RENEWING_PASSTHROUGH`), else None."""
        if self.stale_refused() == refused:
            return None
        self.renew = True
        return RENEWING_PASSTHROUGH.format(restored=restored(self.runtime.workspace), stub=stub)

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
        from sandbox.errors import EngineUnavailableError, SandboxError
        from tool_tree.pool import PoolError

        if name in _WORKSPACE_READS and self._execution is not None and _reads_workspace(arguments):
            return error(
                f"{name} {arguments.get('path') or '/workspace'}: busy, a script of this session is running "
                "(execute_python) and the workspace can be read when it has ended; servers/ can be read meanwhile"
            )
        try:
            return self._with_note(toolset.call(name, arguments, self.opened()))
        except EngineUnavailableError as e:  # /workspace is read in the sandbox (list_files' default path)
            return error(f"{name} failed: /workspace is in the sandbox, which could not start: {e}; {NO_ENGINE_TREE}")
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
                printed, waiting = self._running_now()
                await progress(time.monotonic() - started, printed, waiting)
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

    def _running_now(self) -> tuple[str | None, str | None]:
        """The last line the running script printed so far (`sandbox.Sandbox.last_printed`) and the tool calls it
        waits on (`sandbox.Sandbox.calls_waiting`; before, a script waiting on a slow server showed the seconds alone,
        or a line printed long before); on the event loop, so it never starts a sandbox (`Runtime.sandbox` would, in
        place of one that ended)."""
        sandbox = self.runtime.running_sandbox
        if sandbox is None:
            return None, None
        waiting = sandbox.calls_waiting(at_least=WAIT_SAID)
        return sandbox.last_printed(), waiting.said() if waiting is not None else None

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
        from sandbox.errors import EngineUnavailableError, SandboxError
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
        except EngineUnavailableError as e:  # Docker started later is found by the next call: serve needs no restart
            return error(f"execute_python failed: the sandbox could not start: {e}; {NO_ENGINE_RETRIED}")
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
        changed = self.stale_refused() != refused  # the bridge's words said so already: serve renews it
        if changed or (self.stale_tree and missed_servers(outcome)):
            self.renew = True  # before: "reconnect the client", which a model cannot do (without a workspace folder)
            said = (RENEWING_CHANGED if changed else RENEWING).format(restored=restored(self.runtime.workspace))
            outcome.content.append({"type": "text", "text": said})
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
        # A note of its start (a `skills` file kept aside) is told with the first script's result. Before: only the
        # notes of this save were, and the model never learnt of the others.
        said = self._notes_told[1] if self._notes_told is not None and self._notes_told[0] is sandbox else 0
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
            self._notes_told = (sandbox, sandbox.workspace_notes_total)
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
