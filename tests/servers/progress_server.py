"""An MCP server (raw JSON-RPC over stdio, no SDK) whose one tool reports progress, for the progress tests.

    python progress_server.py

Its tool ``steps`` sends ``n`` ``notifications/progress`` for the call's ``progressToken`` (none when the call
carries none), each ``progress`` i of ``total`` n with the message "``message`` i" (``hostile``: `ESCAPES` and a
space before it, a space and ``pad`` "x"s after it; ``huge``: the progress a number of 400 digits, which no float
holds). Then, given ``release`` (the path of a FIFO), it waits until the test writes to it; it answers "sent K", the
notifications it sent.
"""

from __future__ import annotations

import json
import sys

ESCAPES = "\x1b]52;c;ZWNobyBwd25lZAo=\x07\x1b]0;PWNED\x07\x1b[2J\x1b[31mRED\u202eevil\x9b2K\r\x1b[2Kforged"
"""An OSC 52 clipboard write, a window title, a cleared screen, a colour, a bidi override, an 8-bit CSI and a
carriage return that starts the line again."""
HUGE = 10**400
STEPS = {
    "name": "steps",
    "description": "Sends progress notifications, then answers.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "message": {"type": "string"},
            "hostile": {"type": "boolean"},
            "pad": {"type": "integer"},
            "huge": {"type": "boolean"},
            "release": {"type": "string"},
        },
        "required": ["n"],
    },
}


def send(msg: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def steps(mid: object, params: dict[str, object]) -> None:
    args = params.get("arguments") or {}
    assert isinstance(args, dict)
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    n = int(args["n"]) if token is not None else 0
    for i in range(1, n + 1):
        message = f"{args.get('message', 'part')} {i}"
        if args.get("hostile"):
            message = f"{ESCAPES} {message} " + "x" * int(args.get("pad", 0))
        progress = HUGE if args.get("huge") else i
        fields = {"progressToken": token, "progress": progress, "total": n, "message": message}
        send({"jsonrpc": "2.0", "method": "notifications/progress", "params": fields})
    release = args.get("release")
    if isinstance(release, str):
        with open(release, encoding="utf-8") as fifo:  # blocks until the test opens it to write
            fifo.read()
    send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": f"sent {n}"}]}})


def main() -> None:
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, mid = msg.get("method"), msg.get("id")
        if mid is None:
            continue
        if method == "initialize":
            info = {"name": "progress", "version": "1.0"}
            result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": info}
            send({"jsonrpc": "2.0", "id": mid, "result": result})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [STEPS]}})
        elif method == "tools/call":
            steps(mid, msg.get("params") or {})
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
