"""`tooltree agent` while a script runs (`tooltree_cli.agent_live`): on a terminal, a line every few seconds says how
long it has run, the tool call it waits on and the last line it printed; piped, nothing more than before. The real
CLI on a pseudo-terminal, the real ``anthropic`` SDK against the fake API, a real sandbox and the sample servers."""

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
from types import SimpleNamespace

import pytest

from agent.events import ToolFinished
from agent.testing import FakeMessagesAPI, reply, tool_use
from tests.agent.conftest import Project
from tooltree_cli import agent_live, agent_view
from tooltree_cli.main import main

WAIT = 90.0
SCRIPT = "from servers.media import slow_echo\nprint('fetching 500 leads')\nslow_echo(text='x', seconds={seconds})\n"
# As a user runs it in a terminal: Ctrl-C is a KeyboardInterrupt (a test run in a background job ignores SIGINT).
CLI = (
    "import signal, sys\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "from tooltree_cli.main import main\nsys.exit(main(sys.argv[1:]))\n"
)


def _read_until(master: int, seen: bytearray, wanted: re.Pattern[bytes] | None) -> None:
    """Read the terminal into ``seen`` until ``wanted`` matches it (None: until it closes); bounded by `WAIT`."""
    deadline = time.monotonic() + WAIT
    while wanted is None or not wanted.search(seen):
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


@pytest.mark.docker
def test_on_a_terminal_the_agent_says_what_a_running_script_waits_on_and_last_printed(
    project: Project, owner: str
) -> None:
    # Before: nothing showed between the reply's line and the script's end, as if the run hung.
    with FakeMessagesAPI([reply(tool_use("execute_python", {"code": SCRIPT.format(seconds=60)}))]) as api:
        master, slave = pty.openpty()
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": api.base_url,
               "TOOLTREE_SANDBOX_OWNER": owner}  # fmt: skip
        argv = [sys.executable, "-c", CLI, "agent", "Slow task", "--config", str(project.config_path), "--tree",
                str(project.tree)]  # fmt: skip
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env)
        os.close(slave)
        seen = bytearray()
        try:
            _read_until(master, seen, re.compile(rb"  execute_python running for [^\n]*\n"))
            assert proc.poll() is None, "the line came only once the script had ended"
            proc.send_signal(signal.SIGINT)
            _read_until(master, seen, None)
            assert proc.wait(WAIT) == 130
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(WAIT)
            os.close(master)
    shown = seen.decode("utf-8", errors="replace").replace("\r\n", "\n")
    line = next(line for line in shown.split("\n") if line.startswith("  execute_python running for"))
    pattern = (
        r"  execute_python running for (\d+) s; waiting on media\.slow_echo for (\d+) s; "
        r"last printed: fetching 500 leads"
    )
    assert (match := re.fullmatch(pattern, line)), shown
    assert int(match[1]) >= agent_live.NOTE_EVERY and int(match[2]) >= 1, line
    assert shown.index("[turn 1] tool_use") < shown.index(line) < shown.index("tooltree: interrupted"), shown
    # Ctrl-C says at once that it stops the script (before: nothing while the sandbox waited up to 10 s for it).
    stopping = shown.index("\ntooltree: interrupted: stopping the script (Ctrl-C again quits at once)\n")
    assert shown.index(line) < stopping < shown.index("  execute_python cancelled"), shown


@pytest.mark.docker
def test_piped_the_agent_says_nothing_of_a_running_script(
    project: Project,
    api: FakeMessagesAPI,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    docker_engine: object,
) -> None:
    monkeypatch.setattr(agent_live, "NOTE_EVERY", 0.05)  # many a line, were stderr a terminal
    api.add(reply(tool_use("execute_python", {"code": SCRIPT.format(seconds=1.5)})), reply("Done."))
    argv = ["agent", "Slow task", "--config", str(project.config_path), "--tree", str(project.tree)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "running for" not in err and "\n  execute_python ok · 1 call(s) from the script" in err, err


class _Toolset:
    """A code-mode toolset's `script_running` whose script has run ``seconds`` (None: no script runs)."""

    needs_sandbox = True

    def __init__(self) -> None:
        self.seconds: float | None = None

    def script_running(self, at_least: float = 0.0) -> str | None:
        if self.seconds is None or self.seconds < at_least:
            return None
        return f"running for {self.seconds:.0f} s"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_each_script_says_what_it_does_once_per_note_every_from_its_own_start() -> None:
    # Before: the thread looked every 5 s from the run's start, so a script's first line came 5 to 10 s into it, and a
    # script of 6 s could have none. Its looks are driven here (`tick`), not timed.
    toolset, terminal = _Toolset(), _Terminal()
    notes = agent_live.ScriptNotes(SimpleNamespace(toolset=toolset), stream=terminal)  # type: ignore[arg-type]
    every = agent_live.NOTE_EVERY
    for seconds in (None, 0.5, every - 0.1, every + 0.1, every + 0.6, 2 * every, None, 1.0, every):
        toolset.seconds = seconds
        notes.tick()
    assert terminal.getvalue().splitlines() == [
        f"  execute_python running for {every + 0.1:.0f} s",
        f"  execute_python running for {2 * every:.0f} s",
        f"  execute_python running for {every:.0f} s",  # the next script's first, at its own 5 s
    ]


class _Contended:
    """The live view's lock, setting ``tried`` when a thread comes to take it while another holds it."""

    def __init__(self, tried: threading.Event) -> None:
        self._lock, self._tried = threading.Lock(), tried

    def __enter__(self) -> None:
        if not self._lock.acquire(blocking=False):
            self._tried.set()
            self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def test_a_running_scripts_line_never_comes_after_its_calls_finished_line(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: the notes' thread found the script running, the script ended and its call's finished line was printed,
    # then the notes' thread printed its line, below the finished one. Here the script ends, and the loop prints the
    # finished line on its own thread, just after the notes' thread looked: the two lines come in the order they
    # happened.
    terminal, printed_or_waiting = _Terminal(), threading.Event()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(agent_view, "LIVE_LINES", _Contended(printed_or_waiting))
    finished = ToolFinished(1, "execute_python", "", False, 5.2, 0, 10, 10)

    def end_the_call() -> None:
        agent_view.live_view(finished)
        printed_or_waiting.set()

    loop = threading.Thread(target=end_the_call, daemon=True)

    class Toolset(_Toolset):
        def script_running(self, at_least: float = 0.0) -> str | None:
            said = super().script_running(at_least)
            if at_least and said is not None:  # the notes' look at it: the script ends just after
                self.seconds = None
                loop.start()
                assert printed_or_waiting.wait(WAIT)  # the finished line printed (before), or waiting for the lock
            return said

    toolset = Toolset()
    notes = agent_live.ScriptNotes(SimpleNamespace(toolset=toolset), stream=terminal)  # type: ignore[arg-type]
    toolset.seconds = agent_live.NOTE_EVERY
    notes.tick()
    loop.join(WAIT)
    lines = terminal.getvalue().splitlines()
    assert lines == [f"  execute_python running for {agent_live.NOTE_EVERY:.0f} s", lines[1]], lines
    assert lines[1].startswith("  execute_python [ok] · "), lines
