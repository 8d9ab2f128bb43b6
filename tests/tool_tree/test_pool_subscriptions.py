"""`ServerPool`'s resource subscriptions: a URI subscribed to through `ServerPool.request` has its server's
``notifications/resources/updated`` told to ``on_resource_updated`` (no other URI's, none once unsubscribed), and a
new session that replaces one that ended is subscribed to it again, the listener told once.

Against tests/servers/subscribing_server.py, a real SDK server over stdio. Its notices are read in the stream's
order, before the answer of the call that made it send them: told, or not, when the call returns.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from tool_tree.config import ServerConfig
from tool_tree.pool import CallFailure, ServerPool, ServerUnavailable

pytestmark = pytest.mark.anyio
SERVER = Path(__file__).resolve().parents[1] / "servers" / "subscribing_server.py"
LOG, STATUS = "live://log", "live://status"


def live() -> ServerConfig:
    return ServerConfig(name="live", command=sys.executable, args=(str(SERVER),), timeout=30)


class Told:
    def __init__(self) -> None:
        self.told: list[tuple[str, str]] = []
        self.event = anyio.Event()

    def __call__(self, server: str, uri: str) -> None:
        self.told.append((server, uri))
        self.event.set()


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


def test_a_listener_that_is_not_callable_is_refused() -> None:
    with pytest.raises(TypeError, match="on_resource_updated: expected a callable or None, got str"):
        ServerPool([live()], on_resource_updated="told")  # type: ignore[arg-type]
