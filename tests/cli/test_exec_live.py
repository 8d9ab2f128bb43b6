"""`tooltree exec` on a terminal prints what the script prints as it comes, and at the end only the rest
(`tooltree_cli.exec_live`). Before: a long script showed nothing until it ended. Elsewhere (a pipe, ``--json``) the
output is printed once at the end, as the other exec tests check.

Real parts: a real `tooltree exec` process on a pseudo-terminal, a real container.
"""

from __future__ import annotations

import io
import os
import pty
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sandbox.calls import Waiting
from tests.support import sample_project
from tooltree_cli.exec_live import LiveOutput, WaitNotes

WAIT = 60.0


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _shown(live: LiveOutput, out: io.StringIO) -> str:
    """What the terminal shows once what was handed over has been written (a thread writes it)."""
    assert live.flush(WAIT), "the live output was not written in time"
    return out.getvalue()


def test_output_goes_out_as_it_comes_cleaned_and_the_rest_is_left_for_the_end() -> None:
    out, err = _Terminal(), io.StringIO()  # stderr is not a terminal: left for the end
    live = LiveOutput.on_terminals(out, err)
    assert live is not None
    live.feed("stdout", b"one\ntw")
    assert _shown(live, out) == "one\ntw"  # a line not yet ended too (before: it waited for its newline)
    live.feed("stdout", b"o \x1b[31mred\x1b[0m\r\nthr")
    assert _shown(live, out) == "one\ntwo red\nthr"  # cleaned as a result's output is
    live.feed("stderr", b"warning\n")
    assert err.getvalue() == ""
    assert live.rest("stdout", "one\ntwo red\nthree") == "ee"
    assert live.rest("stderr", "warning\n") == "warning\n"
    assert live.rest("stdout", None) is None


def test_a_character_or_escape_sequence_split_between_pieces_waits_for_its_end() -> None:
    # Cleaned apart, half an escape sequence would show its rest ("[31m"), half a character a "\ufffd".
    out = _Terminal()
    live = LiveOutput({"stdout": out})
    for piece in (b"fetching \xc3", b"\xa9t\xc3\xa9 \x1b[3", b"1mred\x1b[0m done ", b"\xe2\x9c", b"\x93\n"):
        live.feed("stdout", piece)
        text = _shown(live, out)
        assert "\ufffd" not in text and "[3" not in text and "[0m" not in text
    assert _shown(live, out) == "fetching été red done ✓\n"
    assert live.rest("stdout", "fetching été red done ✓\n") == ""


def test_an_output_cut_short_leaves_its_note_and_end_for_the_end() -> None:
    out = _Terminal()
    live = LiveOutput({"stdout": out})
    live.feed("stdout", b"".join(b"line %d\n" % i for i in range(100)))
    note = "[... stdout cut: 99,999 bytes in all; the whole stdout is in out.txt ...]"
    assert live.rest("stdout", f"line 0\nline 1\n\n{note}\n\nline 9999") == f"\n{note}\n\nline 9999"


class _Paused(_Terminal):
    """A terminal nobody reads (Ctrl-S, a stopped pager): a write waits until it is let go."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()

    def write(self, text: str) -> int:
        assert self.go.wait(WAIT), "the test never let the terminal go"
        return super().write(text)


def test_a_paused_terminal_never_holds_up_the_sandbox_and_the_end_prints_what_it_missed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: the channel's reader wrote to the terminal itself, so a paused one stalled the script's output, its
    # tool calls and its result (a 5 s timeout reported after 19 s).
    from tooltree_cli import exec_live

    monkeypatch.setattr(exec_live, "QUEUED", 3)
    monkeypatch.setattr(exec_live, "FLUSH_WAIT", 0.2)
    out = _Paused()
    live = LiveOutput({"stdout": out})
    fed = threading.Event()

    def feed() -> None:
        for n in range(10):  # the writer holds the first, 3 wait, the rest are past the queue: printing stops
            live.feed("stdout", b"line %d\n" % n)
        fed.set()

    try:
        threading.Thread(target=feed, daemon=True).start()
        assert fed.wait(WAIT / 2), "feeding waited for the paused terminal"  # it is let go only below
        whole = "".join(f"line {n}\n" for n in range(10)) + "end"
        rest = live.rest("stdout", whole)  # the terminal is still paused: nothing of it counts as shown
        assert rest == whole
    finally:
        out.go.set()


def test_what_waits_for_a_paused_terminal_is_bounded_in_characters_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # Past the head, each end the sandbox sends (every 2 s, up to 2 x output_chars bytes) is one piece: a count of
    # pieces alone would let a paused terminal hold up to 1,024 of them in memory.
    from tooltree_cli import exec_live

    monkeypatch.setattr(exec_live, "QUEUED_CHARS", 1000)
    monkeypatch.setattr(exec_live, "FLUSH_WAIT", 0.2)
    out = _Paused()
    live = LiveOutput({"stdout": out})
    live.feed("stdout", b"first\n")
    for _ in range(5):
        live.feed("stdout", b"x" * 399 + b"\n", skipped=100)
    assert live._queued_chars <= 1000
    whole = "first\n" + "tail\n"
    assert live.rest("stdout", whole) == whole  # nothing counts as shown: all of it is printed at the end
    out.go.set()


def test_once_the_end_gave_up_on_a_slow_terminal_nothing_more_of_the_live_output_reaches_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: the writer went on writing every piece still queued once the terminal took them again, after what the
    # end printed (its note, its end, tooltree's last line): a slow terminal showed 40 KB of live lines and a
    # "[... not shown ...]" line after "tooltree exit 0".
    from tooltree_cli import exec_live

    monkeypatch.setattr(exec_live, "FLUSH_WAIT", 0.2)
    out = _Paused()
    live = LiveOutput({"stdout": out})
    live.feed("stdout", b"x" * 10_000 + b"\n")  # its first slice is being written when the end gives up
    live.feed("stdout", b"queued\n")
    writer = live._writer
    assert writer is not None
    whole = "x" * 10_000 + "\nqueued\nend\n"
    assert live.rest("stdout", whole) == whole  # printed whole by the end: none of it counts as shown
    out.go.set()
    writer.join(WAIT)
    assert not writer.is_alive()
    assert out.getvalue() == "x" * exec_live.WRITE_CHARS  # only the slice the terminal had begun to take


def test_after_stop_nothing_more_is_shown_as_it_comes_and_the_end_has_it() -> None:
    out = _Terminal()
    live = LiveOutput({"stdout": out})
    live.feed("stdout", b"one\n")
    live.stop()  # a second Ctrl-C
    live.feed("stdout", b"two\n")
    assert _shown(live, out) == "one\n"
    assert live.rest("stdout", "one\ntwo\n") == "two\n"


def test_a_note_takes_a_line_of_its_own_on_stderrs_terminal_and_the_end_prints_the_output_as_without_it() -> None:
    terminal = _Terminal()  # stdout and stderr on one terminal
    live = LiveOutput.on_terminals(terminal, terminal)
    assert live is not None and live.takes_notes
    live.feed("stdout", b"fetching 500 leads...")
    live.note("tooltree: waiting on crm.search_records for 5 s")
    live.feed("stdout", b"done\n")
    assert _shown(live, terminal) == "fetching 500 leads...\ntooltree: waiting on crm.search_records for 5 s\ndone\n"
    assert live.rest("stdout", "fetching 500 leads...done\n") == ""  # the note is not the script's output
    elsewhere = LiveOutput.on_terminals(_Terminal(), io.StringIO())  # stderr is no terminal: no note
    assert elsewhere is not None and not elsewhere.takes_notes
    elsewhere.note("tooltree: waiting")
    assert elsewhere.flush(WAIT)


def test_wait_notes_say_a_call_that_has_waited_long_and_nothing_of_one_that_has_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tooltree_cli.exec_live as exec_live

    monkeypatch.setattr(exec_live, "WAIT_NOTE_EVERY", 0.05)
    err = _Terminal()
    live = LiveOutput.on_terminals(io.StringIO(), err)
    assert live is not None
    asked = threading.Event()
    waits = iter([Waiting(1, "crm.get_record", 0.01), Waiting(3, "crm.search_records", 12.4)])

    def waiting() -> Waiting | None:
        found = next(waits, None)
        if found is None:
            asked.set()
        return found

    with WaitNotes(live, waiting):
        assert asked.wait(WAIT)
    assert _shown(live, err) == "tooltree: 3 calls in flight, the longest crm.search_records for 12 s\n"


def test_no_terminal_no_live_output() -> None:
    assert LiveOutput.on_terminals(io.StringIO(), io.StringIO()) is None


def _read_until(master: int, seen: bytearray, wanted: bytes | None) -> None:
    """Read the terminal into ``seen`` until ``wanted`` is in it (None: until it closes); bounded by `WAIT`."""
    deadline = time.monotonic() + WAIT
    while wanted is None or wanted not in seen:
        assert time.monotonic() < deadline, f"waited for {wanted!r}; the terminal showed {bytes(seen)!r}"
        ready, _, _ = select.select([master], [], [], 0.5)
        if not ready:
            continue
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: every writer has closed the terminal
            data = b""
        if not data:
            assert wanted is None, f"the terminal closed before {wanted!r}: {bytes(seen)!r}"
            return
        seen += data


def exec_on_a_terminal(
    tmp_path: Path, owner: str, code: str, first: bytes, server: str = "crm", **sandbox: object
) -> tuple[str, str]:
    """`tooltree exec` of ``code`` on a pseudo-terminal, with the sample ``server`` (``sandbox``: settings of the
    config's ``sandbox:``): read until ``first`` shows while the script still runs, then Ctrl-C (it stops the script;
    the end completes its output), and read to the end (exit 130). What the terminal showed before the Ctrl-C, and in
    all, with its CRLFs as newlines."""
    config, tree = sample_project(tmp_path, server, timeout=120, **sandbox)
    master, slave = pty.openpty()
    env = {**os.environ, "TOOLTREE_SANDBOX_OWNER": owner}
    argv = [sys.executable, "-m", "tooltree_cli.main", "exec", "-c", code, "--config", str(config), "--tree", str(tree)]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    seen = bytearray()
    try:
        _read_until(master, seen, first)
        assert proc.poll() is None, f"{first!r} came only once the script had ended"
        before = bytes(seen)
        proc.send_signal(signal.SIGINT)
        _read_until(master, seen, None)
        assert proc.wait(WAIT) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(WAIT)
        os.close(master)
    return _text(before), _text(bytes(seen))


def _text(shown: bytes) -> str:
    return shown.decode("utf-8", errors="replace").replace("\r\n", "\n")


@pytest.mark.docker
def test_exec_on_a_terminal_shows_the_output_while_the_script_runs(tmp_path: Path, owner: str) -> None:
    code = "import sys, time\nprint('first line')\nprint('partial', end='')\nsys.stdout.flush()\ntime.sleep(600)\n"
    before, shown = exec_on_a_terminal(tmp_path, owner, code, b"partial")
    assert before.index("first line") < before.index("partial")  # a line not yet ended too, while the script runs
    assert shown.count("first line") == 1 and shown.count("partial") == 1, shown  # live, and not again at the end
    # What tooltree says starts a line of its own.
    assert "first line\npartial\ntooltree: interrupted: stopping the script" in shown, shown


@pytest.mark.docker
def test_exec_on_a_terminal_says_which_tool_call_the_script_waits_on(tmp_path: Path, owner: str) -> None:
    # Before: nothing showed while the script waited on its server, as if it hung.
    code = "from servers.media import slow_echo\nprint('fetching')\nslow_echo(text='x', seconds=25)\n"
    wanted = b"tooltree: waiting on media.slow_echo for "
    before, shown = exec_on_a_terminal(tmp_path, owner, code, wanted, server="media")
    note = before[before.index("tooltree: waiting on") :].split("\n")[0]
    assert before.index("fetching\n") < before.index(note), before
    assert re.fullmatch(r"tooltree: waiting on media\.slow_echo for \d+ s", note), before
    assert int(note.split()[-2]) >= 5, note  # noted once it has waited that long
    assert shown.count("fetching") == 1, shown
