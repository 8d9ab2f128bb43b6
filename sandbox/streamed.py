"""What a running script has printed, as the supervisor's ``output`` notifications bring it (its `stream`).

Kept only to be shown when the execution's result never comes: the sandbox died whole under the script, or stopped
answering and was destroyed (`sandbox.errors.SessionError.stdout`). The notifications come from the container and
are bounded here as anything from it is: base64 text only, each stream's head held to ``4 × max_chars`` bytes and
its end to ``2 × max_chars``. The listener is told of new bytes of the two streams in the order the notification's
``order`` gives, as the sandbox read them (before: stdout's, then stderr's, whatever came first within the 0.25 s
between two notifications).
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
from collections.abc import Callable
from typing import Any

from sandbox.errors import ProtocolError
from sandbox.results import clean_text, cut, preview

logger = logging.getLogger(__name__)

STREAMS = ("stdout", "stderr")
LOST = "the sandbox ended before it reported it whole"
LINE_CHARS = 200
"""The most characters of the last line printed `StreamedOutput.last_line` gives (a progress message's)."""
LINE_BYTES = 4096
"""The end of the stream the last line is looked for in."""
ORDER_RUNS = 4096
"""Runs at most a notification's ``order`` may give (the sandbox sends at most 1024 and what joins them)."""


OutputListener = Callable[[str, bytes, int], None]
"""Called with a stream's name (``stdout``, ``stderr``), the bytes of it that just came, in order, and how many of its
bytes were skipped before them: 0 within its head; past it, where the sandbox sends only the stream's end (at most
every 2 s), what was printed between two ends sent is skipped."""


class StreamedOutput:
    """The head and the end of each stream received so far; thread-safe (the channel's reader feeds it).
    ``listener``: told of each new piece of a stream (`OutputListener`)."""

    def __init__(self, max_chars: int, listener: OutputListener | None = None) -> None:
        self.max_chars = max_chars
        self.listener = listener
        self._head = {name: bytearray() for name in STREAMS}
        self._tail = dict.fromkeys(STREAMS, b"")
        self._total = dict.fromkeys(STREAMS, 0)
        self._told = dict.fromkeys(STREAMS, 0)
        """Bytes of each stream the listener was told of, or skipped."""
        self._latest = "stdout"
        """The stream something came of last."""
        self._lock = threading.Lock()

    def receive(self, method: str, params: dict[str, Any]) -> None:
        """The execute request's notification sink (`sandbox.channel.NotificationSink`).

        Raises:
            ProtocolError: it is not an ``output`` notification, or not as the supervisor sends one.
        """
        if method != "output":
            raise ProtocolError(f"unexpected notification {method[:40]!r} during an execution")
        self.feed(params)

    def feed(self, params: dict[str, Any]) -> None:
        """Take one ``output`` notification's params.

        Raises:
            ProtocolError: a value is not what the supervisor sends.
        """
        heads: dict[str, bytes] = {}
        ends: list[tuple[str, bytes, int]] = []
        order = _order(params.get("order"))
        with self._lock:
            for name in STREAMS:
                total = params.get(f"{name}_bytes")
                if total is not None and (not isinstance(total, int) or isinstance(total, bool) or total < 0):
                    raise ProtocolError(f"output: {name}_bytes is not a count of bytes")
                if (chunk := params.get(name)) is not None:
                    head = self._head[name]
                    data = _decode(chunk, 4 * self.max_chars - len(head))
                    head += data
                    if data:
                        heads[name] = data
                        self._told[name] += len(data)
                        self._latest = name
                if (tail := params.get(f"{name}_tail")) is not None:
                    self._tail[name] = end = _decode(tail, 2 * self.max_chars)
                    self._latest = name
                    if total is not None and total > self._told[name]:  # the end's new bytes, after what was skipped
                        start = max(total - len(end), 0)
                        skipped = max(start - self._told[name], 0)
                        ends.append((name, end[self._told[name] + skipped - start :], skipped))
                        self._told[name] = total
                if total is not None:
                    self._total[name] = max(self._total[name], total)
            if order and not ends and order[-1][0] in heads:  # what came last of the heads
                self._latest = order[-1][0]
        for name, data, skipped in [*_interleaved(heads, order), *ends]:
            self._tell(name, data, skipped)

    def _tell(self, name: str, data: bytes, skipped: int) -> None:
        """Hand ``data`` to the listener; one that raises is told no more (the channel's reader must go on)."""
        if self.listener is None:
            return
        try:
            self.listener(name, data, skipped)
        except Exception:
            logger.warning("an execution's output listener failed; it is told no more", exc_info=True)
            self.listener = None

    def last_line(self) -> str | None:
        """The last line with more than white space in it of the stream that printed last (stdout or stderr: a
        progress bar or a log line goes to stderr), cleaned, at most `LINE_CHARS`; None when there is none."""
        with self._lock:
            name = self._latest
            head, tail = self._head[name], self._tail[name]
            data = tail if tail and self._total[name] > len(head) else head
            return _last_line(bytes(data[-LINE_BYTES:]))

    def text(self, name: str) -> str | None:
        """What ``name`` (``stdout`` or ``stderr``) printed, as a result would show it (a head and an end around a
        note when longer than ``max_chars``); None when nothing of it came."""
        with self._lock:
            head, tail = bytes(self._head[name]), self._tail[name]
            total = max(self._total[name], len(head))
        if not total:
            return None
        half = self.max_chars // 2
        if total <= len(head):  # all of it came in the head
            whole = head.decode("utf-8", errors="replace")
            if len(whole) <= self.max_chars:
                return preview({"head": whole, "truncated": False}, self.max_chars, name)[0]
            head_text, tail_text = whole[:half], whole[-half:]
        else:
            head_text = head.decode("utf-8", errors="replace")[:half]
            tail_text = tail.decode("utf-8", errors="replace")[-half:] if tail else ""
        text = {"head": head_text, "tail": tail_text, "truncated": True, "bytes": total}
        return preview(text, self.max_chars, name, None, LOST)[0]


def _order(value: Any) -> list[tuple[str, int]]:
    """A notification's ``order``: ``[stream, bytes]`` runs, in turn (none when it has none).

    Raises:
        ProtocolError: it is not as the supervisor sends it.
    """
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > ORDER_RUNS:
        raise ProtocolError("output: order is not a list of runs")
    runs: list[tuple[str, int]] = []
    for run in value:
        if (
            not isinstance(run, list)
            or len(run) != 2
            or run[0] not in STREAMS
            or not isinstance(run[1], int)
            or isinstance(run[1], bool)
            or run[1] <= 0
        ):
            raise ProtocolError("output: a run of order is not [stream, bytes]")
        runs.append((run[0], run[1]))
    return runs


def _interleaved(heads: dict[str, bytes], order: list[tuple[str, int]]) -> list[tuple[str, bytes, int]]:
    """The heads' new bytes (by stream, stdout first) cut into ``order``'s runs in turn; what the runs do not cover
    (past what the host keeps of a head, or an order that gives less) after them."""
    taken = dict.fromkeys(heads, 0)
    pieces: list[tuple[str, bytes, int]] = []
    for name, n in order:
        if name in heads and (piece := heads[name][taken[name] : taken[name] + n]):
            pieces.append((name, piece, 0))
            taken[name] += len(piece)
    return pieces + [(name, data[taken[name] :], 0) for name, data in heads.items() if data[taken[name] :]]


def _last_line(data: bytes) -> str | None:
    lines = clean_text(data.decode("utf-8", errors="replace")).splitlines()
    line = next((line.strip() for line in reversed(lines) if line.strip()), None)
    return None if line is None else cut(line, LINE_CHARS)


def _decode(value: Any, limit: int) -> bytes:
    """The bytes of one base64 chunk, at most ``limit`` of them (read as far as it needs).

    Raises:
        ProtocolError: it is not base64 text.
    """
    if not isinstance(value, str):
        raise ProtocolError("output: a chunk is not text")
    if limit <= 0:
        return b""
    try:
        return base64.b64decode(value[: (limit + 2) // 3 * 4], validate=True)[:limit]
    except (binascii.Error, ValueError):
        raise ProtocolError("output: a chunk is not base64") from None
