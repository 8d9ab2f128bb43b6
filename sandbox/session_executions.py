"""A `sandbox.session.Sandbox`'s executions: `Sandbox.execute` and `Sandbox.aexecute` run a script in the session,
`Sandbox.cancel` stops the one running, `Sandbox.reset` starts a fresh interpreter (`_Executions`, which `Sandbox`
takes them from), with the seconds the session waits for the sandbox's answers.

State between executions: workspace files always; interpreter state (variables, imports)
too, because one long-lived worker process runs every execution of the session in the same
namespace. `reset` starts a fresh worker (``reset(workspace=True)`` also empties the
workspace). A timeout or crash restarts the worker as well; the result says
``state_reset=True``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sandbox.bridge import ToolBridge
from sandbox.calls import CallServer, Waiting
from sandbox.channel import INTERRUPTED_ANSWER, SessionTimeoutError, SupervisorChannel
from sandbox.config import SandboxConfig
from sandbox.errors import INTERRUPTED_EXECUTION, INTERRUPTED_UNREPORTED, ProtocolError, SessionError, Unreported
from sandbox.results import ExecutionResult, ToolCallRecord, parse_execution
from sandbox.session_args import check_code, refuse_on_loop, timeout_seconds
from sandbox.streamed import OutputListener, StreamedOutput
from tool_tree.listeners import refuse_async
from tool_tree.text import shown

_GRACE_SECONDS = 15.0
_SCRIPT_END_SLACK = 5.0
"""Seconds after its timeout from which a script's requests are taken for ones it left behind (`CallServer.begin`).
The supervisor starts a script's clock once its interpreter is ready: after a timeout or a reset it first waits for
the new one, so a slack of 1 s could refuse an honest script's last calls as "the execution's time is up" on a
loaded machine. Within the host's deadline (timeout + 15 s), 10 s are left for reading on."""
_OP_TIMEOUT = 120.0
_INTERRUPT_WAIT = 10.0
"""Seconds a Ctrl-C in `Sandbox.execute` waits for the script it stops (the sandbox gives it 3 s, then restarts the
interpreter) before the KeyboardInterrupt goes on; a second Ctrl-C goes on at once."""


class _Turn:
    """One `aexecute`'s script: sent to the sandbox, or abandoned before it was (its task cancelled)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sent = self._abandoned = self._ended = False

    def start(self) -> bool:
        """Just before the script is sent: whether it still may be."""
        with self._lock:
            self._sent = not self._abandoned
            return self._sent

    def abandon(self) -> bool:
        """The task was cancelled: no script is sent from now on; whether one was (and is to be cancelled)."""
        with self._lock:
            self._abandoned = True
            return self._sent

    def end(self) -> None:
        """Its script's answer came (or none will): the session's next script may be sent once this returns."""
        with self._lock:
            self._ended = True

    def cancel(self, stop: Callable[[], object]) -> None:
        """``stop()`` its script if it has not ended; `end` waits meanwhile, so the stop cannot reach the next one.

        Before: a task cancelled as its script ended stopped the session's next script, another caller's.
        """
        with self._lock:
            if self._sent and not self._ended:
                stop()


class _Executions:
    """`Sandbox`'s executions; the session's state they use is `Sandbox`'s (set in its ``__init__``)."""

    bridge: ToolBridge
    config: SandboxConfig
    tool_loop: asyncio.AbstractEventLoop | None
    _channel: SupervisorChannel | None
    _lock: threading.Lock
    _calls: CallServer
    _closed: bool
    _ended: str | None
    _stopped_by_close: bool
    _printing: StreamedOutput | None
    _reset_unsaid: bool

    if TYPE_CHECKING:  # `Sandbox`'s

        def _require_channel(self) -> SupervisorChannel: ...
        def _refuse_in_fork(self) -> None: ...
        def _forked(self) -> bool: ...
        def kill(self) -> None: ...

    def execute(
        self,
        code: str,
        *,
        timeout: float | None = None,
        filename: str | None = None,
        on_output: OutputListener | None = None,
    ) -> ExecutionResult:
        """Run ``code`` in the session and return what happened.

        ``filename`` names the code in its traceback (a script's path as the user gave it); the
        sandbox uses ``<cell-N>`` when it is None or not one line of plain text. ``on_output`` is called with
        ``("stdout" | "stderr", bytes, skipped)`` as the script's output arrives while it runs (``skipped``: how many
        bytes of the stream came between the last bytes it was given and these, 0 within the first 4 ×
        ``output_chars``: `sandbox.streamed.OutputListener`), on the channel's thread: keep it short; e.g. to show it
        live, or `cancel` the script on a line it printed.

        A script that raises, exits non-zero or times out gives a result with ``error`` set, not
        an exception; after a timeout the session stays usable (with fresh interpreter state). One that `close`
        stopped (from another thread, with a workspace) gives a result with ``cancelled=True``.

        ``timeout`` is in seconds, more than 0 and at most a week (`sandbox.config.MAX_TIMEOUT`); None: the config's.

        Raises:
            TypeError: ``code`` is not a str, ``timeout`` not a number, ``filename`` not a str, or ``on_output`` not
                callable or an ``async def`` function (checked before anything runs or changes).
            ValueError: ``timeout`` is not more than 0 and at most a week (NaN and infinity included), or ``code``
                or ``filename`` has a character UTF-8 cannot encode (a lone surrogate).
            KeyboardInterrupt: Ctrl-C during the wait; the script is stopped as by `cancel` (waited for up to 10 s)
                and the session stays usable, its variables kept; the stopped script's result (``cancelled``) goes
                on with the interrupt when it came within that wait (`sandbox.errors.interrupted_execution`); else
                what it printed and the tool calls it made, as far as the host knows (`interrupted_unreported`).
            SessionError: the session is closed or broken, the sandbox stopped answering (it is then
                destroyed), or this is the thread that runs ``tool_loop`` (use `aexecute` there). One that ended
                the script carries the tool calls it had made (``tool_calls``, ``tool_calls_omitted``).
        """
        if on_output is not None and not callable(on_output):  # before: taken, then failed on each output, logged
            raise TypeError(
                f"on_output must be a function (stream, data, skipped) or None, got {type(on_output).__name__}"
            )
        refuse_async(on_output, "on_output")
        return self._execute(code, timeout, filename, None, on_output)

    def _execute(
        self,
        code: str,
        timeout: float | None,
        filename: str | None,
        turn: _Turn | None,
        on_output: OutputListener | None = None,
    ) -> ExecutionResult:
        """`execute`; ``turn``: an `aexecute`'s, which its cancelling may abandon before the script is sent."""
        check_code(code, filename)
        limit = self.config.timeout if timeout is None else timeout_seconds(timeout)
        refuse_on_loop(self.tool_loop)
        self._refuse_in_fork()
        with self._lock:
            channel = self._require_channel()
            if self._closed:  # a close under way, which stops the running script and saves: none starts meanwhile
                raise SessionError("the sandbox session is closed")
            # One a Ctrl-C left before its result may still run: it ends within seconds (before: "an execution is
            # already running").
            channel.wait_left("execute", _INTERRUPT_WAIT)
            self.bridge.begin_execution()
            # The supervisor stops the script `limit` seconds after it gets it; the slack covers the way there.
            ends_at = time.monotonic() + limit + _SCRIPT_END_SLACK
            self._calls.begin(ends_at)
            channel.expect_script_end(ends_at)
            if turn is not None and not turn.start():
                self._calls.end()
                channel.expect_script_end(None)
                raise SessionError("the execution was cancelled before its script was sent; nothing ran")
            started = time.monotonic()
            interrupted: KeyboardInterrupt | None = None
            answer: object = None
            raw: dict[str, Any] = {}
            ledger: list[ToolCallRecord] = []
            printed = self._printing = StreamedOutput(self.config.output_chars, on_output)
            try:
                try:
                    params: dict[str, Any] = {"code": code, "timeout": limit, "max_chars": self.config.output_chars}
                    if filename is not None:
                        params["filename"] = filename
                    raw = channel.request(
                        "execute",
                        params,
                        timeout=limit + _GRACE_SECONDS,
                        sink=printed.receive,
                        # Ctrl-C stops the script too, and returns once it has ended (before: it ran on to its
                        # timeout, and every execute of the session meanwhile failed, "an execution is already
                        # running").
                        on_interrupt=functools.partial(self._interrupted, channel),
                        interrupt_wait=_INTERRUPT_WAIT,
                    )
                except SessionTimeoutError:
                    self._ended = (
                        f"the sandbox did not report back within {limit + _GRACE_SECONDS:g} s and was destroyed"
                    )
                    self.kill()
                    raise SessionError(self._ended) from None
                except KeyboardInterrupt as e:  # the stopped script's result goes on with it, when it came in time
                    interrupted, answer = e, getattr(e, INTERRUPTED_ANSWER, None)
                finally:
                    if turn is not None:
                        turn.end()  # first: a cancel of this turn under way is sent while this script still runs
                    # The advice on a call left waiting is for a script its timeout stopped alone (before: also
                    # after a Ctrl-C, a cancel or a script that ended on its own).
                    timed_out = interrupted is None and raw.get("timed_out") is True
                    ledger = self._calls.end(timed_out=timed_out)
                    channel.expect_script_end(None)
                    self._printing = None
            except SessionError as e:
                # The sandbox ended (or was destroyed) under the script: the calls the bridge handled for it happened
                # all the same. Before: only the error's text, and a caller made them again.
                e.tool_calls, e.tool_calls_omitted = tuple(ledger), self._calls.omitted
                e.stdout, e.stderr = printed.text("stdout"), printed.text("stderr")  # before: lost with the sandbox
                raise
            if interrupted is None:
                result = parse_execution(
                    raw,
                    max_chars=self.config.output_chars,
                    duration=time.monotonic() - started,
                    tool_calls=ledger,
                    tool_calls_omitted=self._calls.omitted,
                )
                if result.cancelled and self._stopped_by_close:
                    result = dataclasses.replace(
                        result, error=f"{result.error}: the sandbox session was closed, which stopped the script"
                    )
                if self._reset_unsaid:  # before: a NameError for a variable the caller had set, and no word why
                    self._reset_unsaid = False
                    result = dataclasses.replace(result, state_reset=True)
                return result
            # What it did as far as the host knows, for when its result did not come (second Ctrl-C, none in time).
            unreported = Unreported(printed.text("stdout"), printed.text("stderr"), tuple(ledger), self._calls.omitted)
            setattr(interrupted, INTERRUPTED_UNREPORTED, unreported)  # `sandbox.errors.interrupted_unreported`
            if isinstance(answer, dict):
                with contextlib.suppress(ProtocolError):  # a malformed answer: the interrupt goes on without it
                    stopped = parse_execution(
                        answer,
                        max_chars=self.config.output_chars,
                        duration=time.monotonic() - started,
                        tool_calls=ledger,
                        tool_calls_omitted=self._calls.omitted,
                    )
                    setattr(interrupted, INTERRUPTED_EXECUTION, stopped)  # `sandbox.errors.interrupted_execution`
            raise interrupted

    def _late_reply(self, method: str, message: dict[str, Any]) -> None:
        """The reply to a request a Ctrl-C left before it came (`SupervisorChannel.on_late_reply`): an execution's
        that restarted its interpreter (a script that did not stop) makes the next result say so."""
        result = message.get("result")
        if method == "execute" and isinstance(result, dict) and result.get("state_reset") is True:
            self._reset_unsaid = True

    def last_printed(self) -> str | None:
        """The last line the running execution has printed so far, as far as the sandbox sent it (cleaned, on one
        line, at most 200 characters), from any thread; None when none runs or it printed no line yet."""
        printing = self._printing
        return None if printing is None else printing.last_line()

    def calls_waiting(self, at_least: float = 0.0) -> Waiting | None:
        """The running execution's tool calls that wait for their server's answer (how many, the one that has waited
        longest and for how long: `Waiting.said` says it), from any thread; None when none does or none runs, or the
        longest has waited less than ``at_least`` seconds."""
        return self._calls.waiting(at_least)

    @staticmethod
    def _interrupted(channel: SupervisorChannel) -> None:
        """Ctrl-C in `execute`: stop its script (the sandbox's answer to the cancel comes at once)."""
        channel.script_stopped()
        with contextlib.suppress(SessionError):
            channel.request("cancel", {}, timeout=_INTERRUPT_WAIT)

    def cancel(self) -> bool:
        """Stop the execution running now, from any thread; the session stays usable. From `execute`'s ``on_output``
        listener (on the thread that reads the sandbox's answers) it returns True at once, the cancel sent from a
        thread of its own.

        The script gets one KeyboardInterrupt (its ``except``/``finally`` clean-up is not interrupted again), so
        variables and imports survive; one that does not stop within a few seconds has its interpreter restarted
        (the result says ``state_reset``).
        The running `execute` returns a result with ``cancelled=True``. Returns False when no
        execution was running (or the session is closed or broken).
        """
        channel = self._channel if self._calls.executing and not self._forked() else None
        if channel is None:
            return False
        if channel.reads_here():
            # An `execute`'s on_output listener: its thread reads the sandbox's answers, this one's too. Before: it
            # waited for it, and the script's output with it, until the sandbox was destroyed as not answering.
            threading.Thread(target=self._cancel_on, args=(channel,), name="sandbox-cancel", daemon=True).start()
            return True
        return self._cancel_on(channel)

    @staticmethod
    def _cancel_on(channel: SupervisorChannel) -> bool:
        """`cancel`'s request: whether the sandbox stopped a script."""
        channel.script_stopped()
        try:
            # Frames go out in order: this cancel reaches the supervisor before any later execute.
            return channel.request("cancel", {}, timeout=_OP_TIMEOUT).get("cancelled") is True
        except SessionError:
            return False

    async def aexecute(
        self, code: str, *, timeout: float | None = None, filename: str | None = None
    ) -> ExecutionResult:
        """`execute` for async callers (runs in a worker thread).

        Cancelling the awaiting task (``asyncio.wait_for``, a task group) cancels the execution in the sandbox
        too, as `cancel` does, so the session's next execution does not wait for it; one still waiting for
        its turn (another execution runs) is never sent, and the running one goes on.

        Raises:
            TypeError, ValueError, SessionError: as `execute`.
        """
        turn = _Turn()
        try:
            return await asyncio.to_thread(self._execute, code, timeout, filename, turn)
        except asyncio.CancelledError:
            # The worker thread runs on. Its script, if sent, is stopped (before, it ran to its timeout, holding the
            # session); if not sent yet (waiting for another execution to end), it never is: cancelling the running
            # one would stop another caller's script. Not awaited: the task is being cancelled.
            if turn.abandon():
                asyncio.get_running_loop().run_in_executor(None, turn.cancel, self.cancel)
            raise

    def reset(self, *, workspace: bool = False) -> None:
        """Start clean: a fresh interpreter; with ``workspace=True`` also an empty workspace.

        Raises:
            TypeError: ``workspace`` is not a bool.
            SessionError: the session is closed or broken.
        """
        if not isinstance(workspace, bool):  # "no" was true: the workspace was emptied
            raise TypeError(f"workspace must be True or False, got {type(workspace).__name__} {shown(workspace)}")
        self._refuse_in_fork()
        with self._lock:
            channel = self._require_channel()
            if self._closed:  # a close under way saves the workspace next: never emptied before it
                raise SessionError("the sandbox session is closed")
            channel.request("reset", {"workspace": workspace}, timeout=_OP_TIMEOUT)
