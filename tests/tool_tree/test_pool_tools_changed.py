"""A server pool tells its owner when a server says its tools, prompts or resources changed after its session was
listed, and which of them when its listener takes a ``kind``."""

from __future__ import annotations

import asyncio
import logging
import runpy
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support import asgi_over_http
from tool_tree.budget import NOTIFICATION_BURST, NOTIFICATION_RATE
from tool_tree.config import ServerConfig
from tool_tree.pool import BackgroundPool, PoolError, ServerPool

SERVERS = Path(__file__).resolve().parents[1] / "servers"


def growing(tmp_path: Path) -> ServerConfig:
    return ServerConfig(name="growing", command=sys.executable, args=(str(SERVERS / "growing_server.py"),
                        str(tmp_path / "added.json")))  # fmt: skip


@pytest.mark.parametrize("kind", ["tool", "prompt", "resource"])
def test_a_server_that_says_a_list_of_its_changed_is_named_to_the_pools_owner(tmp_path: Path, kind: str) -> None:
    # Before, only notifications/tools/list_changed was heard: a server that added a prompt or resource was not.
    told: list[str] = []
    heard = threading.Event()

    def changed(server: str) -> None:
        told.append(server)
        heard.set()

    with BackgroundPool([growing(tmp_path)], on_tools_changed=changed) as pool:
        assert pool.call("growing", f"add_{kind}", {"name": "fresh"})["content"][0]["text"] == "added fresh"
        assert heard.wait(10)  # said before the answer; read in the stream's order
    assert told == ["growing"]


@pytest.mark.parametrize("kind", ["tool", "prompt", "resource"])
def test_a_listener_that_takes_a_kind_is_told_which_list_changed(tmp_path: Path, kind: str) -> None:
    # Before, it was told the server alone: `tooltree serve` could not tell a notice of prompts it does not offer from
    # one of tools, and regenerated the tree for both.
    told: list[tuple[str, str]] = []
    heard = threading.Event()

    def changed(server: str, kind: str = "tools") -> None:
        told.append((server, kind))
        heard.set()

    with BackgroundPool([growing(tmp_path)], on_tools_changed=changed) as pool:
        assert pool.call("growing", f"add_{kind}", {"name": "fresh"})["content"][0]["text"] == "added fresh"
        assert heard.wait(10)
    assert told == [("growing", f"{kind}s")]


@pytest.mark.anyio
async def test_a_listener_whose_kind_is_keyword_only_is_told_it_too(tmp_path: Path) -> None:
    told: list[tuple[str, str]] = []

    class Listener:
        def __call__(self, server: str, *, kind: str) -> None:
            told.append((server, kind))

    async with ServerPool([growing(tmp_path)], on_tools_changed=Listener()) as pool:
        await pool.call("growing", "add_prompt", {"name": "fresh"})  # the notice is read before the answer
    assert told == [("growing", "prompts")]


def test_a_flood_of_notices_of_any_list_is_told_within_the_one_notification_budget(tmp_path: Path) -> None:
    # The notices of prompts and resources go the way the tools' went: each counted, told, and past the server's
    # one budget of notifications (whatever they say) dropped unread. A flood of them costs what one of tools did.
    flood = ServerConfig(name="flood", command=sys.executable, args=(str(SERVERS / "flood_server.py"),))
    told: list[str] = []
    with BackgroundPool([flood], on_tools_changed=told.append) as pool:
        pool.call("flood", "ok", {})  # started and listed: what it says from now on is told
        started = time.monotonic()
        assert pool.call("flood", "changed", {"n": 20_000})["content"][0]["text"] == "changed"
        elapsed = time.monotonic() - started
    assert set(told) == {"flood"}
    assert NOTIFICATION_BURST <= len(told) <= NOTIFICATION_BURST + NOTIFICATION_RATE * elapsed + 1


@pytest.mark.anyio
async def test_a_change_said_while_the_pool_lists_the_server_is_in_its_listing_and_not_told(tmp_path: Path) -> None:
    # changing_server says its tools changed during each of its first two listings: the pool's own two.
    changing = ServerConfig(name="changing", command=sys.executable, args=(str(SERVERS / "changing_server.py"), "2"))
    told: list[str] = []
    async with ServerPool([changing], on_tools_changed=told.append) as pool:
        await pool.start("changing")
        await pool.call("changing", "tool_v2", {})  # a round trip: a notice sent before its answer was read
    assert told == []


def test_on_tools_changed_must_be_callable(tmp_path: Path) -> None:
    for make in (ServerPool, BackgroundPool):
        with pytest.raises(TypeError, match="on_tools_changed: expected a callable or None, got str"):
            make([growing(tmp_path)], on_tools_changed="print")  # type: ignore[arg-type]


LISTEN_SERVER = SERVERS / "listen_server.py"


@asynccontextmanager
async def changing_over_http() -> AsyncIterator[str]:
    """The server of ``listen_server.py`` on a real socket; yields its URL."""
    app = runpy.run_path(str(LISTEN_SERVER))["app"]  # in-process: its __main__ part not run
    async with asgi_over_http(app.streamable_http_app()) as url:
        yield url


@asynccontextmanager
async def changing_over(transport: str) -> AsyncIterator[dict[str, Any]]:
    """Where the server of ``listen_server.py`` is, as the keys of a `ServerConfig`, over ``transport``."""
    if transport == "stdio":
        yield {"command": sys.executable, "args": (str(LISTEN_SERVER),)}
        return
    async with changing_over_http() as url:
        yield {"url": url}


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_server_that_says_its_tools_changed_is_heard_at_either_protocol(transport: str) -> None:
    # Before, a server of the session-less 2026-07-28 protocol (`protocol: auto`) was never heard: it says a list
    # changed only on a `subscriptions/listen` stream, which the pool did not open; `protocol: legacy` alone was.
    told: dict[str, list[str]] = {"auto": [], "legacy": []}
    heard = {protocol: anyio.Event() for protocol in told}

    def changed(server: str) -> None:
        told[server].append(server)
        heard[server].set()

    async with changing_over(transport) as where:
        servers = [ServerConfig(name=protocol, timeout=20, protocol=protocol, **where) for protocol in told]
        async with ServerPool(servers, on_tools_changed=changed) as pool:
            for protocol in told:
                await pool.start(protocol)
                assert (await pool.call(protocol, "change", {}))["content"][0]["text"] == "changed"
            with anyio.fail_after(10):
                for event in heard.values():
                    await event.wait()
    # Over HTTP both sessions reach one server, whose listen streams each change reaches: "auto" may be told twice.
    assert {protocol: set(names) for protocol, names in told.items()} == {"auto": {"auto"}, "legacy": {"legacy"}}


def listens() -> int:
    """How many of the pool's tasks that keep a `subscriptions/listen` stream open run."""
    return sum(task.get_name().endswith("pool_follow._listen.<locals>.run") for task in asyncio.all_tasks())


@pytest.mark.anyio
async def test_a_listen_stream_ends_with_its_session_and_with_the_pool() -> None:
    changing = ServerConfig(name="changing", command=sys.executable, args=(str(LISTEN_SERVER),))
    told: list[str] = []
    async with ServerPool([changing], on_tools_changed=told.append) as pool:
        await pool.start("changing")
        assert listens() == 1
        with pytest.raises(PoolError):
            await pool.call("changing", "exit", {})  # its session ends with its process
        await pool.call("changing", "change", {})  # a new session, once the one before it ended
        assert listens() == 1
    assert listens() == 0


@pytest.mark.anyio
async def test_a_server_that_serves_no_listen_stream_is_no_error(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="tool_tree")
    plain = ServerConfig(name="plain", command=sys.executable, args=(str(LISTEN_SERVER), "--no-listen"))
    async with ServerPool([plain], on_tools_changed=print) as pool:
        await pool.start("plain")
        assert (await pool.call("plain", "change", {}))["content"][0]["text"] == "changed"
        with anyio.fail_after(10):  # its refusal is read on the pool's loop: each pass lets it run
            while not any("refused subscriptions/listen" in r.getMessage() for r in caplog.records):
                await anyio.sleep(0)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


class _Opened(logging.Handler):
    """Counts the listen streams the pool says it opened, and wakes a waiter at each (on the pool's loop)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0
        self.event = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "subscriptions/listen stream open" in record.getMessage():
            self.count += 1
            self.event.set()

    async def reach(self, count: int) -> None:
        with anyio.fail_after(15):
            while self.count < count:
                self.event = anyio.Event()
                await self.event.wait()


@pytest.mark.anyio
async def test_a_listen_stream_the_server_ends_is_opened_again_and_its_changes_told(tmp_path: Path) -> None:
    # The server may end its streams (gracefully, as it shuts them down): one left ended would hear nothing more.
    both = ServerConfig(name="growing", command=sys.executable, args=(*growing(tmp_path).args, "--both-eras"))
    opened = _Opened()
    log = logging.getLogger("tool_tree.listens")
    log.addHandler(opened)
    level, log.level = log.level, logging.DEBUG
    told: list[str] = []
    heard = anyio.Event()

    def changed(server: str) -> None:
        told.append(server)
        heard.set()

    try:
        async with ServerPool([both], on_tools_changed=changed) as pool:
            await pool.start("growing")
            await opened.reach(1)
            assert (await pool.call("growing", "end_listens", {}))["content"][0]["text"] == "ended"
            await opened.reach(2)
            await pool.call("growing", "add_tool", {"name": "fresh"})
            with anyio.fail_after(10):
                await heard.wait()
    finally:
        log.removeHandler(opened)
        log.setLevel(level)
    assert told == ["growing"]
