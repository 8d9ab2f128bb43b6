"""A closed terminal (SIGHUP) stops `tooltree exec`, `tooltree agent` and `tooltree generate-tree` as SIGTERM does:
the workspace is saved, the servers they started (those that left their process group too) are ended, the sandbox
stopped, and they exit 129. Before, SIGHUP's default action ended them at once, as ``kill -9`` does.

Real parts: real `tooltree` processes, some on a pseudo-terminal that is then closed (the kernel hangs it up: SIGHUP
to the session's leader, EIO on every later write to it), real servers, a real container, the fake Messages API's
real HTTP server.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docker_cli import EngineWithCLI
from tests.support import RAW_SERVER, REPO, alive, sample_project

WAIT = 60.0
"""Seconds any one step may take at most (a container start on a busy machine included)."""

HUNG_UP = "tooltree: hung up (SIGHUP: its terminal closed)\n"

_LEADER = (
    "import fcntl, os, sys, termios\n"
    "fcntl.ioctl(2, termios.TIOCSCTTY, 0)\n"  # stderr's terminal becomes the session's: closing it hangs tooltree up
    "os.execv(sys.executable, [sys.executable, '-m', 'tooltree_cli.main', *sys.argv[1:]])\n"
)
"""Runs `tooltree` as the leader of a session whose controlling terminal is its stderr (started in a new session)."""


class Terminal:
    """A pseudo-terminal: ``slave`` for the process, ``master`` for the test, which reads what it shows and closes
    it (`hang_up`)."""

    def __init__(self) -> None:
        self.master, self.slave = pty.openpty()
        self.seen = bytearray()

    def read_until(self, wanted: bytes) -> None:
        """Read what the terminal shows until ``wanted`` is in it; bounded by `WAIT`."""
        deadline = time.monotonic() + WAIT
        while wanted not in self.seen:
            assert time.monotonic() < deadline, f"waited for {wanted!r}; the terminal showed {bytes(self.seen)!r}"
            ready, _, _ = select.select([self.master], [], [], 0.5)
            if ready:
                data = os.read(self.master, 65536)
                assert data, f"the terminal closed before {wanted!r}: {bytes(self.seen)!r}"
                self.seen += data

    def hang_up(self) -> None:
        """Close the terminal, as closing its window does."""
        if self.master >= 0:
            os.close(self.master)
            self.master = -1


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    term = Terminal()
    yield term
    term.hang_up()
    os.close(term.slave)


def _tooltree(argv: list[str], terminal: Terminal | None, env: dict[str, str] | None = None, **streams: Any) -> Any:
    """A `tooltree` process: on ``terminal`` (its stderr, and its session's controlling terminal), or with stderr
    piped; ``streams``: its stdout (default: piped)."""
    env = {**os.environ, **(env or {})}
    streams.setdefault("stdout", subprocess.PIPE)
    if terminal is None:
        argv = [sys.executable, "-m", "tooltree_cli.main", *argv]
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                                cwd=REPO, **streams)  # fmt: skip
    argv = [sys.executable, "-c", _LEADER, *argv]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=terminal.slave, text=True, env=env, cwd=REPO,
                            start_new_session=True, **streams)  # fmt: skip


def _wait_for_file(path: Path, proc: subprocess.Popen[str]) -> str:
    """The text of ``path`` once something was written to it (a process started); bounded by `WAIT`."""
    deadline = time.monotonic() + WAIT
    while not (path.exists() and path.read_text(encoding="utf-8").strip()):
        assert proc.poll() is None, "tooltree ended first"
        assert time.monotonic() < deadline, f"{path.name} was never written"
        time.sleep(0.02)  # a poll of the file, bounded by the deadline
    return path.read_text(encoding="utf-8").strip()


def _gone(*pids: int) -> list[int]:
    """Those of ``pids`` still running `WAIT` seconds on (none, once each ended)."""
    deadline = time.monotonic() + WAIT
    while (running := [pid for pid in pids if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.02)  # a poll of the process table, bounded by the deadline
    return running


def _end(*pids: int) -> None:
    """End what a failed test left running."""
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


# A server that starts a helper in a session of its own (out of its process group: found by its mark alone), then
# lists no tools for an hour.
_DETACHING = (
    "import os, subprocess, sys\n"
    "helper = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True,\n"
    "                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "open(sys.argv[1], 'w').write(str(helper.pid))\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])\n"
)


@pytest.mark.parametrize("how", ["terminal-closed", "kill-hup"])
def test_sighup_stops_generate_tree_ends_its_servers_and_their_detached_helpers_and_exits_129(
    tmp_path: Path, terminal: Terminal, how: str
) -> None:
    # Before: SIGHUP ended generate-tree at once (-1): the server listing its tools and the helper it had started in a
    # session of its own ran on.
    server_pid_file, helper_pid_file, spec = tmp_path / "server.pid", tmp_path / "helper.pid", tmp_path / "spec.json"
    spec.write_text(json.dumps({"behavior": "hang_on_list", "pid_file": str(server_pid_file)}), encoding="utf-8")
    args = ["-c", _DETACHING, str(helper_pid_file), str(RAW_SERVER), str(spec)]
    config = tmp_path / "tooltree.yaml"
    config.write_text(f"servers:\n  slow:\n    command: {json.dumps(sys.executable)}\n    args: {json.dumps(args)}\n"
                      "    timeout: 120\n", encoding="utf-8")  # fmt: skip
    argv = ["generate-tree", "--config", str(config), "--out", str(tmp_path / "tree")]
    on_terminal = how == "terminal-closed"
    proc = _tooltree(argv, terminal if on_terminal else None)
    pids: list[int] = []
    try:
        pids.append(int(_wait_for_file(helper_pid_file, proc)))
        pids.append(int(_wait_for_file(server_pid_file, proc)))
        if on_terminal:
            terminal.read_until(b"listing tools from 1 server(s)")
            terminal.hang_up()
        else:
            proc.send_signal(signal.SIGHUP)
        _, err = proc.communicate(timeout=WAIT)
        assert proc.returncode == 129, err
        assert _gone(*pids) == [], "a server, or the helper it detached, outlived generate-tree"
    finally:
        proc.kill()
        proc.wait()
        _end(*pids)
    if not on_terminal:
        assert err.endswith(HUNG_UP), err
    assert not (tmp_path / "tree" / "manifest.json").exists()


# Prints, writes into the workspace, says so on stderr (a terminal shows it as it comes), makes a tool call (the
# audit file shows it) and sleeps far longer than the test waits.
SCRIPT = """\
import pathlib, sys, time
from servers.crm import list_leads
print("first", flush=True)
pathlib.Path("partial.txt").write_text("made before the hang-up")
print("written", file=sys.stderr, flush=True)
list_leads(limit=1)
time.sleep(100)
print("never")
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The config and tree of the sample crm, which each test of `exec` or `agent` here runs on (generated once)."""
    return sample_project(tmp_path_factory.mktemp("sighup"), "crm", timeout=120)


def _exec_argv(project: tuple[Path, Path], tmp_path: Path, *options: str) -> tuple[list[str], Path]:
    """The arguments of `tooltree exec` of `SCRIPT` on ``project`` (and ``options``) with a workspace folder made in
    ``tmp_path``, and that folder."""
    config, tree = project
    workspace = tmp_path / "ws"
    workspace.mkdir()
    argv = ["exec", "-c", SCRIPT, "--config", str(config), "--tree", str(tree), "--workspace", str(workspace)]
    return [*argv, *options], workspace


@pytest.mark.docker
def test_a_closed_terminal_stops_exec_saves_the_workspace_prints_where_it_can_and_exits_129(
    docker_engine: EngineWithCLI, project: tuple[Path, Path], tmp_path: Path, owner: str, terminal: Terminal
) -> None:
    # Before: SIGHUP ended exec at once (-1): the workspace was not saved, the script's output lost. Its stdout is a
    # file here: what the script printed still goes there; the closed terminal (stderr) takes nothing, without error.
    argv, workspace = _exec_argv(project, tmp_path)
    stdout = tmp_path / "stdout.txt"
    with stdout.open("w", encoding="utf-8") as out:
        proc = _tooltree(argv, terminal, {"TOOLTREE_SANDBOX_OWNER": owner}, stdout=out)
        try:
            terminal.read_until(b"written")
            terminal.hang_up()
            assert proc.wait(WAIT) == 129
        finally:
            proc.kill()
            proc.wait()
    assert stdout.read_text(encoding="utf-8") == "first\n"
    assert (workspace / "partial.txt").read_text(encoding="utf-8") == "made before the hang-up"
    assert docker_engine.owned(owner) == []


@pytest.mark.docker
def test_sighup_to_exec_says_so_after_what_the_script_did(
    docker_engine: EngineWithCLI, project: tuple[Path, Path], tmp_path: Path, owner: str
) -> None:
    # The terminal is still there (`kill -HUP`): the script's result is printed, then why tooltree stopped.
    audit = tmp_path / "audit.jsonl"
    argv, workspace = _exec_argv(project, tmp_path, "--audit", str(audit))
    proc = _tooltree(argv, None, {"TOOLTREE_SANDBOX_OWNER": owner})
    try:
        _wait_for_file(audit, proc)  # the script's tool call: it has printed, written its file, and sleeps
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=WAIT)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 129, err
    assert out == "first\n"
    assert "written\n" in err and "  call crm.list_leads  ok  " in err
    assert err.endswith(
        "· tooltree exit 129 because tooltree's terminal closed (SIGHUP), which stopped the script\n" + HUNG_UP
    ), err
    assert (workspace / "partial.txt").read_text(encoding="utf-8") == "made before the hang-up"
    assert docker_engine.owned(owner) == []


@pytest.mark.docker
def test_sighup_stops_an_agent_run_saves_the_workspace_ends_the_transcript_and_exits_129(
    docker_engine: EngineWithCLI, project: tuple[Path, Path], tmp_path: Path, owner: str
) -> None:
    # Before: SIGHUP ended the agent at once (-1): the file its script wrote never reached the workspace folder, and
    # the transcript had no run_end.
    from agent import read_transcript
    from agent.testing import FakeMessagesAPI, reply, tool_use

    config, tree = project
    workspace, transcript = tmp_path / "ws", tmp_path / "run.jsonl"
    workspace.mkdir()
    started, ended = threading.Event(), threading.Event()
    procs: list[subprocess.Popen[str]] = []

    def hang_up(request: dict[str, object]) -> dict[str, object]:  # the script has run: the model is asked again
        assert started.wait(WAIT)
        procs[0].send_signal(signal.SIGHUP)
        ended.wait(WAIT)  # answered only once tooltree has gone
        return reply("never read")

    code = "import pathlib\npathlib.Path('partial.txt').write_text('made before the hang-up')\nprint('written')"
    with FakeMessagesAPI([reply(tool_use("execute_python", {"code": code})), hang_up]) as api:
        env = {"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": api.base_url, "TOOLTREE_SANDBOX_OWNER": owner}
        argv = ["agent", "Write the file", "--config", str(config), "--tree", str(tree), "--mode", "code",
                "--workspace", str(workspace), "--transcript", str(transcript), "--quiet"]  # fmt: skip
        procs.append(_tooltree(argv, None, env))
        started.set()
        try:
            _, err = procs[0].communicate(timeout=WAIT)
        finally:
            ended.set()
            procs[0].kill()
            procs[0].wait()
    assert procs[0].returncode == 129, err
    assert err.endswith(HUNG_UP), err
    assert (workspace / "partial.txt").read_text(encoding="utf-8") == "made before the hang-up"
    end = read_transcript(transcript)[-1]
    assert end["type"] == "run_end" and end["summary"]["stop_reason"] == "interrupted", end
    assert docker_engine.owned(owner) == []


def test_sighup_raises_hung_up_once_then_is_ignored_and_stays_ignored_under_nohup(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tooltree_cli.signals import HungUp, signals_stop_like_ctrl_c

    caught: list[int] = []

    def guard(signum: int, frame: object) -> None:  # the test session's own: where the command set none
        caught.append(signum)

    before = signal.signal(signal.SIGHUP, guard)
    try:
        with signals_stop_like_ctrl_c():
            pass
        assert signal.getsignal(signal.SIGHUP) is guard  # put back after a run no SIGHUP stopped
        with signals_stop_like_ctrl_c():
            with pytest.raises(HungUp) as raised:
                os.kill(os.getpid(), signal.SIGHUP)
                signal.sigtimedwait([], 0)  # let the handler run here (never waits)
            assert (raised.value.exit_code, raised.value.said) == (129, HUNG_UP.removeprefix("tooltree: ").strip())
            # A closed terminal may send it again (the shell, then the kernel as the shell exits): the cleanup the
            # first one began goes on, and so does the printing after it.
            os.kill(os.getpid(), signal.SIGHUP)
            signal.sigtimedwait([], 0)
            print("the cleanup goes on")
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN and caught == []
        with signals_stop_like_ctrl_c():  # as under `nohup`, which starts a command with SIGHUP ignored
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)
    assert capsys.readouterr().out == "the cleanup goes on\n"
