"""`UpstreamProgress`: the latest progress a server sent for one passthrough call, said by serve's heartbeat.

A passthrough call whose client asked for progress gives the server a progress token too
(`tool_tree.pool.ServerPool.call`'s ``progress``), and `UpstreamProgress.update` is told each
``notifications/progress`` the server sends for it, on the server pool's thread; only the latest is kept. The call's
heartbeat, every ``progress_interval``, says it in its message (``running for 4 s; the server says: step 3 of 6:
indexing``) and keeps its own number, the seconds run: MCP wants the progress of a request to grow, which a server's
own need not, and however many the server sends, the client gets one notification per interval. The server's message
goes out on one line, cleaned of escape sequences and control characters as a result's text is
(`sandbox.results.clean_text`), at most `MESSAGE_CHARS` characters; only its first ``2 × MESSAGE_CHARS`` are looked
at, so a message of a megabyte costs what one of 400 characters does. A message that states the step itself (its
progress and total among its numbers: ``step 3 of 6``, ``3/6 files``) is said alone: before, ``step 3 of 6: step 3
of 6`` for the sample media server's ``long_task``, whose messages say so.
"""

from __future__ import annotations

import re
import threading

from sandbox.results import clean_text
from tool_tree.text import one_line

MESSAGE_CHARS = 200
"""The most characters of a server's progress message a heartbeat says."""
_NUMBER = re.compile(r"(?<![\d.])\d+(?:\.\d+)?(?![\d.])")


class UpstreamProgress:
    """The latest ``(progress, total, message)`` a server sent for one call; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: tuple[float, float | None, str | None] | None = None

    def update(self, progress: float, total: float | None, message: str | None) -> None:
        """Keep this one (`tool_tree.pool.ProgressListener`: from the pool's thread, holding the lock only to store
        it)."""
        with self._lock:
            self._latest = (progress, total, message)

    def said(self) -> str | None:
        """The latest as the heartbeat says it, ``the server says: step 3 of 6: indexing``; None before any came."""
        with self._lock:
            latest = self._latest
        if latest is None:
            return None
        progress, total, message = latest
        step = f"step {progress:g}" + ("" if total is None else f" of {total:g}")
        text = one_line(clean_text(message[: 2 * MESSAGE_CHARS]), MESSAGE_CHARS) if message else ""
        if text and _states_step(text, progress, total):
            return f"the server says: {text}"
        return f"the server says: {step}" + (f": {text}" if text else "")


def _states_step(text: str, progress: float, total: float | None) -> bool:
    """Whether ``text`` holds the step's numbers itself, each a number of its own (``step 3 of 6``, ``3/6``; the same
    number twice for ``6 of 6``)."""
    found = _NUMBER.findall(text)
    wanted = [f"{progress:g}"] + ([] if total is None else [f"{total:g}"])
    return all(found.count(n) >= wanted.count(n) for n in wanted)
