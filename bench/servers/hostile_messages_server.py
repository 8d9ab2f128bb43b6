"""A hostile MCP server that floods its client with messages it never asked for, for `bench/hostile_messages.py`.

    python bench/servers/hostile_messages_server.py MODE

Its tool ``start`` answers at once and starts the flood. Modes ``get_*`` serve Streamable HTTP on a free port of
127.0.0.1 (the first line on stdout is ``listening PORT``, then ``GET <n> waiting`` or ``GET <n> flooding <s>`` for
each GET, ``<s>`` its seconds since ``start``) and flood the GET stream the client opens after
``notifications/initialized``; the other modes speak stdio (raw JSON-RPC, no SDK). "Big" messages hold ~1M values
(an object of 999,980 keys, ~12 MB), just under tooltree's limit of a message.

stdio:
  unknown_big     answers with unknown ids, big, forever
  unknown_small   small answers with unknown ids, 1,000 a write, forever
  error_big       error answers with unknown ids, a big ``data``
  notif_id_big    notifications/message whose data holds ``"id"``, big
  notif_id_small  small notifications/progress with ``"id"`` in their text, 1,000 a write
  notif_big_noid  notifications/message without ``"id"``, big
  notif_plain     small notifications without ``"id"``, 1,000 a write (the control)
  req_big         ping requests with big params, one at a time: each waits for its answer (a polite requester)
Streamable HTTP:
  get_unknown_big    a GET stream of answers with unknown ids, big, forever
  get_notif_big      a GET stream of notifications/message, big, forever
  get_unknown_small  a GET stream of small answers with unknown ids, 1,000 a chunk, forever
  get_reconnect      once started, every GET is answered ``retry: 0`` and ended at once (a client reconnects)
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STDIO_MODES = (
    "notif_plain", "unknown_big", "unknown_small", "error_big", "notif_id_big", "notif_id_small", "req_big",
    "notif_big_noid",
)  # fmt: skip
HTTP_MODES = ("get_unknown_big", "get_notif_big", "get_unknown_small", "get_reconnect")
KEYS = ",".join(f'"k{i}":0' for i in range(999_980))
"""The body of an object of ~1M values: tooltree's limit of a message is 1,000,000 (`tool_tree.budget`)."""
TOOLS = {"tools": [{"name": "start", "inputSchema": {"type": "object"}}]}


def initialized(params: dict[str, Any]) -> dict[str, Any]:
    info = {"name": "hostile", "version": "1"}
    return {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": info}


def stdio_flood(mode: str, write: Any, answered: threading.Semaphore) -> None:
    """Writes the mode's messages to the client forever (``write`` takes one chunk of bytes)."""
    small = {
        "unknown_small": '{"jsonrpc":"2.0","id":%d,"result":{}}\n',
        "notif_id_small": '{"jsonrpc":"2.0","method":"notifications/progress","params":'
        '{"progressToken":"t","progress":1,"message":"\\"id\\""}}\n',
        "notif_plain": '{"jsonrpc":"2.0","method":"notifications/progress","params":'
        '{"progressToken":"t","progress":1}}\n',
    }
    if mode in small:
        line = small[mode]
        batch = "".join(line % (900_000 + j) if "%d" in line else line for j in range(1000)).encode()
        while True:
            write(batch)
    big = {
        "unknown_big": '{"jsonrpc":"2.0","id":"nobody-%d","result":{' + KEYS + "}}\n",
        "error_big": '{"jsonrpc":"2.0","id":"nobody-%d","error":{"code":1,"message":"x","data":{' + KEYS + "}}}\n",
        "notif_id_big": '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":{"id":%d,'
        + KEYS
        + "}}}\n",
        "notif_big_noid": '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":{'
        + KEYS
        + "}}}\n",
        "req_big": '{"jsonrpc":"2.0","id":"r%d","method":"ping","params":{' + KEYS + "}}\n",
    }[mode]
    numbered = "%d" in big
    for i in itertools.count():
        write((big % i if numbered else big).encode())
        if mode == "req_big":
            answered.acquire()  # waits for the client's answer (or its refusal)


def serve_stdio(mode: str) -> None:
    lock, out = threading.Lock(), sys.stdout.buffer

    def write(data: bytes) -> None:
        with lock:
            try:
                out.write(data)
                out.flush()
            except (BrokenPipeError, ValueError):  # the client ended us or went away: nothing more to do
                os._exit(0)

    def send(msg: dict[str, Any]) -> None:
        write((json.dumps(msg, separators=(",", ":")) + "\n").encode())

    answered = threading.Semaphore(0)
    started = False
    for line in sys.stdin:
        msg = json.loads(line)
        method, mid = msg.get("method"), msg.get("id")
        if method is None:
            if str(mid).startswith("r"):
                answered.release()
            continue
        if mid is None:
            continue  # a notification from the client
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": initialized(msg["params"])})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": TOOLS})
        elif method == "tools/call":
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": str(os.getpid())}]}})
            if not started:
                started = True
                threading.Thread(target=stdio_flood, args=(mode, write, answered), daemon=True).start()
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "method not found"}})


def http_event(mode: str, i: int) -> bytes:
    """One chunk of the GET stream's flood (server-sent events)."""
    if mode == "get_unknown_small":
        return b"".join(
            b'event: message\ndata: {"jsonrpc":"2.0","id":%d,"result":{}}\n\n' % (900_000 + i * 1000 + j)
            for j in range(1000)
        )
    if mode == "get_unknown_big":
        data = f'{{"jsonrpc":"2.0","id":"nobody-{i}","result":{{{KEYS}}}}}'
    else:
        data = f'{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":{{{KEYS}}}}}}}'
    return b"event: message\ndata: " + data.encode() + b"\n\n"


def serve_http(mode: str) -> None:
    started = threading.Event()
    started_at = [0.0]
    gets = itertools.count()
    say_lock = threading.Lock()

    def say(text: str) -> None:
        with say_lock:
            print(text, flush=True)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _reply(self, status: int, body: bytes = b"", ctype: str = "") -> None:
            self.send_response(status)
            if ctype:
                self.send_header("content-type", ctype)
            self.send_header("mcp-session-id", "s1")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def do_DELETE(self) -> None:
            self._reply(200)

        def do_POST(self) -> None:
            msg = json.loads(self.rfile.read(int(self.headers["content-length"])))
            if "method" not in msg or "id" not in msg:
                self._reply(202)
                return
            result: dict[str, Any] = {}
            if msg["method"] == "initialize":
                result = initialized(msg["params"])
            elif msg["method"] == "tools/list":
                result = TOOLS
            elif msg["method"] == "tools/call":
                if not started.is_set():
                    started_at[0] = time.monotonic()
                started.set()
                result = {"content": [{"type": "text", "text": "started"}]}
            body = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode()
            self._reply(200, body, "application/json")

        def do_GET(self) -> None:
            n = next(gets)
            say(f"GET {n} flooding {time.monotonic() - started_at[0]:.2f}" if started.is_set() else f"GET {n} waiting")
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("mcp-session-id", "s1")
            if mode == "get_reconnect" and started.is_set():
                self.send_header("content-length", "10")
                self.end_headers()
                self.wfile.write(b"retry: 0\n\n")
                return
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            started.wait()
            try:
                if mode == "get_reconnect":
                    self._chunk(b"retry: 0\n\n")
                    self.wfile.write(b"0\r\n\r\n")
                    return
                for i in itertools.count():
                    self._chunk(http_event(mode, i))
            except OSError:
                self.close_connection = True

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client that hung up on the flood

    server = Server(("127.0.0.1", 0), Handler)
    say(f"listening {server.server_address[1]}")
    server.serve_forever()


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode in HTTP_MODES:
        serve_http(mode)
    elif mode in STDIO_MODES:
        serve_stdio(mode)
    else:
        sys.exit(f"unknown mode {mode!r}: one of {', '.join(STDIO_MODES + HTTP_MODES)}")


if __name__ == "__main__":
    main()
