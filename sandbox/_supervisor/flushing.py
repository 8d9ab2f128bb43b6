"""The script's stdout and stderr: block-buffered, and flushed before anything could lose or reorder what it printed.

The worker runs with ``-u`` (its children inherit ``PYTHONUNBUFFERED``), and unbuffered each piece a ``print`` writes
was one system call: under gVisor 40–86 µs each, so 300,000 lines took 28 s (0.9 s under runc). Now the worker's own
``sys.stdout`` and ``sys.stderr`` gather what is written (64 KiB) and write it out:

- at once when no line went out at once in the last `INTERVAL` seconds (a lone ``print`` goes out as it is made,
  even before native code that holds the interpreter lock until the timeout), else at most `INTERVAL` seconds later
  (a thread, woken only by a write, flushes both: a script printing in a loop makes a few writes in `INTERVAL`);
- on ``flush()`` (``print(..., flush=True)``, ``input()``, logging), when the buffer fills, and when a cell ends
  (normally, by an uncaught exception or ``sys.exit``: before its result, so a traceback still follows the output);
- before a tool call or search is sent, and before a child process starts, the process forks, execs, exits with
  ``os._exit`` or sends a signal (``os.kill``: to itself, a SIGKILL would lose it), so the order of the output and
  what these do is kept.

What can still be lost, that unbuffered output kept: what the script wrote in its last `INTERVAL` seconds before the
process was ended from outside (the timeout's kill, the kernel's for memory, a crash in native code, ``os.abort``)
and, while native code holds the interpreter lock to the end (a catastrophic regex, one huge integer operation, until
the timeout), what it wrote within `INTERVAL` seconds after an earlier line went out. A script's own signal handler
that prints while the interpreter is inside a write of the same stream gets Python's "reentrant call" RuntimeError.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
import time
from typing import Any

INTERVAL = 0.05
"""Seconds written output waits at most before it goes out."""
BUFFER_BYTES = 1 << 16
LINE_WRITES = 8
"""Writes after one that went out at once that go out at once too until one ends a line (``print(a, b)``: 4)."""

_BEFORE = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.posix_spawn",
        "os.spawn",
        "os.exec",
        "os.fork",
        "os.forkpty",
        "os.kill",
        "os.killpg",
        "signal.pthread_kill",
        "pty.spawn",
    }
)
"""Audit events after which what was written could come out of order, or never (`flush_all` first)."""


class BufferedText(io.TextIOWrapper):
    """A text stream that writes out at once after a quiet `INTERVAL`, otherwise gathers (the ticker flushes it)."""

    _due = 0.0
    """When a write may next go out at once."""
    _more = 0
    """Writes that still go out at once, to end the line one went out on (a print writes its parts, then its end)."""

    def write(self, s: str) -> int:
        with _writing:
            n = _write(self, s)
            if (now := _monotonic()) >= self._due:
                self._due = now + INTERVAL
                self._more = 0 if s.endswith("\n") else LINE_WRITES
                self.flush()
            elif self._more:
                self._more = 0 if s.endswith("\n") else self._more - 1
                self.flush()
        return n


class _Binary(io.BufferedWriter):
    """The binary buffer under a `BufferedText` (also what a script writes to ``sys.stdout.buffer``): wakes the
    ticker when it holds something."""

    def write(self, b: Any) -> int:
        global _dirty
        n = _bwrite(self, b)
        if not _dirty:
            _dirty = True
            _wake.set()
        return n


_write = io.TextIOWrapper.write
_bwrite = io.BufferedWriter.write
_monotonic = time.monotonic


def _buffered(old: Any, fd: int) -> BufferedText:
    raw = io.FileIO(fd, "w", closefd=False)
    stream = BufferedText(
        _Binary(raw, BUFFER_BYTES),
        encoding=getattr(old, "encoding", None) or "utf-8",
        errors=getattr(old, "errors", None) or "strict",
        line_buffering=False,
        write_through=True,  # into the binary buffer at once: in order with what a script writes to ``.buffer``
    )
    return stream


_streams: list[BufferedText] = []
_replaced: list[Any] = []
"""The interpreter's own streams: kept, so that collecting them never closes the descriptors."""
_dirty = False
"""Something was written since the ticker's last flush."""
_wake = threading.Event()
"""Set when ``_dirty`` is: the ticker sleeps until then (a script that prints nothing costs no wake-ups)."""
_writing = threading.RLock()
"""Held while a stream is written to or the ticker flushes, and across a fork: the child never inherits a buffer's
lock held by another thread (its first print would wait for good)."""
real_exit = os._exit


def flush_all() -> None:
    """Write out what the buffered streams hold (never raises: a closed or broken stream has nothing to give)."""
    for stream in _streams:
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            stream.flush()


def _exit(status: int) -> None:
    flush_all()
    real_exit(status)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event in _BEFORE:
        flush_all()


def _tick() -> None:
    global _dirty
    while True:
        _wake.wait()
        time.sleep(INTERVAL)
        _wake.clear()
        _dirty = False  # a write from here on wakes the next round; one before it is in this flush
        with _writing:
            flush_all()


def _before_fork() -> None:
    _writing.acquire()
    flush_all()


def _after_fork() -> None:
    _writing.release()


def install() -> None:
    """Replace ``sys.stdout`` and ``sys.stderr`` (and their ``__stdout__``/``__stderr__``) with buffered ones."""
    _replaced.extend((sys.stdout, sys.stderr))
    out, err = _buffered(sys.stdout, 1), _buffered(sys.stderr, 2)
    _streams.extend((out, err))
    # ``sys.stdout = sys.__stdout__`` (a script restoring it) must give the buffered one: the old one would write
    # ahead of what this one holds.
    sys.stdout, sys.stderr = out, err
    sys.__stdout__, sys.__stderr__ = out, err  # type: ignore[misc]  # final in typeshed, writable in CPython
    os._exit = _exit  # type: ignore[assignment]
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork, after_in_child=_after_fork)
    sys.addaudithook(_audit)
    threading.Thread(target=_tick, name="tooltree-flush", daemon=True).start()


def reinstate() -> None:
    """Before a cell: ``sys.stdout`` or ``sys.stderr`` that a script closed (``sys.stdout.close()``, or left as a file
    a ``with`` closed: ``with open(path, "w") as sys.stdout:``) is the worker's own again, open on the same pipe.
    Before, every later cell of the session raised "ValueError: I/O operation on closed file" at its first ``print``
    (``sys.stdout = sys.__stdout__`` too: the same closed stream) until the interpreter was restarted. A stream the
    script set that is still open is left as it set it, as its other variables are."""
    for i, (name, fd) in enumerate((("stdout", 1), ("stderr", 2))):
        ours = _streams[i]
        if ours.closed:
            with _writing:
                ours = _streams[i] = _buffered(ours, fd)
        for attr in (name, f"__{name}__"):
            current = getattr(sys, attr, None)
            if current is not ours and isinstance(current, io.IOBase) and current.closed:
                setattr(sys, attr, ours)


def end_of_cell() -> None:
    """Write out what a cell wrote, before its result is sent: a traceback still follows its output."""
    flush_all()
    for stream in (sys.stdout, sys.stderr):  # the script's own, if it set others
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
