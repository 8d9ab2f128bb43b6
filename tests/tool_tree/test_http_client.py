"""`tool_tree.http_client`: a reply of a Streamable HTTP server is held to the stdio caps on one message, and
the session to the stdio budgets of requests from the server and notifications.

Before, the SDK read a JSON reply whole (one of 1.5 GB took the host to 9.6 GB) and refused any event over
1 MiB, so a 3 MB result a stdio server may send never arrived from an HTTP one; and it parsed whatever a
message under the cap held (30 MB of empty objects: 3.4 GB). The server here is a minimal MCP server on
`http.server` whose tool ``big`` answers with a text of the size asked, as JSON (with a length, or chunked
without one), compressed JSON (gzip, deflate with and without its zlib header, or an encoding tooltree
does not unpack), or one server-sent event (plain or gzip-compressed); and whose tool ``flood`` answers
with structured content of many values (or nested deep), or first sends requests or notifications on the
reply's stream. It refuses the GET stream (405) and records each GET, and records the client's answers.
"""

from __future__ import annotations

import codecs
import json
import logging
import random
import resource
import sys
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import mcp_types as types
import pytest
from httpx2._sse import _SSEParser
from mcp.shared.message import SessionMessage

from tool_tree.budget import (
    HANDED_ON_SECONDS,
    MAX_MESSAGE_VALUES,
    MAX_REQUEST_VALUES,
    MAX_SERVER_REQUESTS,
    NOTIFICATION_BURST,
    STRAY_ANSWERS,
    NotificationBudget,
)
from tool_tree.config import ServerConfig
from tool_tree.get_streams import StreamRefused
from tool_tree.guard import guard
from tool_tree.http_client import EventRefused, _Events, http_client
from tool_tree.pool import ServerPool, ServerUnavailable
from tool_tree.stdio import MAX_MESSAGE_BYTES
from tool_tree.unparsed import count_values

pytestmark = pytest.mark.anyio

CHUNK = b"x" * (1 << 20)


WBITS = {  # form of a reply → how its body is packed (the content-encoding is the form up to "-")
    "gzip": 16 + zlib.MAX_WBITS,
    "gzip-sse": 16 + zlib.MAX_WBITS,
    "deflate": zlib.MAX_WBITS,
    "deflate-raw": -zlib.MAX_WBITS,
    "br": zlib.MAX_WBITS,  # not brotli, but named so: an encoding tooltree does not unpack
}


def pack(form: str, parts: list[bytes]) -> bytes:
    """``parts`` compressed as ``form`` says, one part at a time (2 GiB of letters is never held whole)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, WBITS[form])
    return b"".join(packer.compress(p) for p in parts) + packer.flush()


class Replies(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    sent: list[int]  # body bytes each `tools/call` reply got out before it ended
    done: threading.Semaphore  # released when such a reply ends, written whole or cut off
    answers: threading.Event  # the client's answers to the server's requests are taken once it is set
    taken: threading.Semaphore  # released for each answer taken
    answered: list[dict[str, Any]]  # the client's answers to the server's requests
    gets: list[str | None]  # the Last-Event-ID of each GET

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # no stream for server-initiated messages
        self.gets.append(self.headers.get("last-event-id"))
        self._plain(405, b"")

    def do_DELETE(self) -> None:
        self._plain(200, b"")

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if "method" not in message:  # the client answers a request of the server's
            self.answered.append(message)
            self.answers.wait()
            self._plain(202, b"")
            self.taken.release()
        elif "id" not in message:
            self._plain(202, b"")
        elif message["method"] == "tools/call" and message["params"]["name"] == "flood":
            token = (message["params"].get("_meta") or {}).get("progressToken")
            self._flood(message["id"], **message["params"]["arguments"], token=token)
        elif message["method"] == "tools/call":
            try:
                self._big(message["id"], **message["params"]["arguments"])
            finally:
                self.done.release()
        else:
            result: dict[str, Any] = {}
            if message["method"] == "initialize":
                result = {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "big", "version": "1"},
                }
            elif message["method"] == "tools/list":
                result = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("big", "flood")]}
            body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
            self._plain(200, body, "application/json")

    def _plain(self, status: int, body: bytes, content_type: str = "") -> None:
        self.send_response(status)
        if content_type:
            self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _flood(
        self, request_id: int, *, form: str, values: int = 0, pings: int = 0, notifications: int = 0,
        wait: bool = False, ping_values: int = 0, depth: int = 0, blocks: int = 0, escaped: bool = False,
        spoilt: str = "", batched: int = -1, token: object = None,
    ) -> None:  # fmt: skip
        """Structured content of ``values`` empty objects (or arrays nested ``depth`` deep), and ``blocks`` text
        blocks (``escaped``: their keys written with escapes, ``"\\u0074ype"``), after ``pings`` requests (of
        ``ping_values`` numbers each; each answer taken before the next is sent, with ``wait``) and ``notifications``
        notifications on the reply's event stream (``form`` "sse"; "json": a JSON reply; "204": none at all); the
        reply ``spoilt`` as ``"cut"`` (its second half left out), ``"not_rpc"`` (its result alone, no JSON-RPC
        message), ``"float_id"`` (its id written ``7.0``), ``"other_id"`` (of id 4242), ``"null_id_error"`` (a parse
        error of id null, a server's answer to what it could not read), ``"bom"`` (after a UTF-8 byte order mark),
        ``"empty_batch"`` (``[]``), ``"notes_batch"`` (a batch of one notification), ``"two_answers"`` (a batch of the
        answer twice) or ``"beside_other"`` (a batch of the answer to id 4242, then its own) says; with ``batched`` of 0
        or more, the reply
        (the whole body, or one event) is a JSON-RPC batch of that many progress notifications of the call
        (``token``), then the answer."""
        objects = b",".join([b"{}"] * values) if not depth else b"[" * depth + b"]" * depth
        block = b'{"\\u0074ype":"text","\\u0074ext":"x"}' if escaped else b'{"type":"text","text":"x"}'
        content = b",".join([block] * blocks)
        result = b'{"content":[%s],"structuredContent":{"a":[%s]}}' % (content, objects)
        reply = b'{"jsonrpc":"2.0","id":%d,"result":%s}' % (request_id, result)
        reply = {
            "": reply, "cut": reply[: len(reply) // 2], "not_rpc": result,
            "float_id": b'{"jsonrpc":"2.0","id":%d.0,"result":%s}' % (request_id, result),
            "other_id": b'{"jsonrpc":"2.0","id":4242,"result":%s}' % result,
            "null_id_error": b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}',
            "bom": b"\xef\xbb\xbf" + reply,
            "empty_batch": b"[]", "notes_batch": b'[{"jsonrpc":"2.0","method":"notifications/message","params":{}}]',
            "two_answers": b"[%s,%s]" % (reply, reply),
            "beside_other": b'[{"jsonrpc":"2.0","id":4242,"result":{}},%s]' % reply,
        }[spoilt]  # fmt: skip
        if batched >= 0:
            notes = [{"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token,
                      "progress": i}} for i in range(1, batched + 1)]  # fmt: skip
            reply = b"[%s]" % b", ".join([*(json.dumps(note).encode() for note in notes), reply])
        if form == "json":
            self._plain(200, reply, "application/json")
            return
        if form == "204":  # no answer at all
            self._plain(204, b"")
            return
        progress = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":%d}}'
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        params = b',"params":{"pad":[%s]}' % b",".join([b"0"] * ping_values) if ping_values else b""
        events = [b'{"jsonrpc":"2.0","id":"ping-%d","method":"ping"%s}' % (i, params) for i in range(pings)]
        events += [progress % i for i in range(notifications)]
        try:
            for i, message in enumerate([*events, reply]):
                event = b"event: message\r\ndata: %s\r\n\r\n" % message
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                if wait and i < pings:
                    self.wfile.flush()
                    assert self.taken.acquire(timeout=20)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client closed the stream
            self.close_connection = True

    def _big(self, request_id: int, *, chars: int, form: str) -> None:
        reply = {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": "<>"}]}}
        head, tail = (part.encode() for part in json.dumps(reply).split("<>"))
        events = form.endswith("sse")
        if events:
            head, tail = b"event: message\ndata: " + head, tail + b"\n\n"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream" if events else "application/json")
        parts = [head, *[CHUNK] * (chars // len(CHUNK)), CHUNK[: chars % len(CHUNK)], tail]
        if form in WBITS:
            body = pack(form, parts)
            self.send_header("content-encoding", form.split("-")[0])
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.sent.append(len(body))
            return
        if form == "chunked":
            self.send_header("transfer-encoding", "chunked")
            parts = [b"%x\r\n%s\r\n" % (len(p), p) for p in parts if p] + [b"0\r\n\r\n"]
        else:
            self.send_header("content-length", str(sum(map(len, parts))))
        self.end_headers()
        written = 0
        try:
            for part in parts:
                self.wfile.write(part)
                written += len(part)
        except OSError:  # the client stopped reading and closed
            self.close_connection = True
        finally:
            self.sent.append(written)


class Quiet(ThreadingHTTPServer):
    """Says nothing of a client that closed its connection mid-reply (as tooltree does to a refused one)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture
def http_server() -> Iterator[tuple[ServerConfig, type[Replies]]]:
    shared = {
        "sent": [], "done": threading.Semaphore(0), "answers": threading.Event(), "taken": threading.Semaphore(0),
        "answered": [], "gets": [],
    }  # fmt: skip
    handler = type("Handler", (Replies,), shared)
    server = Quiet(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        yield ServerConfig(name="big", url=url, timeout=60), handler
    finally:
        handler.answers.set()
        server.shutdown()
        server.server_close()


def text(result: dict[str, Any]) -> str:
    return "".join(b["text"] for b in result["content"] if b["type"] == "text")


@pytest.mark.parametrize("form", ["json", "chunked", "sse"])
async def test_a_result_of_a_few_megabytes_arrives_whole(
    http_server: tuple[ServerConfig, type[Replies]], form: str
) -> None:
    config, _ = http_server
    async with ServerPool([config]) as pool:
        result = await pool.call("big", "big", {"chars": 3 * 2**20 + 7, "form": form})
    assert not result.get("isError") and text(result) == "x" * (3 * 2**20 + 7)


@pytest.mark.parametrize("form", ["json", "chunked"])
async def test_a_json_reply_past_the_cap_is_refused_without_being_read_whole(
    http_server: tuple[ServerConfig, type[Replies]], form: str
) -> None:
    config, handler = http_server
    chars = 400 * 2**20
    async with ServerPool([config]) as pool:
        result = await pool.call("big", "big", {"chars": chars, "form": form})
        assert result.get("isError")
        assert f"the server's reply is larger than {MAX_MESSAGE_BYTES // 2**20} MiB" in text(result)
        assert handler.done.acquire(timeout=60)
        # The reply was cut off: the host read at most the cap, plus what socket buffers held.
        assert handler.sent[-1] < MAX_MESSAGE_BYTES + 64 * 2**20 < chars
        ok = await pool.call("big", "big", {"chars": 10, "form": form})  # the server is still usable
        assert text(ok) == "x" * 10


async def test_an_event_past_the_cap_is_refused(http_server: tuple[ServerConfig, type[Replies]]) -> None:
    config, _ = http_server
    async with ServerPool([config]) as pool:
        result = await pool.call("big", "big", {"chars": MAX_MESSAGE_BYTES + 1, "form": "sse"})
    assert result.get("isError") and f"exceeded the {MAX_MESSAGE_BYTES} byte limit" in text(result)


@pytest.mark.parametrize("form", ["gzip", "deflate", "deflate-raw", "gzip-sse"])
async def test_a_reply_compressed_though_asked_not_to_is_unpacked_whole(
    http_server: tuple[ServerConfig, type[Replies]], form: str
) -> None:
    config, _ = http_server
    chars = 3 * 2**20 + 7
    async with ServerPool([config]) as pool:
        result = await pool.call("big", "big", {"chars": chars, "form": form})
    assert not result.get("isError") and text(result) == "x" * chars


async def test_a_compressed_reply_that_unpacks_past_the_cap_is_refused_a_step_past_it(
    http_server: tuple[ServerConfig, type[Replies]],
) -> None:
    # 2 GiB of one letter packs into ~2 MB: unpacked whole it would take gigabytes of the host's memory.
    config, handler = http_server
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    async with ServerPool([config]) as pool:
        result = await pool.call("big", "big", {"chars": 2 * 2**30, "form": "gzip"})
        assert result.get("isError")
        assert f"the server's reply is larger than {MAX_MESSAGE_BYTES // 2**20} MiB" in text(result)
        assert handler.sent[-1] < 4 * 2**20  # it was small on the wire
        ok = await pool.call("big", "big", {"chars": 10, "form": "gzip"})  # the server is still usable
        assert text(ok) == "x" * 10
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 512 * 1024  # the cap (32 MiB) and a few copies of it, not 2 GiB


async def test_a_reply_in_an_encoding_not_unpacked_here_is_refused_with_its_name(
    http_server: tuple[ServerConfig, type[Replies]],
) -> None:
    config, _ = http_server
    async with ServerPool([config]) as pool:
        result = await pool.call("big", "big", {"chars": 1000, "form": "br"})
    assert result.get("isError") and "compressed its reply (br) though asked not to" in text(result)


def test_the_client_still_goes_through_the_proxy_the_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    # A client given a transport of its own ignores HTTP_PROXY: the bound is a response hook instead.
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    client = http_client()
    assert any(pattern.scheme == "http" for pattern in client._mounts)


# --- the budgets: values in one message, requests to the client, notifications ---------------------------------------


@pytest.mark.parametrize("form", ["json", "sse"])
async def test_a_reply_of_more_values_than_the_cap_fails_its_call_unparsed(
    http_server: tuple[ServerConfig, type[Replies]], form: str
) -> None:
    config, handler = http_server
    handler.answers.set()
    async with ServerPool([config]) as pool:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        result = await pool.call("big", "flood", {"values": 3_000_000, "form": form})  # 9 MB of empty objects
        grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        assert result.get("isError")
        assert (
            f"server 'big' sent a message of more than {MAX_MESSAGE_VALUES:,} JSON values, the limit for one message"
            in text(result)
        )
        # The server building its reply in this process, the reply and copies of it, never its values (before:
        # parsing them took about 1 GB more).
        assert grown_kib < 320 * 1024
        within = await pool.call("big", "flood", {"values": MAX_MESSAGE_VALUES - 100, "form": form})
        assert within["structuredContent"] == {"a": [{}] * (MAX_MESSAGE_VALUES - 100)}


async def test_a_server_sending_requests_without_taking_the_answers_has_its_session_closed_at_the_limit(
    http_server: tuple[ServerConfig, type[Replies]],
) -> None:
    # 1,000 pings on the call's event stream; the POST of the first answer is never answered, so each later
    # ping holds a task of the SDK's (before: all 1,000, and the call went on as if nothing happened).
    config, handler = http_server
    async with ServerPool([config]) as pool:
        with pytest.raises(ServerUnavailable) as refused:
            await pool.call("big", "flood", {"pings": 1000, "form": "sse"})
        assert (
            f"server 'big' sent more than {MAX_SERVER_REQUESTS} requests to tooltree without taking their answers, "
            "the limit for one server; tooltree closed the connection" in str(refused.value)
        )
        handler.answers.set()  # a server that takes each answer before it sends the next request: any number
        result = await pool.call("big", "flood", {"pings": 3 * MAX_SERVER_REQUESTS, "wait": True, "form": "sse"})
        assert result["structuredContent"] == {"a": []}


async def test_notifications_past_the_budget_are_dropped_and_the_call_answered(
    http_server: tuple[ServerConfig, type[Replies]], caplog: pytest.LogCaptureFixture
) -> None:
    config, _ = http_server
    with caplog.at_level(logging.WARNING, logger="tool_tree.budget"):
        async with ServerPool([config]) as pool:
            result = await pool.call("big", "flood", {"notifications": 3 * NOTIFICATION_BURST, "form": "sse"})
    assert result["structuredContent"] == {"a": []}
    assert [r.getMessage() for r in caplog.records if "notifications" in r.getMessage()] == [
        f"server 'big' sent more than {NOTIFICATION_BURST:,} notifications at once (then 100 a second), the budget "
        "for one server: tooltree drops the rest unread (it uses none of them)"
    ]


async def test_the_guard_drops_notifications_past_the_budget_never_a_response() -> None:
    # What the SDK's HTTP transport parsed, read through the guard as the session reads it.
    inner_send, inner_receive = anyio.create_memory_object_stream[SessionMessage | Exception](10_000)
    out_send, out_receive = anyio.create_memory_object_stream[SessionMessage](10)
    read, write = guard((inner_receive, out_send), "chatty")
    async with inner_send, out_receive, read, write:
        await write.send(SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/call")))
        for i in range(5000):
            note = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params={"progress": i})
            inner_send.send_nowait(SessionMessage(note))
        inner_send.send_nowait(SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=1, result={})))
        inner_send.close()
        received = [item async for item in read]
    notes = [i for i in received if isinstance(i, SessionMessage) and isinstance(i.message, types.JSONRPCNotification)]
    assert NOTIFICATION_BURST <= len(notes) < 2500  # the burst, and what the rate refilled meanwhile
    last = received[-1]
    assert isinstance(last, SessionMessage) and isinstance(last.message, types.JSONRPCResponse)


async def test_the_stream_of_unasked_messages_answered_405_is_not_asked_again_and_a_resumed_one_is_sent(
    http_server: tuple[ServerConfig, type[Replies]],
) -> None:
    # Before, the GET without `Last-Event-ID` was refused unsent (`StreamRefused`), for good: a server's requests and
    # notifications tied to no call never reached tooltree (`test_get_streams.py`). It is sent now, paced; a server
    # without such a stream says so with 405, as this one does, and is not asked again.
    config, handler = http_server
    assert config.url is not None
    async with http_client() as client:
        resumed = await client.get(config.url, headers={"last-event-id": "7"})  # a request's stream, resumed
        unasked = await client.get(config.url)  # the stream of unasked messages: this task's GETs are it from now
        with pytest.raises(StreamRefused):
            await client.get(config.url)
    assert resumed.status_code == unasked.status_code == 405 and handler.gets == ["7", None]


async def test_a_request_of_more_values_than_the_limit_is_answered_with_an_error_never_dispatched(
    http_server: tuple[ServerConfig, type[Replies]],
) -> None:
    config, handler = http_server
    handler.answers.set()
    async with ServerPool([config]) as pool:
        large = await pool.call("big", "flood", {"pings": 3, "ping_values": 5000, "wait": True, "form": "sse"})
        small = await pool.call("big", "flood", {"pings": 2, "ping_values": 10, "wait": True, "form": "sse"})
    assert large["structuredContent"] == small["structuredContent"] == {"a": []}
    assert [answer["id"] for answer in handler.answered] == ["ping-0", "ping-1", "ping-2", "ping-0", "ping-1"]
    assert all(
        answer["error"]["message"].startswith(
            f"tooltree refused a request of server 'big': it holds more than {MAX_REQUEST_VALUES:,} JSON values"
        )
        for answer in handler.answered[:3]
    )
    assert [answer.get("result") for answer in handler.answered[3:]] == [{}, {}]  # a small ping is answered


async def test_the_guard_ends_the_session_past_the_allowance_of_stray_answers_and_counts_no_late_one() -> None:
    inner_send, inner_receive = anyio.create_memory_object_stream[SessionMessage | Exception](100)
    out_send, out_receive = anyio.create_memory_object_stream[SessionMessage](100)
    read, write = guard((inner_receive, out_send), "stray")

    def answer(request_id: types.RequestId) -> SessionMessage:
        return SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result={}))

    async with inner_send, inner_receive, out_receive, read, write:  # a failing guard leaves its inner stream open
        for request_id in (1, 2, 3):
            await write.send(SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="tools/list")))
        cancel = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params={"requestId": 1})
        await write.send(SessionMessage(cancel))
        inner_send.send_nowait(answer("1"))  # late: the client gave request 1 up (and "1" answers 1)
        for i in range(STRAY_ANSWERS):
            inner_send.send_nowait(answer(f"nobody-{i}"))  # the allowance
        inner_send.send_nowait(answer(2))
        with anyio.fail_after(10):
            first = await read.receive()
        inner_send.send_nowait(answer("nobody-more"))  # one past the allowance
        inner_send.close()
        rest = [item async for item in read]
    assert isinstance(first, SessionMessage) and isinstance(first.message, types.JSONRPCResponse)
    assert first.message.id == 2
    assert len(rest) == 1 and isinstance(rest[0], SessionMessage) and isinstance(rest[0].message, types.JSONRPCError)
    assert rest[0].message.id == 3
    assert rest[0].message.error.message == (
        f"server 'stray' sent more than {STRAY_ANSWERS} answers to requests tooltree did not make or had answered "
        "(then 1 a second), the limit for one server; tooltree closed the connection"
    )


@pytest.mark.parametrize("form", ["json", "sse"])
async def test_an_answer_nested_deeper_than_the_parser_takes_fails_its_call_naming_the_limit_in_one_line(
    http_server: tuple[ServerConfig, type[Replies]], form: str
) -> None:
    # Before: "Failed to parse JSON response: 1 validation error for union[…]" and pydantic's dump of it.
    config, _ = http_server
    async with ServerPool([config]) as pool:
        result = await pool.call("big", "flood", {"depth": 250, "form": form})
        assert result.get("isError")
        assert "server 'big' sent an answer nested more than 200 levels deep, the limit of the JSON parser" in text(
            result
        )
        assert "\n" not in text(result) and "validation error" not in text(result)
        within = await pool.call("big", "flood", {"depth": 150, "form": form})
    assert not within.get("isError")


@pytest.mark.parametrize("form", ["json", "sse"])
@pytest.mark.parametrize(
    ("spoilt", "said"),
    [
        ("cut", "server 'big' answered with JSON that is cut off or malformed (EOF while parsing"),
        ("not_rpc", "server 'big' answered with JSON that is not a JSON-RPC message"),
    ],
)
async def test_an_answer_that_is_not_json_rpc_fails_its_call_saying_so_in_one_line(
    http_server: tuple[ServerConfig, type[Replies]], form: str, spoilt: str, said: str
) -> None:
    # Before: "server error -32700: Failed to parse JSON response: 1 validation error for union[JSONRPCRequest,
    # JSONRPCNotification,JSONRPCResponse,JSONRPCError] Invalid JSON: … [type=json_invalid, input_value=b'{"jsonrp…".
    config, _ = http_server
    async with ServerPool([config]) as pool:
        result = await pool.call("big", "flood", {"values": 10, "form": form, "spoilt": spoilt})
        assert result.get("isError")
        assert said in text(result) and text(result).endswith("it was not read, and the request may have run")
        assert "validation error" not in text(result) and "input_value" not in text(result)
        whole = await pool.call("big", "flood", {"values": 10, "form": form})
    assert not whole.get("isError")


@pytest.mark.parametrize("form", ["json", "sse"])
@pytest.mark.parametrize("notes", [0, 2], ids=["answer_alone", "with_progress"])
async def test_an_answer_in_a_json_rpc_batch_is_read(
    http_server: tuple[ServerConfig, type[Replies]], form: str, notes: int, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: "server 'big' answered with JSON that is not a JSON-RPC message" (JSON-RPC 2.0 lets a server answer with
    # a batch, and MCP's 2025-03-26 protocol), and in an event the SDK's traceback logged too.
    config, _ = http_server
    told: list[float] = []
    async with ServerPool([config]) as pool:
        result = await pool.call(
            "big", "flood", {"values": 3, "form": form, "batched": notes}, progress=lambda n, total, m: told.append(n)
        )
        assert not result.get("isError"), result
        assert result["structuredContent"] == {"a": [{}, {}, {}]}
    # The SDK reads one message of a JSON reply: there, the notifications beside the answer are not read.
    assert told == ([] if form == "json" else list(range(1, notes + 1)))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize(
    ("spoilt", "said"),
    [
        ("float_id", ""),
        ("null_id_error", "server error -32700: Parse error"),
        (
            "other_id",
            "server error -32603: the server answered the request with the answer to another one (id 4242); it was "
            "not used, and the request may have run",
        ),
    ],
)
@pytest.mark.parametrize("form", ["json", "sse"])
async def test_a_reply_answering_another_id_is_taken_as_the_answer_to_its_request(
    http_server: tuple[ServerConfig, type[Replies]], spoilt: str, said: str, form: str
) -> None:
    # Before: the SDK correlates a JSON reply by its id, so a reply of id 7.0, null or another was dropped as an
    # answer to no request, and the call waited out its whole timeout. It gives an event's answer its request's id:
    # there, the result of id 4242 was taken as the call's, and id 7.0 failed it as "JSON that is not a JSON-RPC
    # message".
    config, _ = http_server
    async with ServerPool([config]) as pool:
        with anyio.fail_after(20):
            result = await pool.call("big", "flood", {"values": 2, "form": form, "spoilt": spoilt})
        if said:
            assert result.get("isError") and text(result) == said
        else:
            assert not result.get("isError") and result["structuredContent"] == {"a": [{}, {}]}
        assert not (await pool.call("big", "flood", {"values": 2, "form": "json"})).get("isError")


@pytest.mark.parametrize(
    ("spoilt", "held", "form"),
    [
        ("empty_batch", "an empty JSON-RPC batch (an array of no message)", "json"),
        ("notes_batch", "a JSON-RPC batch of 1 message, not its answer", "json"),
        ("two_answers", "a JSON-RPC batch holding 2 answers to it", "json"),
        ("beside_other", "", "json"),
        ("beside_other", "", "sse"),
        ("two_answers", "a JSON-RPC batch holding 2 answers to it", "sse"),
    ],
)
async def test_a_reply_that_is_a_batch_is_read_as_its_one_answer_or_fails_saying_what_it_held(
    http_server: tuple[ServerConfig, type[Replies]], spoilt: str, held: str, form: str
) -> None:
    # Before: each JSON reply failed as "server 'big' answered with JSON that is not a JSON-RPC message" (the one
    # holding its answer beside the answer to another request too); in an event, the answer to the other request was
    # taken as the call's (the SDK gives an event's answer its request's id), and of two answers to it the first.
    config, _ = http_server
    async with ServerPool([config]) as pool:
        with anyio.fail_after(20):
            result = await pool.call("big", "flood", {"values": 2, "form": form, "spoilt": spoilt})
        if held:
            assert result.get("isError") and text(result) == (
                f"server error -32603: the server answered the request with {held}; it was not used, and the request "
                "may have run"
            )
        else:
            assert not result.get("isError") and result["structuredContent"] == {"a": [{}, {}]}
        assert not (await pool.call("big", "flood", {"values": 2, "form": "json"})).get("isError")


async def test_a_json_reply_after_a_byte_order_mark_is_read(http_server: tuple[ServerConfig, type[Replies]]) -> None:
    # Before: "answered with JSON that is cut off or malformed (expected value at line 1 column 1)"; a stdio server's
    # line after one was read already.
    config, _ = http_server
    async with ServerPool([config]) as pool:
        result = await pool.call("big", "flood", {"values": 2, "form": "json", "spoilt": "bom"})
    assert not result.get("isError") and result["structuredContent"] == {"a": [{}, {}]}


async def test_a_request_answered_204_fails_saying_so(http_server: tuple[ServerConfig, type[Replies]]) -> None:
    # Before: "server error -32600: Unexpected content type: " (the SDK's words for a reply of no content type).
    config, _ = http_server
    async with ServerPool([config]) as pool:
        result = await pool.call("big", "flood", {"form": "204"})
    assert result.get("isError")
    assert text(result) == "server error -32603: the server answered the request with 204 No Content, no answer"


# --- counting an event stream's events as the SDK's parser cuts them --------------------------------------------------


def values_of(data: str) -> int:
    def count(value: Any) -> int:
        if isinstance(value, list):
            return 1 + sum(map(count, value))
        if isinstance(value, dict):
            return 1 + sum(map(count, value.values()))
        return 1

    return count(json.loads(data))


def events_seen(chunks: list[bytes], *, ended: bool = True) -> list[str]:
    """The data of each event the SDK's parser makes of ``chunks`` (decoded as it decodes them); at the end of
    the stream (``ended``: not cut short by an error) it flushes what it holds."""
    parser, decoder = _SSEParser(None), codecs.getincrementaldecoder("utf-8")("replace")
    events = [sse.data for chunk in chunks for sse in parser.decode(decoder.decode(chunk))]
    return events + [sse.data for sse in parser.flush()] if ended else events


def counted(
    chunks: list[bytes], limit: int, notifications: NotificationBudget | None = None
) -> tuple[list[bytes], bool]:
    """What `_Events` passes on of ``chunks`` before it refuses an event, and whether it refused one."""
    events, passed = _Events(limit, MAX_MESSAGE_BYTES, "s", notifications), []
    try:
        for chunk in chunks:
            passed += events.feed(chunk)
        passed += events.close()
    except EventRefused:
        return passed, True
    return passed, False


def random_stream(rng: random.Random) -> bytes:
    """Events of JSON data over one or more ``data`` lines, with comments, other fields and every line ending."""
    parts = []
    for _ in range(rng.randint(1, 6)):
        value = [{"k,[": 'v",{'}] * rng.randint(0, 4) + [[]] * rng.randint(0, 3) + ["é,"] * rng.randint(0, 3)
        lines = json.dumps(value, indent=rng.choice([None, 1]), ensure_ascii=False).split("\n")
        fields = [f"data: {line}" if rng.random() < 0.8 else f"data:{line}" for line in lines]
        for other in rng.sample([": keep, [alive] {", "event: message", "id: 7,[", "retry: 10"], rng.randint(0, 2)):
            fields.insert(rng.randint(0, len(fields)), other)  # the data lines stay in order
        end = rng.choice(["\n", "\r", "\r\n"])
        blank = rng.choice(["\r", "\r\n"] if end == "\r" else ["\n", "\r", "\r\n"])  # "\r" then "\n" is one ending
        parts.append(end.join(fields) + end + blank)
    return "".join(parts).encode()


def test_an_event_over_the_limit_is_refused_before_the_bytes_that_end_it_are_passed_on() -> None:
    rng = random.Random(7)
    for _ in range(400):
        stream = random_stream(rng)
        values = [values_of(data) for data in events_seen([stream])]
        for limit in {1, min(values), max(values) - 1, max(values)} - {0}:
            for _ in range(5):
                cuts = sorted(rng.sample(range(len(stream) + 1), min(len(stream), rng.randint(0, 8))))
                chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
                passed, refused = counted(chunks, limit)
                assert all(values_of(data) <= limit for data in events_seen(passed, ended=not refused))
                assert refused == (max(values) > limit)  # exact for compact data: no event refused wrongly


def test_an_event_is_counted_whole_wherever_the_stream_is_cut() -> None:
    stream = b"data: [{},\r\ndata: {}]\r\r: c\n\ndata: [1,2]\n\r"  # two events: 3 values, then 3
    for cut in range(len(stream) + 1):
        passed, refused = counted([stream[:cut], stream[cut:]], 3)
        assert b"".join(passed) == stream and not refused
        passed, refused = counted([stream[:cut], stream[cut:]], 2)
        assert refused and not events_seen(passed, ended=False)


def test_events_that_can_only_be_notifications_are_dropped_past_the_budget_the_rest_pass_as_they_were() -> None:
    rng = random.Random(11)
    note = 'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":%d}}'
    answer = 'data: {"jsonrpc":"2.0","id":%d,"result":{}}'
    for _ in range(300):
        kinds = [rng.choice(["note", "note", "answer", "comment"]) for _ in range(rng.randint(1, 12))]
        stream = ""
        for i, kind in enumerate(kinds):
            lines = {"note": [note % i], "answer": [answer % i], "comment": [": ping"]}[kind]
            end = rng.choice(["\n", "\r", "\r\n"])
            blank = rng.choice(["\r", "\r\n"] if end == "\r" else ["\n", "\r", "\r\n"])
            stream += end.join(["event: message", *lines]) + end + blank
        data = stream.encode()
        cuts = sorted(rng.sample(range(len(data) + 1), min(len(data), rng.randint(0, 6))))
        chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        budget = NotificationBudget("s", burst=2, rate=0.0)
        passed, refused = counted(chunks, 10**6, budget)
        seen = [json.loads(event) for event in events_seen(passed) if event]  # a comment's event has no data
        everything = [json.loads(event) for event in events_seen([data]) if event]
        assert not refused
        assert [m for m in seen if "id" in m] == [m for m in everything if "id" in m]  # every answer, in order
        assert [m for m in seen if "id" not in m] == [m for m in everything if "id" not in m][:2]  # the burst


def test_a_json_reply_and_an_event_count_as_the_stdio_line_would() -> None:
    body = b'{"a":[' + b",".join([b"{}"] * 10) + b"]}"
    assert count_values(body, 5) == 12 and counted([b"data: " + body + b"\n\n"], 11)[1]
    assert not counted([b"data: " + body + b"\n\n"], 12)[1]


def test_large_notification_events_are_charged_by_their_values_and_dropped_past_the_budget() -> None:
    # Before: an event over 64 KiB was never charged, so a million-value notification was parsed at each turn.
    zeros = b",".join([b"0"] * 100_000)
    note = b'data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":[%s]}}\n\n'
    answer = b'data: {"jsonrpc":"2.0","id":1,"result":{"a":[%s]}}\n\n' % zeros
    budget = NotificationBudget("s", burst=250, rate=0.0)
    passed, refused = counted([note % zeros] * 5 + [answer], 10**6, budget)
    seen = [json.loads(event) for event in events_seen(passed)]
    assert not refused
    assert [m.get("id") for m in seen] == [None, None, 1]  # two notifications of 101 each, then the answer


def test_events_passed_on_are_charged_to_the_reader_answers_are_not() -> None:
    events = _Events(10**6, MAX_MESSAGE_BYTES, "s", NotificationBudget("s"))
    note = b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1,"id":2}}\n\n'
    answer = b'event: message\r\ndata: {"jsonrpc": "2.0", "id": "7", "result": {"a": [1, 2, 3]}}\r\n\r\n'
    assert events.feed(answer) == [answer] and events.owed == 0
    assert events.feed(note * 10) == [note] * 10 and events.owed >= 10 * HANDED_ON_SECONDS


def test_on_the_stream_of_unasked_messages_an_answer_is_charged_too() -> None:
    # No answer belongs on it: answers with unknown ids on the GET stream are charged like any event.
    events = _Events(10**6, MAX_MESSAGE_BYTES, "s", NotificationBudget("s"), answers=False)
    answer = b'event: message\r\ndata: {"jsonrpc": "2.0", "id": "7", "result": {"a": [1, 2, 3]}}\r\n\r\n'
    assert events.feed(answer) == [answer] and events.owed >= HANDED_ON_SECONDS
