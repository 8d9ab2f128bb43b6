"""`ServerPool`'s ``subscriptions/listen`` stream to a server of the session-less 2026-07-28 protocol: kept open with
no listener too (under `tooltree agent` and `exec`), so the server's tools changed are checked as it lists them now;
over HTTP held `tool_tree.listens.HELD_SECONDS` at most, the next opened before it closes, so that a server told to
stop is not held by it (the SDK's server, under uvicorn, waits for an open listen stream as it stops).

Against tests/servers/listen_server.py and growing_server.py (the SDK's servers), over stdio, over Streamable HTTP in
this process, and as a process of its own on a real socket (told to stop with SIGTERM).
"""

from __future__ import annotations

import functools
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import tool_tree.listens
import tool_tree.pool_follow
import tool_tree.pool_start
from tests.tool_tree.test_pool_tools_changed import LISTEN_SERVER, changing_over_http
from tool_tree.config import ServerConfig
from tool_tree.listens import HELD_SECONDS
from tool_tree.pool import ServerPool

pytestmark = pytest.mark.anyio

SERVERS = Path(__file__).resolve().parents[1] / "servers"
WAIT = 20.0
"""Seconds a test waits at most for what it expects."""


@pytest.fixture
def heard(monkeypatch: pytest.MonkeyPatch) -> anyio.Event:
    """Set once the pool counts a notice that a server's tools changed (`tool_tree.pool_relist.heard`)."""
    real, said = tool_tree.pool_start.heard, anyio.Event()

    def counted(slot: Any, kind: str) -> None:
        real(slot, kind)
        if kind == "tools":
            said.set()

    monkeypatch.setattr(tool_tree.pool_start, "heard", counted)
    return said


async def test_a_pool_without_a_listener_hears_a_session_less_server_s_new_tool_and_checks_it_as_listed_now(
    tmp_path: Path, heard: anyio.Event
) -> None:
    # Before, the pool opened the stream only for a listener (`tooltree serve`'s): under `tooltree agent` or `exec`
    # a tool such a server added, changed or removed was checked against the listing of the session's start.
    args = (str(SERVERS / "growing_server.py"), str(tmp_path / "added.json"), "--both-eras")
    growing = ServerConfig(name="growing", command=sys.executable, args=args, timeout=WAIT)
    async with ServerPool([growing]) as pool:
        assert await pool.live_tool("growing", "fresh") is None
        await pool.call("growing", "add_tool", {"name": "fresh"})
        with anyio.fail_after(WAIT):
            await heard.wait()
        fresh = await pool.live_tool("growing", "fresh")
    assert fresh is not None and fresh["description"] == "The fresh tool.", fresh


async def test_an_http_stream_held_its_time_is_renewed_without_a_gap_and_the_notices_after_it_are_heard(
    monkeypatch: pytest.MonkeyPatch, heard: anyio.Event
) -> None:
    monkeypatch.setattr(tool_tree.pool_follow, "HELD_SECONDS", 0.05)
    missed: list[object] = []
    monkeypatch.setattr(tool_tree.pool_follow, "_missed", lambda pool, slot: missed.append(slot))
    real_open, opened, renewed = tool_tree.listens.Listening._open, [0], anyio.Event()

    async def counting(self: tool_tree.listens.Listening) -> Any:
        got = await real_open(self)
        opened[0] += 1
        if opened[0] >= 3:
            renewed.set()
        return got

    monkeypatch.setattr(tool_tree.listens.Listening, "_open", counting)
    async with changing_over_http() as url, ServerPool([ServerConfig(name="live", url=url, timeout=WAIT)]) as pool:
        await pool.start("live")
        with anyio.fail_after(WAIT):
            await renewed.wait()  # held its time twice, renewed each time
        assert not heard.is_set()
        assert (await pool.call("live", "change", {}))["content"][0]["text"] == "changed"
        with anyio.fail_after(WAIT):
            await heard.wait()
    assert missed == []  # a renewal opens the next stream first: nothing is missed, no listing read again for it


@pytest.fixture
def listen_server_process() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """listen_server.py serving Streamable HTTP on a listening socket it inherits, as a process of its own; yields it
    and its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()  # connections wait in the backlog until the server takes them: no wait for it to be up
        fd = sock.fileno()
        proc = subprocess.Popen(
            [sys.executable, str(LISTEN_SERVER), "--http", str(fd)], pass_fds=[fd], stderr=subprocess.DEVNULL
        )
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    try:
        yield proc, url
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.mark.parametrize("listener", [True, False], ids=["listener", "no_listener"])
async def test_an_http_server_a_pool_listens_to_stops_on_sigterm_while_the_pool_runs(
    listen_server_process: tuple[subprocess.Popen[bytes], str], heard: anyio.Event, listener: bool
) -> None:
    # Before, the pool held its listen stream for the session's life (with a listener, `tooltree serve`'s), and the
    # SDK's server, told to stop, waited for it: it did not exit until the pool closed.
    proc, url = listen_server_process
    told = (lambda server: None) if listener else None
    async with ServerPool([ServerConfig(name="live", url=url, timeout=WAIT)], on_tools_changed=told) as pool:
        await pool.call("live", "change", {})
        with anyio.fail_after(WAIT):
            await heard.wait()  # its stream is open
        proc.terminate()
        ended = functools.partial(proc.wait, timeout=HELD_SECONDS + WAIT)  # in a thread: the pool's loop runs
        assert await anyio.to_thread.run_sync(ended) in (0, -signal.SIGTERM)  # stopped (uvicorn raises it again)
