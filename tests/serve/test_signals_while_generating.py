"""A signal while `tooltree serve` generates a missing tree, before it serves: the servers it started are ended.

A client that gave up waiting for its handshake (Claude Code waits 30 s, then sends SIGINT, SIGTERM and SIGKILL within
about a second) stops serve while it still lists the servers. Before, SIGTERM and SIGHUP ended serve at once (status
−15, −1) and the server it was listing ran on, orphaned; SIGINT took 2.5 s, past the client's SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.serve.conftest import MARK_ENV, marked_processes
from tests.support import REPO, wait_until

SILENT = "import time\ntime.sleep(600)\n"
"""A server that never answers: its listing waits for its timeout (here 600 s)."""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
@pytest.mark.parametrize("http", [False, True], ids=["stdio", "http"])
def test_a_signal_while_the_missing_tree_is_generated_ends_its_servers_and_serve(
    tmp_path: Path, signum: signal.Signals, http: bool
) -> None:
    mark = uuid.uuid4().hex[:12]
    server = tmp_path / "silent_server.py"
    server.write_text(SILENT, encoding="utf-8")
    config = tmp_path / "tooltree.yaml"
    config.write_text(
        f"servers:\n  silent:\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(server))}]\n"
        f"    env: {{{MARK_ENV}: {json.dumps(mark)}}}\n    timeout: 600\n",
        encoding="utf-8",
    )
    tree = tmp_path / "tree"
    argv = [sys.executable, "-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree)]
    argv += ["--http", "--port", "0"] if http else []
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, "TOOLTREE_SERVE_TOKEN": "signals-token-0123456789"},
    )  # fmt: skip
    try:
        wait_until(lambda: bool(marked_processes(mark)), "serve to start the server it lists", timeout=60)
        started = marked_processes(mark)
        proc.send_signal(signum)
        # Within the second a client like Claude Code gives before its SIGKILL, with room for a loaded machine.
        code = proc.wait(timeout=10)
        _, stderr = proc.communicate(timeout=10)
        left = marked_processes(mark)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in marked_processes(mark):
            os.kill(pid, signal.SIGKILL)
    assert code == 128 + signum, stderr
    assert f"stopped generating {tree} ({signum.name})" in stderr, stderr
    assert started and not left, "a server outlived serve"
    assert not tree.exists(), "nothing is written"
