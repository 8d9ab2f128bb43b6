"""SIGTERM to `tooltree serve --http`: a tool call in flight that ends within the stop grace is answered.

Serve gives requests in flight `agent.serve.http.STOP_GRACE` seconds to be answered before it cancels them. Before,
the upstream servers were sent SIGTERM at the signal itself, so a call that needed one second more failed with
"server 'slow' is unavailable: the server died during the call": the grace held only for calls that used no server,
and the client was told its server had crashed.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import anyio
import httpx2
import pytest

from agent.serve.http import STOP_GRACE
from tests.serve.conftest import TOKEN
from tests.serve.test_http import ACCEPT, HANDSHAKE, data_lines
from tests.support import REPO, TEST_OWNER, ServeProcess, wait_until

pytestmark = pytest.mark.anyio

SLOW = REPO / "tests" / "servers" / "slow_server.py"
CALL_SECONDS = 1.5
"""How long the call in flight takes: well within the grace, counted from when it started."""


async def test_a_call_in_flight_at_sigterm_that_ends_within_the_grace_is_answered(tmp_path: Path) -> None:
    from generator.generate import generate
    from tooltree_cli.common import load

    assert CALL_SECONDS < STOP_GRACE
    marks = tmp_path / "marks"
    marks.mkdir()
    config = tmp_path / "tooltree.yaml"
    config.write_text(
        f"servers:\n  slow:\n    command: {json.dumps(sys.executable)}\n"
        f"    args: [{json.dumps(str(SLOW))}, {json.dumps(str(marks))}]\n",
        encoding="utf-8",
    )
    tree = tmp_path / "tree"
    generated = await anyio.to_thread.run_sync(lambda: generate(load(str(config)), tree, embeddings="off"))
    assert not generated.failed
    argv = [sys.executable, "-m", "tooltree_cli.main", "serve", "--http", "--port", "0", "--config", str(config),
            "--tree", str(tree), "--no-regenerate", "--warm", "0", "--passthrough", "slow.wait"]  # fmt: skip
    env = {**os.environ, "TOOLTREE_SANDBOX_OWNER": TEST_OWNER, "TOOLTREE_SERVE_TOKEN": TOKEN}
    serve = ServeProcess(argv, env)
    try:
        # A client of its own (the SDK's client ends its transport when it cannot reopen its stream to a stopping
        # server, and with it the call it waits for): initialize, then the call, read as it is answered.
        auth = {**ACCEPT, "Authorization": f"Bearer {TOKEN}"}
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as http:
            init = await http.post(serve.url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                                    "params": HANDSHAKE}, headers=auth)  # fmt: skip
            session = {**auth, "Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
            await http.post(serve.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            answers: list[str] = []

            async def call() -> None:
                params = {"name": "slow__wait", "arguments": {"seconds": CALL_SECONDS, "mark": "running"}}
                answer = await http.post(serve.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                                          "params": params}, headers=session)  # fmt: skip
                answers.append(answer.text)

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await anyio.to_thread.run_sync(
                    lambda: wait_until((marks / "running").exists, "the call to reach the server", timeout=60)
                )
                serve.proc.send_signal(signal.SIGTERM)
        code = await anyio.to_thread.run_sync(lambda: serve.proc.wait(60))
    finally:
        serve.stop()
    log = "".join(serve.stderr_lines)
    (answer,) = answers
    result = data_lines(answer)[-1]["result"]
    assert result.get("isError") is not True, (result, log)
    assert result["content"][0]["text"] == f"waited {CALL_SECONDS:g} s", log
    assert code == 0, log
