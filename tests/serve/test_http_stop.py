"""Stopping `tooltree serve --http` while clients hold sessions: every SDK client (and Claude Code) keeps a ``GET``
stream open, and uvicorn waited for every connection to close, so SIGTERM did nothing for as long as a client
stayed. Now open streams end at once and requests in flight get a short grace (`STOP_GRACE`), then are cancelled."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import anyio
import pytest
from starlette.types import Message, Receive, Scope, Send

from agent.serve.http_gate import SessionGate
from tests.serve.conftest import http_client, new_serve

pytestmark = pytest.mark.anyio

WAIT = 30.0

EXIT_WAIT = 60.0
"""Seconds serve may take to exit once signalled (before the fix it never did while the client stayed)."""


async def test_sigterm_stops_serve_while_a_client_holds_its_session_and_stream(
    serve_tree: Path, tmp_path: Path
) -> None:
    serve = new_serve(tmp_path, serve_tree, serve={"warm": 0})
    url = serve.start_http()
    assert serve.proc is not None
    try:
        async with http_client(url) as client:
            listed = await client.call_tool("list_files", {"path": "servers"})
            assert "crm/" in listed.content[0].text
            serve.proc.send_signal(signal.SIGTERM)
            # The client stays connected (its GET stream open) while serve stops.
            code = await anyio.to_thread.run_sync(lambda: _exit_code(serve.proc))
            assert code == 0, "".join(serve.process.stderr_lines if serve.process else [])
    finally:
        serve.stop()
    stderr = "".join(serve.process.stderr_lines if serve.process else [])
    assert "Traceback" not in stderr and "Exception in ASGI application" not in stderr, stderr


def _exit_code(proc: subprocess.Popen[str] | None) -> int | None:
    assert proc is not None
    try:
        return proc.wait(timeout=EXIT_WAIT)
    except subprocess.TimeoutExpired:
        return None


class Hanging:
    """The SDK's app as far as the gate sees it: ``initialize`` opens session ``s1``; a ``GET`` of it is a stream that
    never ends; any other ``POST`` is never answered."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = (await receive()).get("body", b"")
        if scope["method"] == "POST" and b"initialize" in body:
            headers = [(b"content-type", b"application/json"), (b"mcp-session-id", b"s1")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b"{}"})
            return
        if scope["method"] == "GET":
            await send({"type": "http.response.start", "status": 200, "headers": []})
        await anyio.sleep_forever()


async def test_stopping_ends_the_streams_at_once_and_answers_what_is_left_after_the_grace() -> None:
    async def on_end(key: str) -> None:
        pass

    gate = SessionGate(Hanging(), max_sessions=4, idle_timeout=3600, on_end=on_end)
    answers: dict[str, list[Message]] = {"init": [], "get": [], "call": [], "late": []}
    began = anyio.Event()

    def request(method: str, body: bytes, name: str) -> tuple[Scope, Receive, Send]:
        headers = [(b"host", b"127.0.0.1:1"), (b"content-length", str(len(body)).encode())]
        if name != "init":
            headers.append((b"mcp-session-id", b"s1"))
        given = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> Message:
            if given:
                return given.pop()
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        async def send(message: Message) -> None:
            answers[name].append(message)
            if name == "call" or message.get("status") == 200:
                began.set()

        scope = {"type": "http", "method": method, "path": "/mcp", "headers": headers, "query_string": b""}
        return scope, receive, send

    call = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {}}).encode()
    await gate(*request("POST", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize"}).encode(), "init"))
    with anyio.fail_after(WAIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(gate, *request("GET", b"", "get"))
            await began.wait()
            tg.start_soon(gate, *request("POST", call, "call"))
            await anyio.wait_all_tasks_blocked()
            gate.stop(0.2)
    assert [m["type"] for m in answers["get"]] == ["http.response.start", "http.response.body"]
    assert answers["get"][-1].get("more_body", False) is False
    assert answers["call"][0]["status"] == 503 and b"tooltree serve is stopping" in answers["call"][1]["body"]
    await gate(*request("POST", call, "late"))
    assert answers["late"][0]["status"] == 503


class Streaming(Hanging):
    """`Hanging`, but a ``tools/call`` is answered with a stream of events: its head and a progress event, then
    nothing (a script still running)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        if scope["method"] == "POST" and b"tools/call" in message.get("body", b""):
            headers = [(b"content-type", b"text/event-stream")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 2}}
            event = b"event: message\r\ndata: " + json.dumps(progress).encode() + b"\r\n\r\n"
            await send({"type": "http.response.body", "body": event, "more_body": True})
            await anyio.sleep_forever()

        async def again() -> Message:
            return message

        await super().__call__(scope, again, send)


async def test_a_call_whose_stream_of_events_began_is_answered_with_an_error_saying_serve_is_stopping() -> None:
    # Before: its stream ended with no answer, and the SDK client said only "SSE stream ended without a response".
    async def on_end(key: str) -> None:
        pass

    gate = SessionGate(Streaming(), max_sessions=4, idle_timeout=3600, on_end=on_end)
    sent: list[Message] = []
    began = anyio.Event()

    def request(body: bytes, key: str | None) -> tuple[Scope, Receive, Send]:
        headers = [(b"host", b"127.0.0.1:1"), (b"content-length", str(len(body)).encode())]
        headers += [(b"mcp-session-id", key.encode())] if key is not None else []
        given = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> Message:
            if given:
                return given.pop()
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        async def send(message: Message) -> None:
            if key is not None:
                sent.append(message)
                began.set()

        return (
            {"type": "http", "method": "POST", "path": "/mcp", "headers": headers, "query_string": b""},
            receive,
            send,
        )

    await gate(*request(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize"}).encode(), None))
    call = json.dumps({"jsonrpc": "2.0", "id": "call-7", "method": "tools/call", "params": {}}).encode()
    with anyio.fail_after(WAIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(gate, *request(call, "s1"))
            await began.wait()
            await anyio.wait_all_tasks_blocked()
            gate.stop(0.2)
    assert sent[0]["status"] == 200 and sent[-1]["more_body"] is False
    events = b"".join(m.get("body", b"") for m in sent[1:]).decode()
    answers = [json.loads(line[5:]) for line in events.splitlines() if line.startswith("data:")]
    assert answers[-1] == {
        "jsonrpc": "2.0",
        "id": "call-7",
        "error": {
            "code": -32000,
            "message": "tooltree serve is stopping: this request was still running 0.2 s after serve was told to "
            "stop, so it was cancelled (a script it ran was stopped)",
        },
    }


class AnsweredNotClosed(Hanging):
    """`Hanging`, but a ``tools/call`` is answered with a stream whose answer event was sent, and the stream not yet
    closed (the SDK sends the answer, then closes its stream: a stop's cancel may land in between)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        if scope["method"] == "POST" and b"tools/call" in message.get("body", b""):
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
            )
            answer = {"jsonrpc": "2.0", "id": json.loads(message["body"])["id"], "result": {"content": []}}
            event = b"event: message\r\ndata: " + json.dumps(answer).encode() + b"\r\n\r\n"
            await send({"type": "http.response.body", "body": event, "more_body": True})
            await anyio.sleep_forever()

        async def again() -> Message:
            return message

        await super().__call__(scope, again, send)


async def test_a_call_answered_before_its_stream_closed_at_a_stop_gets_no_second_answer() -> None:
    # Before: the stop's error followed the call's answer in its stream, a second answer to one request.
    async def on_end(key: str) -> None:
        pass

    gate = SessionGate(AnsweredNotClosed(), max_sessions=4, idle_timeout=3600, on_end=on_end)
    sent: list[Message] = []
    began = anyio.Event()

    def request(body: bytes, key: str | None) -> tuple[Scope, Receive, Send]:
        headers = [(b"host", b"127.0.0.1:1"), (b"content-length", str(len(body)).encode())]
        headers += [(b"mcp-session-id", key.encode())] if key is not None else []
        given = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> Message:
            if given:
                return given.pop()
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        async def send(message: Message) -> None:
            if key is not None:
                sent.append(message)
                began.set()

        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers, "query_string": b""}
        return scope, receive, send

    await gate(*request(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize"}).encode(), None))
    call = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {}}).encode()
    with anyio.fail_after(WAIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(gate, *request(call, "s1"))
            await began.wait()
            await anyio.wait_all_tasks_blocked()
            gate.stop(0.2)
    assert sent[0]["status"] == 200 and sent[-1]["more_body"] is False
    events = b"".join(m.get("body", b"") for m in sent[1:]).decode()
    answers = [json.loads(line[5:]) for line in events.splitlines() if line.startswith("data:")]
    assert answers == [{"jsonrpc": "2.0", "id": 7, "result": {"content": []}}]
