"""Ctrl-C during `tooltree exec`, in a real `tooltree exec` process with a real container: the first one stops
the script and prints what it did until then, and a server still at the script's call is signalled at once; a second
one quits at once. Neither leaves a container."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest
from mcp.client.stdio import PROCESS_TERMINATION_TIMEOUT

from tests.docker_cli import EngineWithCLI
from tests.support import raw_server_tree, sample_project

WAIT = 60.0
"""Seconds any one step may take at most (a container start on a busy machine included)."""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return sample_project(tmp_path_factory.mktemp("exec-interrupt"), "crm", timeout=120)


def _start(owner: str, *argv: str) -> subprocess.Popen[str]:
    env = {**os.environ, "TOOLTREE_SANDBOX_OWNER": owner}
    return subprocess.Popen(
        [sys.executable, "-m", "tooltree_cli.main", "exec", *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8", env=env,
    )  # fmt: skip


def _wait_for_call(proc: subprocess.Popen[str], audit: Path) -> None:
    """Until the script's tool call is in the audit file: the script runs, and printed what it prints before it."""
    deadline = time.monotonic() + WAIT
    while not (audit.exists() and audit.read_text(encoding="utf-8").strip()):
        assert proc.poll() is None, f"tooltree exec ended first: {proc.communicate()}"
        assert time.monotonic() < deadline, "the script's tool call never came"
        time.sleep(0.05)  # a poll of the host-side event, bounded by the deadline


def stopped_in_script(traceback: str) -> bool:
    """Whether ``traceback`` is of the interrupt stopping `SCRIPT` after its call was made: in its sleep, or while the
    call's result was still on its way into the script (the audit line is written as the host hands it back; CI met
    the signal there once)."""
    return traceback.rstrip().endswith("KeyboardInterrupt") and (
        "    time.sleep(100)\n" in traceback or "    list_leads(limit=1)\n" in traceback
    )


def _lines(stream: IO[str]) -> tuple[queue.Queue[str | None], threading.Thread]:
    """The lines ``stream`` gives, as they come (None at its end), and the thread that reads them."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return lines, reader


def _read_until(lines: queue.Queue[str | None], text: str) -> list[str]:
    """The lines read until one holding ``text`` (it included); fails when the stream ends first or it is late."""
    seen: list[str] = []
    deadline = time.monotonic() + WAIT
    while True:
        line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        assert line is not None, f"no line with {text!r}; stderr was: {''.join(seen)!r}"
        seen.append(line)
        if text in line:
            return seen


# The script prints, makes a tool call (which the test waits for) and sleeps far longer than the test waits.
SCRIPT = """\
import pathlib, time
from servers.crm import list_leads
print("first", flush=True)
pathlib.Path("partial.txt").write_text("made before the interrupt")
list_leads(limit=1)
time.sleep(100)
print("never")
"""


def _signalled_once_called(
    sig: signal.Signals, project: tuple[Path, Path], owner: str, tmp_path: Path, as_json: bool
) -> tuple[int, str, str, Path]:
    """`tooltree exec --workspace` of `SCRIPT` (``--json`` if ``as_json``) sent ``sig`` once its tool call was made:
    its exit status, stdout, stderr and workspace."""
    config, tree = project
    audit, workspace = tmp_path / "audit.jsonl", tmp_path / "ws"
    workspace.mkdir()
    argv = ["-c", SCRIPT, "--config", str(config), "--tree", str(tree), "--audit", str(audit)]
    proc = _start(owner, *argv, "--workspace", str(workspace), *(["--json"] if as_json else []))
    try:
        _wait_for_call(proc, audit)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=WAIT)
    finally:
        proc.kill()
        proc.wait()
    return proc.returncode, out, err, workspace


@pytest.mark.docker
@pytest.mark.parametrize("as_json", [True, False], ids=["json", "human"])
def test_ctrl_c_stops_the_script_and_prints_what_it_did_saves_the_workspace_and_exits_130(
    docker_engine: EngineWithCLI, project: tuple[Path, Path], owner: str, tmp_path: Path, as_json: bool
) -> None:
    # Before: Ctrl-C printed only "tooltree: interrupted" (--json: nothing on stdout); output and ledger were lost.
    code, out, err, workspace = _signalled_once_called(signal.SIGINT, project, owner, tmp_path, as_json)
    assert code == 130, err
    assert "tooltree: interrupted: stopping the script (Ctrl-C again quits at once)\n" in err
    if as_json:
        printed = json.loads(out)
        assert printed["stdout"] == "first\n" and printed["interrupted"] is True
        assert printed["error"] == "cancelled (KeyboardInterrupt)" and stopped_in_script(printed["traceback"])
        assert [(c["server"], c["tool"], c["ok"]) for c in printed["calls"]] == [("crm", "list_leads", True)]
    else:
        assert out == "first\n"
        assert stopped_in_script(err[: err.index("KeyboardInterrupt\n") + 18]) and "  call crm.list_leads  ok  " in err
        assert err.endswith("· tooltree exit 130 because the script was interrupted (Ctrl-C)\n")
    assert (workspace / "partial.txt").read_text(encoding="utf-8") == "made before the interrupt"
    assert docker_engine.owned(owner) == []


STUBBORN = """\
import sys, time
from servers.crm import list_leads
print("first", flush=True)
print("to stderr", file=sys.stderr, flush=True)
list_leads(limit=1)
while True:
    try:
        time.sleep(100)
    except KeyboardInterrupt:
        pass
"""


@pytest.mark.docker
@pytest.mark.parametrize("as_json", [True, False], ids=["json", "human"])
def test_a_second_ctrl_c_quits_at_once_prints_what_the_script_did_and_leaves_no_container(
    docker_engine: EngineWithCLI, project: tuple[Path, Path], owner: str, tmp_path: Path, as_json: bool
) -> None:
    # The script ignores its KeyboardInterrupt: the sandbox would restart its interpreter in 3 s; the user does not
    # wait for that. Before: the first Ctrl-C quit at once, never saying it stops the script; later the second one
    # printed only "tooltree: interrupted", what the script had printed and the call it had made lost (piped, or
    # with --json: nothing on stdout).
    config, tree = project
    audit = tmp_path / "audit.jsonl"
    argv = ["-c", STUBBORN, "--config", str(config), "--tree", str(tree), "--audit", str(audit)]
    proc = _start(owner, *argv, *(["--json"] if as_json else []))
    assert proc.stdout is not None and proc.stderr is not None
    lines, reader = _lines(proc.stderr)
    with proc:  # closes the pipes after
        try:
            _wait_for_call(proc, audit)
            proc.send_signal(signal.SIGINT)
            said = _read_until(lines, "stopping the script")
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=WAIT)
            err = "".join([*said, *iter(lambda: lines.get(timeout=WAIT), None)])
            out = proc.stdout.read()
        finally:
            proc.kill()
            proc.wait()
            reader.join(WAIT)
    assert proc.returncode == 130, err
    assert err.endswith("because the script was interrupted (Ctrl-C)\ntooltree: interrupted\n"), err
    if as_json:
        printed = json.loads(out)
        assert printed["stdout"] == "first\n" and printed["stderr"] == "to stderr\n"
        assert printed["interrupted"] is True and printed["exit_code"] is None and printed["sandbox_error"] is None
        assert printed["error"] == "quit before the sandbox reported the script's end"
        assert [(c["server"], c["tool"], c["ok"]) for c in printed["calls"]] == [("crm", "list_leads", True)]
        assert "the JSON's stdout and stderr hold what it sent before) · 1 tool call(s) · " in err
    else:
        assert out == "first\n"
        assert "to stderr\n" in err and "  call crm.list_leads  ok  " in err
        assert "tooltree: the script's end was not reported (the output above is what it sent before) · 1 tool" in err
        assert "tooltree: error" not in err
    assert docker_engine.owned(owner) == []


SLEEP = [{"name": "sleep", "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}}}]
SLEEPS = "from servers.raw import sleep\nsleep(seconds=120)\n"
"""A script that stays in a call of the server of `sleeping_server` for 120 s."""


def sleeping_server(folder: Path) -> tuple[list[str], Path]:
    """The config and tree arguments of `tooltree exec` for a raw server whose ``sleep`` tool sleeps as long as it is
    told, and the file it logs its calls and its SIGTERM in (each with the system-wide monotonic time)."""
    tree, _ = raw_server_tree(folder, SLEEP)
    log = folder / "calls.log"
    spec = {"pages": [SLEEP], "log_file": str(log), "log_signals": True}
    (folder / "raw.json").write_text(json.dumps(spec), encoding="utf-8")
    return ["--config", str(folder / "tooltree.yaml"), "--tree", str(tree)], log


@pytest.mark.docker
def test_ctrl_c_during_a_tool_call_signals_the_server_still_at_it_at_once(
    docker_engine: EngineWithCLI, owner: str, tmp_path: Path
) -> None:
    # Before: the first Ctrl-C stopped the script, then the runtime closed as after any run, so the server, still at
    # the call the script had made, got SIGTERM only after the 2 s of grace from its stdin's close given to a server
    # to leave on its own, which one busy with a call never does: `exec` waited for it (3.0 s from Ctrl-C to exit on
    # a quiet machine, now 0.6 s).
    where, log = sleeping_server(tmp_path)
    proc = _start(owner, "-c", SLEEPS, *where)
    try:
        deadline = time.monotonic() + WAIT
        while not (log.exists() and "called:sleep " in log.read_text(encoding="utf-8")):
            assert proc.poll() is None, f"tooltree exec ended first: {proc.communicate()}"
            assert time.monotonic() < deadline, "the server never took the call"
            time.sleep(0.02)  # a poll of the server's log, bounded by the deadline
        started = time.monotonic()  # the clock the server logs by: system-wide
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=WAIT)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, err
    assert "  call raw.sleep  error: cancelled: " in err
    (signalled,) = [
        float(line.split()[1]) for line in log.read_text(encoding="utf-8").splitlines() if "sigterm " in line
    ]
    assert signalled - started < PROCESS_TERMINATION_TIMEOUT  # before: only once the grace, from after it, had ended
    assert docker_engine.owned(owner) == []


@pytest.mark.docker
def test_a_timeout_during_a_tool_call_signals_the_server_still_at_it_at_once(
    docker_engine: EngineWithCLI, owner: str, tmp_path: Path
) -> None:
    # Before: the script timed out, then the runtime closed as after any run, so the server still at the script's call
    # got SIGTERM only after the 2 s of grace a server is given to leave on its own (5.3 s after the call of a script
    # of --timeout 3).
    where, log = sleeping_server(tmp_path)
    timeout = 3.0
    proc = _start(owner, "-c", SLEEPS, "--timeout", f"{timeout:g}", *where)
    try:
        _, err = proc.communicate(timeout=WAIT)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 1, err
    assert "timed out" in err, err
    lines = log.read_text(encoding="utf-8").splitlines()
    (called,) = [float(line.split()[1]) for line in lines if line.startswith("called:sleep ")]
    (signalled,) = [float(line.split()[1]) for line in lines if "sigterm " in line]
    # The script's clock started before its call, so its end is less than `timeout` after the call.
    assert signalled - called - timeout < PROCESS_TERMINATION_TIMEOUT  # before: only once the grace had ended
    assert docker_engine.owned(owner) == []


@pytest.mark.docker
def test_ctrl_c_while_the_server_of_the_call_starts_says_it_was_starting_without_the_timeouts_advice(
    owner: str, tmp_path: Path
) -> None:
    # Before: the call's line said "a script that waits longer needs a longer sandbox timeout, and the server its own
    # timeout setting", as after a timeout, though the user had stopped the script.
    tree, _ = raw_server_tree(tmp_path, [{"name": "echo", "inputSchema": {"type": "object"}}])
    log = tmp_path / "server.log"
    spec = tmp_path / "raw.json"
    spec.write_text(
        json.dumps({**json.loads(spec.read_text(encoding="utf-8")), "start_delay": 600, "log_file": str(log)}),
        encoding="utf-8",
    )
    code = "from servers.raw import echo\necho()"
    proc = _start(owner, "-c", code, "--config", str(tmp_path / "tooltree.yaml"), "--tree", str(tree), "--json")
    try:
        deadline = time.monotonic() + WAIT
        while not (log.exists() and "start " in log.read_text(encoding="utf-8")):  # started by the script's call
            assert proc.poll() is None, f"tooltree exec ended first: {proc.communicate()}"
            assert time.monotonic() < deadline, "the server was never started"
            time.sleep(0.02)  # a poll of the server's log, bounded by the deadline
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=WAIT)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, err
    (call,) = json.loads(out)["calls"]
    assert call["error"] == (
        "cancelled: the execution ended before the server answered (the server raw was still starting: it had not "
        "answered its start-up yet)"
    )
