"""The pool's ``on_tools_changed`` listener is told that a server's lists may have changed when a notice of it may have
been missed: its stream of unasked messages opened again after it was lost (a redeploy answering 503), a session the
server no longer knows (its stream answered 404: a new one is opened at once), or a new session that replaced one that
ended (a crash and restart); not on its first session, nor when the server ends its stream and it is reopened.

Before, ``tooltree serve`` served a stale tree, silently: the server's ``tools/list_changed`` sent while the stream was
lost reached no one, a stream answered 404 was given up until some call found the session gone, and no restart told the
listener.

The servers are `tests/servers/unasked_server.py` (the SDK's ``MCPServer`` over Streamable HTTP, a real process on a
real socket) and `tests/servers/raw_server.py` (stdio).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import anyio
import pytest

from tests.tool_tree.test_get_streams import WAIT, Heard, gets, outside, text, unasked_server
from tool_tree.config import ServerConfig
from tool_tree.pool import ServerPool, ServerUnavailable

pytestmark = pytest.mark.anyio
RAW = Path(__file__).resolve().parents[1] / "servers" / "raw_server.py"
ALL = [("unasked", "tools"), ("unasked", "prompts"), ("unasked", "resources")]
"""What a listener with ``kind`` is told of the server ``unasked`` when its lists may have changed."""


class Told:
    """A listener taking ``kind``: what it was told, and a wait until it was told ``count`` times."""

    def __init__(self) -> None:
        self.told: list[tuple[str, str]] = []
        self._new = anyio.Event()

    def __call__(self, server: str, kind: str = "tools") -> None:
        self.told.append((server, kind))
        self._new.set()

    async def reached(self, count: int) -> None:
        with anyio.fail_after(WAIT):
            while len(self.told) < count:
                self._new = anyio.Event()
                await self._new.wait()


async def test_a_stream_lost_to_503s_then_open_again_tells_the_listener_once_though_the_server_said_nothing() -> None:
    # A redeploy: the server answers the stream's GETs 503 three times, then opens it. A notice it sent meanwhile
    # reached no one (it sends none here: the pool is told all the same, as if it had said its lists changed).
    told = Told()
    async with unasked_server("503", 3) as config, ServerPool([config], on_tools_changed=told) as pool:
        await pool.start("unasked")
        await told.reached(3)
        assert len(await gets(pool, 5, timeout=0)) == 4  # three answered 503, the last one open
    assert told.told == ALL


async def test_streams_the_server_ends_are_reopened_untold_and_only_the_loss_after_them_is_told() -> None:
    # The first two streams end at once (`retry: 0`): reopened, each opening told nothing; the third GET is answered
    # 503, the fourth opens: that one is told, once.
    told = Told()
    async with unasked_server("ended-503", 1) as config, ServerPool([config], on_tools_changed=told) as pool:
        await pool.start("unasked")
        await told.reached(3)
        assert len(await gets(pool, 5, timeout=0)) == 4
    assert told.told == ALL


async def test_a_stream_answered_404_for_a_session_the_server_forgot_has_a_new_session_opened_and_the_listener_told(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The server forgets the session (as a restart does) and answers its stream 404. Before, nothing happened until a
    # call sent on it was answered 404 too: meanwhile no notice reached the pool, and the new session's listing was
    # told to no one. Now the session is checked (a tools/list, answered 404), retired, and a new one opened at once.
    caplog.set_level(logging.WARNING, logger="tool_tree.upstream")
    told = Told()
    async with unasked_server("forget") as config, ServerPool([config], on_tools_changed=told) as pool:
        await pool.start("unasked")
        assert told.told == []  # its first session: nothing told
        await outside(config, "/go")  # the server forgets the session and answers its stream 404
        await told.reached(3)
        assert pool.restarts("unasked") == 1 and pool.state("unasked") == "running"
        assert text(await pool.call("unasked", "change", {})) == "said"  # on the new session, and its stream
        await told.reached(4)
    assert told.told == [*ALL, ("unasked", "tools")]
    assert [r.getMessage() for r in caplog.records if r.name == "tool_tree.upstream"] == [
        "server 'unasked' ended: it no longer knows its session (it answered its stream of unasked messages 404, and "
        "a tools/list too: it restarted or let the session expire); a new session is opened now"
    ]


async def test_a_stdio_server_restarted_after_a_crash_tells_the_listener_once_its_new_session_is_listed(
    tmp_path: Path,
) -> None:
    # The new session may list other tools (the server was redeployed meanwhile). A listener without `kind` is called
    # once.
    spec = tmp_path / "raw.json"
    spec.write_text(json.dumps({"pages": [[{"name": "pid", "inputSchema": {"type": "object"}}]]}), encoding="utf-8")
    config = ServerConfig(name="raw", command=sys.executable, args=(str(RAW), str(spec)), timeout=WAIT)
    told: list[str] = []
    async with ServerPool([config], on_tools_changed=told.append) as pool:
        first = text(await pool.call("raw", "pid", {}))
        assert told == []  # its first session
        with pytest.raises(ServerUnavailable, match="died before answering the call"):
            await pool.call("raw", "crash", {})
        assert text(await pool.call("raw", "pid", {})) != first
    assert told == ["raw"]


async def test_a_stream_answered_404_before_the_session_is_listed_is_checked_once_it_is_and_the_session_kept() -> None:
    # The server has no stream of unasked messages and answers its GET 404 before its listing is answered (it holds
    # the listing until then), so the 404 is heard while the session opens, before the pool can act on it: it is acted
    # on once the session is listed. The server still knows the session (the tools/list checking it is answered), so
    # the session goes on, no new one is opened, and nothing is told. Before this was acted on, the check never ran.
    told, pool_heard, pool_log = Told(), Heard(), logging.getLogger("tool_tree.pool")
    level = pool_log.level
    pool_log.addHandler(pool_heard)
    pool_log.setLevel(logging.INFO)
    try:
        async with unasked_server("404-early") as config, ServerPool([config], on_tools_changed=told) as pool:
            await pool.start("unasked")
            await pool_heard.said(lambda message: "answers on its session" in message)
            assert len(await gets(pool, 2, timeout=0)) == 1  # on the same session; its one GET, not sent again
            assert pool.restarts("unasked") == 0 and pool.state("unasked") == "running"
    finally:
        pool_log.removeHandler(pool_heard)
        pool_log.setLevel(level)
    assert told.told == []
    assert pool_heard.at(logging.INFO) == [
        "server 'unasked' answers on its session: it has no stream of unasked messages (its 404)"
    ]
