"""A script that runs out of its time says where it was: its result's traceback lists the script's frames at that
moment (the loop it was stuck in, the call it waited in), ending ``TimeoutError: timed out after N s``; the model sees
it in the result's text. Before: only ``timed out after N s``, and a script stuck in a loop had no line to go on.

The supervisor asks the interpreter (a signal its cell runs on after) and kills it after at most half a second, as
before; a script that ignores the question times out as before, without a traceback. Real containers."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from agent.content import execution_blocks
from sandbox import DockerBackend, Sandbox

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def session(backend: DockerBackend) -> Iterator[Sandbox]:
    with Sandbox(backend) as sb:
        yield sb


def test_a_script_stuck_in_a_loop_is_told_the_line_it_was_on(session: Sandbox) -> None:
    code = "def spin(n):\n    while n >= 0:\n        n += 1\n\nprint('started')\nspin(0)\n"
    result = session.execute(code, timeout=1)
    assert result.timed_out and result.state_reset and result.error == "timed out after 1 s"
    assert result.stdout == "started\n"
    assert result.traceback is not None
    lines = result.traceback.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1] == "TimeoutError: timed out after 1 s"
    frames = [re.sub(r"<cell-\d+>", "<cell>", line.strip()) for line in lines[1:-1]]
    assert frames[:2] == ['File "<cell>", line 6, in <module>', "spin(0)"], frames
    assert frames[2] in ('File "<cell>", line 2, in spin', 'File "<cell>", line 3, in spin'), frames
    assert "_supervisor" not in result.traceback  # tooltree's own frames are not the script's
    text = execution_blocks(result)[0]["text"]
    assert "[error]\nTraceback (most recent call last):" in text and text.endswith(
        "TimeoutError: timed out after 1 s\n\n"
        "[the interpreter was restarted: variables and imports are gone; files remain]"
    )


def test_a_script_waiting_in_a_sleep_is_told_where(session: Sandbox) -> None:
    result = session.execute("import time\n\ntime.sleep(300)\n", timeout=1)
    assert result.timed_out and result.traceback is not None
    assert re.search(r'File "<cell-\d+>", line 3, in <module>\n    time\.sleep\(300\)\n', result.traceback), (
        result.traceback
    )
    assert session.execute("print('after')").stdout == "after\n"  # the session goes on, on a new interpreter


def test_a_script_that_ignores_the_question_times_out_as_before(session: Sandbox) -> None:
    code = "import signal, time\nsignal.signal(signal.SIGUSR2, signal.SIG_IGN)\ntime.sleep(300)\n"
    result = session.execute(code, timeout=1)
    assert result.timed_out and result.error == "timed out after 1 s" and result.traceback is None
    assert result.duration < 10
    assert session.execute("print('after')").stdout == "after\n"


def test_a_script_waiting_in_tooltrees_runtime_is_told_its_own_line_not_where_the_runtime_waited(
    session: Sandbox,
) -> None:
    # Before: the traceback ended in `File "/usr/lib/python3.11/threading.py", line 320, in wait`, `waiter.acquire()`:
    # the frame our runtime waited in (the same for a tool call that outlived the script's time), not the script's.
    code = "import time\nfrom tool_tree.runtime import parallel\nparallel(lambda: time.sleep(300))\n"
    result = session.execute(code, timeout=1)
    assert result.timed_out and result.traceback is not None
    lines = [re.sub(r"<cell-\d+>", "<cell>", line) for line in result.traceback.splitlines()]
    assert lines == [
        "Traceback (most recent call last):",
        '  File "<cell>", line 3, in <module>',
        "    parallel(lambda: time.sleep(300))",
        "TimeoutError: timed out after 1 s",
    ], result.traceback


def test_a_script_that_fails_in_a_library_it_called_is_still_shown_the_librarys_last_line(session: Sandbox) -> None:
    result = session.execute('import json\njson.loads("{")\n')
    assert result.traceback is not None and result.error is not None
    assert result.error.startswith("json.decoder.JSONDecodeError: Expecting property name")
    lines = result.traceback.splitlines()
    assert re.fullmatch(r'  File ".*/json/decoder\.py", line \d+, in raw_decode', lines[3]), result.traceback
    assert [re.sub(r"<cell-\d+>", "<cell>", line) for line in lines[1:3]] == [
        '  File "<cell>", line 2, in <module>',
        '    json.loads("{")',
    ]
