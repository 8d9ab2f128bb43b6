"""`tooltree exec` on a terminal: a script's output printed as it comes, not only once the script has ended.

The sandbox sends what a script prints while it runs (`sandbox.streamed`); where stdout or stderr is a terminal,
`LiveOutput` prints each complete line of that stream as it arrives, cleaned as a result's output is
(`sandbox.results.clean_text`), as far as the sandbox sends it (the first 4 × ``output_chars`` bytes). When the
script has ended, `LiveOutput.rest` gives what of the stream, as the result shows it, is left to print: the lines
after those already printed, or, for an output cut short, its note and its end. Before: a long script showed nothing
until it ended. Elsewhere (a pipe, a file, ``--json``) nothing changes: the output is printed once, at the end.
"""

from __future__ import annotations

import re
import threading
from typing import TextIO

from sandbox.results import clean_text

_CUT = re.compile(r"\n\n\[\.\.\. std(?:out|err) cut")
"""Where a result's text of an output cut short has its note (`sandbox.results.preview`)."""


class LiveOutput:
    """Prints the streams named in ``streams`` line by line as the sandbox sends them; thread-safe."""

    def __init__(self, streams: dict[str, TextIO]) -> None:
        self._streams = streams
        self._pending = {name: bytearray() for name in streams}
        self._lines = dict.fromkeys(streams, 0)
        self._lock = threading.Lock()

    @classmethod
    def on_terminals(cls, stdout: TextIO, stderr: TextIO) -> LiveOutput | None:
        """One for those of ``stdout`` and ``stderr`` that are terminals; None when neither is."""
        streams = {name: s for name, s in (("stdout", stdout), ("stderr", stderr)) if _is_terminal(s)}
        return cls(streams) if streams else None

    def feed(self, name: str, data: bytes) -> None:
        """What ``name`` just printed (`sandbox.streamed.OutputListener`): its complete lines go out now."""
        out = self._streams.get(name)
        if out is None:
            return
        with self._lock:
            pending = self._pending[name]
            pending += data
            end = pending.rfind(b"\n")
            if end < 0:
                return
            text = clean_text(bytes(pending[: end + 1]).decode("utf-8", errors="replace"))
            del pending[: end + 1]
            self._lines[name] += text.count("\n")
            try:
                out.write(text)
                out.flush()
            except (OSError, ValueError):  # the terminal went away: the result is printed (or not) at the end
                self._streams.pop(name, None)

    def rest(self, name: str, text: str | None) -> str | None:
        """What of ``text`` (the stream as the result shows it) is left to print: all of it when nothing of it was
        printed live; for an output cut short, from its note on (the live lines already show more than its head)."""
        with self._lock:
            printed = self._lines.get(name, 0)
        if not text or not printed:
            return text
        if (cut := _CUT.search(text)) is not None:
            return text[cut.start() + 1 :]
        position = -1
        for _ in range(printed):
            position = text.find("\n", position + 1)
            if position < 0:
                return ""
        return text[position + 1 :]


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False
