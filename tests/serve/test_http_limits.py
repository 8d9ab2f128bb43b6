"""`agent.serve.http_limits` in a real `tooltree serve --http` process, over raw TCP: a connection that sends no
request head in time is closed, connections past the cap are answered ``503`` and closed, the open files
limit is raised at start, and running out of descriptors is one log line, not a traceback per try."""

from __future__ import annotations

import asyncio
import os
import resource
import shutil
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.abc
import pytest

from agent.serve.http_limits import BACKLOG, connection_cap, quiet_accept_errors
from tests.serve.conftest import TOKEN, Serve, new_serve
from tests.support import ServeProcess, wait_until

pytestmark = pytest.mark.anyio

WAIT = 90.0
HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
ACCEPT = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {TOKEN}"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}  # fmt: skip


@pytest.fixture
def serving(serve_tree: Path, tmp_path: Path) -> Iterator[Callable[..., Serve]]:
    """``serving(nofile="128:128")``: a serve process over HTTP (no warm sandbox), under that open files limit."""
    made: list[Serve] = []

    def make(nofile: str | None = None) -> Serve:
        serve = new_serve(tmp_path, serve_tree, serve={"warm": 0})
        made.append(serve)
        argv = serve.argv("--http", "--port", "0")
        if nofile is not None:
            if shutil.which("prlimit") is None:
                pytest.skip("prlimit (util-linux) is not installed")
            argv = ["prlimit", f"--nofile={nofile}", *argv]
        serve.process = ServeProcess(argv, serve.env())
        serve.proc, serve.url = serve.process.proc, serve.process.url
        return serve

    yield make
    for serve in made:
        serve.stop()


def address(serve: Serve) -> tuple[str, int]:
    parts = urlsplit(serve.url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


async def closed_by_server(stream: anyio.abc.SocketStream, trickle: bytes | None = None) -> bytes:
    """What the server sends until it closes the connection (``trickle``: sent every 2 s meanwhile)."""
    received = b""
    with anyio.fail_after(WAIT):
        while True:
            with anyio.move_on_after(2):
                try:
                    received += await stream.receive()
                    continue
                except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
                    return received
            if trickle is not None:
                try:
                    await stream.send(trickle)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
                    return received


async def test_a_connection_that_sends_no_request_head_in_time_is_closed(serving: Callable[..., Serve]) -> None:
    # Before: kept for ever, silent or trickling a header line every few seconds (2,000 connections were held).
    serve = serving()
    host, port = address(serve)
    async with await anyio.connect_tcp(host, port) as silent, await anyio.connect_tcp(host, port) as trickling:
        await trickling.send(HEAD)
        async with anyio.create_task_group() as tg:
            tg.start_soon(closed_by_server, silent)
            tg.start_soon(closed_by_server, trickling, b"X-Pad: a\r\n")
    import httpx2

    async with httpx2.AsyncClient(timeout=30) as http:  # a client that sends its request is served as before
        answer = await http.post(serve.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert answer.status_code == 401


async def test_past_the_cap_a_new_connection_takes_the_place_of_the_one_waiting_longest_for_a_request(
    serving: Callable[..., Serve],
) -> None:
    # Before: no cap; 2,000 connections that sent nothing were held (at a 1024 descriptor limit, serve ran out).
    import httpx2

    serve = serving(nofile="128:128")
    host, port = address(serve)
    silent = [await anyio.connect_tcp(host, port) for _ in range(connection_cap(128))]
    try:
        async with httpx2.AsyncClient(timeout=30) as http:
            answer = await http.post(serve.url, json=INITIALIZE, headers=ACCEPT)
        first = await closed_by_server(silent[0])
    finally:
        for stream in silent:
            await stream.aclose()
    assert answer.status_code == 200
    assert first == b""  # closed to make room, without an answer


async def test_when_every_connection_has_a_request_under_way_a_new_one_is_answered_503(
    serving: Callable[..., Serve],
) -> None:
    serve = serving(nofile="128:128")
    host, port = address(serve)
    head = (f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: "
            "application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n"
            "Expect: 100-continue\r\n\r\n").encode()  # fmt: skip
    busy: list[anyio.abc.SocketStream] = []
    try:
        with anyio.fail_after(WAIT):
            for _ in range(connection_cap(128)):
                busy.append(await anyio.connect_tcp(host, port))
                await busy[-1].send(head)
                assert (await busy[-1].receive()).startswith(b"HTTP/1.1 100")  # its body is being read
            async with await anyio.connect_tcp(host, port) as extra:
                refused = await closed_by_server(extra)
    finally:
        for stream in busy:
            await stream.aclose()
    assert refused.startswith(b"HTTP/1.1 503") and b"too many connections" in refused
    assert serve.process is not None
    lines = serve.process.stderr_lines
    # Logged as the 503 goes out: read from serve's stderr by another thread, maybe after the answer arrived.
    wait_until(lambda: any("refused connections past" in line for line in lines), "the refusal's log line")
    assert sum("refused connections past" in line for line in lines) == 1, lines


def test_the_open_files_limit_is_raised_to_the_hard_one(serving: Callable[..., Serve]) -> None:
    serve = serving(nofile="256:4096")
    assert serve.proc is not None
    limits = Path(f"/proc/{serve.proc.pid}/limits").read_text(encoding="utf-8")
    (line,) = [line for line in limits.splitlines() if line.startswith("Max open files")]
    assert line.split()[3:5] == ["4096", "4096"]


async def test_running_out_of_descriptors_in_serve_is_logged_not_as_a_traceback_and_it_serves_again(
    serving: Callable[..., Serve],
) -> None:
    # Before: at a 1024 limit, 250,000 tracebacks (112 MB of stderr) in 25 s, a core pegged. That many tries
    # make one line is shown in-process below, where the tries can be counted.
    import subprocess

    import httpx2

    if shutil.which("prlimit") is None:
        pytest.skip("prlimit (util-linux) is not installed")
    serve = serving()
    assert serve.proc is not None and serve.process is not None
    pid = serve.proc.pid
    in_use = len(list(Path(f"/proc/{pid}/fd").iterdir()))
    limit = in_use + 8
    subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={limit}:{limit}"], check=True, timeout=30)
    host, port = address(serve)
    streams = [await anyio.connect_tcp(host, port) for _ in range(100)]
    try:
        lines = serve.process.stderr_lines
        await anyio.to_thread.run_sync(
            lambda: wait_until(lambda: any("cannot accept connections" in line for line in lines), "the log line")
        )
    finally:
        for stream in streams:
            await stream.aclose()
    async with httpx2.AsyncClient(timeout=WAIT) as http:  # once descriptors are free again, it serves
        answer = await http.post(serve.url, json=INITIALIZE, headers=ACCEPT)
    assert answer.status_code == 200
    assert not any("Traceback" in line for line in lines), lines[:20]
    assert sum("cannot accept connections" in line for line in lines) <= 3, lines[:20]


async def test_many_refused_accepts_are_one_log_line_not_a_traceback_per_try(caplog: pytest.LogCaptureFixture) -> None:
    # A real listening socket on this test's loop, with serve's backlog and handler, and this process out of
    # descriptors: the accept loop calls the handler once a try (`BACKLOG` tries a wake-up), then retries a
    # second later; we wait until it has been refused three rounds over, counted by the handler.
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    accepted: list[asyncio.BaseTransport] = []

    class Accepting(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            accepted.append(transport)

    server = await loop.create_server(Accepting, "127.0.0.1", 0, backlog=BACKLOG)
    port = server.sockets[0].getsockname()[1]
    # Each refused try schedules its own retry a second later (`_start_serving`, looked up on the loop when
    # scheduled); one that runs after the server closed adds a reader for its closed socket and raises
    # "Invalid file descriptor: -1". A round of tries spans longer than the wait below polls on a loaded
    # machine, so its last retries can come after every connection was accepted: they are counted, waited for.
    retried = 0
    start_serving = loop._start_serving  # type: ignore[attr-defined]

    def counted_retry(*args: Any) -> None:
        nonlocal retried
        retried += 1
        start_serving(*args)

    loop._start_serving = counted_retry  # type: ignore[attr-defined]
    clients = [socket.socket() for _ in range(100)]  # opened before descriptors run out
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowest_free = os.dup(0)
    os.close(lowest_free)
    try:
        errors = quiet_accept_errors(loop)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))  # no descriptor left to accept with
            for client in clients:
                client.setblocking(False)
                client.connect_ex(("127.0.0.1", port))
            with anyio.fail_after(WAIT):
                while errors.refused < 3 * BACKLOG:
                    await anyio.sleep(0.05)
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        with anyio.fail_after(WAIT):  # descriptors free again: a retry accepts every connection
            while len(accepted) < len(clients):
                await anyio.sleep(0.05)
        with anyio.fail_after(WAIT):  # and every retry scheduled has run, before the server closes
            while retried < errors.refused:
                await anyio.sleep(0.05)
    finally:
        del loop._start_serving  # type: ignore[attr-defined]
        loop.set_exception_handler(previous)
        for transport in accepted:
            transport.close()
        for client in clients:
            client.close()
        server.close()
        await server.wait_closed()
    said = [r for r in caplog.records if "cannot accept connections" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in caplog.records][:20]
    assert not any(r.exc_info for r in caplog.records), [r.getMessage() for r in caplog.records][:20]
