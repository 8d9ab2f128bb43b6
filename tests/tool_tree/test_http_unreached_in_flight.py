"""A call that cannot reach an HTTP server leaves the calls already sent on the session to finish.

A server shutting down gracefully (or a proxy before it at its connection limit) refuses new connections while it
finishes the requests it took. A call that then cannot connect fails saying it was not sent, and the next call opens
a new session; before, the session was closed at once under the calls in flight, which failed as "the server died
during the call" though the server was still answering them (their outcome unknown: a tool that acts may have run).
Here a real SDK server is reached through a real TCP forwarder whose listening socket is closed while a slow call is
in flight on a connection it already forwards.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import pytest

from tests.tool_tree.test_http_lifecycle import text
from tests.tool_tree.test_http_unreachable import free_port, serving
from tool_tree.config import ServerConfig
from tool_tree.pool import ServerPool, ServerUnavailable

pytestmark = pytest.mark.anyio


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with suppress(OSError):
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    writer.close()


@asynccontextmanager
async def forwarding(port: int, to: int) -> AsyncIterator[asyncio.Server]:
    """Connections to ``port`` forwarded to ``to``; closing the server refuses new ones and keeps those open."""
    links: set[asyncio.Future[Any]] = set()

    async def link(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", to)
        both = asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        links.add(both)
        await both

    server = await asyncio.start_server(link, "127.0.0.1", port)
    try:
        yield server
    finally:
        server.close()
        for both in links:
            both.cancel()


def slowed(arrived: anyio.Event, release: anyio.Event) -> Any:
    """An app wrapper holding the request whose body calls ``bump`` with tag "slow" until ``release``."""

    def wrap(app: Any) -> Any:
        async def held(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http" or scope["method"] != "POST":
                await app(scope, receive, send)
                return
            first = await receive()
            if b'"slow"' in first.get("body", b""):
                arrived.set()
                await release.wait()
            replayed = False

            async def again() -> Any:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return first
                return await receive()

            await app(scope, again, send)

        return held

    return wrap


async def test_a_call_that_cannot_connect_leaves_the_call_in_flight_on_an_open_connection_to_finish() -> None:
    port, front = free_port(), free_port()
    calls: list[str] = []
    arrived, release = anyio.Event(), anyio.Event()
    slow: list[Any] = []
    either = anyio.Event()  # the refusal, or the slow call cut off under it
    async with (
        serving(port, calls, slowed(arrived, release)),
        forwarding(front, port) as forwarder,
        ServerPool([ServerConfig(name="ctr", url=f"http://127.0.0.1:{front}/mcp", timeout=20)]) as pool,
    ):
        assert text(await pool.call("ctr", "bump", {"tag": "a"})) == "bumped a"

        async def call_slow() -> None:
            try:
                slow.append(await pool.call("ctr", "bump", {"tag": "slow"}))
            except ServerUnavailable as e:
                slow.append(e)
            finally:
                either.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(call_slow)
            with anyio.fail_after(10):
                await arrived.wait()
            forwarder.close()  # new connections refused; the slow call's goes on
            refused: list[BaseException] = []

            async def call_refused() -> None:
                try:
                    await pool.call("ctr", "bump", {"tag": "b"})
                except ServerUnavailable as e:
                    refused.append(e)
                finally:
                    either.set()

            tg.start_soon(call_refused)
            # Waited for as an event. Before: `anyio.wait_all_tasks_blocked()` in a loop, which can hang for good (as
            # in a CI run under load) once uvicorn's main loop (a task here, asleep 0.1 s between its ticks) falls in
            # step with its own 0.1 s re-check: each time it finds the ticker's sleep over, the ticker not run yet.
            with anyio.fail_after(10):
                await either.wait()
            release.set()
        assert slow and not isinstance(slow[0], BaseException), slow
        assert text(slow[0]) == "bumped slow"
        assert refused and "the call was not sent" in str(refused[0])
    assert calls == ["a", "slow"]
