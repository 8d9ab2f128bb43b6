"""A sandbox that ends under a script (its container killed: past ``sandbox.memory`` under gVisor, ``docker kill``)
raises a `SessionError` that carries the tool calls the host's bridge handled for that script: they happened.
Before: only the error's text, so a caller could not tell and made them again.

Real parts: a real container, the container killed through the engine; the bridge is a plain function, which is
the seam under test here (the MCP bridge's own tests are elsewhere).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from sandbox import DockerBackend, Sandbox
from sandbox.errors import SessionError
from tests.docker_cli import EngineWithCLI

pytestmark = pytest.mark.docker

WAIT = 60.0
SCRIPT = """\
from tool_tree.runtime import ToolError, call_tool
call_tool("media", "render_chart", {"title": "side effect"})
try:
    call_tool("media", "missing", {})
except ToolError:
    pass
call_tool("media", "hold", {})  # answered only once its container is killed
"""


def test_a_sandbox_killed_under_a_script_raises_with_the_calls_the_script_made(
    docker_engine: EngineWithCLI, backend: DockerBackend
) -> None:
    calls: list[str] = []
    holding, release = threading.Event(), threading.Event()

    def tool(server: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        calls.append(f"{server}.{name}")
        if name == "hold":  # the script sends it only once the first two were answered, so in the ledger
            holding.set()
            release.wait(WAIT)
        if name == "missing":
            return {"content": [{"type": "text", "text": "no such tool"}], "isError": True}
        return {"content": [{"type": "text", "text": "chart rendered"}]}

    raised: list[SessionError] = []
    ended = threading.Event()
    with Sandbox(backend, tools=tool) as sb:

        def run() -> None:
            try:
                sb.execute(SCRIPT)
            except SessionError as e:
                raised.append(e)
            ended.set()

        threading.Thread(target=run, daemon=True).start()
        assert holding.wait(WAIT), "the script did not make its calls"
        try:
            docker_engine.run(["kill", sb.name])
            assert ended.wait(WAIT), "the execution did not end when its container died"
        finally:
            release.set()
        (error,) = raised
        assert "status 137" in str(error)
        assert [(c.server, c.tool, c.ok) for c in error.tool_calls] == [
            ("media", "render_chart", True),
            ("media", "missing", False),
            ("media", "hold", False),
        ]
        assert error.tool_calls[0].response_bytes > 0 and error.tool_calls_omitted == 0
        assert error.tool_calls[2].error is not None and error.tool_calls[2].error.startswith("cancelled")
        assert calls == ["media.render_chart", "media.missing", "media.hold"]
        with pytest.raises(SessionError) as later:  # no script ran: no calls
            sb.execute("print(1)")
        assert later.value.tool_calls == ()
