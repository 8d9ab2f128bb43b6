"""`signals_stop_like_ctrl_c`: SIGTERM, and SIGHUP (the terminal closed), stop a command's run as Ctrl-C does, for
commands that clean up.

``timeout``, ``docker stop`` and a cancelled CI job send SIGTERM, whose default action ends the process at
once: a container whose create request was with the engine is made all the same and left behind, a workspace's
new files are never saved back, a transcript gets no ``run_end``. Closing the terminal sends SIGHUP, whose
default action does the same. Inside `signals_stop_like_ctrl_c` SIGTERM raises `Terminated`, SIGHUP `HungUp` (a
`Terminated`), a `KeyboardInterrupt`, so the cleanup Ctrl-C runs runs; the command then says ``tooltree:
terminated`` (``tooltree: hung up …``) and exits `EXIT_TERMINATED` (`EXIT_HUNG_UP`), as a shell reports a command
ended by the signal.

After a hang-up, what the command prints on its way out goes where it still can (a file or a pipe stdout was
redirected to) and into nothing where it cannot (the closed terminal: EIO; a pipe whose reader left: EPIPE),
never failing the cleanup (`quiet_where_gone`).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TextIO, cast

EXIT_TERMINATED = 128 + signal.SIGTERM
"""The exit code of a command SIGTERM stopped (Ctrl-C: 130)."""
EXIT_HUNG_UP = 128 + signal.SIGHUP
"""The exit code of a command SIGHUP stopped: its terminal closed."""

_SAID = {signal.SIGTERM: "terminated", signal.SIGHUP: "hung up (SIGHUP: its terminal closed)"}
_CAUSE = {signal.SIGTERM: "tooltree was terminated (SIGTERM)", signal.SIGHUP: "tooltree's terminal closed (SIGHUP)"}


def said(signum: int) -> str:
    """A command's last line when ``signum`` (SIGTERM, SIGHUP) stopped it, after ``tooltree: ``."""
    return _SAID[signal.Signals(signum)]


class Terminated(KeyboardInterrupt):
    """SIGTERM (``signum``; SIGHUP for `HungUp`), raised where the run is, so that it stops as Ctrl-C stops it."""

    signum: int = signal.SIGTERM

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, as a shell reports a command the signal ended."""
        return 128 + self.signum

    @property
    def said(self) -> str:
        """The command's last line, after ``tooltree: ``: ``terminated``, ``hung up (SIGHUP: its terminal closed)``."""
        return said(self.signum)

    @property
    def cause(self) -> str:
        """Why the run stopped, as the end of a sentence: ``tooltree was terminated (SIGTERM)``."""
        return _CAUSE[signal.Signals(self.signum)]


class HungUp(Terminated):
    """SIGHUP: tooltree's terminal closed (or a ``kill -HUP``)."""

    signum = signal.SIGHUP


def hangup_ignored() -> bool:
    """SIGHUP was ignored when tooltree started (``nohup``): it stays so, and the command runs on once its terminal
    closes."""
    return signal.getsignal(signal.SIGHUP) is signal.SIG_IGN


@contextlib.contextmanager
def signals_stop_like_ctrl_c() -> Iterator[None]:
    """Within it, SIGTERM raises `Terminated` and the first SIGHUP `HungUp` (unless SIGHUP is ignored: `nohup`);
    the previous handlers are back after it. Only on the main thread (elsewhere, where no handler can be set, it
    does nothing).

    A SIGHUP after the first is ignored, also after it (while the command prints what the run did, and exits): a
    closed terminal may send it twice (the shell signals its jobs, then the kernel the foreground group as the shell
    exits), and a second one would cut the cleanup short as a second Ctrl-C does (the workspace not saved, the
    servers not waited for), or end the command as it prints."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: object) -> None:
        raise Terminated

    hung_up = threading.Event()

    def on_hangup(signum: int, frame: object) -> None:
        if hung_up.is_set():
            return
        hung_up.set()
        quiet_where_gone()
        raise HungUp

    signals: dict[int, Callable[[int, Any], None]] = {signal.SIGTERM: on_term}
    if not hangup_ignored():
        signals[signal.SIGHUP] = on_hangup
    previous = {sig: signal.signal(sig, handler) for sig, handler in signals.items()}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, signal.SIG_IGN if sig == signal.SIGHUP and hung_up.is_set() else old)


def quiet_where_gone() -> None:
    """After a hang-up: stdout and stderr write into nothing where they can no longer be written, now (a terminal that
    closed, a pipe whose reader left) or later (a reader that leaves after the signal); elsewhere (a file, a pipe
    still read) they go on as before. So what a command prints on its way out never fails its cleanup, nor its exit
    (Python's last flush). Before: a write to the closed terminal raised EIO out of the cleanup."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None:
            continue
        with contextlib.suppress(OSError, ValueError, AttributeError):  # no file: a test's capture
            fd = stream.fileno()
            if _gone(fd):
                _into_nothing(fd)
        if not isinstance(stream, _Forgiving):
            setattr(sys, name, cast(TextIO, _Forgiving(stream)))


def _gone(fd: int) -> bool:
    """Whether writing ``fd`` fails: a terminal hung up, a pipe with no reader (poll says POLLERR)."""
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poll.poll(0))


def _into_nothing(fd: int) -> None:
    """Point ``fd`` at /dev/null: what is written to it from now on (and what its stream holds) goes nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


@contextlib.contextmanager
def stderr_forgiving() -> Iterator[None]:
    """Within it, a write to stderr that fails (a pipe whose reader left, a terminal that closed, a full disk) drops
    what it held and all that follows instead of raising (`_Forgiving`): what a command only shows there cannot stop
    its work."""
    stream = sys.stderr
    if stream is None or isinstance(stream, _Forgiving):
        yield
        return
    sys.stderr = cast(TextIO, _Forgiving(stream))
    try:
        yield
    finally:
        sys.stderr = stream


class _Forgiving:
    """``stream``, but a write or flush that fails (EIO, EPIPE) points its file at /dev/null instead of raising:
    what could not be shown is dropped, and so is all that follows."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError:
            self._drop()
            return len(text)

    def writelines(self, lines: Sequence[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError:
            self._drop()

    def _drop(self) -> None:
        with contextlib.suppress(OSError, ValueError, AttributeError):  # no file: a test's capture
            _into_nothing(self._stream.fileno())
        with contextlib.suppress(OSError, ValueError):
            self._stream.flush()  # what it still holds goes into nothing: Python's flush at exit does not fail

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def handling(signals: Sequence[int], handler: Callable[[int, Any], None]) -> Iterator[None]:
    """Within it, ``handler`` handles ``signals``; the previous handlers are back after it. Only on the main thread
    (elsewhere, where no handler can be set, it does nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def held() -> Iterator[list[int]]:
    """Within it, SIGINT, SIGTERM and SIGHUP (each unless ignored: ``nohup``, a shell's background job) are held:
    noted in the list it gives, in the order they came, not acted on; the previous handlers are back after it. For a
    command's start-up (its modules import, its arguments are read), so that a signal then is acted on once the
    command is known (`stop`), as one a moment later is (``exec --json`` still prints its object), not by the default
    action, which ends the process at once with nothing said. Only on the main thread."""
    pending: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield pending
        return
    signals = [s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) if signal.getsignal(s) is not signal.SIG_IGN]
    with handling(signals, lambda signum, frame: pending.append(signum)):
        yield pending


def stop(signum: int) -> KeyboardInterrupt:
    """What a held ``signum`` (`held`) raises once acted on: `KeyboardInterrupt`, `Terminated`, `HungUp`."""
    if signum == signal.SIGHUP:
        quiet_where_gone()
        return HungUp()
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()
