"""What a running execution has printed, sent to the host as it grows (``output`` notifications).

An execution's result carries its output, but a sandbox that dies whole (its container killed: past its memory
limit under gVisor, ``docker kill``, the engine stopping) never sends that result, and what the script printed
went with it. So the supervisor also sends each stream while the script runs: the first ``4 × max_chars`` bytes
once each (a character is at most 4 bytes: the whole text a result would show, or its head), and past those, at
most every `TAIL_INTERVAL` seconds, the last ``2 × max_chars`` bytes in place of the last ones sent. New output
goes out at once, then at most every `GAP` seconds, and always before a tool call the script makes and before
the execution's result (what the heads hold that was not sent yet). The host keeps
it (`sandbox.streamed.StreamedOutput`) and shows it only when the result never comes. What the script printed in
its last `GAP` seconds, and what its interpreter had yet to write out (`flushing.INTERVAL`), can still be lost.

A notification that carries new bytes of both heads says in ``order`` how they interleave, as the two pipes were read:
``[[stream, bytes], ...]``, runs of each stream's chunk in turn. Before, the host took stdout's chunk, then stderr's,
so what a script printed within one `GAP` came out of order live (``print('a', end='', flush=True)``, a warning on
stderr, ``print(' done')``: "a done" then the warning). Output written faster than the supervisor reads its pipes
(microseconds apart) keeps the order of the reads: both pipes read at once give stdout's first. Past `ORDER_RUNS`
runs waiting, a stream's bytes join its last run.
"""

from __future__ import annotations

import base64
import time
from typing import Any

from .capture import OutputCapture

GAP = 0.25
"""Seconds between two ``output`` notifications at least."""
TAIL_INTERVAL = 2.0
"""Seconds between two sends of a stream's end at least, once it is longer than its head."""
STREAMS = ("stdout", "stderr")
ORDER_RUNS = 1024
"""Runs of the heads' bytes not yet sent whose order is kept at most (each a stretch of one stream read between two
of the other's)."""


class OutputStreamer:
    """What one execution has sent of its output, and what to send next."""

    def __init__(self, max_chars: int) -> None:
        self.head_bytes = 4 * max_chars
        self.tail_bytes = 2 * max_chars
        self.sent = dict.fromkeys(STREAMS, 0)
        """Bytes of each stream's head sent."""
        self.tail_of = dict.fromkeys(STREAMS, 0)
        """Each stream's length when its end was last sent."""
        self.sent_at = float("-inf")
        self.tail_at = float("-inf")
        self.runs: list[list[Any]] = []
        """``[stream, start, end]`` of the heads' bytes read and not yet sent, in the order they were read."""

    def read(self, name: str, start: int, end: int) -> None:
        """Bytes ``start`` to ``end`` of ``name`` were just read (after what was read of the other stream so far)."""
        end = min(end, self.head_bytes)
        if start >= end:
            return
        last = self.runs[-1] if self.runs and self.runs[-1][0] == name else None
        if last is None and len(self.runs) >= ORDER_RUNS:
            last = next((run for run in reversed(self.runs) if run[0] == name), None)
        if last is not None and last[2] == start:
            last[2] = end
        else:
            self.runs.append([name, start, end])

    def _head_end(self, capture: OutputCapture) -> int:
        return min(capture.total, self.head_bytes)

    def _tail_waits(self, capture: OutputCapture, name: str) -> bool:
        return capture.total > self.head_bytes and capture.total != self.tail_of[name]

    def due_in(self, captures: dict[str, OutputCapture], now: float) -> float | None:
        """Seconds until the next notification is due (0: now), None while nothing waits to be sent."""
        due: float | None = None
        for name, capture in captures.items():
            if self._head_end(capture) > self.sent[name]:
                due = min(due if due is not None else float("inf"), self.sent_at + GAP)
            elif self._tail_waits(capture, name):
                when = max(self.sent_at + GAP, self.tail_at + TAIL_INTERVAL)
                due = min(due if due is not None else float("inf"), when)
        return None if due is None else max(0.0, due - now)

    def take(
        self, captures: dict[str, OutputCapture], at: float | None = None, *, now: bool = False
    ) -> dict[str, Any] | None:
        """The ``output`` notification's params due at ``at`` (default: the clock's time) and count them as sent, or
        None when nothing is due; ``now``: the heads' new bytes are due whenever they came (a tool call is made)."""
        at = time.monotonic() if at is None else at
        wait = self.due_in(captures, at)
        heads = now and any(self._head_end(c) > self.sent[name] for name, c in captures.items())
        if wait is None or (wait > 0 and not heads):
            return None
        tail_due = at >= max(self.tail_at + TAIL_INTERVAL, self.sent_at + GAP)
        params: dict[str, Any] = {}
        chunks: dict[str, tuple[int, int]] = {}
        for name, capture in captures.items():
            end = self._head_end(capture)
            if end > self.sent[name]:
                chunk = capture.head(self.sent[name], end)
                params[name] = base64.b64encode(chunk).decode("ascii")
                chunks[name] = (self.sent[name], self.sent[name] + len(chunk))
                self.sent[name] = self.sent[name] + len(chunk) if chunk else end
            if tail_due and self._tail_waits(capture, name):
                params[f"{name}_tail"] = base64.b64encode(capture.last(self.tail_bytes)).decode("ascii")
                self.tail_of[name] = capture.total
                self.tail_at = at
            params[f"{name}_bytes"] = capture.total
        if len(chunks) > 1:
            params["order"] = self._order(chunks)
        self.runs = [run for run in self.runs if run[2] > self.sent[run[0]]]
        self.sent_at = at
        return params

    def _order(self, chunks: dict[str, tuple[int, int]]) -> list[list[Any]]:
        """How the chunks of both heads (``start``, ``end`` of each) interleave: ``[stream, bytes]`` in turn."""
        order: list[list[Any]] = []
        for name, start, end in self.runs:
            low, high = chunks.get(name, (0, 0))
            if (n := min(end, high) - max(start, low)) > 0:
                if order and order[-1][0] == name:
                    order[-1][1] += n
                else:
                    order.append([name, n])
        return order
