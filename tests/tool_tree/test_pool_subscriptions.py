"""`ServerPool`'s resource subscriptions: a URI subscribed to through `ServerPool.request` has its server's
``notifications/resources/updated`` told to ``on_resource_updated`` (no other URI's, none once unsubscribed), and a
new session that replaces one that ended is subscribed to it again, the listener told once; so when an HTTP server
forgot the session (a new one is opened at once, also without an ``on_tools_changed`` listener), and when its stream
of unasked messages was lost and opened again (a change may have been missed).

Against tests/servers/subscribing_server.py, a real SDK server over stdio, or over Streamable HTTP (a real process on a
real socket, its GETs answered as a test asks). Its notices are read in the stream's order, before the answer of the
call that made it send them: told, or not, when the call returns.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from tests.tool_tree.test_get_streams import on_socket, outside
from tool_tree.config import ServerConfig
from tool_tree.pool import CallFailure, ServerPool, ServerUnavailable

pytestmark = pytest.mark.anyio
SERVER = Path(__file__).resolve().parents[1] / "servers" / "subscribing_server.py"
LOG, STATUS = "live://log", "live://status"


WAIT = 30.0
"""Seconds a test waits at most for what it expects."""


def live() -> ServerConfig:
    return ServerConfig(name="live", command=sys.executable, args=(str(SERVER),), timeout=WAIT)


@asynccontextmanager
async def live_over_http(mode: str) -> AsyncIterator[ServerConfig]:
    """The server over Streamable HTTP with sessions, its GETs answered as ``mode`` says (its ``GET_MODE``)."""
    async with on_socket(SERVER, "live", mode) as config:
        yield config


class Told:
    def __init__(self) -> None:
        self.told: list[tuple[str, str]] = []
        self.event = anyio.Event()

    def __call__(self, server: str, uri: str) -> None:
        self.told.append((server, uri))
        self.event.set()

    async def reached(self, count: int) -> None:
        """Wait (at most `WAIT` seconds) until the listener was told ``count`` times."""
        with anyio.fail_after(WAIT):
            while len(self.told) < count:
                self.event = anyio.Event()
                await self.event.wait()


async def test_the_listener_is_told_of_the_uris_subscribed_through_the_pool_only() -> None:
    told = Told()
    async with ServerPool([live()]) as pool:
        pool.on_resource_updated = told  # set once the pool runs, as serve sets it on a client session's pool
        assert not isinstance(await pool.request("live", "resources/subscribe", {"uri": LOG}), CallFailure)
        await pool.call("live", "touch", {"uri": LOG})
        await pool.call("live", "touch", {"uri": STATUS, "any": True})  # sent, not subscribed to: not told
        assert told.told == [("live", LOG)]
        assert not isinstance(await pool.request("live", "resources/unsubscribe", {"uri": LOG}), CallFailure)
        await pool.call("live", "touch", {"uri": LOG, "any": True})
    assert told.told == [("live", LOG)]


async def test_a_new_session_is_subscribed_again_and_the_listener_told_once() -> None:
    told = Told()
    async with ServerPool([live()], on_resource_updated=told) as pool:
        await pool.request("live", "resources/subscribe", {"uri": LOG})
        with pytest.raises(ServerUnavailable, match="the server died during the call"):
            await pool.call("live", "crash", {})
        await pool.start("live")  # a new session
        with anyio.fail_after(30):
            await told.event.wait()  # subscribed again first, then told
        subscribed = await pool.call("live", "subscribed", {})
        await pool.call("live", "touch", {"uri": LOG})
    assert json.loads(subscribed["content"][0]["text"]) == [LOG]
    assert told.told == [("live", LOG), ("live", LOG)]
    assert pool.restarts("live") == 1


async def test_a_session_an_http_server_forgot_is_replaced_at_once_subscribed_again_and_the_listener_told() -> None:
    # No on_tools_changed listener: before, only one made the pool open a new session at once; without it the next
    # call did, and until then the server's updates reached no one, told nothing.
    told = Told()
    async with live_over_http("forget") as config, ServerPool([config], on_resource_updated=told) as pool:
        assert not isinstance(await pool.request("live", "resources/subscribe", {"uri": LOG}), CallFailure)
        await outside(config, "/go")  # the server forgets the session: its stream answered 404, then a tools/list
        await told.reached(1)
        assert pool.restarts("live") == 1 and pool.state("live") == "running"
        subscribed = await pool.call("live", "subscribed", {})  # on the new session
        await pool.call("live", "touch", {"uri": LOG})
        await told.reached(2)
    assert json.loads(subscribed["content"][0]["text"]) == [LOG]
    assert told.told == [("live", LOG), ("live", LOG)]  # once for the new session, once for the touch


async def test_a_stream_of_unasked_messages_lost_then_open_again_under_a_subscription_tells_the_listener_once() -> None:
    # The server answers its stream's GETs 503 (a redeploy) until /go, after the subscribe: a change said meanwhile
    # reached no one, so the listener is told once the stream opens again, though the server said nothing.
    told = Told()
    async with live_over_http("503") as config, ServerPool([config], on_resource_updated=told) as pool:
        assert not isinstance(await pool.request("live", "resources/subscribe", {"uri": LOG}), CallFailure)
        await outside(config, "/go")
        await told.reached(1)
        await pool.call("live", "touch", {"uri": LOG})  # on the stream open now
        await told.reached(2)
        assert pool.restarts("live") == 0
    assert told.told == [("live", LOG), ("live", LOG)]


def test_a_listener_that_is_not_callable_is_refused() -> None:
    with pytest.raises(TypeError, match="on_resource_updated: expected a callable or None, got str"):
        ServerPool([live()], on_resource_updated="told")  # type: ignore[arg-type]
