"""What a long-running ``tooltree serve --http`` accumulates: clients that left without a ``DELETE`` (Claude Code
after every ``claude -p``, a crashed client) leave their MCP sessions in the gate and the SDK until
``idle_timeout``, their sandboxes gone after `agent.serve.sessions.GONE_GRACE`. In a soak of 300 sessions (one in six
abandoned, `bench/serve_soak.py`) they filled every place of ``serve.max_sessions``, so each new client ended one.
The session ended for a new client must then be one whose client left, not a connected client's that was idle a
little longer (its variables lost while stale sessions stayed).

In process: the gate with a stand-in for the SDK's app.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from starlette.types import Message, Receive, Scope, Send

from agent.serve.http_gate import SessionGate

pytestmark = pytest.mark.anyio

WAIT = 30.0
HOUR = 3600.0


class App:
    """The SDK's app as far as the gate sees it: each ``initialize`` opens session ``s1``, ``s2``, ...; a ``DELETE``
    ends one; a ``GET`` is a stream that lasts until its client disconnects."""

    def __init__(self) -> None:
        self.opened = 0
        self.deleted: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = dict(scope["headers"]).get(b"mcp-session-id", b"").decode()
        if scope["method"] in ("POST", "DELETE"):
            await receive()
            headers = [(b"content-type", b"application/json")]
            if scope["method"] == "DELETE":
                self.deleted.append(key)
            elif not key:
                self.opened += 1
                headers.append((b"mcp-session-id", f"s{self.opened}".encode()))
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b"{}"})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        while (await receive())["type"] != "http.disconnect":
            pass
        await send({"type": "http.response.body", "body": b""})


def request(method: str, headers: dict[str, str]) -> Scope:
    raw = [(k.lower().encode(), v.encode()) for k, v in {"host": "127.0.0.1:1", **headers}.items()]
    return {"type": "http", "method": method, "path": "/mcp", "headers": raw, "query_string": b""}


class Harness:
    def __init__(self, max_sessions: int) -> None:
        self.app = App()
        self.ended: list[str] = []
        self.streams: list[tuple[str, bool]] = []
        self.changed = anyio.Event()
        self.gate = SessionGate(self.app, max_sessions=max_sessions, idle_timeout=HOUR, on_end=self.on_end,
                                on_stream=self.on_stream)  # fmt: skip

    async def on_end(self, key: str) -> None:
        self.ended.append(key)
        self.changed.set()

    def on_stream(self, key: str, opened: bool) -> None:
        self.streams.append((key, opened))
        self.changed.set()

    async def until(self, what: Any) -> None:
        with anyio.fail_after(WAIT):
            while not what():
                self.changed = anyio.Event()
                await self.changed.wait()

    async def post(
        self, method: str, key: str | None = None, answered: Callable[[], Awaitable[None]] | None = None
    ) -> int:
        """The status of a ``POST`` of ``method`` (in session ``key``); ``answered`` runs when its client has the
        answer's last bytes (before the gate's own bookkeeping of the request, as with a real client)."""
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": {}}).encode()
        headers = {"content-length": str(len(body)), "content-type": "application/json"}
        if key is not None:
            headers["mcp-session-id"] = key
        given = iter([{"type": "http.request", "body": body, "more_body": False}])
        sent: list[Message] = []

        async def receive() -> Message:
            return next(given, {"type": "http.disconnect"})

        async def send(message: Message) -> None:
            sent.append(message)
            if answered is not None and message["type"] == "http.response.body" and not message.get("more_body"):
                await answered()

        await self.gate(request("POST", headers), receive, send)
        return int(sent[0]["status"])

    async def stream(self, key: str, leave: anyio.Event) -> None:
        """A client's ``GET`` stream of ``key``, open until ``leave`` is set."""
        first = True

        async def receive() -> Message:
            nonlocal first
            if first:
                first = False
                return {"type": "http.request", "body": b"", "more_body": False}
            await leave.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            pass

        await self.gate(request("GET", {"mcp-session-id": key}), receive, send)


async def test_a_new_client_ends_the_session_of_a_client_that_left_not_a_connected_one() -> None:
    h = Harness(max_sessions=2)
    desktop_leaves, code_leaves = anyio.Event(), anyio.Event()
    async with anyio.create_task_group() as tg:
        assert await h.post("initialize") == 200  # s1: a connected client (Claude Desktop), idle longest
        assert await h.post("tools/list", "s1") == 200  # past its handshake (a session in it is never ended)
        tg.start_soon(h.stream, "s1", desktop_leaves)
        await h.until(lambda: ("s1", True) in h.streams)
        assert await h.post("initialize") == 200  # s2: a client that exits without a DELETE (claude -p)
        assert await h.post("tools/call", "s2") == 200
        tg.start_soon(h.stream, "s2", code_leaves)
        await h.until(lambda: ("s2", True) in h.streams)
        code_leaves.set()
        await h.until(lambda: ("s2", False) in h.streams)

        assert await h.post("initialize") == 200  # s3: every place is taken, one session must end
        await h.until(lambda: h.ended)
        assert h.ended == ["s2"] and h.app.deleted == ["s2"]  # before: s1, the connected client's
        assert ("s1", False) not in h.streams  # the connected client's stream is still open

        # A client whose stream closed but that sent a request since is there again: the oldest idle one goes.
        assert await h.post("tools/call", "s3") == 200
        tg.start_soon(h.stream, "s3", anyio.Event())
        await h.until(lambda: ("s3", True) in h.streams)
        assert await h.post("initialize") == 200  # s4
        await h.until(lambda: len(h.ended) == 2)
        assert h.ended == ["s2", "s1"]
        tg.cancel_scope.cancel()


async def test_a_client_that_initializes_the_moment_the_last_busy_session_is_answered_is_admitted() -> None:
    # Its previous request's answer has reached it, but the gate has not yet counted that request finished: before,
    # every session still had "a request in flight" and the new client got 503 (seen under load in the HTTP tests).
    h = Harness(max_sessions=1)
    statuses: list[int] = []
    async with anyio.create_task_group() as tg:
        assert await h.post("initialize") == 200  # s1

        async def next_client() -> None:
            statuses.append(await h.post("initialize"))

        async def answered() -> None:  # s1's client has its answer: a new client initializes at once
            tg.start_soon(next_client)
            with anyio.fail_after(WAIT):  # until the new client is refused (before) or waits for a place (now)
                while not statuses and h.gate._finished is None:
                    await anyio.sleep(0)

        assert await h.post("tools/call", "s1", answered) == 200
        await h.until(lambda: h.ended)
    assert statuses == [200] and h.ended == ["s1"]


class AnsweringTwice(App):
    """The SDK's app as a client's notification comes while its session ends (a client that cancels its call and
    leaves at once): it answers ``202``, fails to hand the notification on (the session's stream closed), answers
    ``500`` to the same request and raises, failing to hand the error on too."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST" or not dict(scope["headers"]).get(b"mcp-session-id"):
            await super().__call__(scope, receive, send)
            return
        await receive()
        for status, body in ((202, b""), (500, b"Internal Server Error")):
            await send({"type": "http.response.start", "status": status, "headers": []})
            await send({"type": "http.response.body", "body": body})
        raise anyio.ClosedResourceError


async def test_a_second_answer_to_a_request_already_answered_is_not_sent() -> None:
    # Before: it reached the HTTP server, which raised "Unexpected ASGI message 'http.response.start' sent, after
    # response already completed" (and, past that, the SDK's ClosedResourceError): a traceback of about 40 lines on
    # serve's stderr for most clients that cancel a call and leave at once (58 in 96 such sessions of a soak).
    async def on_end(key: str) -> None:
        pass

    gate = SessionGate(AnsweringTwice(), max_sessions=2, idle_timeout=HOUR, on_end=on_end, on_stream=lambda k, o: None)
    body = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    headers = {"content-length": str(len(body)), "content-type": "application/json"}
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:  # as uvicorn: nothing once the response is complete
        if sent and sent[-1]["type"] == "http.response.body" and not sent[-1].get("more_body"):
            raise RuntimeError(f"Unexpected ASGI message {message['type']!r} sent, after response already completed.")
        sent.append(message)

    async def discard(message: Message) -> None:
        pass

    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}).encode()
    given = iter([{"type": "http.request", "body": init, "more_body": False}])

    async def receive_init() -> Message:
        return next(given, {"type": "http.disconnect"})

    await gate(request("POST", {"content-length": str(len(init)), "content-type": "application/json"}), receive_init,
               discard)  # fmt: skip
    await gate(request("POST", {**headers, "mcp-session-id": "s1"}), receive, send)
    assert [m.get("status") for m in sent if m["type"] == "http.response.start"] == [202]
