"""Capturing one stream of one execution: a head and a tail in memory, everything in a file.

The first ``memory_bytes`` are kept in memory. Past that, the capture spills everything to a
file in the workspace and keeps only the last ``memory_bytes`` in memory, so a script that
prints gigabytes costs bounded memory; the file stops growing at ``file_bytes``. With a ``folder``, the
file grows only after the folder made room for it (`OutputFolder`: the oldest saved outputs are deleted), and
only as far as the folder lets the execution's files grow together.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from .outputs import OutputFolder

MEMORY_BYTES = 1 << 20
FILE_BYTES = 64 << 20
LINE_SLACK = 4
"""A cut head ends at its last line's end, and a cut tail starts at its first line's start, when that gives up at
most 1/LINE_SLACK of the part: a model reads whole lines, not "30" left of line 1,930."""


class OutputCapture:
    """Collects the bytes one stream produced during one execution."""

    def __init__(
        self,
        spill_path: str,
        *,
        memory_bytes: int = MEMORY_BYTES,
        file_bytes: int = FILE_BYTES,
        folder: OutputFolder | None = None,
    ) -> None:
        self.spill_path = spill_path
        self.folder = folder
        self.memory_bytes = memory_bytes
        self.file_bytes = file_bytes
        self.total = 0
        self._head = bytearray()
        self._tail = bytearray()
        self._file: int | None = None
        self._file_written = 0
        self._file_failed = False

    def _open_spill(self) -> None:
        try:
            os.makedirs(os.path.dirname(self.spill_path), exist_ok=True)
            self._file = os.open(
                self.spill_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
            )
        except OSError:
            self._file_failed = True
            return
        self._write_spill(bytes(self._head))

    def _write_spill(self, data: bytes) -> None:
        if self._file is None or self._file_failed:
            return
        room = self.file_bytes - self._file_written
        if room <= 0:
            return
        data = data[:room]
        if self.folder is not None:
            data = data[: self.folder.grow(len(data))]
        try:
            view = memoryview(data)
            while view:
                n = os.write(self._file, view)
                view = view[n:]
                self._file_written += n
        except OSError:  # e.g. the workspace is full: keep the in-memory preview
            self._file_failed = True

    def feed(self, data: bytes) -> None:
        """Add bytes read from the stream."""
        self.total += len(data)
        if self._file is None and not self._file_failed and len(self._head) + len(data) <= self.memory_bytes:
            self._head += data
            return
        if self._file is None and not self._file_failed:
            room = self.memory_bytes - len(self._head)
            self._head += data[:room]
            self._tail += data[room:]
            self._open_spill()
            self._write_spill(data[room:])
        else:
            self._tail += data
            self._write_spill(data)
        if len(self._tail) > self.memory_bytes:
            del self._tail[: len(self._tail) - self.memory_bytes]

    def head(self, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` of the stream, as far as the head kept in memory holds them."""
        return bytes(self._head[start:end])

    def last(self, n: int) -> bytes:
        """The stream's last ``n`` bytes (at most ``memory_bytes``: what memory keeps of the end)."""
        if self.total == len(self._head) + len(self._tail):  # nothing between the head and the tail was dropped
            return bytes((self._head + self._tail)[-n:]) if len(self._tail) < n else bytes(self._tail[-n:])
        return bytes(self._tail[-n:])

    def finish(self, max_chars: int) -> dict[str, Any]:
        """The report for the host: the whole text, or a head and a tail and the file with everything.

        Returns ``{"head", "tail", "truncated", "bytes", "path", "saved"}``; ``tail`` is empty and ``path`` null
        when nothing was cut; ``saved`` is how many bytes the file holds (fewer than ``bytes`` past ``file_bytes``).
        """
        half = max(max_chars // 2, 1)
        spilled = self._file is not None or self._file_failed
        if not spilled:
            text = self._head.decode("utf-8", errors="replace")
            if len(text) <= max_chars:
                return {"head": text, "tail": "", "truncated": False, "bytes": self.total, "path": None}
            self._open_spill()
            head, tail = text[: half + 1], text[-half - 1 :]  # a character more each: is the cut at a line's end?
        else:
            head = self._head.decode("utf-8", errors="replace")[: half + 1]
            tail = self._tail.decode("utf-8", errors="replace")[-half - 1 :]
        head, tail = _at_lines(head, tail, half)
        self.close()
        if not self._file_failed and self._file_written == 0 and self.total > 0:  # the execution's budget was spent
            self._file_failed = True
            with contextlib.suppress(OSError):
                os.unlink(self.spill_path)
        path = None if self._file_failed else self.spill_path
        return {"head": head, "tail": tail, "truncated": True, "bytes": self.total, "path": path,
                "saved": self._file_written}  # fmt: skip

    def close(self) -> None:
        """Close the spill file, if one was opened."""
        if self._file is not None:
            os.close(self._file)
            self._file = None


def _at_lines(head: str, tail: str, half: int) -> tuple[str, str]:
    """The ``half`` characters a cut output shows of its start and of its end, from ``head`` and ``tail`` (a character
    more each when the output has it, the one after the head and the one before the tail), moved to whole lines where
    a line ends near the cut (`LINE_SLACK`)."""
    slack = half // LINE_SLACK
    if len(head) > half:
        end = head.rfind("\n", 0, half)
        head = head[: end + 1] if head[half] != "\n" and end >= 0 and half - end - 1 <= slack else head[:half]
    if len(tail) > half:
        if tail[0] != "\n" and (start := tail.find("\n", 1)) >= 0 and start <= slack and start < len(tail) - 1:
            tail = tail[start + 1 :]
        else:
            tail = tail[1:]
    return head, tail
