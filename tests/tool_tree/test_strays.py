"""`tool_tree.strays`: the processes of one server's start are found by their mark and ended, no others."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.support import alive
from tool_tree.strays import MARK_ENV, end_marked, new_mark

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="pidfds are Linux's")

# Ignores SIGTERM, says it is ready, sleeps.
STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(600)"
)


def start(env: dict[str, str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", STUBBORN], env={**os.environ, **env}, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"  # its handler is in place
    return proc


def test_only_the_processes_holding_the_mark_are_ended_sigkill_after_the_grace() -> None:
    mark = new_mark()
    marked = start({MARK_ENV: mark})
    other = start({MARK_ENV: new_mark()})
    prefix = start({MARK_ENV: mark + "0"})  # the whole entry must match, not its start
    try:
        began = time.monotonic()
        assert end_marked(mark, grace=0.5) == 1
        assert 0.5 <= time.monotonic() - began < 5  # SIGTERM was ignored: SIGKILL after the grace
        assert marked.wait(5) == -9
        assert alive(other.pid) and alive(prefix.pid)
        assert end_marked(mark) == 0  # nothing left to end
    finally:
        for proc in (marked, other, prefix):
            proc.kill()
            proc.wait()
            assert proc.stdout is not None
            proc.stdout.close()
