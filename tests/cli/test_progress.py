"""`ServerProgress`: a live line on a terminal (redrawn by a thread), plain numbered lines elsewhere."""

from __future__ import annotations

import io
import threading

from generator.generate import ServerOutcome
from tooltree_cli.progress import ERROR_CHARS, ServerProgress, embedding_progress, shown_error


class Terminal(io.StringIO):
    """A stream that says it is a terminal and lets a test wait for text to appear on it."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = threading.Condition()

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> int:
        with self.changed:
            n = super().write(s)
            self.changed.notify_all()
        return n

    def wait_for(self, text: str, timeout: float = 10.0) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: text in self.getvalue(), timeout)


def test_on_a_terminal_one_line_shows_the_counts_and_failures_stay_above_it() -> None:
    term = Terminal()
    with ServerProgress(3, stream=term) as progress:
        assert progress.live
        progress.server_started("a")
        progress.server_started("b")
        assert term.wait_for("0 listed, 0 failed, 2 starting, 1 queued of 3")
        progress.server_done(ServerOutcome("a", "ok", seconds=0.5))
        progress.server_done(ServerOutcome("b", "failed", error="timed out after 30 s"))
        assert term.wait_for("\r\x1b[K  FAILED  b: timed out after 30 s\n")
        assert term.wait_for("1 listed, 1 failed, 0 starting, 1 queued of 3")
    shown = term.getvalue()
    assert shown.endswith("\r\x1b[K")  # the live line is gone when the work is done
    assert "  ok      a" not in shown  # successes only move the counts


def test_a_failed_servers_error_is_shown_on_one_cleaned_line_cut_at_500_characters() -> None:
    # Before: the error raw above the live line: a title set, the screen cleared, a line forged by a line feed.
    error = "MCPError: no \x1b]0;TITLE\x07\x1b[2J\x9b31mway\r\ntooltree: forged\U000e0041 " + "x" * 10_000
    term = Terminal()
    with ServerProgress(2, stream=term) as progress:
        progress.server_started("a")
        progress.server_done(ServerOutcome("a", "failed", error=error))
        assert term.wait_for("1 failed")
    shown = term.getvalue().replace("\r\x1b[K", "")  # the live line's own redraws
    line = "  FAILED  a: " + ("MCPError: no way tooltree: forged " + "x" * 10_000)[: ERROR_CHARS - 1] + "…\n"
    assert shown.startswith(line) and "\x1b" not in shown and "\r" not in shown and "\x9b" not in shown
    assert shown_error(None) == "" and shown_error("x" * ERROR_CHARS) == "x" * ERROR_CHARS


def test_off_a_terminal_each_finished_server_is_one_numbered_line_and_nothing_is_redrawn() -> None:
    pipe = io.StringIO()
    with ServerProgress(2, stream=pipe) as progress:
        assert not progress.live
        progress.server_started("a")
        progress.server_done(ServerOutcome("a", "ok", seconds=0.25))
        progress.server_started("b")
        progress.server_done(ServerOutcome("b", "failed", error="cannot start: no such file"))
    assert pipe.getvalue() == "  ok      a  (0.25 s)  [1/2]\n  FAILED  b: cannot start: no such file  [2/2]\n"


def test_the_live_line_clears_itself_once_every_server_is_done() -> None:
    term = Terminal()
    with ServerProgress(1, stream=term) as progress:
        progress.server_started("a")
        assert term.wait_for("1 starting")
        progress.server_done(ServerOutcome("a", "ok", seconds=0.1))
        ticker = progress._ticker
        assert ticker is not None
        ticker.join(timeout=10)  # it stops by itself once all are done
        assert not ticker.is_alive()
        assert term.getvalue().endswith("\r\x1b[K")  # cleared before what follows (rendering) prints


def test_embedding_progress_counts_up_in_one_line_on_a_terminal() -> None:
    stream = io.StringIO()
    done = embedding_progress(300, stream=stream, live=True)
    for n in (128, 256, 300):
        done(n)
    label = "tooltree: embedding 300 tool(s) for hybrid search …"
    assert stream.getvalue() == f"{label} 0/300" + "".join(f"\r\x1b[K{label} {n}/300" for n in (128, 256, 300)) + "\n"


def test_embedding_progress_off_a_terminal_prints_a_line_at_each_quarter() -> None:
    stream = io.StringIO()
    done = embedding_progress(400, stream=stream)  # a StringIO is not a terminal
    for n in (64, 100, 150, 256, 320, 400):
        done(n)
    assert stream.getvalue().splitlines() == [
        "tooltree: embedding 400 tool(s) for hybrid search …",
        "tooltree: embedded 100/400 tool(s)",
        "tooltree: embedded 256/400 tool(s)",
        "tooltree: embedded 320/400 tool(s)",
        "tooltree: embedded 400/400 tool(s)",
    ]
