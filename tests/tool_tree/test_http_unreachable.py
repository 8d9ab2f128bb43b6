"""An HTTP server the pool cannot reach when a call starts: nothing listens at its URL, its host name does not
resolve, or it was up for an earlier call and went away since (a real official-SDK server on a real socket).

Before, a server that went away between two calls failed the next one as "the server died during the call
(Connection closed)": the outcome of a call that was sent and lost, though no connection was made and nothing was
sent; and one that could not be reached when the pool opened it "cannot start", as if it were a process. Now each
says the server could not be reached at its URL (host and port), why, that the call was not sent, and what to check.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
import uvicorn

from tests.tool_tree.test_http_lifecycle import counter_app, text
from tool_tree.config import ServerConfig
from tool_tree.pool import ServerPool, ServerUnavailable

pytestmark = pytest.mark.anyio


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def serving(port: int, calls: list[str], wrap: Callable[[Any], Any] | None = None) -> AsyncIterator[None]:
    """A handshake-era SDK server (its tool ``bump`` records each run in ``calls``; the app ``wrap`` makes of it) on
    ``port`` for the block; when the block ends, its socket is closed: a connection to the port is refused then."""
    app = counter_app(calls, f"http://127.0.0.1:{port}/mcp", None)
    app = wrap(app) if wrap is not None else app
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()  # connections wait in the backlog until uvicorn takes them: no wait for it to be up
    web = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning"))
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(web.serve, [sock])
            try:
                yield
            finally:
                web.should_exit = True  # the task group waits for it to shut down
    finally:
        sock.close()


def not_sent(reason: str, port: int, call: str = "the call was not sent") -> None:
    assert "died" not in reason
    assert f"could not reach the server at its URL (127.0.0.1:{port}: Connection refused)" in reason
    assert call in reason
    assert "check that the server is running and listening there, and its URL (servers.ctr.url)" in reason


async def test_a_call_to_an_http_server_nothing_listens_on_says_it_could_not_reach_its_url() -> None:
    port = free_port()
    async with ServerPool([ServerConfig(name="ctr", url=f"http://127.0.0.1:{port}/mcp", timeout=20)]) as pool:
        with pytest.raises(ServerUnavailable) as info:
            await pool.call("ctr", "bump", {"tag": "a"})
    not_sent(info.value.reason, port, "no call was sent")
    assert "cannot start" not in info.value.reason


async def test_a_call_to_an_http_server_whose_host_name_does_not_resolve_says_so() -> None:
    server = ServerConfig(name="ctr", url="http://tooltree-test.invalid/mcp", timeout=20)  # .invalid never resolves
    async with ServerPool([server]) as pool:
        with pytest.raises(ServerUnavailable) as info:
            await pool.call("ctr", "bump", {"tag": "a"})
    assert "could not reach the server at its URL (tooltree-test.invalid:80: host name not resolved" in str(info.value)
    assert "no call was sent" in str(info.value)


async def test_a_call_after_the_http_server_went_away_says_it_was_not_sent_and_runs_once_it_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = free_port()
    calls: list[str] = []
    caplog.set_level(logging.WARNING)
    async with ServerPool([ServerConfig(name="ctr", url=f"http://127.0.0.1:{port}/mcp", timeout=20)]) as pool:
        async with serving(port, calls):
            assert text(await pool.call("ctr", "bump", {"tag": "a"})) == "bumped a"
        with pytest.raises(ServerUnavailable) as info:
            await pool.call("ctr", "bump", {"tag": "b"})  # the pool's session is open; its server is gone
        not_sent(info.value.reason, port)
        assert pool.state("ctr") == "stopped"
        async with serving(port, calls):
            assert text(await pool.call("ctr", "bump", {"tag": "c"})) == "bumped c"  # a new session
    assert calls == ["a", "c"]
    # The session the server took with it is not ended (no DELETE to a server that cannot be reached, logged).
    assert [r.getMessage() for r in caplog.records if r.name.startswith("mcp")] == []
