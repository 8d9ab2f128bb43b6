"""`tooltree exec` on a terminal prints what the script prints as it comes, and at the end only the rest
(`tooltree_cli.exec_live`). Before: a long script showed nothing until it ended. Elsewhere (a pipe, ``--json``) the
output is printed once at the end, as the other exec tests check.

Real parts: a real `tooltree exec` process on a pseudo-terminal, a real container.
"""

from __future__ import annotations

import io
import os
import pty
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docker_cli import EngineWithCLI
from tests.support import TEST_OWNER, sample_project
from tooltree_cli.exec_live import LiveOutput

WAIT = 60.0


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_complete_lines_go_out_as_they_come_cleaned_and_the_rest_is_left_for_the_end() -> None:
    out, err = _Terminal(), io.StringIO()  # stderr is not a terminal: left for the end
    live = LiveOutput.on_terminals(out, err)
    assert live is not None
    live.feed("stdout", b"one\ntw")
    assert out.getvalue() == "one\n"  # a line goes out once it is whole
    live.feed("stdout", b"o \x1b[31mred\x1b[0m\r\nthr")
    assert out.getvalue() == "one\ntwo red\n"  # cleaned as a result's output is
    live.feed("stderr", b"warning\n")
    assert err.getvalue() == ""
    assert live.rest("stdout", "one\ntwo red\nthree") == "three"
    assert live.rest("stderr", "warning\n") == "warning\n"
    assert live.rest("stdout", None) is None


def test_an_output_cut_short_leaves_its_note_and_end_for_the_end() -> None:
    out = _Terminal()
    live = LiveOutput({"stdout": out})
    live.feed("stdout", b"".join(b"line %d\n" % i for i in range(100)))
    note = "[... stdout cut: 99,999 bytes in all; the whole stdout is in out.txt ...]"
    assert live.rest("stdout", f"line 0\nline 1\n\n{note}\n\nline 9999") == f"\n{note}\n\nline 9999"


def test_no_terminal_no_live_output() -> None:
    assert LiveOutput.on_terminals(io.StringIO(), io.StringIO()) is None


@pytest.fixture
def owner(docker_engine: EngineWithCLI) -> Iterator[str]:
    from sandbox.docker_backend import remove_containers

    name = f"{TEST_OWNER}-{uuid.uuid4().hex[:8]}"
    yield name
    remove_containers(docker_engine, label=f"tooltree.owner={name}")


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


@pytest.mark.docker
def test_exec_on_a_terminal_shows_the_output_while_the_script_runs(tmp_path: Path, owner: str) -> None:
    config, tree = sample_project(tmp_path, "crm", timeout=120)
    code = "import sys, time\nprint('first line')\nprint('partial', end='')\nsys.stdout.flush()\ntime.sleep(600)\n"
    master, slave = pty.openpty()
    env = {**os.environ, "TOOLTREE_SANDBOX_OWNER": owner}
    argv = [sys.executable, "-m", "tooltree_cli.main", "exec", "-c", code, "--config", str(config), "--tree", str(tree)]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    seen = bytearray()
    try:
        _read_until(master, seen, b"first line")
        assert proc.poll() is None, "the line came only once the script had ended"
        assert b"partial" not in seen  # a line goes out once it is whole
        proc.send_signal(signal.SIGINT)  # stops the script: what it printed is completed at the end
        _read_until(master, seen, None)
        assert proc.wait(WAIT) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(WAIT)
        os.close(master)
    shown = seen.decode("utf-8", errors="replace").replace("\r\n", "\n")
    assert shown.count("first line") == 1, shown  # live, and not again at the end
    assert shown.index("first line\n") < shown.index("partial\n"), shown
    assert shown.index("first line") < shown.index("tooltree: interrupted") < shown.index("partial\n"), shown
