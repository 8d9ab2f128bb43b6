"""`tool_tree.http_client`: a reply of a Streamable HTTP server is held to the stdio cap on one message.

Before, the SDK read a JSON reply whole (one of 1.5 GB took the host to 9.6 GB) and refused any event over
1 MiB, so a 3 MB result a stdio server may send never arrived from an HTTP one. The server here is a
minimal MCP server on `http.server` whose one tool answers with a text of the size asked, as JSON (with a
length, or chunked without one), compressed JSON (gzip, deflate with and without its zlib header, or an
encoding tooltree does not unpack), or one server-sent event (plain or gzip-compressed).
"""

from __future__ import annotations

import json
import resource
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tool_tree.config import ServerConfig
from tool_tree.pool import ServerPool
from tool_tree.stdio import MAX_MESSAGE_BYTES

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

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # no stream for server-initiated messages
        self._plain(405, b"")

    def do_DELETE(self) -> None:
        self._plain(200, b"")

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if "id" not in message:
            self._plain(202, b"")
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
                result = {"tools": [{"name": "big", "inputSchema": {"type": "object"}}]}
            body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
            self._plain(200, body, "application/json")

    def _plain(self, status: int, body: bytes, content_type: str = "") -> None:
        self.send_response(status)
        if content_type:
            self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

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


@pytest.fixture
def http_server() -> Iterator[tuple[ServerConfig, type[Replies]]]:
    handler = type("Handler", (Replies,), {"sent": [], "done": threading.Semaphore(0)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        yield ServerConfig(name="big", url=url, timeout=60), handler
    finally:
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
    from tool_tree.http_client import http_client

    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    client = http_client()
    assert any(pattern.scheme == "http" for pattern in client._mounts)
