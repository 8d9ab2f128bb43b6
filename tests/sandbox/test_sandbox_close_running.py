"""`Sandbox.close` from another thread while a script runs, with a workspace: the script is stopped first (as
`Sandbox.cancel` stops it), what it wrote is saved, and its `execute` returns a result that says why."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from sandbox import DockerBackend, ExecutionResult, Sandbox, SessionError
from tests.sandbox.conftest import WAIT, StartSignal

pytestmark = pytest.mark.docker

WRITES_THEN_SLEEPS = (
    "import time\nfrom tool_tree.runtime import call_tool\n"
    "open('before.txt', 'w').write('written before the close')\n"
    "call_tool('t', 'started', {})\n"
    "time.sleep(600)\n"
    "open('after.txt', 'w').write('never')\n"
)


def close_in_thread(sb: Sandbox) -> tuple[threading.Event, list[BaseException]]:
    done, errors = threading.Event(), []

    def close() -> None:
        try:
            sb.close()
        except BaseException as e:  # handed to the test
            errors.append(e)
        finally:
            done.set()

    threading.Thread(target=close, daemon=True).start()
    return done, errors


def test_a_close_from_another_thread_stops_the_running_script_and_saves_what_it_wrote(
    backend: DockerBackend, tmp_path: Path
) -> None:
    # Before: the close waited for the script to end (18 s of a 20 s sleep here: past WAIT, with its 600 s), and
    # the script ran on meanwhile.
    bridge, workspace = StartSignal(), tmp_path / "ws"
    sb = Sandbox(backend, tools=bridge, workspace=workspace).start()
    with ThreadPoolExecutor(1) as pool:
        running: Future[ExecutionResult] = pool.submit(sb.execute, WRITES_THEN_SLEEPS, timeout=3 * WAIT)
        assert bridge.started.wait(WAIT), "the script never started"
        closed, errors = close_in_thread(sb)
        try:
            assert closed.wait(WAIT), "close waited for the script to end"
            result = running.result(WAIT)
        finally:
            sb.kill()  # nothing left running when an assertion failed
    assert errors == []
    assert result.cancelled and not result.ok and not result.timed_out
    assert result.error == "cancelled (KeyboardInterrupt): the sandbox session was closed, which stopped the script"
    assert (workspace / "before.txt").read_text(encoding="utf-8") == "written before the close"
    assert not (workspace / "after.txt").exists()
    assert sb.not_saved is None
    with pytest.raises(SessionError, match="closed"):
        sb.execute("print(1)")


def test_an_execution_waiting_for_its_turn_when_the_session_closes_never_runs(
    backend: DockerBackend, tmp_path: Path
) -> None:
    bridge, workspace = StartSignal(), tmp_path / "ws"
    sb = Sandbox(backend, tools=bridge, workspace=workspace).start()
    with ThreadPoolExecutor(2) as pool:
        running = pool.submit(sb.execute, WRITES_THEN_SLEEPS, timeout=3 * WAIT)
        assert bridge.started.wait(WAIT), "the script never started"
        waiting = pool.submit(sb.execute, "open('queued.txt', 'w').write('ran')")
        closed, errors = close_in_thread(sb)
        try:
            assert closed.wait(WAIT), "close waited for the script to end"
            assert running.result(WAIT).cancelled
            with pytest.raises(SessionError, match="closed"):
                waiting.result(WAIT)
        finally:
            sb.kill()
    assert errors == []
    assert (workspace / "before.txt").is_file()
    assert not (workspace / "queued.txt").exists()


def test_without_a_workspace_a_close_ends_the_running_execution_with_a_session_error(backend: DockerBackend) -> None:
    bridge = StartSignal()
    sb = Sandbox(backend, tools=bridge).start()
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(sb.execute, WRITES_THEN_SLEEPS, timeout=3 * WAIT)
        assert bridge.started.wait(WAIT), "the script never started"
        closed, errors = close_in_thread(sb)
        try:
            assert closed.wait(WAIT)
            with pytest.raises(SessionError, match="the sandbox session is closed"):
                running.result(WAIT)
        finally:
            sb.kill()
    assert errors == []


def test_a_close_from_the_output_listener_stops_the_script_and_saves_what_it_wrote(
    backend: DockerBackend, tmp_path: Path
) -> None:
    # Before: the close waited on the thread that reads the sandbox's answers, for the script's timeout, which then
    # destroyed the sandbox: its workspace was never saved.
    workspace = tmp_path / "ws"
    sb = Sandbox(backend, workspace=workspace).start()
    closed = threading.Event()

    def listener(stream: str, data: bytes, skipped: int) -> None:
        if b"go" in data and not closed.is_set():
            sb.close()
            closed.set()

    code = "import time\nopen('before.txt', 'w').write('kept')\nprint('go', flush=True)\ntime.sleep(600)\n"
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(sb.execute, code, timeout=3 * WAIT, on_output=listener)
        try:
            assert closed.wait(WAIT), "close waited in the listener"
            result = running.result(WAIT)
            sb.close()  # returns once the close the listener asked for has saved and ended
        finally:
            sb.kill()
    assert result.cancelled and "the sandbox session was closed" in (result.error or "")
    assert (workspace / "before.txt").read_text(encoding="utf-8") == "kept"
    assert sb.not_saved is None
