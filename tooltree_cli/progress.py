"""Progress of long work on stderr: one live line on a terminal, plain lines otherwise.

`embedding_progress` follows the first embedding of a large catalog for hybrid search: on a
terminal one line counts the tools up in place, elsewhere a plain line at each quarter.

`ServerProgress` follows ``generate-tree`` listing many servers: on a terminal one line is
redrawn in place five times a second (``listing tools: 37 listed, 1 failed, 2 starting, 80 queued of 120 (12.3 s)``),
with each failure printed above it as it happens; elsewhere (a pipe, a CI log) one plain line per
server that finished, numbered. Nothing is printed under ``--json`` (the caller does not make one).
A failed server's error is shown by `shown_error`: on one line, cleaned of escape sequences, cut.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from tooltree_cli.output import terminal_label, terminal_name

if TYPE_CHECKING:
    from generator.generate import ServerOutcome

_CLEAR = "\r\x1b[K"
REDRAW_EVERY = 0.2
"""Seconds between redraws of the live line (a thread redraws it, so the clock moves while servers start)."""
ERROR_CHARS = 500
"""The most characters of a server's error a progress line or the summary table shows (``--json`` holds more)."""


def shown_error(error: str | None) -> str:
    """A failed server's error as the terminal shows it: the server wrote it, so it is cleaned of escape sequences
    and control characters and kept on one line (no line it holds passes for one of ours), at most `ERROR_CHARS`
    characters (an error quoting a 15 MB cursor was printed whole, and sized the table's rule)."""
    return terminal_label(error or "", ERROR_CHARS)


class ServerProgress:
    """Counts servers through queued → starting → listed or failed, and shows the counts.

    Use as ``with ServerProgress(n) as progress:``, passing `server_started` and `server_done`
    as the callbacks of the work; leaving the block takes the live line off the screen.
    """

    def __init__(self, total: int, *, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.total = total
        self.started = 0
        self.listed = 0
        self.failed = 0
        self._began = time.monotonic()
        self._line_shown = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> ServerProgress:
        if self.live:
            self._ticker = threading.Thread(target=self._tick, name="tooltree-progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            self._clear()

    @property
    def starting(self) -> int:
        return self.started - self.listed - self.failed

    @property
    def queued(self) -> int:
        return self.total - self.started

    def line(self) -> str:
        """The counts in one line."""
        return (
            f"listing tools: {self.listed} listed, {self.failed} failed, {self.starting} starting, "
            f"{self.queued} queued of {self.total} ({time.monotonic() - self._began:.1f} s)"
        )

    def server_started(self, name: str) -> None:
        with self._lock:
            self.started += 1

    def server_done(self, outcome: ServerOutcome) -> None:
        with self._lock:
            if outcome.status == "ok":
                self.listed += 1
                text = f"  ok      {terminal_name(outcome.name)}  ({outcome.seconds:.2f} s)"
            else:
                self.failed += 1
                text = f"  FAILED  {terminal_name(outcome.name)}: {shown_error(outcome.error)}"
            if not self.live:
                self._print(f"{text}  [{self.listed + self.failed}/{self.total}]")
            elif outcome.status != "ok":  # failures stay on screen, above the live line
                self._print(text)
                self._draw()

    def _print(self, text: str) -> None:
        self._clear()
        self.stream.write(text + "\n")
        self.stream.flush()

    def _draw(self) -> None:
        self.stream.write(_CLEAR + self.line())
        self.stream.flush()
        self._line_shown = True

    def _clear(self) -> None:
        if self._line_shown:
            self.stream.write(_CLEAR)
            self.stream.flush()
            self._line_shown = False

    def _tick(self) -> None:
        while not self._stop.wait(REDRAW_EVERY):
            with self._lock:
                try:
                    if self.listed + self.failed >= self.total:  # all done: what follows prints its own lines
                        self._clear()
                        return
                    self._draw()
                except OSError:  # the terminal closed (EIO): the line is drawn no more, and the run goes on
                    return


def embedding_progress(count: int, *, stream: TextIO | None = None, live: bool | None = None) -> Callable[[int], None]:
    """Announce embedding ``count`` tools on ``stream`` (default stderr) and return the callback that
    is told how many are done: it redraws one line on a terminal, else prints one at each quarter."""
    out = stream if stream is not None else sys.stderr
    label = f"tooltree: embedding {count} tool(s) for hybrid search …"
    if out.isatty() if live is None else live:
        out.write(f"{label} 0/{count}")
        out.flush()

        def redraw(done: int) -> None:
            out.write(f"{_CLEAR}{label} {done}/{count}" + ("\n" if done >= count else ""))
            out.flush()

        return redraw
    out.write(label + "\n")
    out.flush()
    shown = [0]

    def plain(done: int) -> None:
        quarter = 4 * done // max(1, count)
        if quarter > shown[0]:
            shown[0] = quarter
            out.write(f"tooltree: embedded {done}/{count} tool(s)\n")
            out.flush()

    return plain
