"""SIGTERM to `tooltree serve --http` while a client's call runs past the stop grace: the call is cancelled and serve
exits saying nothing of the SDK's attempt to answer it on a connection already closed."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import MCPError

from agent.serve.http import STOP_GRACE
from tests.serve.conftest import clean_up, http_client, new_serve

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

EXIT_WAIT = 60.0


AT_GRACE = f"{STOP_GRACE:g} s after serve was told to stop"
AT_ONCE = "when serve was told again to stop"


@pytest.mark.parametrize(
    ("signals", "when"),
    [([signal.SIGTERM], AT_GRACE), ([signal.SIGTERM, signal.SIGINT], AT_ONCE)],
    ids=["one-signal", "a-second-signal"],
)
async def test_a_call_cancelled_at_the_end_of_the_stop_grace_leaves_no_warning_of_the_sdks_on_stderr(
    serve_tree: Path, tmp_path: Path, docker_engine: Any, signals: list[signal.Signals], when: str
) -> None:
    # Before: "warning: shutdown error response for request 3 gave up: transport write blocked", a line per call
    # in flight, naming neither client nor call: the gate had already ended the request (503, or its stream).
    # A second signal (a Ctrl-C after SIGTERM) cancels the call at once; before, it waited out the grace all the same.
    serve = new_serve(tmp_path, serve_tree, serve={"warm": 0})
    url = serve.start_http()
    assert serve.proc is not None and serve.process is not None
    try:
        async with http_client(url) as client, anyio.create_task_group() as tg:
            running = anyio.Event()
            failures: list[str] = []

            async def progress(done: float, total: float | None, message: str | None) -> None:
                running.set()

            async def call() -> None:
                # The call fails, with the gate's answer (before: "SSE stream ended without a response").
                with pytest.raises(MCPError) as failed:
                    await client.call_tool("execute_python", {"code": "import time\ntime.sleep(600)"},
                                           progress_callback=progress)  # fmt: skip
                failures.append(str(failed.value))

            tg.start_soon(call)
            with anyio.fail_after(EXIT_WAIT):
                await running.wait()
            for signum in signals:  # two kinds: two signals of one kind sent at once may arrive as one
                serve.proc.send_signal(signum)
            code = await anyio.to_thread.run_sync(lambda: serve.proc.wait(EXIT_WAIT) if serve.proc else None)
            tg.cancel_scope.cancel()
    finally:
        clean_up(serve, docker_engine)
    stderr = "".join(serve.process.stderr_lines)
    assert code == 0, stderr
    assert stderr.endswith(": stopped (every session ended, its script, sandbox and servers with it)\n"), stderr
    assert failures == [f"tooltree serve is stopping: this request was still running {when}, so it was cancelled (a "
                        "script it ran was stopped)"]  # fmt: skip
    assert "transport write blocked" not in stderr and "shutdown error response" not in stderr, stderr
