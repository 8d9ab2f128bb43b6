"""Around one `tooltree exec` execution: the first Ctrl-C stops the script, not the command (`CtrlCStopsTheScript`),
the first Ctrl-C, SIGTERM or SIGHUP during the workspace's save lets it finish (`FinishTheSave`), and the sandbox's
workspace notes are not logged, since `exec` prints them itself (`notes_not_logged`)."""

from __future__ import annotations

import _thread
import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

from sandbox.errors import QuitNow

if TYPE_CHECKING:
    from sandbox.session import Sandbox

CANCEL_WAIT = 15.0
"""Seconds the first Ctrl-C waits for the result of the script it stops (the sandbox gives a script 3 s to end after
its KeyboardInterrupt, then restarts its interpreter) before it gives up, as a second Ctrl-C does."""


class CtrlCStopsTheScript:
    """Within it, the first Ctrl-C stops the script ``session`` runs (`Sandbox.cancel`), not the command: the
    session's ``execute`` returns what the script did until then (``cancelled``), to be printed as usual.

    A second Ctrl-C, or no result within ``wait`` seconds, raises `sandbox.errors.QuitNow` (a KeyboardInterrupt
    that ``execute`` does not wait out) where the main thread is: the runtime then closes; what the script did goes
    with it as far as the host knows (`sandbox.errors.interrupted_unreported`). The handler
    only sets an event (the main thread is the one waiting in ``execute``); a thread of its own stops the script.
    Only on the main thread, and only while Ctrl-C has Python's own handler (not ignored, as a shell does for
    a background job); else it does nothing.
    """

    def __init__(self, session: Sandbox, wait: float, before_saying: Callable[[], object] | None = None) -> None:
        self._session = session
        self._wait = wait
        self._before_saying = before_saying
        """Called before it says it stops the script (the live output's `break_line`)."""
        self._pressed = threading.Event()
        self._over = threading.Event()
        self._lock = threading.Lock()  # `_over` is set, or a Ctrl-C raised for a script that did not stop: not both
        self._previous: Any = None

    def __enter__(self) -> None:
        main = threading.current_thread() is threading.main_thread()
        if not main or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return
        threading.Thread(target=self._stop_script, name="tooltree-exec-ctrl-c", daemon=True).start()
        self._previous = signal.signal(signal.SIGINT, self._on_ctrl_c)

    def __exit__(self, *exc_info: object) -> None:
        if self._previous is None:
            return
        with self._lock:
            self._over.set()
        self._pressed.set()  # ends `_stop_script` if it still waits
        # A Ctrl-C `_give_up` raised just before may still reach the handler: ignored now that `_over` is set.
        signal.signal(signal.SIGINT, self._previous)

    def _on_ctrl_c(self, signum: int, frame: FrameType | None) -> None:
        if self._over.is_set():
            return
        if self._pressed.is_set():  # the script was stopped, and waited for, already: `execute` waits no more
            raise QuitNow
        self._pressed.set()

    def _stop_script(self) -> None:
        self._pressed.wait()
        if self._over.is_set():
            return
        give_up = threading.Timer(self._wait, self._give_up)
        give_up.daemon = True
        give_up.start()
        if self._before_saying is not None:
            self._before_saying()
        with contextlib.suppress(OSError, ValueError):
            print("tooltree: interrupted: stopping the script (Ctrl-C again quits at once)", file=sys.stderr,
                  flush=True)  # fmt: skip
        if not self._session.cancel():  # no script was running: not sent yet, or just ended
            self._give_up()
        if self._over.is_set():
            give_up.cancel()

    def _give_up(self) -> None:
        """A Ctrl-C again (unless the result came): ``execute`` raises KeyboardInterrupt."""
        with self._lock:
            if not self._over.is_set():
                _thread.interrupt_main(signal.SIGINT)


_NOTE_LOG = "workspace %s: %s"
"""How `Sandbox.save_workspace` logs each note it also keeps in ``workspace_notes``."""


class _NoteRecords(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        from sandbox.session import UNSAVED_LOG

        return record.msg not in (_NOTE_LOG, UNSAVED_LOG)


@contextlib.contextmanager
def notes_not_logged() -> Iterator[None]:
    """Within it the sandbox does not log the workspace's notes, nor that its workspace was not saved: `exec` prints
    them itself, once and cleaned.

    Before, each came out twice on stderr: from Python's last-resort log handler, then as ``tooltree: workspace:``.
    """
    logger, records = logging.getLogger("sandbox.session"), _NoteRecords()
    logger.addFilter(records)
    try:
        yield
    finally:
        logger.removeFilter(records)


_STOP_WORDS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}


class FinishTheSave:
    """Within it (`exec`'s save of the workspace, once the script has ended), the first Ctrl-C, SIGTERM or SIGHUP lets
    the save finish, saying so on stderr, and is kept in ``signum`` for the command to end by after it; a Ctrl-C or
    SIGTERM after it quits the save at once (a KeyboardInterrupt; a second SIGHUP is ignored). A signal ignored when
    it begins (a background job's Ctrl-C, ``nohup``'s SIGHUP) stays ignored. Only on the main thread.

    Before, the first one quit the save midway: the script's output, tool calls and the reason were never printed,
    only ``tooltree: interrupted``, and nothing said that what the script wrote in /workspace was not saved."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> FinishTheSave:
        if threading.current_thread() is threading.main_thread():
            for sig in _STOP_WORDS:
                if signal.getsignal(sig) is not signal.SIG_IGN:
                    self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for sig, old in self._previous.items():
            signal.signal(sig, signal.SIG_IGN if sig == signal.SIGHUP == self.signum else old)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
            if signum == signal.SIGHUP:
                from tooltree_cli.signals import quiet_where_gone

                quiet_where_gone()
            with contextlib.suppress(OSError, ValueError):
                print(f"tooltree: {_STOP_WORDS[signal.Signals(signum)]}: finishing the workspace's save first "
                      "(Ctrl-C again quits at once, leaving it unsaved)", file=sys.stderr, flush=True)  # fmt: skip
            return
        if signum != signal.SIGHUP:
            raise KeyboardInterrupt
