"""`ServerPool`'s resource subscriptions to a server of the session-less 2026-07-28 protocol, which has no
``resources/subscribe``: the pool serves it on the session's ``subscriptions/listen`` stream, opened again with the
URIs subscribed to, and the server's updates of them are told to ``on_resource_updated`` as under the protocol with
sessions (`tests/tool_tree/test_pool_subscriptions.py`).

Against tests/servers/listen_server.py (the SDK's ``MCPServer``) over stdio, or over Streamable HTTP in this process.
Its updates come on the listen stream, not before the answer of the call that made it send them: waited for.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator

import anyio
import pytest

import tool_tree.http_client
import tool_tree.listens
from tests.tool_tree.test_pool_subscriptions import LOG, STATUS, Told
from tests.tool_tree.test_pool_tools_changed import LISTEN_SERVER, changing_over, changing_over_http
from tool_tree.config import ServerConfig
from tool_tree.pool import CallFailure, PoolError, ServerPool

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_session_less_server_s_updates_of_the_uris_subscribed_through_the_pool_are_told(transport: str) -> None:
    # Before, its `resources/subscribe` was answered -32601 (the protocol has none) and nothing was told.
    told = Told()
    async with changing_over(transport) as where, ServerPool([ServerConfig(name="live", timeout=20, **where)]) as pool:
        await pool.start("live")
        pool.on_resource_updated = told  # set once the pool runs, as serve sets it on a client session's pool
        assert not isinstance(await pool.request("live", "resources/subscribe", {"uri": LOG}), CallFailure)
        await pool.call("live", "touch", {"uri": STATUS})  # not subscribed to: not told
        await pool.call("live", "touch", {"uri": LOG})
        await told.reached(1)
        assert not isinstance(await pool.request("live", "resources/unsubscribe", {"uri": LOG}), CallFailure)
        assert not isinstance(await pool.request("live", "resources/subscribe", {"uri": STATUS}), CallFailure)
        await pool.call("live", "touch", {"uri": LOG})  # unsubscribed: not told (the stream keeps its order)
        await pool.call("live", "touch", {"uri": STATUS})
        await told.reached(2)
    assert told.told == [("live", LOG), ("live", STATUS)]


async def test_a_new_session_of_a_session_less_server_listens_to_the_uris_again_and_the_listener_is_told() -> None:
    told = Told()
    live = ServerConfig(name="live", command=sys.executable, args=(str(LISTEN_SERVER),), timeout=20)
    async with ServerPool([live], on_resource_updated=told) as pool:
        assert not isinstance(await pool.request("live", "resources/subscribe", {"uri": LOG}), CallFailure)
        with pytest.raises(PoolError):
            await pool.call("live", "exit", {})  # its session ends with its process
        await pool.start("live")  # a new session: told once of each URI (a change may have been missed)
        await told.reached(1)
        await pool.call("live", "touch", {"uri": LOG})
        await told.reached(2)
    assert told.told == [("live", LOG), ("live", LOG)]


async def test_a_session_less_server_with_no_listen_stream_refuses_a_subscription_in_clear_words() -> None:
    told = Told()
    plain = ServerConfig(name="plain", command=sys.executable, args=(str(LISTEN_SERVER), "--no-listen"), timeout=20)
    async with ServerPool([plain], on_resource_updated=told) as pool:
        refused = await pool.request("plain", "resources/subscribe", {"uri": LOG})
        assert isinstance(refused, CallFailure)
        assert "server 'plain' declared no resource subscriptions" in str(refused)
        assert (await pool.call("plain", "touch", {"uri": LOG}))["content"][0]["text"] == "touched"
    assert told.told == []


class _Said(logging.Handler):
    """Wakes a waiter once the pool says a listen stream opened (``opened``), once one ended or was lost and waits
    to open again (``ended``), and once the server refused the first (``refused``)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.opened, self.ended, self.refused = anyio.Event(), anyio.Event(), anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        said = record.getMessage()
        if said.endswith("subscriptions/listen stream open"):
            self.opened.set()
        elif "refused subscriptions/listen" in said:
            self.refused.set()
        elif "subscriptions/listen stream" in said:
            self.ended.set()


@pytest.fixture
def said() -> Iterator[_Said]:
    """`_Said`, listening to the pool's listen streams at debug level for the test's length."""
    handler, log = _Said(), logging.getLogger("tool_tree.listens")
    log.addHandler(handler)
    level = log.level
    log.setLevel(logging.DEBUG)  # not the attribute alone: the logger caches what it enables
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


async def test_a_subscription_made_while_the_listen_stream_waits_to_reopen_takes_effect_at_once(
    monkeypatch: pytest.MonkeyPatch, said: _Said
) -> None:
    # Before, it waited for the stream's reopening (its back-off, up to 60 s): the subscription timed out first.
    monkeypatch.setattr(tool_tree.listens, "FIRST_WAIT", 3600.0)
    told = Told()
    live = ServerConfig(name="live", command=sys.executable, args=(str(LISTEN_SERVER),), timeout=20)
    async with ServerPool([live], on_resource_updated=told) as pool:
        await pool.start("live")
        with anyio.fail_after(10):
            await said.opened.wait()
        assert (await pool.call("live", "end_listens", {}))["content"][0]["text"] == "ended"
        with anyio.fail_after(10):
            await said.ended.wait()
        subscribed = await pool.request("live", "resources/subscribe", {"uri": LOG}, timeout=10)
        assert not isinstance(subscribed, CallFailure), subscribed
        await pool.call("live", "touch", {"uri": LOG})
        await told.reached(1)
    assert told.told == [("live", LOG)]


async def test_a_listen_stream_lost_to_its_read_timeout_tells_the_listener_once_it_is_open_again(
    monkeypatch: pytest.MonkeyPatch, said: _Said
) -> None:
    # A server that sends no keep-alive on a quiet stream (the SDK's sends one each 15 s) has it cut at the read
    # timeout (5 minutes; 2 s here) and opened again: before, what it said meanwhile was lost and nothing was told.
    monkeypatch.setattr(tool_tree.http_client, "MCP_DEFAULT_SSE_READ_TIMEOUT", 2.0)
    told = Told()
    async with changing_over_http() as url, ServerPool([ServerConfig(name="live", url=url, timeout=20)]) as pool:
        await pool.start("live")
        pool.on_resource_updated = told
        assert not isinstance(await pool.request("live", "resources/subscribe", {"uri": LOG}), CallFailure)
        with anyio.fail_after(10):
            await said.ended.wait()  # cut at the read timeout: the SDK's keep-alive comes after 15 s
        await told.reached(1)
    assert told.told[0] == ("live", LOG)


async def test_a_subscription_to_a_server_that_refused_its_first_listen_stream_opens_one_kept_and_told(
    said: _Said,
) -> None:
    # Before, the session was left unlistened after the refusal: the subscription opened a stream only to hear its
    # answer and succeeded, and nothing kept listening, so the listener was never told of the update.
    told = Told()
    args = (str(LISTEN_SERVER), "--refuse-first-listen")
    live = ServerConfig(name="live", command=sys.executable, args=args, timeout=20)
    async with ServerPool([live], on_resource_updated=told) as pool:
        await pool.start("live")
        with anyio.fail_after(10):
            await said.refused.wait()
        subscribed = await pool.request("live", "resources/subscribe", {"uri": LOG}, timeout=10)
        assert not isinstance(subscribed, CallFailure), subscribed
        await pool.call("live", "touch", {"uri": LOG})
        await told.reached(1)
    assert told.told == [("live", LOG)]


async def test_a_new_session_that_refused_its_first_listen_stream_still_follows_the_uris_subscribed_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before, the new session was left unlistened after the refusal: told once of the URI, then never again.
    monkeypatch.setattr(tool_tree.listens, "FIRST_WAIT", 0.1)
    told = Told()
    args = (str(LISTEN_SERVER), "--refuse-first-listen")  # each process refuses its first
    live = ServerConfig(name="live", command=sys.executable, args=args, timeout=20)
    async with ServerPool([live], on_resource_updated=told) as pool:
        assert not isinstance(await pool.request("live", "resources/subscribe", {"uri": LOG}), CallFailure)
        with pytest.raises(PoolError):
            await pool.call("live", "exit", {})  # its session ends with its process
        await pool.start("live")  # a new session: told once of each URI (a change may have been missed)
        await told.reached(1)
        with anyio.fail_after(10):
            while len(told.told) < 3:  # told as its stream opens (a touch before is lost), then of each touch
                before = len(told.told)
                await pool.call("live", "touch", {"uri": LOG})
                await told.reached(before + 1)
    assert set(told.told) == {("live", LOG)}
