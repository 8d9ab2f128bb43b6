"""An MCP server built with the official SDK (``MCPServer``), over Streamable HTTP with sessions (the protocol before
2026-07-28), that sends its client what is tied to no call: on the stream its client opens with a GET.

    python unasked_server.py FD GET_MODE [SIZE]

It serves on the listening socket ``FD`` (inherited: connections wait in its backlog until it takes them). Its
tools ask or tell on that stream, first making sure it is open (a ``ping`` answered on it, a few tries; the SDK drops
what is sent before the client's GET has opened it): ``ask`` sends ``ping`` or ``roots/list`` (by ``kind``) and
answers what the client answered, or its error; ``change`` sends ``notifications/tools/list_changed``; ``gets``
waits until ``count`` GETs have come (at most ``timeout`` seconds) and answers each one's ``Last-Event-ID`` and
arrival (`time.monotonic`), as JSON. Outside MCP (no session, not counted as GETs): ``/gets?after=S`` answers the
same list once another GET comes, or ``S`` seconds after the last stream the server answered itself ended (at once
if none did); ``/go`` lets the ``strays`` stream go.

``GET_MODE`` says how its GETs are answered: ``sdk`` by the SDK (a stream that stays open); ``retry0`` with ``retry: 0``
and ended at once, each time, and ``retry0-id`` with ``id: 7`` as well; ``405`` with 405 (no such stream); ``values``,
``bytes`` and ``flood`` the first one with an event of ``SIZE`` values (a ``notifications/tools/list_changed`` padded
with empty objects), of ``SIZE`` bytes (those two once ``change`` is called), or ``SIZE`` ``notifications/message``,
then ended, and the later ones by the SDK; ``strays`` the first one with ``retry: 0`` and `STRAYS` answers to requests
the client never made, each of ``SIZE`` values (once ``/go`` is asked), then ended, and the later ones by the SDK;
``retry0-slowend`` as ``retry0``, and a ``DELETE`` (the client ending its session) answered only once another GET comes
or after `HELD` seconds; ``404`` and ``401`` each GET with that status, and ``404-early`` so too, each request of a
session held until a GET is answered (its listing answered once its stream was refused, so the client hears the 404
before the listing); ``503`` the first ``SIZE`` with 503, and ``cut`` the first ``SIZE`` with a stream whose connection
is cut once open, the later ones by the SDK; ``ended-503`` the first two with ``retry: 0`` and ended at once, the next
``SIZE`` with 503, the later ones by the SDK; ``forget`` the first once ``/go`` is asked with 404, its session forgotten
(each later request of it answered 404, as by a server that restarted), the later ones by the SDK; ``values-each`` each
with an event of ``SIZE`` values (a ``notifications/message``), then ended.
"""

from __future__ import annotations

import json
import socket
import sys
import time
import warnings
from typing import Any

import anyio
import mcp.types as mt
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

server = MCPServer("unasked", log_level="WARNING")
MODE = sys.argv[2] if len(sys.argv) > 2 else "sdk"
SIZE = int(sys.argv[3]) if len(sys.argv) > 3 else 0
GETS: list[tuple[str | None, float]] = []
EVENTS: dict[str, anyio.Event] = {}
"""``got``: set (and replaced) at each GET; ``opened``: once the SDK answers one; ``asked``: once ``change`` runs, or
``/go`` is asked; ``refused``: once this server answered a GET itself."""
ENDED: list[float] = []
"""When each stream this server answered itself (not the SDK) ended (`time.monotonic`)."""
STRAYS = 24
"""Answers to no request the ``strays`` stream holds: more than tooltree's allowance (16 at once)."""
CUT: dict[str, Any] = {}
"""Where a ``cut`` GET's answer ends: its connection is cut."""
FORGOTTEN: set[bytes] = set()
"""The session ids ``forget`` no longer knows."""
HELD = 3.0
"""Seconds ``retry0-slowend`` holds a DELETE at most: longer than the wait before the stream's third GET (2 s)."""


async def _stream_ready(ctx: Context) -> None:
    """Wait until the client's GET stream is open, then until a ``ping`` on it is answered (a few tries)."""
    with anyio.move_on_after(10):
        await EVENTS["opened"].wait()
    for _ in range(2):
        try:
            await ctx.session.send_request(mt.PingRequest(), mt.EmptyResult, request_read_timeout_seconds=2)
            return
        except MCPError:  # sent before the stream was registered, and dropped: once more
            continue
    await ctx.session.send_request(mt.PingRequest(), mt.EmptyResult, request_read_timeout_seconds=2)


@server.tool(structured_output=False)
async def ask(kind: str, ctx: Context) -> str:
    """Send ``ping`` or ``roots/list`` tied to no request; what the client answered, or its error."""
    await _stream_ready(ctx)
    question: mt.PingRequest | mt.ListRootsRequest = mt.PingRequest() if kind == "ping" else mt.ListRootsRequest()
    try:
        with warnings.catch_warnings():  # roots are deprecated from 2026-07-28; this server is of an older protocol
            warnings.simplefilter("ignore")
            result = await ctx.session.send_request(question, mt.EmptyResult, request_read_timeout_seconds=10)
    except MCPError as e:
        return f"the client refused: {e.error.message}"
    return f"the client answered: {result.model_dump(mode='json')}"


@server.tool(structured_output=False)
async def change(ctx: Context) -> str:
    """Say on the GET stream that the tools changed."""
    EVENTS["asked"].set()
    await _stream_ready(ctx)
    await ctx.session.send_tool_list_changed()
    return "said"


@server.tool(structured_output=False)
async def gets(count: int, timeout: float) -> str:
    """Each GET's ``Last-Event-ID`` and arrival, once ``count`` have come or after ``timeout`` seconds."""
    with anyio.move_on_after(timeout):
        while len(GETS) < count:
            await EVENTS["got"].wait()
    return json.dumps(GETS)


def _event_stream(body: bytes) -> list[dict[str, Any]]:
    head = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    return [
        {"type": "http.response.start", "status": 200, "headers": head},
        {"type": "http.response.body", "body": body},
    ]


def _status(status: int, *headers: tuple[bytes, bytes]) -> list[dict[str, Any]]:
    return [{"type": "http.response.start", "status": status, "headers": list(headers)},
            {"type": "http.response.body", "body": b""}]  # fmt: skip


def _hostile(number: int) -> list[dict[str, Any]] | None:
    """How the ``number``-th GET (from 1) is answered, or None: by the SDK."""
    if MODE == "405":
        return _status(405, (b"allow", b"POST, DELETE"))
    if MODE in ("404", "401", "404-early"):
        return _status(int(MODE[:3]))
    if MODE == "values-each":
        pad = b",".join([b"{}"] * SIZE)
        message = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"pad":[%s]}}' % pad
        return _event_stream(b"data: %s\n\n" % message)
    if MODE == "forget" or (MODE in ("503", "cut") and number > SIZE) or (MODE == "ended-503" and number > SIZE + 2):
        return None
    if MODE == "ended-503":
        return _event_stream(b"retry: 0\n\n") if number <= 2 else _status(503)
    if MODE == "503":
        return _status(503)
    if MODE == "cut":  # the stream opens, then its connection is cut (the app fails mid-answer: uvicorn closes it)
        return [_event_stream(b"")[0], {"type": "http.response.body", "body": b": open\n\n", "more_body": True}, CUT]
    if MODE in ("retry0", "retry0-id", "retry0-slowend"):
        return _event_stream((b"id: 7\n" if MODE == "retry0-id" else b"") + b"retry: 0\n\n")
    if number > 1 or MODE == "sdk":
        return None
    if MODE == "strays":  # ids no request has: the client's own count from 1
        pad = b",".join([b"0"] * SIZE)
        answer = b'data: {"jsonrpc":"2.0","id":%d,"result":{"pad":[%s]}}\n\n'
        bodies = [b"retry: 0\n\n", *(answer % (10**9 + i, pad) for i in range(STRAYS)), b""]
        parts = [{"type": "http.response.body", "body": body, "more_body": bool(body)} for body in bodies]
        return [_event_stream(b"")[0], *parts]
    if MODE == "values":
        pad = b",".join([b"{}"] * SIZE)
        message = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"pad":[%s]}}' % pad
        return _event_stream(b"data: %s\n\n" % message)
    if MODE == "bytes":
        text = b"x" * SIZE
        message = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"pad":"%s"}}' % text
        return _event_stream(b"data: %s\n\n" % message)
    note = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":%d}}'
    return _event_stream(b"".join(b"data: %s\n\n" % (note % i) for i in range(SIZE)))


def counting(app: Any) -> Any:
    """``app`` with each GET recorded and answered as ``GET_MODE`` says."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/gets":
            await _listed(scope, send)
            return
        if scope["type"] == "http" and scope["path"] == "/go":
            EVENTS["asked"].set()
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        session = dict(scope.get("headers", [])).get(b"mcp-session-id")
        if scope["type"] == "http" and session in FORGOTTEN:
            for message in _status(404):
                await send(message)
            return
        if scope["type"] == "http" and scope["method"] == "POST" and session is not None and MODE == "404-early":
            with anyio.move_on_after(HELD):
                await EVENTS["refused"].wait()
        if scope["type"] == "http" and scope["method"] == "DELETE" and MODE == "retry0-slowend":
            with anyio.move_on_after(HELD):
                await EVENTS["got"].wait()
        if scope["type"] != "http" or scope["method"] != "GET":
            await app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        last = headers.get(b"last-event-id")
        GETS.append((last.decode() if last is not None else None, time.monotonic()))
        EVENTS["got"].set()
        EVENTS["got"] = anyio.Event()
        if MODE == "forget" and len(GETS) == 1 and session is not None:  # once the pool has listed the tools
            with anyio.move_on_after(30):
                await EVENTS["asked"].wait()
            FORGOTTEN.add(session)
            for message in _status(404):
                await send(message)
            return
        answer = _hostile(len(GETS))
        if answer is not None:
            await send(answer[0])
            if MODE in ("values", "bytes", "strays"):  # once asked: the pool has listed the tools, its session is up
                with anyio.move_on_after(30):
                    await EVENTS["asked"].wait()
            for message in answer[1:]:
                if message is CUT:
                    raise ConnectionAbortedError("the GET's connection is cut, as by a server restarting")
                await send(message)
            ENDED.append(time.monotonic())
            EVENTS["refused"].set()
            return

        async def noting(message: Any) -> None:
            if message["type"] == "http.response.start" and message["status"] == 200:
                EVENTS["opened"].set()
            await send(message)

        await app(scope, receive, noting)

    return wrapped


async def _listed(scope: Any, send: Any) -> None:
    """Answer ``/gets?after=S``: the GETs so far, once another comes or ``S`` seconds after the last stream this
    server answered itself ended."""
    after = float(scope["query_string"].decode().removeprefix("after=") or 0)
    wait = ENDED[-1] + after - time.monotonic() if ENDED else 0.0
    if wait > 0:
        with anyio.move_on_after(wait):
            await EVENTS["got"].wait()
    body = json.dumps(GETS).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


async def main() -> None:
    EVENTS.update(got=anyio.Event(), opened=anyio.Event(), asked=anyio.Event(), refused=anyio.Event())
    sock = socket.socket(fileno=int(sys.argv[1]))
    app = counting(server.streamable_http_app())
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    await web.serve([sock])


if __name__ == "__main__":
    anyio.run(main)
