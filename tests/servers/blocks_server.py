"""An MCP server (raw JSON-RPC, no SDK) whose one tool, ``blocks``, answers every call with the result read from a
file once at start: thousands of content blocks, an answer's worth of structured content, a ``_meta`` of its own.

    python blocks_server.py RESULT.json             # over stdio
    python blocks_server.py RESULT.json --http      # Streamable HTTP on a free port of 127.0.0.1 (its URL printed
                                                    # on stdout), each reply one JSON body, no session
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def answer(message: dict, result: str) -> str | None:
    """The answer to ``message`` (None for a notification): the result as written for a call, not parsed again."""
    if "id" not in message:
        return None
    if message["method"] == "initialize":
        info = {"name": "blocks", "version": "1"}
        said = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": info}  # fmt: skip
    elif message["method"] == "tools/list":
        said = {"tools": [{"name": "blocks", "inputSchema": {"type": "object"}}]}
    elif message["method"] == "tools/call":
        return f'{{"jsonrpc": "2.0", "id": {json.dumps(message["id"])}, "result": {result}}}'
    else:
        said = {}
    return json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": said})


def serve_http(result: str) -> None:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # no stream of unasked messages
            self.send_response(405)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_DELETE(self) -> None:
            self.do_GET()

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            reply = answer(json.loads(body), result)
            data = reply.encode() if reply is not None else b""
            self.send_response(200 if reply is not None else 202)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"http://127.0.0.1:{server.server_address[1]}/mcp", flush=True)
    server.serve_forever()


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        result = f.read()
    if "--http" in sys.argv[2:]:
        serve_http(result)
        return
    for line in sys.stdin:
        reply = answer(json.loads(line), result)
        if reply is not None:
            sys.stdout.write(reply + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
