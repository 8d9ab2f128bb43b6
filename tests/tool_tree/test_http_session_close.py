"""Closing a Streamable HTTP session: the real ``@modelcontextprotocol/server-everything`` over HTTP, and an SDK
server whose ``DELETE`` fails.

Before, a session that server-everything had forgotten (it restarted: its answer to the session's id is a 400, "No
valid session ID provided") was ended with a ``DELETE`` all the same when the pool closed it, which the server
answered 400 too, and the SDK logged "Session termination failed: 400". A session the server said it no longer
knows is now closed without a ``DELETE``; a normal close sends one, with its session id, once; and a ``DELETE``
that fails for another reason is still logged.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.types import Receive, Scope, Send

from tests.support import REPO, require_install
from tests.tool_tree.test_http_lifecycle import text
from tests.tool_tree.test_http_unreachable import free_port, serving
from tool_tree.config import ServerConfig
from tool_tree.connect import connect, list_tools_raw
from tool_tree.pool import ServerPool

pytestmark = pytest.mark.anyio
ROOT = Path(os.environ.get("TOOLTREE_REAL_SERVERS") or REPO / ".real-servers").resolve()
EVERYTHING = ROOT / "node" / "node_modules" / ".bin" / "mcp-server-everything"


class Everything:
    """server-everything over Streamable HTTP on ``port``, its stdout (one line per request) in ``log``."""

    def __init__(self, port: int, log: Path) -> None:
        self.log = log
        with log.open("a", encoding="utf-8") as out:
            self.proc = subprocess.Popen(
                [str(EVERYTHING), "streamableHttp"], env=os.environ | {"PORT": str(port)},
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
        listening, lines = threading.Event(), []
        assert self.proc.stderr is not None
        stream = self.proc.stderr

        def read() -> None:
            for line in stream:
                lines.append(line)
                if "listening on port" in line:
                    listening.set()
            listening.set()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        if not listening.wait(60) or self.proc.poll() is not None:
            self.stop()
            raise RuntimeError("server-everything did not start:\n" + "".join(lines[-20:]))

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self._reader.join(30)  # its pipe ends with the process
        assert self.proc.stderr is not None
        self.proc.stderr.close()

    def terminations(self) -> list[str]:
        """The session ids the server was asked to end (``DELETE`` with a session it knows), in order."""
        said = self.log.read_text(encoding="utf-8")
        return re.findall(r"Received session termination request for session (\S+)", said)


@pytest.fixture
def everything(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A port and a log file for server-everything (skipped, or failed under REQUIRE_REAL_SERVERS=1, when it is not
    installed)."""
    require_install(ROOT / ".stamp", "third-party MCP servers", "run `make real-servers`")
    yield free_port(), tmp_path / "everything.log"


def warnings_of_the_sdk(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("mcp") and r.levelno >= logging.WARNING]


@pytest.mark.real_servers
async def test_closing_a_session_with_server_everything_ends_it_once_and_logs_nothing(
    everything: tuple[int, Path], caplog: pytest.LogCaptureFixture
) -> None:
    port, log = everything
    server = Everything(port, log)
    try:
        async with connect(ServerConfig(name="ev", url=f"http://127.0.0.1:{port}/mcp", timeout=60)) as conn:
            assert "echo" in [t["name"] for t in await list_tools_raw(conn.client)]
    finally:
        server.stop()
    assert len(server.terminations()) == 1  # one DELETE, carrying the session's id (the server knew it)
    assert warnings_of_the_sdk(caplog) == []


@pytest.mark.real_servers
async def test_a_session_server_everything_forgot_is_closed_without_a_delete_or_a_warning(
    everything: tuple[int, Path], caplog: pytest.LogCaptureFixture
) -> None:
    port, log = everything
    url = f"http://127.0.0.1:{port}/mcp"
    server = Everything(port, log)
    try:
        async with ServerPool([ServerConfig(name="ev", url=url, timeout=60)]) as pool:
            assert text(await pool.call("ev", "echo", {"message": "a"})) == "Echo: a"
            server.stop()
            server = Everything(port, log)  # a new process: the session tooltree holds is unknown to it
            forgot = await pool.call("ev", "echo", {"message": "b"})
            assert forgot["isError"] and "no longer knows this session (HTTP 400" in text(forgot)
            assert text(await pool.call("ev", "echo", {"message": "c"})) == "Echo: c"  # on a new session
    finally:
        server.stop()
    assert len(server.terminations()) == 1  # the new session's, when the pool closed
    assert warnings_of_the_sdk(caplog) == []  # before: "Session termination failed: 400" for the forgotten one


async def test_a_delete_the_server_fails_is_still_logged(caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()

    server = ServerConfig(name="ctr", url=f"http://127.0.0.1:{port}/mcp", timeout=20)
    async with serving(port, [], wrap=_delete_fails), connect(server) as conn:
        await list_tools_raw(conn.client)
    assert warnings_of_the_sdk(caplog) == ["Session termination failed: 500"]


def _delete_fails(app: Any) -> Any:
    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "DELETE":
            await send({"type": "http.response.start", "status": 500, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    return wrapped
