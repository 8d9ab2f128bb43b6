"""`tooltree serve` over stdio whose client goes away (is killed) during a call: serve finds its stdout broken when
it next writes (a progress notification) and takes it as the client's leaving: exit status 0, no traceback, the
containers removed and the upstream servers ended, also one that outlives its stdin and one that ignores SIGTERM."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest

from tests.serve import test_stdio_shutdown as shutdown
from tests.serve.conftest import Serve, containers, marked_processes
from tests.serve.test_stdio_shutdown import STALL, WAIT, _noted
from tests.support import REPO, wait_until

pytestmark = [pytest.mark.docker]

stalling_tree = shutdown.stalling_tree  # the fixtures of the stalling server
stalling_serve = shutdown.stalling_serve


def _send(stdin: IO[str], message: dict[str, Any]) -> None:
    stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    stdin.flush()


def _read_until(stdout: IO[str], test: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    for line in stdout:
        message: dict[str, Any] = json.loads(line)
        if test(message):
            return message
    pytest.fail("tooltree serve closed its stdout")


def _start_stalling_call(serve: Serve, stderr: IO[bytes]) -> subprocess.Popen[str]:
    """A serve process whose client has made a call that never ends, and has seen a progress notification of it."""
    proc = subprocess.Popen(
        serve.argv(), env=serve.env(), cwd=REPO, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    client = {"name": "raw-test", "version": "0"}
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
    _send(proc.stdin, {"id": 1, "method": "initialize", "params": params})
    _read_until(proc.stdout, lambda m: m.get("id") == 1)
    _send(proc.stdin, {"method": "notifications/initialized"})
    call = {"name": "execute_python", "arguments": {"code": STALL}, "_meta": {"progressToken": "p"}}
    _send(proc.stdin, {"id": 2, "method": "tools/call", "params": call})
    _read_until(proc.stdout, lambda m: m.get("method") == "notifications/progress")
    wait_until(lambda: _noted(serve, "called"), "the call to reach the server")
    assert marked_processes(serve.mark) and containers(serve.owner)
    return proc


@pytest.mark.parametrize("ignore_term", [False, True], ids=["outlives-stdin", "ignores-sigterm"])
@pytest.mark.parametrize("closed", ["stdout", "both"], ids=["stdout-closed", "client-killed"])
def test_a_client_gone_during_a_call_is_a_disconnect_when_serve_finds_its_stdout_broken(
    stalling_serve: Callable[[bool], Serve], ignore_term: bool, closed: str, tmp_path: Path
) -> None:
    serve = stalling_serve(ignore_term)
    errors = tmp_path / "stderr.txt"
    with errors.open("wb") as stderr_file:
        proc = _start_stalling_call(serve, stderr_file)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        # Closing our end of serve's stdout: its next progress notification (every 0.2 s) meets a broken pipe. A
        # client killed has both its ends closed at once; one that only stops reading keeps stdin open.
        proc.stdout.close()
        if closed == "both":
            proc.stdin.close()
        code = proc.wait(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=WAIT)
        if not proc.stdin.closed:
            proc.stdin.close()
    stderr = errors.read_text(encoding="utf-8", errors="replace")
    assert code == 0, stderr
    for word in ("Traceback", "ExceptionGroup", "BrokenPipeError", "error:"):
        assert word not in stderr, stderr
    assert marked_processes(serve.mark) == []
    assert containers(serve.owner) == []
