"""`tooltree exec` on a terminal: a script's output printed as it comes, not only once the script has ended.

The sandbox sends what a script prints while it runs (`sandbox.streamed`); where stdout or stderr is a terminal,
`LiveOutput` prints that stream as it arrives, cleaned as a result's output is (`sandbox.results.clean_text`: a CR
ends a line too, so a progress bar redrawn with ``\\r`` shows each update as it comes, not all of them once a newline
follows), a line not yet ended too (``print("fetching…", end="", flush=True)``; before: it waited for its newline;
what the other stream of the same terminal prints next starts a line of its own, not that one; the two streams in
the order the sandbox read them, `sandbox.streamed`),
as the sandbox sends it: the first 4 × ``output_chars`` bytes as they come, then the stream's end at most every 2 s,
with a line saying how much was printed between two ends and not shown (before: live output stopped at the head).
When the script has ended, `LiveOutput.rest` gives what of the stream, as the result shows it, is left to print: what
follows the text already printed; for an output cut short, its note and its end (only what of the end was not
shown: after what was shown last, or none of it when every byte of the stream was). Before: a long script showed
nothing until it ended. Elsewhere (a pipe, a file, ``--json``) nothing changes: the output is printed once, at the
end.

Where stderr is a terminal, a script held by a slow server says so there too (`WaitNotes`): every `WAIT_NOTE_EVERY`
seconds that a tool call of it has waited that long, a line ``tooltree: waiting on crm.search_records for 10 s``
(several at once: ``3 calls in flight, the longest …``; `sandbox.calls.Waiting`). Before: nothing showed while the
script waited, as if it hung. The line is tooltree's, not the script's output: the end prints that as before.

(Over 400 lines: the live printing of the streams and tooltree's lines among them share one writer and its record of
the terminal's line.)
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import queue
import re
import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Literal, TextIO

from sandbox.results import clean_text
from tool_tree.text import size

if TYPE_CHECKING:
    from sandbox.calls import Waiting

_CUT = re.compile(r"\n\n\[\.\.\. std(?:out|err) cut(?:: ([\d,]+) bytes in all)?")
"""Where a result's text of an output cut short has its note, and the stream's size it gives
(`sandbox.results.preview`)."""
_NOTE_END = " ...]"


QUEUED = 1024
"""Pieces at most waiting for a slow terminal; past them live printing stops (the end prints the rest)."""
QUEUED_CHARS = 1 << 20
"""Characters at most waiting for a slow terminal, all pieces together (a stream's end sent every 2 s is up to
2 × ``output_chars`` bytes); past them too."""
RECENT = 65_536
"""Characters of each stream last shown that are kept, to find the start of the result's end in."""
OVERLAP = 80
"""Characters the start of the result's end must match of what was shown last (less: all of it) to count as shown."""
FLUSH_WAIT = 2.0
"""Seconds the end waits for the pieces still queued to reach the terminal (a paused one: it gives up)."""
WRITE_CHARS = 4096
"""Characters written at a time: once the end gave up on a slow terminal, at most these of a piece still reach it."""
WAIT_NOTE_EVERY = 5.0
"""Seconds between the notes of a script's tool call still waiting for its server (`WaitNotes`), and the least a call
has waited to be noted."""

_Kind = Literal["stream", "gap", "note"]
"""What a piece to write is: the stream's own text, tooltree's line of what of it was not shown, or another line of
tooltree's (`LiveOutput.note`)."""


class LiveOutput:
    """Prints the streams named in ``streams`` as the sandbox sends them; thread-safe.

    The sandbox's channel hands the pieces over (`feed`) and a thread of this object writes them, so a terminal that
    is slow or paused (Ctrl-S) never holds up the channel, and with it the script's tool calls and its result: past
    `QUEUED` pieces (or `QUEUED_CHARS` characters) waiting, live printing stops, as it does on `stop` (Ctrl-C: what
    comes after is not the user's to see as it comes); the end prints what was not shown (`rest`).
    """

    def __init__(self, streams: dict[str, TextIO]) -> None:
        self._streams = streams
        self._pending = {name: bytearray() for name in streams}
        self._fed = dict.fromkeys(streams, 0)
        """Bytes of each stream received."""
        self._shown = dict.fromkeys(streams, 0)
        """Characters of each stream printed."""
        self._digest = {name: hashlib.sha256() for name in streams}
        """Of what of each stream was printed: to know it again at the start of the result's text."""
        self._recent = dict.fromkeys(streams, "")
        """The last `RECENT` characters of each stream shown, since a note of what was not (to find the result's end
        in)."""
        self._queued_chars = 0
        self._queued_open = dict.fromkeys(streams, False)
        """The last text queued of the stream left its line open."""
        self._open = dict.fromkeys(streams, False)
        """The terminal's line is one of the stream's not yet ended (what tooltree says then starts a line anew)."""
        self._terminal = {name: _terminal_of(stream) for name, stream in streams.items()}
        """Which terminal each stream writes to: stdout and stderr are most often the same one, whose line is then
        the last writer's only (before: each kept its own open, and the end added a blank line)."""
        self._lock = threading.Lock()
        self._queue: queue.Queue[tuple[str, str, _Kind] | None] = queue.Queue(QUEUED)
        """Pieces to write: a stream's name, the text, and what it is."""
        self._writer: threading.Thread | None = None
        self._written = threading.Condition()
        self._stopped = False
        self._closing = False
        self._partial = False
        """Some of what came was never shown (live printing stopped before the stream's end)."""
        self._abandoned = False
        """The end gave up waiting for the terminal (`finish`): what is still queued is not written (the end prints
        it), so that nothing comes after what the end prints."""

    @classmethod
    def on_terminals(cls, stdout: TextIO, stderr: TextIO) -> LiveOutput | None:
        """One for those of ``stdout`` and ``stderr`` that are terminals; None when neither is."""
        streams = {name: s for name, s in (("stdout", stdout), ("stderr", stderr)) if _is_terminal(s)}
        return cls(streams) if streams else None

    def feed(self, name: str, data: bytes, skipped: int = 0) -> None:
        """What ``name`` just printed (`sandbox.streamed.OutputListener`): what of it can be cleaned alone goes out
        now (`_printable`). After ``skipped`` bytes not sent (past the stream's head the sandbox sends its end every
        2 s), a line says how much was not shown, and ``data`` is shown from its first line's end on."""
        if name not in self._streams:
            return
        with self._lock:
            if self._stopped:
                self._partial = True
                return
            pending = self._pending[name]
            self._fed[name] += len(data) + skipped
            pieces: list[tuple[str, str, _Kind]] = []
            if skipped:
                ends = [i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0]
                first = min(ends) + 1 if ends else len(data)  # the line the gap cut into is not shown
                held = clean_text(bytes(pending).decode("utf-8", errors="replace"))
                line_open = held[-1:] != "\n" if held else self._queued_open[name]
                held += "\n" if line_open else ""
                pieces.append((name, f"{held}[... {size(skipped + first)} not shown ...]\n", "gap"))
                pending.clear()
                data = data[first:]
            pending += data
            if end := _printable(pending):
                pieces.append((name, clean_text(bytes(pending[:end]).decode("utf-8", errors="replace")), "stream"))
                del pending[:end]
            if not pieces:
                return
            self._queued_open[name] = not pieces[-1][1].endswith("\n")
            try:
                for piece in pieces:
                    if self._queued_chars + len(piece[1]) > QUEUED_CHARS:
                        raise queue.Full
                    self._queue.put_nowait(piece)
                    self._queued_chars += len(piece[1])
            except queue.Full:  # the terminal does not keep up: the end prints the rest
                self._stopped = self._partial = True
                return
            self._start_writer()

    @property
    def takes_notes(self) -> bool:
        """Stderr is a terminal: `note` shows there."""
        return "stderr" in self._streams

    def note(self, text: str) -> None:
        """A line of tooltree's on stderr's terminal while the script runs (`WaitNotes`), on a line of its own; not
        the script's output (what the end prints of it is as without it). Nothing when stderr is no terminal, once
        live printing stopped, or when the terminal does not keep up."""
        with self._lock:
            if self._stopped or "stderr" not in self._streams or self._queued_chars + len(text) + 1 > QUEUED_CHARS:
                return
            try:
                self._queue.put_nowait(("stderr", text + "\n", "note"))
            except queue.Full:
                return
            self._queued_chars += len(text) + 1
            for name in self._shared("stderr"):  # the note ends the terminal's line
                self._queued_open[name] = False
            self._start_writer()

    def _start_writer(self) -> None:
        """Under the lock."""
        if self._writer is None:
            self._writer = threading.Thread(target=self._write, name="exec-live-output", daemon=True)
            self._writer.start()

    def _write(self) -> None:
        while (piece := self._queue.get()) is not None:
            name, text, kind = piece
            out = self._streams.get(name)
            try:
                if out is not None:
                    self._write_piece(name, out, text, kind)
            except (OSError, ValueError):  # the terminal went away: the result is printed (or not) at the end
                self._streams.pop(name, None)
            finally:
                with self._lock:
                    self._queued_chars -= len(text)
                with self._written:
                    self._queue.task_done()
                    self._written.notify_all()
            if self._closing and self._queue.empty():  # `finish` found the queue full: no end marker follows
                return
        self._queue.task_done()

    def _write_piece(self, name: str, out: TextIO, text: str, kind: _Kind) -> None:
        """Write one piece, in slices: once the end gave up on a slow terminal (and prints what it missed), only the
        slice being written still reaches it, not the rest of a piece of up to 2 x output_chars."""
        for at in range(0, len(text), WRITE_CHARS):
            with self._lock:
                if self._abandoned:
                    return
                # Another stream's line left open on this terminal: this text starts a line of its own (before:
                # stderr's went on stdout's line not yet ended, "fetching 500 leads...Warning: slow"); a note does
                # after its own stream's line too.
                shared = self._shared(name)
                cut_in = not text.startswith("\n") and any(self._open[o] for o in shared if o != name or kind == "note")
            written = text[at : at + WRITE_CHARS]
            out.write("\n" + written if cut_in else written)
            out.flush()
            with self._lock:
                if kind == "stream":
                    self._shown[name] += len(written)
                    self._digest[name].update(_encoded(written))
                # What the terminal shows last of the stream (a note of what was not shown starts it anew).
                if kind != "note":
                    self._recent[name] = (self._recent[name] + written)[-RECENT:] if kind == "stream" else ""
                self._opened(name, not written.endswith("\n"))

    def flush(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` seconds) until what was handed over so far is on the terminal; whether it is."""
        with self._written:
            return self._written.wait_for(lambda: not self._queue.unfinished_tasks, timeout)

    def break_line(self) -> None:
        """End the terminal's line where the output left it open (waiting at most `FLUSH_WAIT` seconds for what is
        queued), so that what tooltree says next starts a line of its own; from any thread."""
        self.flush(FLUSH_WAIT)
        with self._lock:
            ended = [name for name, line_open in self._open.items() if line_open]
            for name in ended:
                self._open[name] = False
        for out in {id(self._streams[name]): self._streams[name] for name in ended if name in self._streams}.values():
            with contextlib.suppress(OSError, ValueError):
                out.write("\n")
                out.flush()

    def stop(self) -> None:
        """Print nothing more as it comes (from any thread); what was queued still goes out."""
        with self._lock:
            self._stopped = True

    def finish(self) -> None:
        """Stop, and wait (at most `FLUSH_WAIT` seconds) for what is queued to reach the terminal."""
        with self._lock:
            self._stopped = True
            writer, self._writer = self._writer, None
        if writer is not None:
            self._closing = True
            with contextlib.suppress(queue.Full):  # after every piece queued: none is added once stopped
                self._queue.put_nowait(None)
            writer.join(FLUSH_WAIT)
            if writer.is_alive():  # a paused terminal: what it has not taken is printed (again) at the end
                with self._lock:
                    self._partial = self._abandoned = True

    def rest(self, name: str, text: str | None) -> str | None:
        """What of ``text`` (the stream as the result shows it) is left to print: all of it when nothing of it was
        printed live, or when it does not start with what was (cleaned apart, pieces can differ from the whole: a
        line printed twice rather than one lost); for an output cut short, from its note on (the live lines already
        show more than its head), and of its end only what was not printed when every byte of the stream was; a
        newline when all was printed but the line it ended is still open on the terminal; after a newline when
        another stream's line is left open on the same terminal (stdout's rest is not on stderr's line)."""
        self.finish()
        rest = self._rest(name, text)
        with self._lock:
            line_open = self._open.get(name, False)
            # Another stream's line left open on the same terminal: the rest starts a line of its own.
            other = any(self._open[o] for o in self._shared(name) if o != name)
            if rest or line_open:  # printed with a newline at its end: no line is left open on the terminal
                self._opened(name, False)
        if rest and other:
            return "\n" + rest
        # All of it shown, the terminal's line left open: the newline a result's printer adds to its output's end.
        return "\n" if rest == "" and line_open else rest

    def _shared(self, name: str) -> list[str]:
        """The streams that write to the terminal ``name`` writes to (``name`` too); under the lock."""
        if name not in self._terminal:
            return []
        return [o for o in self._terminal if self._terminal[o] == self._terminal[name]]

    def _opened(self, name: str, line_open: bool) -> None:
        """``name`` just wrote to its terminal, leaving its line open or not: the line is no other stream's now."""
        for o in self._shared(name):
            self._open[o] = line_open and o == name

    def _rest(self, name: str, text: str | None) -> str | None:
        with self._lock:
            shown, digest = self._shown.get(name, 0), self._digest.get(name)
            fed, pending = self._fed.get(name, 0), bytes(self._pending.get(name, b""))
            recent = self._recent.get(name, "")
            whole = not self._partial and not self._queue.qsize()
        if not text or not shown or digest is None:
            return text
        if len(text) >= shown and hashlib.sha256(_encoded(text[:shown])).digest() == digest.digest():
            return text[shown:]
        if (cut := _CUT.search(text)) is None:
            return text
        note_end = text.find(_NOTE_END, cut.end())
        total = int(cut.group(1).replace(",", "")) if cut.group(1) else None
        if note_end < 0:
            return text[cut.start() + 1 :]
        note = text[cut.start() + 1 : note_end + len(_NOTE_END)]
        if total != fed or not whole:  # the end, but for what of it was just shown (the stream's end, sent as it ran)
            end = text[note_end + len(_NOTE_END) :].removeprefix("\n\n")
            unshown = end[_overlap(recent, end) :]
        else:
            unshown = clean_text(pending.decode("utf-8", errors="replace"))
        return note + (f"\n\n{unshown}" if unshown else "\n")


def _overlap(shown: str, end: str) -> int:
    """How many characters at the start of ``end`` are the last ones ``shown`` (at least `OVERLAP`, or all of
    ``end``); 0 when it does not end with them."""
    probe = end[:OVERLAP]
    at = shown.find(probe) if probe else -1
    while at >= 0:
        if end.startswith(shown[at:]):
            return len(shown) - at
        at = shown.find(probe, at + 1)
    return 0


_C1_STARTS = tuple(b"\xc2" + bytes([code]) for code in (0x90, 0x98, 0x9B, 0x9D, 0x9E, 0x9F))
"""The 8-bit controls that start a sequence (DCS, SOS, CSI, OSC, PM, APC), as UTF-8."""


def _printable(pending: bytes | bytearray) -> int:
    """How many of the ``pending`` bytes can be printed now, cleaned alone as the whole will be: all but a CR last
    (the first half of a CRLF, maybe: one line end, not two), a character whose last bytes have not come, and, on
    a line not yet ended, an escape sequence that may not be whole (cleaned before its end, its rest would show)."""
    limit = len(pending) - 1 if pending.endswith(b"\r") else len(pending)
    lines = max(pending.rfind(b"\n", 0, limit), pending.rfind(b"\r", 0, limit)) + 1
    for start in (b"\x1b", *_C1_STARTS):  # ESC, and the 8-bit sequences as UTF-8
        if (at := pending.rfind(start, lines, limit)) >= 0:
            limit = at
    return max(lines, _whole_characters(pending, limit))


def _whole_characters(data: bytes | bytearray, end: int) -> int:
    """``end``, or where the UTF-8 character it cuts starts."""
    start = end - 1
    while start >= 0 and end - start < 4 and data[start] & 0xC0 == 0x80:  # a continuation byte
        start -= 1
    if start < 0:
        return end
    lead = data[start]
    length = 2 if 0xC0 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF8 else 1
    return start if end - start < length else end


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogatepass")


def _terminal_of(stream: TextIO) -> object:
    """What tells ``stream``'s terminal from another: its device (stdout and stderr on one terminal have the same),
    else the stream itself."""
    try:
        status = os.fstat(stream.fileno())
    except (AttributeError, ValueError, OSError):
        return id(stream)
    return (status.st_dev, status.st_ino, status.st_rdev)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


class WaitNotes:
    """While a script runs (a ``with`` block): every `WAIT_NOTE_EVERY` seconds, when a tool call of it has waited that
    long for its server (``waiting``: `sandbox.Sandbox.calls_waiting`), `LiveOutput.note` says which and for how
    long, on a thread of its own."""

    def __init__(self, live: LiveOutput | None, waiting: Callable[[], Waiting | None]) -> None:
        self._live, self._waiting = live, waiting
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> WaitNotes:
        if self._live is not None and self._live.takes_notes:
            self._thread = threading.Thread(target=self._run, name="exec-wait-notes", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(FLUSH_WAIT)

    def _run(self) -> None:
        while not self._done.wait(WAIT_NOTE_EVERY):
            waiting = self._waiting()
            if waiting is not None and waiting.seconds >= WAIT_NOTE_EVERY and self._live is not None:
                self._live.note(f"tooltree: {waiting.said()}")
