"""`tooltree agent` on a terminal: while a script runs, what it is doing, on stderr.

Every `NOTE_EVERY` seconds that an ``execute_python`` has been running (the first after that long), a line of the live
view says for how long, the tool calls it waits on and the last line it printed, in the words of `tooltree serve`'s
progress (`agent.toolsets.script_running`): `` execute_python running for 10 s; waiting on crm.search_records for 9 s;
last printed: fetching 500 leads``. Before, nothing showed between a reply's line and the script's end (30 s by default,
up to the sandbox's timeout), as if the run hung. Only where stderr is a terminal and the live view is on (not
``--quiet``): a pipe or a log file gets the live view's lines as before, and each once.

A Ctrl-C while a script runs says at once, wherever stderr goes (not with ``--quiet``), that the script is being
stopped, as `tooltree exec` says it: the sandbox waits up to 10 s for the script to end (`sandbox.Sandbox.execute`), and
before, nothing showed meanwhile, as if the Ctrl-C had not been heard.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, TextIO

from tooltree_cli import agent_view
from tooltree_cli.exec_live import WAIT_NOTE_EVERY
from tooltree_cli.output import terminal_label

if TYPE_CHECKING:
    from agent import Agent

NOTE_EVERY = WAIT_NOTE_EVERY
"""Seconds between two lines of a running script, and the least it has run to get one (as `tooltree exec`'s)."""
POLL = 0.5
"""Seconds between two looks at the running script: its lines come within that of each `NOTE_EVERY` it has run."""
NOTE_CHARS = 400
"""The most characters of such a line after the tool's name (the last line printed alone may have 200)."""
SCRIPT_TOOL = "execute_python"
STOPPING = "tooltree: interrupted: stopping the script (Ctrl-C again quits at once)"
"""Said at the first Ctrl-C while a script runs (the words of `tooltree_cli.exec_stop`)."""


class ScriptNotes:
    """While ``agent`` runs (a ``with`` block), on a thread of its own: what its running script does (`NOTE_EVERY`),
    on ``stream`` when it is a terminal and not ``quiet``; nothing otherwise, nor in a mode that runs no scripts. Not
    ``quiet``, on the main thread, where Ctrl-C has Python's own handler, the first Ctrl-C while a script runs says
    `STOPPING` on ``stream`` before it goes on as the KeyboardInterrupt it was."""

    def __init__(self, agent: Agent, *, quiet: bool = False, stream: TextIO | None = None) -> None:
        self._agent, self._stream = agent, stream if stream is not None else sys.stderr
        self._quiet = quiet
        self._on = not quiet and agent.toolset.needs_sandbox and _is_terminal(self._stream)
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._previous: Any = None
        self._stopping = False
        self._lines = 0
        """Lines said of the script running now."""

    def __enter__(self) -> ScriptNotes:
        main = threading.current_thread() is threading.main_thread()
        ours = signal.getsignal(signal.SIGINT) is signal.default_int_handler
        if main and ours and not self._quiet and self._agent.toolset.needs_sandbox:
            self._previous = signal.signal(signal.SIGINT, self._on_ctrl_c)
        if self._on:
            self._thread = threading.Thread(target=self._run, name="agent-script-notes", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._done.set()
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        if self._thread is not None:
            self._thread.join(NOTE_EVERY)

    def _on_ctrl_c(self, signum: int, frame: FrameType | None) -> None:
        if not self._stopping and self._agent.toolset.script_running() is not None:
            self._stopping = True
            with contextlib.suppress(OSError, ValueError, RuntimeError):  # RuntimeError: a write it cut into
                self._stream.write(f"{STOPPING}\n")
                self._stream.flush()
        signal.default_int_handler(signum, frame)

    def _run(self) -> None:
        while not self._done.wait(POLL):
            self.tick()

    def tick(self) -> None:
        """Say what the running script does when it has run another `NOTE_EVERY` seconds since the last line said it
        (the first at `NOTE_EVERY`): the thread's loop calls it every `POLL` seconds. Before, the thread looked every
        `NOTE_EVERY` seconds from the run's start, so a script's first line came 5 to 10 s into it, and a script of
        6 s could have none. The script is looked at and its line printed under the live view's lock
        (`agent_view.LIVE_LINES`): its call's finished line, printed once the script has ended, comes after."""
        toolset = self._agent.toolset
        if toolset.script_running() is None:
            self._lines = 0  # the next script's first line comes at NOTE_EVERY
            return
        with agent_view.LIVE_LINES:
            said = toolset.script_running(at_least=(self._lines + 1) * NOTE_EVERY)
            if said is None or self._done.is_set():
                return
            self._lines += 1
            with contextlib.suppress(OSError, ValueError):  # a terminal gone: the run goes on (`_live_line`)
                print(f"  {SCRIPT_TOOL} {terminal_label(said, NOTE_CHARS)}", file=self._stream, flush=True)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False
