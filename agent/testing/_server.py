"""`FakeMessagesAPI`: a local HTTP stand-in for the Anthropic Messages API.

It answers ``POST /v1/messages`` with scripted replies in order (JSON, or server-sent events
when the request asks to stream), with ``usage`` blocks computed by the stated approximation in
`agent.tokens` and a simulated prompt cache; answers ``POST /v1/messages/count_tokens`` with the
same approximation; and records every request body. The real ``anthropic`` SDK talks to it
through ``base_url``, so retries, streaming and parsing are the SDK's own.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import socket
import struct
import sys
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import TYPE_CHECKING, Any

from agent.testing._accounting import PromptCache, check_request
from agent.testing._content import check_content
from agent.testing._replies import ApiError, CutStream, Reply
from agent.tokens import content_tokens, request_tokens

if TYPE_CHECKING:
    import anthropic

_CHUNK = 4096
_MAX_BODY = 64 * 1024 * 1024
_STALL_MAX = 60.0
"""Seconds a stalled stream (`CutStream` ending ``stall``) waits at most for its client to leave."""


class FakeMessagesAPI:
    """A scripted Messages API on ``127.0.0.1``. Use as a context manager.

    Args:
        replies: the answers to give, in order (more can be added with `add`).
        min_cache_tokens: the shortest prefix the simulated prompt cache stores (1,024 as for Sonnet).
        validate: refuse malformed requests with a 400 as the real API does (tool names, tool
            results that do not answer the previous tool uses, more than 4 cache breakpoints).

    Attributes:
        requests: every ``/v1/messages`` request body, in arrival order (refused ones too).
        responses: every message sent back, in order.
        count_requests: every ``/v1/messages/count_tokens`` request body.
        headers: the headers of every ``/v1/messages`` request.
    """

    def __init__(self, replies: Iterable[Reply] = (), *, min_cache_tokens: int = 1024, validate: bool = True) -> None:
        self._replies: deque[Reply] = deque(replies)
        self._lock = threading.Lock()
        self.cache = PromptCache(min_cache_tokens)
        self.validate = validate
        self.requests: list[dict[str, Any]] = []
        self.responses: list[dict[str, Any]] = []
        self.count_requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._ids = {"msg": 0, "toolu": 0, "srvtoolu": 0}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    # ---- lifecycle --------------------------------------------------------------------------

    def start(self) -> FakeMessagesAPI:
        """Start serving on a free port (idempotent)."""
        if self._server is None:
            server = _Server(("127.0.0.1", 0), _handler_for(self))
            server.daemon_threads = True
            self._stopping.clear()
            self._server = server
            self._thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-messages-api", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # a stalled stream lets go
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            if self._thread is not None:
                self._thread.join(timeout=10)
            self._server = None

    def __enter__(self) -> FakeMessagesAPI:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """What to pass as the SDK's ``base_url`` (or set as ``ANTHROPIC_BASE_URL``)."""
        if self._server is None:
            raise RuntimeError("the fake API is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def client(self, *, max_retries: int = 2, **kwargs: Any) -> anthropic.Anthropic:
        """An ``anthropic.Anthropic`` client pointed at this server."""
        import anthropic

        return anthropic.Anthropic(api_key="sk-fake", base_url=self.base_url, max_retries=max_retries, **kwargs)

    # ---- the script -------------------------------------------------------------------------

    def add(self, *replies: Reply) -> None:
        """Append replies to the script."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def remaining(self) -> int:
        """Replies not given yet."""
        with self._lock:
            return len(self._replies)

    def _next_id(self, kind: str) -> str:
        self._ids[kind] += 1
        return f"{kind}_fake{self._ids[kind]:04d}"

    def answer(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
        """Status, extra headers and body (a message or an error) for one ``/v1/messages`` request."""
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            problem = check_request(body) if self.validate else None
            problem = problem or (check_content(body) if self.validate else None)
            if problem is not None:
                return 400, {}, ApiError(400, problem).body()
            if not self._replies:
                message = "the fake API's script has no reply left for this request"
                return 400, {}, ApiError(400, message).body()
            item = self._replies.popleft()
        while callable(item):
            item = item(body)
        if isinstance(item, ApiError) and item.in_stream and body.get("stream") is True:
            return 200, {}, item
        if isinstance(item, ApiError):
            extra: dict[str, str] = {}
            if item.retry_after is not None:
                extra["retry-after"] = str(max(1, math.ceil(item.retry_after)))
                extra["retry-after-ms"] = str(max(1, round(item.retry_after * 1000)))
            return item.status, extra, item.body() if item.page is None else _Page(item.page)
        cut, ending = (item.events, item.ending) if isinstance(item, CutStream) else (None, "close")
        with self._lock:
            completed = self._complete(item.reply if isinstance(item, CutStream) else item, body)
            self.responses.append(completed)
        return 200, {}, completed if cut is None else _Cut(completed, cut, ending)

    def _complete(self, partial: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        content = copy.deepcopy(partial.get("content", []))
        last_server_use = None
        for block in content:
            if block.get("type") == "tool_use" and "id" not in block:
                block["id"] = self._next_id("toolu")
            elif block.get("type") == "server_tool_use":
                block.setdefault("id", self._next_id("srvtoolu"))
                last_server_use = block["id"]
            elif block.get("type") == "tool_search_tool_result" and "tool_use_id" not in block:
                block["tool_use_id"] = last_server_use or "srvtoolu_missing"
        cached = self.cache.usage(body)
        usage: dict[str, Any] = {
            "input_tokens": cached.input_tokens,
            "cache_creation_input_tokens": cached.cache_creation_input_tokens,
            "cache_read_input_tokens": cached.cache_read_input_tokens,
            "output_tokens": max(1, content_tokens(content)),
        }
        searches = sum(1 for b in content if b.get("type") == "server_tool_use")
        if searches:
            usage["server_tool_use"] = {"web_search_requests": 0, "web_fetch_requests": 0}
        message = {
            "id": self._next_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": str(body.get("model", "")),
            "content": content,
            "stop_reason": partial.get("stop_reason", "end_turn"),
            "stop_sequence": None,
            "usage": usage,
        }
        message.update({k: v for k, v in partial.items() if k not in ("content", "stop_reason", "usage")})
        message["usage"].update(partial.get("usage", {}))
        return message

    def count(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.count_requests.append(body)
        return {"input_tokens": request_tokens(body)}


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that left before its answer was written (a run stopped, a request given up on) is not an
        error of the fake; anything else is printed as `socketserver` does."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass(frozen=True)
class _Page:
    """An error answer's body that is not the API's JSON: a proxy's HTML page (`ApiError.page`)."""

    text: str


@dataclass(frozen=True)
class _Cut:
    """A message to answer with only its first ``events`` events (or half its JSON), then a closed connection."""

    message: dict[str, Any]
    events: int
    ending: str = "close"


def _events(message: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The server-sent events that stream ``message``."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        kind = block.get("type")
        if kind == "text":
            yield "content_block_start", _start(index, {**block, "text": ""})
            for i in range(0, len(block["text"]), _CHUNK):
                delta = {"type": "text_delta", "text": block["text"][i : i + _CHUNK]}
                yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        elif kind in ("tool_use", "server_tool_use"):
            yield "content_block_start", _start(index, {**block, "input": {}})
            data = json.dumps(block.get("input", {}), ensure_ascii=False)
            for i in range(0, len(data), _CHUNK):
                delta = {"type": "input_json_delta", "partial_json": data[i : i + _CHUNK]}
                yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        else:
            yield "content_block_start", _start(index, block)
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield "message_delta", {"type": "message_delta", "delta": delta, "usage": usage}
    yield "message_stop", {"type": "message_stop"}


def _error_events(error: ApiError) -> Iterator[tuple[str, dict[str, Any]]]:
    """A stream that starts a message, then fails with ``error`` (as an ``error`` event)."""
    usage = {"input_tokens": 0, "output_tokens": 0}
    start = {"id": "msg_fake_failed", "type": "message", "role": "assistant", "model": "", "content": []}
    yield "message_start", {"type": "message_start", "message": {**start, "stop_reason": None, "usage": usage}}
    yield "error", error.body()


def _start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _handler_for(api: FakeMessagesAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # the tests' output stays clean
            pass

        def _send_json(self, status: int, body: Any, extra: dict[str, str] | None = None) -> None:
            page = isinstance(body, _Page)
            data = body.text.encode("utf-8") if page else json.dumps(body, ensure_ascii=False).encode("utf-8")
            self.send_response(status)
            self.send_header("content-type", "text/html; charset=utf-8" if page else "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("request-id", f"req_fake{len(api.requests):04d}")
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _send_stream(self, message: dict[str, Any] | ApiError | _Cut) -> None:
            ending = message.ending if isinstance(message, _Cut) else "close"
            chunked = ending != "close"  # as the API streams: a body cut short is then one the client can tell
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            if chunked:
                self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            events: Iterable[tuple[str, dict[str, Any]]]
            if isinstance(message, _Cut):
                events = itertools.islice(_events(message.message), message.events)
            else:
                events = _error_events(message) if isinstance(message, ApiError) else _events(message)
            for event, data in events:
                payload = f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload) if chunked else payload)
            self.wfile.flush()
            self.close_connection = True
            if ending == "stall":
                api._stopping.wait(_STALL_MAX)
            elif ending == "reset":  # closed with SO_LINGER 0: a TCP reset, not an orderly end
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            if length > _MAX_BODY:
                self._send_json(413, ApiError(413, "request too large").body())
                return
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self._send_json(400, ApiError(400, "the request body is not JSON").body())
                return
            path = self.path.split("?", 1)[0].rstrip("/")
            if path == "/v1/messages/count_tokens":
                self._send_json(200, api.count(body))
            elif path == "/v1/messages":
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, extra, answer = api.answer(body, headers)
                if status == 200 and isinstance(body, dict) and body.get("stream") is True:
                    self._send_stream(answer)
                elif isinstance(answer, _Cut):  # half of the JSON, then the connection closes
                    data = json.dumps(answer.message, ensure_ascii=False).encode("utf-8")
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data[: len(data) // 2])
                    self.close_connection = True
                else:
                    self._send_json(status, answer, extra)
            else:
                self._send_json(404, ApiError(404, f"no route {path}").body())

    return Handler
