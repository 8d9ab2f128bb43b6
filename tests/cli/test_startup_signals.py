"""A Ctrl-C, SIGTERM or SIGHUP that reaches `tooltree` as it starts (its modules import, its arguments are read)
stops it as one a moment later does: ``exec --json`` prints its object (``quit before the script ran``), the last
line says why, and the exit code is the signal's (130, 143, 129). Before, SIGTERM's and SIGHUP's default action ended
it at once with nothing said (exit by the signal, an empty stdout), and a Ctrl-C printed no JSON.

Real parts: a real `tooltree` process; the signal is sent once the process is seen (in /proc) to catch SIGTERM, the
first moment tooltree can act on it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import REPO, sample_project

WAIT = 30.0
"""Seconds the process may take to catch SIGTERM, and then to end."""


def _catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (its SigCgt mask in /proc)."""
    status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    mask = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(mask, 16) >> (signum - 1) & 1)


def _stopped_as_it_starts(argv: list[str], env: dict[str, str], signum: int, code: int) -> tuple[str, str]:
    """Run ``argv``, send it ``signum`` once it catches SIGTERM, check it exits ``code``; its stdout and stderr."""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        deadline = time.monotonic() + WAIT
        while not _catches(proc.pid, signal.SIGTERM):
            assert proc.poll() is None and time.monotonic() < deadline, "tooltree never caught SIGTERM"
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=WAIT)
    assert proc.returncode == code, (proc.returncode, out, err)
    return out, err


@pytest.mark.parametrize(
    ("signum", "code", "said"),
    [
        (signal.SIGTERM, 143, "terminated"),
        (signal.SIGHUP, 129, "hung up (SIGHUP: its terminal closed)"),
        (signal.SIGINT, 130, "interrupted"),
    ],
)
def test_exec_json_stopped_as_it_starts_prints_its_object(tmp_path: Path, signum: int, code: int, said: str) -> None:
    config, tree = sample_project(tmp_path, "crm", timeout=60)
    argv = [sys.executable, "-m", "tooltree_cli.main", "exec", "-c", "print(1)"]
    argv += ["--config", str(config), "--tree", str(tree), "--json"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out, err = _stopped_as_it_starts(argv, env, signum, code)
    printed = json.loads(out)
    assert printed["error"] == "quit before the script ran" and printed["interrupted"] is True
    assert printed["exit_code"] is None and printed["stdout"] is None and printed["calls"] == []
    assert err == f"tooltree: {said}\n", err  # one line: nothing started that has more to say


@pytest.mark.parametrize(
    ("signum", "code", "said"), [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")]
)
def test_agent_json_stopped_as_it_starts_prints_its_run(tmp_path: Path, signum: int, code: int, said: str) -> None:
    # Before: the one line on stderr and an empty stdout, which a reader of --json could not parse.
    config, tree = sample_project(tmp_path, "crm", timeout=60)
    config.write_text(config.read_text(encoding="utf-8") + "agent:\n  mode: direct\n", encoding="utf-8")
    argv = [sys.executable, "-m", "tooltree_cli.main", "agent", "read the deal"]
    argv += ["--config", str(config), "--tree", str(tree), "--json", "--model", "claude-test-1"]
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "ANTHROPIC_API_KEY": "sk-test",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
    }
    out, err = _stopped_as_it_starts(argv, env, signum, code)
    run = json.loads(out)  # the run it would have made: the config's mode, the model asked for
    assert (run["mode"], run["model"], run["stop_reason"]) == ("direct", "claude-test-1", "interrupted")
    assert run["turns"] == 0
    assert err == f"tooltree: {said}\n", err
    assert run["usage"]["total"] == 0 and run["transcript"] is None
