"""`StderrLog`: the end of what a stdio server wrote to stderr (and the first lines it wrote to stdout that
were not JSON-RPC), bounded and redacted of the server's secrets, for the error that reports its failure."""

from __future__ import annotations

import contextlib
import os
import select
import threading
from typing import TextIO

from tool_tree.config import ServerConfig
from tool_tree.redact import longest_secret, redact

NOISE_LINES = 3
"""Lines that are not JSON-RPC a stdio server's stdout may leave in its `StderrLog` (the first ones: a banner)."""
NOISE_CHARS = 200
"""Characters kept of each such line."""


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

    def stdout_noise(self, line: str) -> None:
        """Note a line the server wrote to stdout that is not JSON-RPC; `tail` ends with the first few."""
        with self._lock:
            self._noise_count += 1
            if len(self._noise) < NOISE_LINES:
                self._noise.append(line if len(line) <= NOISE_CHARS else line[:NOISE_CHARS] + "…")

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
        tail = "\n".join(text.rstrip("\n").splitlines()[-lines:])[-max_chars:]
        return "\n".join(filter(None, (tail, self._noise_note())))

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
