"""What `tooltree exec` prints live on a terminal, and what it leaves for the end (`tooltree_cli.exec_live`), beyond
plain lines: a progress bar redrawn with ``\\r`` shows as it comes (a CR ends a line, as in a result's output;
before: nothing until a newline came, then every update at once); an output cut short whose every byte was
printed live ends with its note, not its end again (before: the end's lines printed twice); and the end is found
by what was printed, not by counting lines (before: output cleaned differently in pieces, or a line that looks
like a result's note, lost lines at the end).

Real parts: a real `tooltree exec` process on a pseudo-terminal, a real container (the last test).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from sandbox.results import clean_text, preview
from tests.cli.test_exec_live import _shown, exec_on_a_terminal
from tool_tree.text import size
from tooltree_cli.exec_live import LiveOutput


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _live() -> tuple[LiveOutput, _Terminal]:
    out = _Terminal()
    return LiveOutput({"stdout": out}), out


def test_a_progress_bar_redrawn_with_cr_shows_each_update_as_it_comes() -> None:
    live, out = _live()
    live.feed("stdout", b"\r 10%|#")
    assert _shown(live, out) == "\n 10%|#"  # before: shown only once the next update had started it anew
    live.feed("stdout", b"\r 20%|##")
    assert _shown(live, out) == "\n 10%|#\n 20%|##"
    live.feed("stdout", b"\r100%|###|\n")
    assert _shown(live, out) == "\n 10%|#\n 20%|##\n100%|###|\n"
    assert live.rest("stdout", clean_text("\r 10%|#\r 20%|##\r100%|###|\n")) == ""


def test_a_crlf_split_between_two_pieces_ends_one_line() -> None:
    live, out = _live()
    live.feed("stdout", b"one\r")
    assert _shown(live, out) == "one"  # the CR may be a CRLF's first half: it waits
    live.feed("stdout", b"\ntwo\r\nthree")
    assert _shown(live, out) == "one\ntwo\nthree"
    # All of it shown, its last line open: the newline a result's printer adds at its end.
    assert live.rest("stdout", clean_text("one\r\ntwo\r\nthree")) == "\n"


def test_what_tooltree_says_after_a_line_left_open_starts_a_line_of_its_own() -> None:
    live, out = _live()
    live.feed("stdout", b"fetching 500 leads...")
    live.break_line()  # before tooltree says it stops the script
    assert out.getvalue() == "fetching 500 leads...\n"
    live.break_line()  # the line is ended once
    assert out.getvalue() == "fetching 500 leads...\n"
    assert live.rest("stdout", "fetching 500 leads...") == ""  # nothing left, and no blank line


def test_stdout_and_stderr_on_one_terminal_share_its_line_no_blank_line_and_no_line_joined_at_the_end() -> None:
    # Before: each stream kept its own line open, so the end added one newline for each (a blank line), and the
    # rest of stdout went on the line stderr had left open ("30/100 |###done").
    terminal = _Terminal()
    live = LiveOutput({"stdout": terminal, "stderr": terminal})
    live.feed("stdout", b"fetching...")
    live.feed("stderr", b"\r 30/100 |###")
    assert _shown(live, terminal) == "fetching...\n 30/100 |###"
    assert live.rest("stdout", "fetching... done\n") == "\n done\n"  # on a line of its own, not stderr's
    assert live.rest("stderr", "\n 30/100 |###") == ""  # that line was ended by stdout's rest: no blank line
    terminal = _Terminal()
    live = LiveOutput({"stdout": terminal, "stderr": terminal})
    live.feed("stdout", b"partial")
    live.feed("stderr", b"err-partial")
    assert live.rest("stdout", "partial") == ""
    assert live.rest("stderr", "err-partial") == "\n"  # one newline ends the terminal's line, once


def test_what_one_stream_prints_after_the_others_line_left_open_starts_a_line_of_its_own() -> None:
    # Before: stderr's warning went on stdout's line not yet ended ("fetching 500 leads...Warning: slow server"), and
    # stdout's row on stderr's progress bar.
    terminal = _Terminal()
    live = LiveOutput({"stdout": terminal, "stderr": terminal})
    live.feed("stdout", b"fetching 500 leads...")
    live.feed("stderr", b"Warning: slow server\n")
    live.feed("stdout", b" done\n")
    live.feed("stderr", b"\r 10%|#")
    live.feed("stdout", b"row 1\n")
    live.feed("stdout", b"row 2")
    live.feed("stdout", b"\n")
    assert _shown(live, terminal) == "fetching 500 leads...\nWarning: slow server\n done\n\n 10%|#\nrow 1\nrow 2\n"
    assert live.rest("stdout", "fetching 500 leads... done\nrow 1\nrow 2\n") == ""  # all of it shown
    assert live.rest("stderr", "Warning: slow server\n\n 10%|#") == ""
    # Each on its own terminal (stdout piped elsewhere, say): nothing is added to either.
    out, err = _Terminal(), _Terminal()
    live = LiveOutput({"stdout": out, "stderr": err})
    live.feed("stdout", b"fetching...")
    live.feed("stderr", b"Warning\n")
    live.feed("stdout", b" done\n")
    assert (_shown(live, out), _shown(live, err)) == ("fetching... done\n", "Warning\n")


def _lines(first: int, last: int) -> str:
    return "".join(f"log line {n:04d} of a long job\n" for n in range(first, last))


def test_past_the_head_the_ends_sent_are_shown_with_what_was_not_and_the_end_prints_only_what_was_not_shown() -> None:
    # Before: live output stopped at the stream's head (4 x output_chars bytes); the end printed the result's end.
    live, out = _live()
    live.feed("stdout", _lines(0, 100).encode())
    # The next end the sandbox sends starts within line 150 (a gap of 50 lines and a half): shown from line 151 on.
    live.feed("stdout", _lines(150, 200).encode()[10:], skipped=len(_lines(100, 150)) + 10)
    shown = _shown(live, out)
    skipped = size(len(_lines(100, 151)))  # the line the gap cut into too
    assert shown == f"{_lines(0, 100)}[... {skipped} not shown ...]\n{_lines(151, 200)}", shown[-400:]
    # The script ends before the next end is sent: the result's end (lines 180 to 260) is printed from line 200 on.
    total = len(_lines(0, 260))
    note = f"[... stdout cut: {total:,} bytes in all; the rest could not be saved ...]"
    result = f"{_lines(0, 10)}\n{note}\n\n{_lines(180, 260)}"
    assert live.rest("stdout", result) == f"\n{note}\n\n{_lines(200, 260)}"


def test_what_was_not_shown_is_said_on_a_line_of_its_own() -> None:
    live, out = _live()
    live.feed("stdout", b"line 1\nline 2 is lo")  # the head ends within a line, which is shown
    live.feed("stdout", b"ne 7\nline 8\n", skipped=20)
    assert _shown(live, out) == "line 1\nline 2 is lo\n[... 25 B not shown ...]\nline 8\n"


def test_when_what_was_shown_last_is_not_at_the_start_of_the_results_end_the_whole_end_is_printed() -> None:
    live, _ = _live()
    live.feed("stdout", _lines(0, 100).encode())
    live.feed("stdout", _lines(150, 160).encode(), skipped=len(_lines(100, 150)))
    total = len(_lines(0, 400))
    note = f"[... stdout cut: {total:,} bytes in all; the rest could not be saved ...]"
    result = f"{_lines(0, 10)}\n{note}\n\n{_lines(300, 400)}"  # lines 160 to 300 never came: nothing is left out
    assert live.rest("stdout", result) == f"\n{note}\n\n{_lines(300, 400)}"


def test_an_output_cut_short_but_printed_whole_ends_with_its_note_not_its_end_again() -> None:
    live, out = _live()
    printed = b"".join(b"line %02d\n" % i for i in range(40)) + b"unfinished"
    live.feed("stdout", printed)
    text = printed.decode()
    stream = {"head": text, "tail": text[-51:], "truncated": True, "bytes": len(printed)}
    result, cut, _ = preview(stream, 100, "stdout")
    assert cut and "line 39" in result.split("...]")[1]  # the result's end: lines already on the terminal
    note = f"[... stdout cut: {len(printed):,} bytes in all; the rest could not be saved ...]"
    assert live.rest("stdout", result) == f"\n{note}\n"  # its end, "unfinished", is on the terminal already
    assert _shown(live, out).count("line 39") == 1 and _shown(live, out).endswith("unfinished")


def test_output_cleaned_differently_in_pieces_is_printed_again_rather_than_lost() -> None:
    """An escape sequence left open eats the lines after it up to its end: across pieces in the whole text, to its
    piece's end in a piece. The end is still printed whole."""
    live, out = _live()
    pieces = [b"\x1b]title\nA\n", b"B\nC\n", b"\x07D\nE\n", b"the last line"]
    for piece in pieces:
        live.feed("stdout", piece)
    assert _shown(live, out) == "B\nC\nD\nE\nthe last line"
    text = clean_text(b"".join(pieces).decode())
    assert text == "D\nE\nthe last line"
    rest = live.rest("stdout", text)
    assert rest is not None and rest.endswith("the last line")


def test_a_line_that_looks_like_a_results_note_is_output_like_any_other() -> None:
    live, _ = _live()
    live.feed("stdout", b"first\n")
    text = "first\nsecond\n\n[... stdout cut: 5 bytes in all; printed by the script ...]\nthird"
    assert live.rest("stdout", text) == text[len("first\n") :]


@pytest.mark.docker
def test_exec_on_a_terminal_shows_a_progress_bar_while_the_script_runs(tmp_path: Path, owner: str) -> None:
    code = (
        "import sys, time\nfor step in (1, 2):\n    sys.stderr.write(f'\\rstep {step} of 3')\n    sys.stderr.flush()\n"
        "    time.sleep(0.5)\ntime.sleep(600)\n"
    )
    _, shown = exec_on_a_terminal(tmp_path, owner, code, b"step 2 of 3")
    assert shown.count("step 1 of 3") == 1 and shown.count("step 2 of 3") == 1, shown
    assert "step 1 of 3\nstep 2 of 3\ntooltree: interrupted" in shown, shown


@pytest.mark.docker
def test_exec_on_a_terminal_goes_on_showing_the_output_past_its_head(tmp_path: Path, owner: str) -> None:
    # output_chars 100: the head is 400 bytes, and then the end (200 bytes) is sent at most every 2 s.
    code = (
        "import time\nfor n in range(40):\n    print(f'log line {n:04d} of a long job', flush=True)\n"
        "print('past the head', flush=True)\ntime.sleep(600)\n"
    )
    before, shown = exec_on_a_terminal(tmp_path, owner, code, b"past the head", output_chars=100)
    assert "log line 0000" in before and " not shown ...]" in before, before  # the head, then what was skipped
    assert shown.count("past the head") == 1, shown  # while it ran, and not again at the end
    assert "[... stdout cut: " in shown.split("tooltree: interrupted")[1], shown  # the result's note at the end
