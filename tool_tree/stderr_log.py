"""`StderrLog`: the end of what a stdio server wrote to stderr (and the first lines it wrote to stdout that
were not JSON-RPC), bounded and redacted of the server's secrets, for the error that reports its failure; a call
that times out says how many such lines came while it waited, and the last (`StderrLog.noise_since`), and the last
error the server sent tied to no request (id null) meanwhile (`StderrLog.unaddressed_since`).

A Node or JVM server's stack trace puts its error above its frames (``Error: API_TOKEN is required``, then ten
``    at …`` lines and ``Node.js v22``): its last lines are frames alone, and an error that shows the last 8 of them
(`sandbox.mcp_bridge.with_stderr`) left out the one line that says what to fix. `StderrLog.tail` keeps the first
frame of each such run and counts the rest in one line.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import threading
from typing import TextIO

from mcp_types import ErrorData

from tool_tree.config import ServerConfig
from tool_tree.redact import longest_secret, redact

NOISE_LINES = 3
"""Lines that are not JSON-RPC a stdio server's stdout may leave in its `StderrLog` (the first ones: a banner)."""
NOISE_CHARS = 200
"""Characters kept of each such line."""
FRAME = re.compile(
    r"[ \t]{1,16}at (?:[^()]*\()?[^()]*(?::\d+(?::\d+)?|native|<anonymous>|Native Method|Unknown Source)\)?"
)
"""A frame of a JavaScript or JVM stack trace: ``    at main (/srv/index.js:2:25)``, ``\tat a.B.c(B.java:10)``."""
FRAMES_KEPT = 1
"""Frames `StderrLog.tail` keeps of each run (the first: where the error was thrown)."""
FRAME_CHARS = 1000
"""A longer line is no frame (and is not matched: the server writes what it likes)."""


class StderrLog:
    """The last `KEEP_BYTES` a stdio server wrote to stderr: what is needed to report a failure.

    `connect` feeds it from a pipe (`tool_tree.stdio`; with the SDK's own transport, the pipe behind
    `file`), so a server that writes without end costs the host no disk and at most twice `KEEP_BYTES`
    of memory. Its tail leaves with the secrets of
    ``server``'s configuration redacted (`tool_tree.redact`); `connect` gives a log made without a
    server the one it connects to. Thread-safe: fed on the pool's loop, read from any thread.
    """

    KEEP_BYTES = 64 * 1024

    def __init__(self, server: ServerConfig | None = None) -> None:
        self.server = server
        self._lock = threading.Lock()
        self._kept = bytearray()
        self._cut = False  # the start of what was written is gone
        self._file: TextIO | None = None  # the write end of `_pipe`, for a transport that needs a file
        self._pipe: int | None = None
        self._pipe_lock = threading.Lock()
        self._noise: list[str] = []  # the first stdout lines that were not JSON-RPC
        self._noise_count = 0
        self._last_noise = ""  # the latest of them
        self._unaddressed_count = 0  # errors of id null the server sent
        self._last_unaddressed = ""  # the latest of them, as told
        self.exit_status: int | None = None
        """The server's exit status when it ended on its own (`exited`); None while it runs, or when tooltree ended
        it."""

    def exited(self, status: int) -> None:
        """The server ended on its own with ``status`` (`tool_tree.stdio.stdio_client`'s ``on_exit``)."""
        self.exit_status = status

    def how_exited(self) -> str | None:
        """How the server ended on its own, when known: ``it exited with status 3``, or ``it was killed by signal 9
        (SIGKILL)``; None while it runs, or when tooltree ended it."""
        status = self.exit_status
        if status is None:
            return None
        if status >= 0:
            return f"it exited with status {status}"
        name = _signal_name(-status)
        return f"it was killed by signal {-status}{f' ({name})' if name else ''}"

    def exited_said(self, what: str) -> str:
        """``what`` ("the server exited during start-up"), with how it exited when known: ``, with exit status 3``, or
        ``, killed by SIGKILL``. Before, a server that exited 127 (its command not found by a wrapper) or was killed
        by the kernel's OOM killer said the same as one that exited 1."""
        status = self.exit_status
        if status is None:
            return what
        if status < 0:
            return f"{what}, killed by {_signal_name(-status) or f'signal {-status}'}"
        return f"{what}, with exit status {status}"

    def stdout_noise(self, line: str) -> None:
        """Note a line the server wrote to stdout that is not JSON-RPC; `tail` ends with the first few."""
        with self._lock:
            self._noise_count += 1
            self._last_noise = line if len(line) <= NOISE_CHARS else line[:NOISE_CHARS] + "…"
            if len(self._noise) < NOISE_LINES:
                self._noise.append(self._last_noise)

    @property
    def noise_count(self) -> int:
        """How many lines the server wrote to stdout that are not JSON-RPC (`stdout_noise`)."""
        return self._noise_count

    def noise_since(self, count: int) -> str | None:
        """What a call that timed out is told of the stdout lines that were not JSON-RPC since `noise_count` was
        ``count`` (its answer may be among them, written otherwise than one JSON-RPC message a line), or None for none.

        Before, such lines were kept here alone, shown when a start failed, and a call's timeout said nothing of them.
        """
        with self._lock:
            more, last = self._noise_count - count, self._last_noise
        if more <= 0:
            return None
        if self.server is not None:
            last = redact(last, self.server)
        lines = "a line" if more == 1 else f"{more} lines"
        return (
            f"meanwhile the server wrote {lines} to stdout that {'is' if more == 1 else 'are'} not JSON-RPC, the last "
            f"{last!r}: MCP over stdio carries one JSON-RPC message a line, and logs belong on stderr"
        )

    def noise_said(self) -> str | None:
        """What a start that timed out is told of the lines the server wrote to stdout that are not JSON-RPC (how
        many, and the first: a banner, or a program that is no MCP server), or None for none. Before, its error said
        "timed out" alone, the lines shown below it under the heading of its stderr."""
        with self._lock:
            noise, count = list(self._noise), self._noise_count
        if not noise:
            return None
        first = redact(noise[0], self.server) if self.server is not None else noise[0]
        wrote = "a line that is not JSON-RPC," if count == 1 else f"{count} lines that are not JSON-RPC, the first"
        return (
            f"it wrote to stdout {wrote} {first!r}: an MCP server over stdio writes only JSON-RPC messages there, "
            "one a line (logs belong on stderr); is the command an MCP server?"
        )

    def unaddressed(self, error: ErrorData) -> None:
        """Note an error the server sent with the id null (`tool_tree.stdio.stdio_client`'s ``on_unaddressed``): its
        answer to a message it could not read, which may be a call's request (or a notification, an answer)."""
        message = error.message if len(error.message) <= NOISE_CHARS else error.message[:NOISE_CHARS] + "…"
        with self._lock:
            self._unaddressed_count += 1
            self._last_unaddressed = f"error {error.code}: {message!r}"

    @property
    def unaddressed_count(self) -> int:
        """How many errors tied to no request the server sent (`unaddressed`)."""
        return self._unaddressed_count

    def unaddressed_since(self, count: int) -> str | None:
        """What a call that timed out is told of the errors tied to no request (id null) the server sent since
        `unaddressed_count` was ``count`` (the last one), or None for none. The server sends one when it cannot read a
        message: it may have been the call's request, or a notification or answer tooltree wrote, so no call fails at
        once for it; before, its timeout said nothing of it (only a log line gave its code)."""
        with self._lock:
            more, last = self._unaddressed_count - count, self._last_unaddressed
        if more <= 0:
            return None
        if self.server is not None:
            last = redact(last, self.server)
        times = "" if more == 1 else f" ({more} such errors, the last)"
        return (
            f"meanwhile the server sent an error not tied to a request (id null, its answer to a message it could not "
            f"read){times}: {last}"
        )

    def feed(self, chunk: bytes) -> None:
        with self._lock:
            self._kept += chunk
            if len(self._kept) > 2 * self.KEEP_BYTES:
                del self._kept[: -self.KEEP_BYTES]
                self._cut = True

    @property
    def file(self) -> TextIO:
        """A file for a transport that hands the server its stderr itself (the SDK's, when tooltree's cannot
        be used): the write end of a pipe whose read end a thread feeds into the kept tail, so that stderr
        costs no disk and is bounded as when `connect` reads it."""
        if self._file is None:
            read_fd, write_fd = os.pipe()
            os.set_blocking(read_fd, False)
            self._pipe = read_fd
            threading.Thread(target=self._drain, name="tooltree-stderr", daemon=True).start()
            # Closed by close(); it must outlive this call, so no `with`.
            self._file = open(write_fd, "w", encoding="utf-8", errors="replace")  # noqa: SIM115
        return self._file

    def _drain(self) -> None:
        """Feed the pipe's bytes as they come, until every writer (the server, `close`) has closed it."""
        poll = select.poll()
        with self._pipe_lock:
            if self._pipe is None:
                return
            poll.register(self._pipe, select.POLLIN)
        while self._take():
            poll.poll()

    def _take(self) -> bool:
        """Feed what the pipe holds now; False once it has ended (and is closed)."""
        with self._pipe_lock:
            if self._pipe is None:
                return False
            while True:
                try:
                    chunk = os.read(self._pipe, 64 * 1024)
                except BlockingIOError:
                    return True
                if not chunk:
                    os.close(self._pipe)
                    self._pipe = None
                    return False
                self.feed(chunk)

    def tail(self, lines: int = 20, max_chars: int = 4000) -> str:
        """The last lines the server wrote to stderr, its configured secrets replaced by markers."""
        if self._file is not None:
            with contextlib.suppress(OSError, ValueError):  # closed already
                self._file.flush()  # what was written to `file` in this process, too
        self._take()  # what the server wrote to the pipe before it ended is in the tail
        with self._lock:
            data, cut = bytes(self._kept[-max_chars * 2 :]), self._cut or len(self._kept) > max_chars * 2
        text = data.decode("utf-8", errors="replace")
        if self.server is not None:
            longest = longest_secret(self.server)
            if cut and longest:
                # The text begins inside what was written, maybe inside a secret, whose piece would not be
                # recognised: drop as much as a secret holds, and 3 more for the replacement characters of a
                # cut character.
                text = text[longest + 3 :]
            text = redact(text, self.server)
        tail = "\n".join(folded(text.rstrip("\n").splitlines())[-lines:])[-max_chars:]
        return "\n".join(filter(None, (tail, self._noise_note(), self._unaddressed_note())))

    def _unaddressed_note(self) -> str:
        with self._lock:
            count, last = self._unaddressed_count, self._last_unaddressed
        if not count:
            return ""
        if self.server is not None:
            last = redact(last, self.server)
        times = "" if count == 1 else f" ({count}, the last)"
        return f"[tooltree] the server sent an error not tied to a request (id null){times}: {last}"

    def _noise_note(self) -> str:
        with self._lock:
            noise, count = list(self._noise), self._noise_count
        if not noise:
            return ""
        shown = "\n".join(f"  {line!r}" for line in noise)
        if self.server is not None:
            shown = redact(shown, self.server)
        more = f" (and {count - len(noise)} more)" if count > len(noise) else ""
        return f"[tooltree] the server wrote to stdout what is not JSON-RPC{more} (logs belong on stderr):\n{shown}"

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def folded(lines: list[str]) -> list[str]:
    """``lines`` with each run of stack frames (`FRAME`) cut to its first `FRAMES_KEPT` and a line counting the others,
    so that the error above them stays among the last lines."""
    out: list[str] = []
    run = 0  # frames in the run that ends at out[-1]
    for line in lines:
        if len(line) > FRAME_CHARS or FRAME.fullmatch(line) is None:
            run = 0
            out.append(line)
            continue
        run += 1
        if run <= FRAMES_KEPT:
            out.append(line)
        elif run == FRAMES_KEPT + 1:
            out.append("")  # replaced below, once the run's length is known
        if run > FRAMES_KEPT:
            indent = line[: len(line) - len(line.lstrip())]
            more = run - FRAMES_KEPT
            out[-1] = f"{indent}… {more} more stack frame{'s' if more > 1 else ''} (tooltree left them out)"
    return out


def _signal_name(signum: int) -> str | None:
    """``SIGKILL`` for 9; None for a number no signal has."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return None
