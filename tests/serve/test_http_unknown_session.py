"""``tooltree serve --http`` answering a request in a session it does not know (``404``): the message still begins
``Session not found`` (clients match it; the code stays ``-32001``, on which a client initializes again, as the MCP
spec has it), and then says why the session may have ended and to start a new one. Before, it said only "Session not
found": a user shown it could not tell that the session had idled out, been ended for another client, or that serve
had restarted, nor what to do.

A real serve process (no sandbox started: nothing here runs a script) with raw HTTP and the official SDK client, and
the gate in process in front of a stand-in for the SDK's app, which forgets a session as the SDK does at its
``idle_timeout``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from agent.serve.http_gate import SessionGate
from tests.serve.conftest import TOKEN, Serve, http_client, new_serve
from tests.serve.conftest import raw_session as initialize

pytestmark = pytest.mark.anyio

WAIT = 90.0
IDLE = 1234.0
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
AUTH = {**ACCEPT, "Authorization": f"Bearer {TOKEN}"}
AGAIN = "start a new session (initialize again)"


@pytest.fixture(scope="module")
def one_place(serve_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """A serve process over HTTP with one client session at most and no warm sandbox."""
    serve = new_serve(tmp_path_factory.mktemp("unknown-session"), serve_tree,
                      serve={"warm": 0, "max_sessions": 1, "idle_timeout": IDLE})  # fmt: skip
    serve.start_http()
    yield serve
    serve.stop()


def said(error: dict[str, Any]) -> str:
    """The message of a ``404``'s JSON-RPC error, after checking what a client reads first."""
    assert error["code"] == -32001 and error["message"].startswith("Session not found: ")
    assert error["message"].endswith(AGAIN)
    return str(error["message"])


async def test_a_session_serve_never_knew_is_told_it_ended_or_serve_restarted(one_place: Serve) -> None:
    # What a client of a serve that restarted sends: a session id from before.
    import httpx2

    stale = {**AUTH, "Mcp-Session-Id": "0123456789abcdef0123456789abcdef", "MCP-Protocol-Version": "2025-11-25"}
    async with httpx2.AsyncClient(timeout=30) as http:
        answers = [
            await http.post(one_place.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=stale),
            await http.get(one_place.url, headers=stale),
            await http.delete(one_place.url, headers=stale),
        ]
    assert [a.status_code for a in answers] == [404] * 3
    texts = {said(a.json()["error"]) for a in answers}
    assert len(texts) == 1
    (text,) = texts
    assert f"serve.idle_timeout, {IDLE:g} s" in text and "restarted" in text, text


async def test_the_sdk_client_of_a_session_ended_for_a_new_client_reads_why_with_the_code_it_knew(
    one_place: Serve,
) -> None:
    import httpx2
    from mcp import MCPError

    async with http_client(one_place.url, read_timeout_seconds=WAIT) as client:
        assert (await client.list_tools()).tools  # past its handshake: a session that may be ended for another
        async with httpx2.AsyncClient(timeout=30) as http:
            newcomer = await initialize(http, one_place.url)  # the one place: the SDK client's session ends
            with pytest.raises(MCPError) as caught:
                await client.list_tools()
            await http.delete(one_place.url, headers=newcomer)
    # The SDK client hands on the body's error as it did (before: -32001, "Session not found" alone).
    text = said({"code": caught.value.code, "message": caught.value.message})
    assert "to make room for a new client" in text and "serve.max_sessions" in text, text


async def test_a_session_its_client_ended_says_so(one_place: Serve) -> None:
    import httpx2

    async with httpx2.AsyncClient(timeout=30) as http:
        session = await initialize(http, one_place.url)
        assert (await http.delete(one_place.url, headers=session)).status_code == 200
        gone = await http.post(one_place.url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
                               headers=session)  # fmt: skip
    assert gone.status_code == 404
    assert "its client ended it" in said(gone.json()["error"])


# ---- the SDK's own 404: a session the gate knows, which the SDK ended at its idle_timeout --------------------------


class ForgetfulApp:
    """The SDK's app as far as the gate sees it: ``initialize`` opens session ``s1``, ``s2``, ...; a session in
    `forgotten` (the SDK ended it at its ``idle_timeout``) is answered as the SDK answers one it does not know."""

    def __init__(self) -> None:
        self.opened = 0
        self.forgotten: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = dict(scope["headers"]).get(b"mcp-session-id", b"").decode()
        await receive()
        headers = [(b"content-type", b"application/json")]
        if key in self.forgotten:  # the SDK's own answer (`StreamableHTTPSessionManager`)
            body = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Session not found"}}'
            await send({"type": "http.response.start", "status": 404, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        if not key:
            self.opened += 1
            headers.append((b"mcp-session-id", f"s{self.opened}".encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"{}"})


async def request(gate: SessionGate, method: str, key: str | None = None) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of a request of ``method`` (a ``POST`` of it, or ``DELETE``/``GET``) in ``key``."""
    body = b"" if method in ("DELETE", "GET") else json.dumps({"jsonrpc": "2.0", "id": 1, "method": method}).encode()
    headers = {"host": "127.0.0.1:1", "content-length": str(len(body)), "content-type": "application/json"}
    if key is not None:
        headers["mcp-session-id"] = key
    scope = {"type": "http", "method": method if method in ("DELETE", "GET") else "POST", "path": "/mcp",
             "headers": [(k.encode(), v.encode()) for k, v in headers.items()], "query_string": b""}  # fmt: skip
    given = iter([{"type": "http.request", "body": body, "more_body": False}])
    sent: list[Message] = []

    async def receive() -> Message:
        return next(given, {"type": "http.disconnect"})

    async def send(message: Message) -> None:
        sent.append(message)

    await gate(scope, receive, send)
    text = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return int(sent[0]["status"]), json.loads(text)


async def test_a_session_the_sdk_ended_at_its_idle_timeout_is_told_so_with_the_gates_code() -> None:
    # Before: the SDK's body went through as it was: -32600 (where the gate's own 404 says -32001) and no reason.
    app, ended = ForgetfulApp(), list[str]()

    async def on_end(key: str) -> None:
        ended.append(key)

    gate = SessionGate(app, max_sessions=4, idle_timeout=0, on_end=on_end)  # any session is idle that long
    assert (await request(gate, "initialize"))[0] == 200
    app.forgotten.add("s1")
    status, body = await request(gate, "tools/list", "s1")
    assert status == 404 and ended == ["s1"]
    assert "it ended after serve.idle_timeout (0 s) without a request" in said(body["error"])
    assert await request(gate, "tools/list", "s1") == (404, body)  # unknown to the gate now too: the same reason


async def test_a_session_the_sdk_ended_before_its_idle_timeout_is_not_said_to_have_idled_out() -> None:
    app = ForgetfulApp()

    async def on_end(key: str) -> None:
        pass

    gate = SessionGate(app, max_sessions=4, idle_timeout=3600, on_end=on_end)
    assert (await request(gate, "initialize"))[0] == 200
    app.forgotten.add("s1")  # ended some other way (its server task failed)
    answers = [await request(gate, method, "s1") for method in ("GET", "tools/list")]
    assert [status for status, _ in answers] == [404, 404]
    assert [said(body["error"]) for _, body in answers] == [f"Session not found: it ended on the server; {AGAIN}"] * 2
