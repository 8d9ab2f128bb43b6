"""A client session that follows a resource (``resources/subscribe``) is not ended for ``idle_timeout`` while its client
can be told of a change: over stdio while it is connected, over HTTP while its ``GET`` stream is open
(`agent.serve.sessions.SessionRegistry`). MCP has no notice that a subscription ended: before, a client that only
followed resources (no call) was sent no ``notifications/resources/updated`` after ``idle_timeout`` (30 minutes),
without a word, its servers stopped with its session. Once it follows none, the idle rule ends it as any other; over
HTTP one whose ``GET`` stream is closed is not kept for them (the SDK sends them nowhere else), and a new client that
finds every place taken still ends it (the bound: ``max_sessions``).

`tooltree serve` runs as a real subprocess, over stdio and over ``--http``, with ``idle_timeout: 1`` (a session idle
that long ends within 1.25 s: the check runs every quarter of it), driven by the official SDK client, in front of
tests/servers/subscribing_server.py, whose ``touch`` with ``after`` sends an update `LATER` seconds after its call
returned, tied to no call: past the idle timeout. The rules themselves are checked in process too, with the registry
and a real `Followed`. No sandbox is started (``warm: 0``, no script runs). Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import mcp
import pytest

from agent.serve.sessions import STDIO_SESSION, SessionRegistry
from agent.serve.upstream_subscriptions import Followed, Subscriptions
from tests.serve.conftest import TOKEN, http_client, processes_with
from tests.serve.test_resource_subscriptions import (
    LOG,
    PASSTHROUGH,
    Updates,
    generate,
    live_entry,
    serve_argv,
    subscribe,
    unsubscribe,
    write_config,
)
from tests.support import REPO, ServeProcess, wait_until
from tool_tree.pool import ServerPool

pytestmark = pytest.mark.anyio

IDLE = 1.0
"""The ``idle_timeout`` serve runs with here (seconds)."""
LATER = 3.0
"""Seconds after its call the server sends the update: past `IDLE` and its check."""
WAIT = 30.0
"""Seconds a test waits at most for what it expects."""
MARK = "SUBSCRIBING_SERVER_MARK"
HOUR = 3600.0


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(tmp_path_factory.mktemp("subscriptions-idle"), live_entry())


def config(folder: Path, mark: Path, serve: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_config(folder, live_entry(mark), f"{PASSTHROUGH}  idle_timeout: {IDLE:g}\n{serve}")


async def touch_later(client: mcp.Client, uri: str) -> None:
    """Have ``client``'s own ``live`` server say ``uri`` changed `LATER` seconds from now (the call returns at once)."""
    result = await client.call_tool("live__touch", {"uri": uri, "after": LATER})
    assert result.is_error is not True, result.content


async def servers_stopped(mark: Path) -> None:
    """Wait until the ``live`` server of ``mark`` has no process left (its client session ended)."""
    await anyio.to_thread.run_sync(
        wait_until, lambda: processes_with(MARK, str(mark)) == [], "the server to stop", WAIT
    )


async def test_over_stdio_a_session_that_follows_a_resource_outlives_idle_timeout_until_it_follows_none(
    tree: Path, tmp_path: Path
) -> None:
    mark = tmp_path / "starts"
    argv = serve_argv(config(tmp_path / "serve", mark), tree)
    params = mcp.StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(REPO))
    updates = Updates()
    async with mcp.Client(params, read_timeout_seconds=WAIT, message_handler=updates, mode="legacy") as client:
        await subscribe(client, LOG)
        await touch_later(client, LOG)  # the client's last call: idle from now on
        with anyio.fail_after(LATER + WAIT):
            await updates.until(LOG)  # sent past idle_timeout: the session and its server were kept
        assert mark.read_text(encoding="utf-8").splitlines() == ["started"]  # the one server, never restarted
        assert processes_with(MARK, str(mark)) != []
        await unsubscribe(client, LOG)  # it follows none now: idle_timeout ends it (and its server) as any other
        await servers_stopped(mark)


async def test_over_http_a_session_that_follows_a_resource_outlives_idle_timeout_but_gives_its_place_to_a_new_client(
    tree: Path, tmp_path: Path
) -> None:
    # Kept while its GET stream is open; the bound: it holds one of the max_sessions places, no more, and only while
    # no other client needs it (it has no request in flight, so it is the one ended to make room).
    mark = tmp_path / "starts"
    argv = [*serve_argv(config(tmp_path / "serve", mark, "  max_sessions: 1\n"), tree), "--http", "--port", "0"]
    process = ServeProcess(argv, {**os.environ, "TOOLTREE_SERVE_TOKEN": TOKEN})
    updates = Updates()
    try:
        async with http_client(process.url, read_timeout_seconds=WAIT, message_handler=updates) as first:
            await subscribe(first, LOG)
            await touch_later(first, LOG)
            with anyio.fail_after(LATER + WAIT):
                await updates.until(LOG)  # on its GET stream, past idle_timeout
            assert mark.read_text(encoding="utf-8").splitlines() == ["started"]
            assert processes_with(MARK, str(mark)) != []
            async with http_client(process.url, read_timeout_seconds=WAIT) as second:
                await servers_stopped(mark)  # the first session ended for it, its server and subscription with it
                listed = await second.list_tools()
                assert "live__touch" in {tool.name for tool in listed.tools}
    finally:
        process.stop()
    assert updates.uris == [LOG]


# ---- the rule, in process -----------------------------------------------------------------------------------------


class PooledRuntime:
    """What a session needs of a runtime here: a server pool (of no server: serve sets its ``on_resource_updated``),
    opened at once, and no sandbox."""

    running_sandbox = None
    workspace = None

    def __init__(self) -> None:
        # `stale`: the refusals a session renews after (`ClientSession.opened` sets their advice)
        self.bridge = SimpleNamespace(pool=ServerPool([]), stale=SimpleNamespace(advice=""))

    def open(self) -> PooledRuntime:
        return self

    def close(self) -> None:
        pass


async def test_the_idle_rule_keeps_a_session_that_follows_a_resource_only_while_its_client_can_be_told() -> None:
    make: Any = PooledRuntime
    sessions = SessionRegistry(lambda key: make(), idle_timeout=HOUR, max_sessions=4, gone_grace=60)
    subscriptions = Subscriptions(lambda send: None)
    sessions.stream("streamed", opened=True)  # its client's GET stream, open before its first call
    ended: dict[str, str | None] = {}
    followed: dict[str, Followed] = {}
    for key in (STDIO_SESSION, "streamed", "streamless", "idle"):
        async with sessions.use(key) as session:
            runtime: Any = session.opened()
        followed[key] = subscriptions.of(runtime.bridge.pool, None, asyncio.get_running_loop())  # as a subscribe does
        if key != "idle":
            followed[key].ask("live", LOG)
            followed[key].settle("live", LOG, True)
        ended[key] = sessions._why_end(session, session.last_used + HOUR + 1)
    assert ended == {
        STDIO_SESSION: None,  # connected until stdin closes
        "streamed": None,  # told on its GET stream
        "streamless": f"after {HOUR:g} s without a call",  # an HTTP client without one would be told nothing
        "idle": f"after {HOUR:g} s without a call",  # follows nothing
    }
    streamed = sessions.get("streamed")
    assert streamed is not None
    sessions.stream("streamed", opened=False)  # its client may have left: the grace, then it ends as any other
    streamed.last_used, streamed.gone_since = 0.0, HOUR
    assert sessions._why_end(streamed, HOUR + 59) is None
    assert sessions._why_end(streamed, HOUR + 60) == "60 s after its client's connection closed"
    stdio = sessions.get(STDIO_SESSION)
    assert stdio is not None
    assert followed[STDIO_SESSION].drop(LOG) == ["live"]
    assert sessions._why_end(stdio, stdio.last_used + HOUR + 1) == f"after {HOUR:g} s without a call"  # unsubscribed
