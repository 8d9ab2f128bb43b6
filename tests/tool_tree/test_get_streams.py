"""`tool_tree.get_streams`: the stream of messages a Streamable HTTP server sends unasked (its GET, over the protocol
with sessions) is opened, so what a server sends tied to no call reaches tooltree; it is reopened paced, whatever
``retry`` the server sends, its events bounded as a request's are, and a server without one (405) is asked once.
It is kept through failures that may pass (a 503, a connection refused or cut; the SDK alone gave it up after two in
a row), and given up at once, said once, on those that will not (404, 401).

Before, tooltree refused the SDK's GET unsent: a ``ping`` or ``roots/list`` a server sent tied to no call went
unanswered (the call waited its whole timeout, then said only that it timed out) and a
``notifications/tools/list_changed`` on that stream never reached the pool (``tooltree serve`` never refreshed).

The server is `tests/servers/unasked_server.py` (the SDK's ``MCPServer``, a real process on a real socket), its GETs
answered by the SDK or, to play a hostile server, by a wrapper that records each.
"""

from __future__ import annotations

import itertools
import json
import logging
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client import streamable_http

from tool_tree.budget import MAX_MESSAGE_VALUES, NOTIFICATION_BURST, STRAY_ANSWERS
from tool_tree.config import ServerConfig
from tool_tree.get_streams import FIRST_WAIT, LONGEST_WAIT, OPENINGS_PER_MINUTE, STEADY_SECONDS, GetStreams
from tool_tree.http_client import http_client
from tool_tree.pool import ServerPool
from tool_tree.stdio import MAX_MESSAGE_BYTES

SERVER = Path(__file__).resolve().parents[1] / "servers" / "unasked_server.py"
WAIT = 30.0
"""Seconds a test waits at most for what it expects (a call, a GET, a notice told)."""
JITTER = 0.05
"""Seconds two GETs' arrivals at the server may differ from their sending by tooltree."""


@asynccontextmanager
async def on_socket(script: Path, name: str, *args: str) -> AsyncIterator[ServerConfig]:
    """``script`` serving Streamable HTTP on a listening socket it inherits (``script FD ARGS...``), as server
    ``name`` of the protocol with sessions."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()  # connections wait in the backlog until the server takes them: no wait for it to be up
        fd = sock.fileno()
        proc = subprocess.Popen([sys.executable, str(script), str(fd), *args], pass_fds=[fd])
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    try:
        yield ServerConfig(name=name, url=url, timeout=WAIT, protocol="legacy")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@asynccontextmanager
async def unasked_server(mode: str, size: int = 0) -> AsyncIterator[ServerConfig]:
    """`unasked_server.py` answering its GETs as ``mode`` says, as a server of the protocol with sessions."""
    async with on_socket(SERVER, "unasked", mode, str(size)) as config:
        yield config


def text(result: dict[str, Any]) -> str:
    return "".join(b["text"] for b in result["content"] if b["type"] == "text")


async def gets(pool: ServerPool, count: int, timeout: float = WAIT / 2) -> list[tuple[str | None, float]]:
    """Each GET's ``Last-Event-ID`` and arrival at the server, once ``count`` have come (or after ``timeout``)."""
    return [
        tuple(g) for g in json.loads(text(await pool.call("unasked", "gets", {"count": count, "timeout": timeout})))
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("kind", "answer"),
    [
        ("ping", "the client answered: {"),
        ("roots", "the client refused: Roots not supported: tooltree does not offer roots (roots/list"),
    ],
)
async def test_a_request_the_server_sends_tied_to_no_call_is_answered_and_the_call_completes(
    kind: str, answer: str
) -> None:
    # Before: no stream for it, so the server's request never reached tooltree and the call waited its timeout.
    async with unasked_server("sdk") as config, ServerPool([config]) as pool:
        with anyio.fail_after(WAIT):
            result = await pool.call("unasked", "ask", {"kind": kind})
    assert text(result).startswith(answer), text(result)


@pytest.mark.anyio
async def test_tools_list_changed_said_on_the_stream_of_unasked_messages_is_told_to_the_pools_owner() -> None:
    told: list[str] = []
    heard = anyio.Event()

    def changed(server: str) -> None:
        told.append(server)
        heard.set()

    async with unasked_server("sdk") as config, ServerPool([config], on_tools_changed=changed) as pool:
        assert text(await pool.call("unasked", "change", {})) == "said"
        with anyio.fail_after(WAIT):
            await heard.wait()
    assert told == ["unasked"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["retry0", "retry0-id"])
async def test_a_stream_ended_at_once_with_retry_0_is_reopened_after_waits_that_grow(mode: str) -> None:
    # Before tooltree refused the GET, the SDK reopened such a stream 22 times a second, for good; with an `id` on
    # it, the reopening carries `Last-Event-ID` like a request's stream resumed, and is paced as the stream all the
    # same.
    async with unasked_server(mode) as config, ServerPool([config]) as pool:
        seen = await gets(pool, 3)
    assert [last for last, _ in seen] == ([None, "7", "7"] if mode == "retry0-id" else [None, None, None])
    arrivals = [at for _, at in seen]
    gaps = [later - earlier for earlier, later in itertools.pairwise(arrivals)]
    assert gaps[0] >= FIRST_WAIT - JITTER and gaps[1] >= 2 * FIRST_WAIT - JITTER, gaps


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_reopenings_are_at_most_the_cap_in_any_minute_however_long_each_stream_stayed_open() -> None:
    for lived in (0.0, STEADY_SECONDS, 3 * STEADY_SECONDS):  # each stream ended at once, or after a while
        clock = Clock()
        streams = GetStreams("s", clock=clock)
        opened = []
        while clock.now < 1800:  # half an hour of streams ended as soon as they are `lived` seconds old
            clock.now += streams.wait()
            opened.append(clock.now)
            clock.now += lived
        assert all(sum(at <= o < at + 60 for o in opened) <= OPENINGS_PER_MINUTE for at in opened), lived
        waits = [later - earlier - lived for earlier, later in itertools.pairwise(opened)]
        if lived < STEADY_SECONDS:  # each ended early: the wait doubles up to its longest
            assert waits[:7] == [1, 2, 4, 8, 16, 32, LONGEST_WAIT] and set(waits[7:]) == {LONGEST_WAIT}
        else:  # each stayed open: the first wait each time, but not past the cap
            assert min(waits) >= FIRST_WAIT
            assert len(opened) <= OPENINGS_PER_MINUTE * (1800 / 60 + 1)


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "size"), [("values", MAX_MESSAGE_VALUES + 100), ("bytes", MAX_MESSAGE_BYTES + 100)])
async def test_an_event_past_a_cap_on_the_stream_of_unasked_messages_is_refused_unread(mode: str, size: int) -> None:
    # Its first stream brings, once the tools are listed, a `tools/list_changed` past the values or the bytes of one
    # message: refused, that stream ends, and the next one carries the `change` tool's (told once: the first never
    # reached the SDK's session).
    told: list[str] = []
    heard = anyio.Event()

    def changed(server: str) -> None:
        told.append(server)
        heard.set()

    async with unasked_server(mode, size) as config, ServerPool([config], on_tools_changed=changed) as pool:
        assert text(await pool.call("unasked", "change", {})) == "said"
        with anyio.fail_after(WAIT):
            await heard.wait()
        assert [last for last, _ in await gets(pool, 2)] == [None, None]
    assert told == ["unasked"]


@pytest.mark.anyio
async def test_notifications_on_the_stream_of_unasked_messages_are_charged_to_the_servers_budget(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="tool_tree.budget"):
        async with unasked_server("flood", 3 * NOTIFICATION_BURST) as config, ServerPool([config]) as pool:
            assert [last for last, _ in await gets(pool, 2)] == [None, None]  # the flood's stream, and the next
            assert text(await pool.call("unasked", "change", {})) == "said"
    assert [r.getMessage() for r in caplog.records if "notifications" in r.getMessage()] == [
        f"server 'unasked' sent more than {NOTIFICATION_BURST:,} notifications at once (then 100 a second), the "
        "budget for one server: tooltree drops the rest unread (it uses none of them)"
    ]


async def outside(config: ServerConfig, path: str) -> Any:
    """What the server answers at ``path``, outside MCP (no session; not counted as a GET)."""
    assert config.url is not None
    async with httpx2.AsyncClient(timeout=WAIT) as client:
        reply = await client.get(config.url.removesuffix("/mcp") + path)
    return reply.json() if reply.content else None


async def logged(caplog: pytest.LogCaptureFixture, said: Callable[[str], bool]) -> None:
    with anyio.fail_after(WAIT):
        while not any(said(r.getMessage()) for r in caplog.records):
            await anyio.sleep(0.05)


@pytest.mark.anyio
async def test_a_server_without_a_stream_of_unasked_messages_is_asked_once_and_its_calls_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # 405 is the spec's "no such stream": the SDK's second try (a second later) is refused unsent.
    caplog.set_level(logging.DEBUG, logger="tool_tree.get_streams")
    async with unasked_server("405") as config, ServerPool([config]) as pool:
        assert len(await gets(pool, 1)) == 1  # the pool opens its session at its first call
        await logged(caplog, lambda message: "(it answered 405): not asked again" in message)
        await logged(caplog, lambda message: "the SDK's GET refused unsent" in message)
        assert len(await gets(pool, 2, timeout=0)) == 1
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.anyio
@pytest.mark.parametrize("size", [10, MAX_MESSAGE_VALUES - 100], ids=["small", "a-million-values"])
async def test_answers_on_the_stream_of_unasked_messages_are_never_parsed_and_past_the_allowance_end_the_server(
    size: int, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: each was parsed by the SDK (a million values: about a second of the loop each, slowed only by the
    # reader's budget, so the server was not ended in 30 s); small ones ended it, but the stream's task reopened it
    # after its wait: one more GET reached the server tooltree had ended.
    parsed: list[str] = []
    sdk = streamable_http.jsonrpc_message_adapter

    class Counted:  # the SDK's own parser of what a stream brings, counted: none of the answers must reach it
        def validate_json(self, data: str, **kwargs: Any) -> Any:
            if '"id":1000000' in data[:40]:
                parsed.append(data[:40])
            return sdk.validate_json(data, **kwargs)

    monkeypatch.setattr(streamable_http, "jsonrpc_message_adapter", Counted())
    caplog.set_level(logging.WARNING, logger="tool_tree.guard")  # the guard logs the limit broken
    async with unasked_server("strays", size) as config, ServerPool([config]) as pool:
        assert len(await gets(pool, 1)) == 1  # the session is open, and its stream
        await outside(config, "/go")
        await logged(caplog, lambda message: "answers to requests tooltree did not make" in message)
        with anyio.fail_after(WAIT):
            while pool.state("unasked") != "stopped":
                await anyio.sleep(0.05)
        # Past the wait before the stream's next GET (1 s after it ended), with a second to spare.
        seen = await outside(config, f"/gets?after={FIRST_WAIT + 1}")
    assert len(seen) == 1 and parsed == []
    assert [r.getMessage() for r in caplog.records] == [
        f"server 'unasked' sent more than {STRAY_ANSWERS} answers to requests tooltree did not make or had answered "
        "(then 1 a second), the limit for one server"
    ]


@pytest.mark.anyio
async def test_no_get_reaches_the_server_once_the_pool_closed_even_while_it_ends_the_session() -> None:
    # The server holds the DELETE ending its session until another GET comes (or 3 s): before, the stream's task
    # was cancelled only after that DELETE, so the reopening its wait (2 s) had planned went out meanwhile.
    async with unasked_server("retry0-slowend") as config:
        async with ServerPool([config]) as pool:
            assert len(await gets(pool, 2)) == 2  # the stream ended at once, reopened: the next GET waits 2 s
        assert len(await outside(config, "/gets")) == 2


class Heard(logging.Handler):
    """What `tool_tree.get_streams` logs, and a wait until it says something (`said`)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._new = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:  # on the event loop: the SDK's tasks log there
        self.records.append(record)
        self._new.set()

    async def said(self, what: Callable[[str], bool]) -> None:
        with anyio.fail_after(WAIT):
            while not any(what(r.getMessage()) for r in self.records):
                self._new = anyio.Event()
                await self._new.wait()

    def at(self, level: int) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno == level]


@pytest.fixture
def heard() -> Iterator[Heard]:
    handler, log = Heard(), logging.getLogger("tool_tree.get_streams")
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


NOTICES = "its notices tied to no call (tools/list_changed among them)"
LOST = (
    f"server 'unasked': its stream of unasked messages is lost (HTTP 503 Service Unavailable): {NOTICES} do not reach "
    "tooltree until it opens again; tried again 1 s apart, doubling up to 60 s, at most 6 times a minute"
)


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "failures"), [("503", 3), ("cut", 2)])
async def test_the_stream_of_unasked_messages_is_reopened_after_failures_that_may_pass_and_what_it_says_told(
    mode: str, failures: int, heard: Heard
) -> None:
    # The server answers its first GETs 503, or cuts their connection once the stream is open (a server restarting
    # behind its proxy, a redeploy), then opens it. Before, the SDK gave the stream up after two failures in a row: no
    # GET after the second, and the `tools/list_changed` the `change` tool sends on it never reached the pool. A stream
    # lost (503) that opens again is told too, before that notice (what the server sent meanwhile never arrived); one
    # cut whose next GET opens is not.
    told: list[str] = []
    expected = ["unasked", "unasked"] if mode == "503" else ["unasked"]
    changed = anyio.Event()

    def listener(server: str) -> None:
        told.append(server)
        if len(told) == len(expected):
            changed.set()

    async with unasked_server(mode, failures) as config, ServerPool([config], on_tools_changed=listener) as pool:
        assert text(await pool.call("unasked", "change", {})) == "said"
        with anyio.fail_after(WAIT):
            await changed.wait()
        assert len(await gets(pool, failures + 2, timeout=0)) == failures + 1  # the last one stays open
    assert told == expected
    if mode == "503":  # said once as lost, whatever the GETs that failed; once as open again
        assert heard.at(logging.WARNING) == [LOST]
        assert heard.at(logging.INFO) == [
            "server 'unasked': its stream of unasked messages is open again (what the server sent meanwhile may never "
            "arrive)"
        ]
    else:  # each stream cut was reopened at once: nothing was lost
        assert heard.at(logging.WARNING) == heard.at(logging.INFO) == []


@pytest.mark.anyio
async def test_a_get_of_the_stream_that_cannot_connect_is_handed_to_the_sdk_as_a_stream_ended_and_said_once(
    heard: Heard,
) -> None:
    # A server down for a redeploy refuses connections. Before, the SDK got the ConnectError: a failure, and two in a
    # row gave the stream up for the session.
    with socket.socket() as down:
        down.bind(("127.0.0.1", 0))  # bound, not listening: a connection to it is refused
        url = f"http://127.0.0.1:{down.getsockname()[1]}/mcp"
        async with http_client(name="unasked") as client:
            first = await client.get(url)  # the first GET without Last-Event-ID: the stream of unasked messages
            second = await client.get(url)
    for ended in (first, second):
        assert (ended.status_code, ended.headers["content-type"], ended.content) == (200, "text/event-stream", b"")
    assert heard.at(logging.WARNING) == [LOST.replace("HTTP 503 Service Unavailable", "Connection refused")]


@pytest.mark.anyio
@pytest.mark.parametrize("status", [404, 401])
async def test_a_stream_of_unasked_messages_refused_404_or_401_is_given_up_after_one_get_and_said_once(
    status: int, heard: Heard
) -> None:
    # A 404 says the server no longer knows the session, a 401 that it refuses the credentials: the same GET would
    # be refused again. Before, the SDK sent it once more a second later, and gave the stream up without a word. This
    # server still knows the session (it answers GETs 404, having none): the pool checks it, and keeps it.
    pool_heard, pool_log = Heard(), logging.getLogger("tool_tree.pool")
    pool_log.addHandler(pool_heard)
    level = pool_log.level
    pool_log.setLevel(logging.INFO)
    try:
        async with unasked_server(str(status)) as config, ServerPool([config]) as pool:
            assert len(await gets(pool, 1)) == 1  # the pool opens its session at its first call
            await heard.said(lambda message: "the SDK's GET refused unsent" in message)
            if status == 404:
                await pool_heard.said(lambda message: "answers on its session" in message)
            assert len(await gets(pool, 2, timeout=0)) == 1
            assert pool.restarts("unasked") == 0
    finally:
        pool_log.removeHandler(pool_heard)
        pool_log.setLevel(level)
    if status == 404:
        said = (
            "its stream of unasked messages is given up (it answered 404: the server no longer knows the session, as "
            f"after a restart, or has no such stream): {NOTICES} reach tooltree again only in a new session"
        )
        assert pool_heard.at(logging.INFO) == [
            "server 'unasked' answers on its session: it has no stream of unasked messages (its 404)"
        ]
    else:
        said = (
            "its stream of unasked messages is given up (HTTP 401 Unauthorized: the server wants credentials: set "
            'them in its `headers` (e.g. Authorization: "Bearer ${TOKEN}") (servers.unasked.headers)): '
            f"{NOTICES} do not reach tooltree in this session"
        )
    assert heard.at(logging.WARNING) == [f"server 'unasked': {said}"]


@pytest.mark.anyio
async def test_the_sdk_giving_the_stream_up_of_its_own_after_two_failed_streams_in_a_row_is_said_once(
    heard: Heard,
) -> None:
    # Each stream brings an event past the values of one message, refused: the stream fails on what it holds, which
    # no reopening mends. The SDK gives it up after two such in a row (the behaviour `KeepingClient` relies on: its
    # count of failures, set back to 0 only by a stream that ends cleanly); before, it did so silently.
    async with unasked_server("values-each", MAX_MESSAGE_VALUES + 100) as config, ServerPool([config]) as pool:
        assert len(await gets(pool, 1)) == 1
        await heard.said(lambda message: "the SDK gave up its stream of unasked messages" in message)
        assert len(await gets(pool, 3, timeout=0)) == 2
    assert heard.at(logging.WARNING) == [
        "server 'unasked': the SDK gave up its stream of unasked messages (two streams in a row failed on what they "
        "held, such as an event past a cap, or a redirect it does not follow; the log of mcp.client.streamable_http "
        f"says which): {NOTICES} do not reach tooltree in this session"
    ]
