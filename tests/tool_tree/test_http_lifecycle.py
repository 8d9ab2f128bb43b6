"""The life of a Streamable HTTP session seen from the pool: a server that restarts, one whose credentials stop
working, one that ends its listing with an empty cursor (real official-SDK servers on a real socket).

Before, a server restarted mid-session (its session id then unknown: HTTP 404, as the MCP spec says) failed every
later call with "server error -32600: Session not found" for the life of the pool, though the spec has the client
open a new session; a token revoked mid-session failed each call as "server error -32603: Server returned an error
response", without the status or what to do; a server ending ``tools/list`` with ``nextCursor: ""`` could not be
started ("pagination repeats"); and a reply with an empty JSON body logged the SDK's traceback.

The SDK servers here speak the handshake era (they answer ``server/discover`` with no modern version, as the Go
SDK's stateful servers do), the one with sessions; a "restart" swaps in a new server, with an empty session table,
behind the same socket, as a restarted process has.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import mcp_types as types
import pytest
import uvicorn
from anyio.abc import TaskGroup, TaskStatus
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.lowlevel import Server
from starlette.types import Receive, Scope, Send

from tool_tree.config import ServerConfig
from tool_tree.connect import connect, list_tools_raw
from tool_tree.pool import ServerPool

pytestmark = pytest.mark.anyio


class Tokens:
    """A token verifier whose tokens can be revoked (an OAuth-protected server)."""

    def __init__(self, *valid: str) -> None:
        self.valid = set(valid)

    async def verify_token(self, token: str) -> AccessToken | None:
        return AccessToken(token=token, client_id="c", scopes=[]) if token in self.valid else None


def counter_app(calls: list[str], url: str, tokens: Tokens | None) -> Any:
    """A handshake-era SDK server whose tool ``bump`` records each run in ``calls``."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {"tag": {"type": "string"}}}
        return types.ListToolsResult(tools=[types.Tool(name="bump", input_schema=schema)])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tag = str((params.arguments or {})["tag"])
        calls.append(tag)
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"bumped {tag}")])

    async def discover(ctx: Any, params: Any) -> types.DiscoverResult:
        return types.DiscoverResult(supported_versions=["2025-06-18"], capabilities=types.ServerCapabilities())

    server: Server[Any] = Server("counter", on_list_tools=list_tools, on_call_tool=call_tool)
    server.add_request_handler("server/discover", types.RequestParams, discover)
    if tokens is None:
        return server.streamable_http_app()
    auth = AuthSettings.model_validate(
        {"issuer_url": "https://auth.example", "resource_server_url": url, "validate_token_resource": False}
    )
    return server.streamable_http_app(auth=auth, token_verifier=tokens)


class Restartable:
    """An SDK server on a real socket (uvicorn); `restart` ends its life and begins a new one (each life is a task
    of its own, which enters and leaves the app's lifespan: its session manager)."""

    def __init__(self, port: int, tg: TaskGroup, tokens: Tokens | None) -> None:
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.calls: list[str] = []
        self._tg, self._tokens = tg, tokens
        self._app: Any = None
        self._end: anyio.Event | None = None
        self._ended: anyio.Event | None = None

    async def _live(self, *, task_status: TaskStatus[None]) -> None:
        app = counter_app(self.calls, self.url, self._tokens)
        end = self._end = anyio.Event()
        ended = self._ended = anyio.Event()
        try:
            async with app.router.lifespan_context(app):
                self._app = app
                task_status.started()
                await end.wait()
        finally:
            ended.set()

    async def restart(self) -> None:
        await self.stop()
        await self._tg.start(self._live)

    async def stop(self) -> None:
        if self._end is not None and self._ended is not None:
            self._end.set()
            await self._ended.wait()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)


@asynccontextmanager
async def sdk_server(tokens: Tokens | None = None) -> AsyncIterator[Restartable]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()  # connections wait in the backlog until uvicorn takes them: no wait for it to be up
        async with anyio.create_task_group() as tg:
            server = Restartable(sock.getsockname()[1], tg, tokens)
            await server.restart()
            web = uvicorn.Server(uvicorn.Config(server, lifespan="off", log_level="warning"))
            tg.start_soon(web.serve, [sock])
            try:
                yield server
            finally:
                web.should_exit = True
                await server.stop()


def text(result: dict[str, Any]) -> str:
    return "".join(b["text"] for b in result["content"] if b["type"] == "text")


async def test_a_server_restarted_mid_session_gets_a_new_session_and_the_call_runs_once() -> None:
    async with sdk_server() as server, ServerPool([ServerConfig(name="ctr", url=server.url, timeout=20)]) as pool:
        assert text(await pool.call("ctr", "bump", {"tag": "a"})) == "bumped a"
        await server.restart()  # the session id tooltree holds now answers 404 ("Session not found")
        second = await pool.call("ctr", "bump", {"tag": "b"})
        assert not second.get("isError") and text(second) == "bumped b"
        assert text(await pool.call("ctr", "bump", {"tag": "c"})) == "bumped c"
        assert server.calls == ["a", "b", "c"]  # b ran once: the 404 said the old session never ran it
        assert pool.restarts("ctr") == 1


async def test_calls_sent_together_after_a_restart_share_one_new_session_and_each_runs_once() -> None:
    async with sdk_server() as server, ServerPool([ServerConfig(name="ctr", url=server.url, timeout=20)]) as pool:
        await pool.call("ctr", "bump", {"tag": "first"})
        await server.restart()
        results: dict[str, dict[str, Any]] = {}

        async def bump(tag: str) -> None:
            results[tag] = await pool.call("ctr", "bump", {"tag": tag})

        async with anyio.create_task_group() as tg:
            for tag in "abcdefgh":
                tg.start_soon(bump, tag)
        # Before (with the first fix alone), the first call to learn of the restart closed the old session under
        # the others, which failed as "the server died during the call" though their 404s said they never ran.
        assert {tag: text(result) for tag, result in results.items()} == {tag: f"bumped {tag}" for tag in "abcdefgh"}
        assert sorted(server.calls) == sorted(["first", *"abcdefgh"])
        assert pool.restarts("ctr") == 1


async def test_a_token_revoked_mid_session_fails_the_call_with_the_status_and_what_to_set() -> None:
    tokens = Tokens("t0k3n")
    async with sdk_server(tokens) as server:
        config = ServerConfig(name="auth", url=server.url, timeout=20, headers={"Authorization": "Bearer t0k3n"})
        async with ServerPool([config]) as pool:
            assert text(await pool.call("auth", "bump", {"tag": "a"})) == "bumped a"
            tokens.valid.clear()  # the token expired, or was revoked
            result = await pool.call("auth", "bump", {"tag": "b"})
    assert result["isError"] is True
    message = text(result)
    assert "HTTP 401 Unauthorized" in message
    assert "refused the credentials in its `headers`" in message and "OAuth" in message
    assert "t0k3n" not in message
    assert server.calls == ["a"]


# A raw server (http.server): a handshake-era server that forgets every session at once (each call answers 404,
# or with `answer` 400, a 400 naming the session to a call on the first one), lists with an empty cursor at the
# end, and answers the tool `empty` with an empty JSON body, `page` with a web page, `cut` with an event stream
# that ends before the answer.
class Forgetful(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    calls: list[str | None]  # the session id each tools/call came with
    sessions: list[str]
    answer = 404  # to a tools/call: 404 always, or (400) a 400 naming the session to one sent on the first session

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in {"content-type": "application/json", **(headers or {})}.items():
            self.send_header(key, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(405)

    def do_DELETE(self) -> None:
        self._send(200)

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if "id" not in message:
            return self._send(202)
        method, session = message["method"], self.headers.get("mcp-session-id")
        headers: dict[str, str] = {}
        result: dict[str, Any] = {}
        if method == "server/discover":
            error = {"code": -32601, "message": "Method not found"}
            return self._send(200, json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}).encode())
        if method == "initialize":
            self.sessions.append(f"s{len(self.sessions)}")
            headers["mcp-session-id"] = self.sessions[-1]
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "forgetful", "version": "1"},
            }
        elif method == "tools/list":
            result = {
                "tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("gone", "empty", "page", "cut")]
            }
            result["nextCursor"] = ""  # the end, as some servers write it
        elif method == "tools/call" and message["params"]["name"] == "empty":
            return self._send(200)
        elif method == "tools/call" and message["params"]["name"] == "cut":  # the stream ends before the answer
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
            self.wfile.write(b"event: message\ndata: %s\n\n" % json.dumps(note).encode())
            self.close_connection = True
            return None
        elif method == "tools/call" and message["params"]["name"] == "page":
            return self._send(200, b"<html>Sign in</html>", {"content-type": "text/html"})
        elif method == "tools/call" and self.answer == 400 and session != "s0":
            self.calls.append(session)
            result = {"content": [{"type": "text", "text": "ran"}]}
        elif method == "tools/call" and self.answer == 400:  # as the TypeScript SDK's examples answer
            self.calls.append(session)
            error = {"code": -32000, "message": "Bad Request: No valid session ID provided"}
            return self._send(400, json.dumps({"jsonrpc": "2.0", "error": error}).encode())
        elif method == "tools/call":
            self.calls.append(session)
            return self._send(404, b"Session not found", {"content-type": "text/plain"})
        self._send(200, json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode(), headers)


@pytest.fixture
def forgetful() -> Iterator[tuple[str, type[Forgetful]]]:
    handler = type("Handler", (Forgetful,), {"calls": [], "sessions": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp", handler
    finally:
        server.shutdown()
        server.server_close()


async def test_an_empty_next_cursor_ends_the_listing(forgetful: tuple[str, type[Forgetful]]) -> None:
    url, _ = forgetful
    async with connect(ServerConfig(name="f", url=url, timeout=20)) as conn:
        assert [t["name"] for t in await list_tools_raw(conn.client)] == ["gone", "empty", "page", "cut"]


async def test_a_session_the_server_forgets_again_is_retried_once_and_the_call_fails_saying_it_did_not_run(
    forgetful: tuple[str, type[Forgetful]],
) -> None:
    url, handler = forgetful
    async with ServerPool([ServerConfig(name="f", url=url, timeout=20)]) as pool:
        result = await pool.call("f", "gone", {})
    assert result["isError"] is True
    message = text(result)
    assert "HTTP 404" in message and "session" in message and "did not run" in message
    assert handler.calls == ["s0", "s1"]  # once on the old session, once on a new one: no more


async def test_a_400_naming_the_session_fails_the_call_unsent_again_and_the_next_call_opens_a_new_session(
    forgetful: tuple[str, type[Forgetful]],
) -> None:
    url, handler = forgetful
    handler.answer = 400
    async with ServerPool([ServerConfig(name="f", url=url, timeout=20)]) as pool:
        first = await pool.call("f", "gone", {})
        second = await pool.call("f", "gone", {})
    assert first["isError"] is True
    assert text(first) == (
        "the server no longer knows this session (HTTP 400 Bad Request: Bad Request: No valid session ID provided); "
        "the request was not sent again: the next one opens a new session"
    )
    assert text(second) == "ran"
    assert handler.calls == ["s0", "s1"]


async def test_an_empty_json_reply_fails_its_call_without_a_traceback(
    forgetful: tuple[str, type[Forgetful]], caplog: pytest.LogCaptureFixture
) -> None:
    url, _ = forgetful
    with caplog.at_level(logging.DEBUG):
        async with ServerPool([ServerConfig(name="f", url=url, timeout=20)]) as pool:
            result = await pool.call("f", "empty", {})
    assert text(result) == "server error -32603: the server answered the request with an empty body"
    assert not [r for r in caplog.records if r.exc_info and r.levelno >= logging.WARNING]


async def test_a_web_page_answering_a_call_is_named(forgetful: tuple[str, type[Forgetful]]) -> None:
    url, _ = forgetful
    async with ServerPool([ServerConfig(name="f", url=url, timeout=20)]) as pool:
        result = await pool.call("f", "page", {})
    assert text(result) == (
        "server error -32603: the server answered the request with a web page (text/html), not MCP (a proxy's "
        "sign-in or error page?)"
    )


async def test_a_reply_stream_that_ends_before_the_answer_says_the_call_may_have_run(
    forgetful: tuple[str, type[Forgetful]],
) -> None:
    url, _ = forgetful
    async with ServerPool([ServerConfig(name="f", url=url, timeout=20)]) as pool:
        result = await pool.call("f", "cut", {})
    assert text(result) == (
        "the server's reply ended before its answer (SSE stream ended without a response): the call may have run"
    )
