"""A hostile MCP server in raw JSON-RPC over stdio (no SDK) whose tools flood the client, for the budget tests.

    python flood_server.py

It answers ``initialize``, ``tools/list`` and ``ping`` as any server; ``tools/call`` by tool name, with
``n`` from the arguments:

    pid        answers this process's pid
    values     answers structured content {"a": [{}, {}, …]} of ``n`` empty objects, compact, on one line
    blocks     answers ``n`` empty text blocks
    noise      writes a stdout line of valid JSON that is not JSON-RPC (``[{}, …]``, ``n`` objects), then answers
    pings      sends ``n`` ``ping`` requests (with ``values``, each holding that many numbers in its params), then
               answers the call; with ``wait``, it reads each ping's answer before the next and answers how many
               it read (with ``values``: {"answers": …, "errors": [the error messages]} as JSON), otherwise it
               never reads its stdin again
    cancelled  sends ``n`` ``ping`` requests, each followed by its ``notifications/cancelled``, still reading
               its stdin, then answers
    notify     sends ``n`` ``notifications/progress`` (every other one's message holds ``"id"`` and a
               backslash; with ``values``, none does, and each holds that many numbers), then answers
    changed    sends ``n`` notices that a list changed, ``notifications/tools/list_changed``, ``.../prompts/...``
               and ``.../resources/...`` in turn, then answers
    strays     sends ``n`` answers to requests the client never made (every other one an error with ``data``),
               then answers the call
    deep       answers with structured content nested ``n`` arrays deep; with ``last``, its id written last
    unreadable answers with a line that cannot be parsed: with ``n`` 0 a text holding a lone surrogate's escape
               (``\\udcff``), 1 a value that is not JSON (``tru``), 2 a message of JSON-RPC 1.0 (``"jsonrpc": "1.0"``,
               its id after it)
    float_id   answers ``ok`` with its id written as a float (``7.0``)
    null_error sends ``n`` parse errors of id null (JSON-RPC's answer to a request whose id could not be read), then
               answers ``ok``
    bom        answers ``ok`` on a line that starts with a UTF-8 byte order mark (as a .NET server writing UTF-8 with
               its preamble does)
    batch      answers with a JSON-RPC batch on one line: ``n`` ``notifications/progress`` of the call (progress
               1, 2, …), then the answer ``batched`` (with ``last``, after two items that are no message: ``1`` and
               an object with no ``jsonrpc``)
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

out = threading.Lock()


def send_line(line: str) -> None:
    with out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def send(message: dict[str, object]) -> None:
    send_line(json.dumps(message, separators=(",", ":")))


def answer(request_id: object, text: str) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}]}})


def call(
    request_id: object, name: str, n: int, wait: bool, values: int = 0, last: bool = False, token: object = None
) -> None:
    rid = json.dumps(request_id)
    if name == "pid":
        answer(request_id, str(os.getpid()))
    elif name == "values":
        objects = ",".join(["{}"] * n)
        send_line(f'{{"jsonrpc":"2.0","id":{rid},"result":{{"content":[],"structuredContent":{{"a":[{objects}]}}}}}}')
    elif name == "blocks":
        blocks = ",".join(['{"type":"text","text":""}'] * n)
        send_line(f'{{"jsonrpc":"2.0","id":{rid},"result":{{"content":[{blocks}]}}}}')
    elif name == "noise":
        send_line("[" + ",".join(["{}"] * n) + "]")
        answer(request_id, "after the noise")
    elif name == "pings":
        answers, errors = 0, []
        for i in range(n):
            ping: dict[str, object] = {"jsonrpc": "2.0", "id": f"ping-{i}", "method": "ping"}
            if values:
                ping["params"] = {"pad": [0] * values}
            send(ping)
            while wait:  # a well-behaved server waits for the answer
                reply = json.loads(sys.stdin.readline())
                if reply.get("id") == f"ping-{i}":
                    answers += 1
                    if "error" in reply:
                        errors.append(reply["error"]["message"])
                    break
        answer(request_id, json.dumps({"answers": answers, "errors": errors}) if values else str(answers))
        if not wait:
            time.sleep(3600)  # never reads its stdin again: the client's answers pile up
    elif name == "cancelled":
        for i in range(n):
            send({"jsonrpc": "2.0", "id": f"ping-{i}", "method": "ping"})
            send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": f"ping-{i}"}})
        answer(request_id, "cancelled them all")
    elif name == "notify":
        for i in range(n):
            message = 'item "id" \\ done' if i % 2 and not values else "done"
            params = {"progressToken": "t", "progress": i, "message": message}
            if values:
                params["data"] = [0] * values
            send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
        answer(request_id, "notified")
    elif name == "changed":
        for i in range(n):
            send({"jsonrpc": "2.0", "method": f"notifications/{('tools', 'prompts', 'resources')[i % 3]}/list_changed"})
        answer(request_id, "changed")
    elif name == "strays":
        for i in range(n):
            if i % 2:
                send({"jsonrpc": "2.0", "id": f"nobody-{i}", "error": {"code": 1, "message": "x", "data": [0, 1]}})
            else:
                send({"jsonrpc": "2.0", "id": f"nobody-{i}", "result": {}})
        answer(request_id, "strayed")
    elif name == "deep":
        nested = "[" * n + "]" * n
        result = f'"result":{{"content":[],"structuredContent":{{"a":{nested}}}}}'
        if last:
            send_line(f'{{"jsonrpc":"2.0",{result},"id":{rid}}}')
        else:
            send_line(f'{{"jsonrpc":"2.0","id":{rid},{result}}}')
    elif name == "unreadable":
        body = [
            '"result":{"content":[{"type":"text","text":"lone \\udcff here"}]}',
            '"result":{"content":[],"isError":tru}',
            '"result":{"content":[]}',
        ][n]
        version = "1.0" if n == 2 else "2.0"
        send_line(f'{{"jsonrpc":"{version}","id":{rid},{body}}}')
    elif name == "bom":
        with out:
            sys.stdout.buffer.write(
                b"\xef\xbb\xbf"
                + json.dumps(
                    {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": "ok"}]}}
                ).encode()
                + b"\n"
            )
            sys.stdout.buffer.flush()
    elif name == "float_id":
        send_line(
            f'{{"jsonrpc":"2.0","id":{float(str(request_id))!r},"result":{{"content":[{{"type":"text","text":"ok"}}]}}}}'
        )
    elif name == "null_error":
        for _ in range(n):
            send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
        answer(request_id, "ok")
    elif name == "batch":
        notes = [
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": i}}
            for i in range(1, n + 1)
        ]
        reply = {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": "batched"}]}}
        send_line(json.dumps([*([1, {"note": "no message"}] if last else []), *notes, reply]))
    else:
        answer(request_id, "ok")


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if method is None or request_id is None:
            continue  # an answer to one of our requests, or a notification
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "flood", "version": "1"},
            }
            send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "tools/list":
            tools = ["pid", "values", "blocks", "noise", "pings", "cancelled", "notify", "changed", "strays", "deep"]
            tools += ["unreadable", "bom", "batch", "float_id", "null_error", "ok"]
            listed = [{"name": name, "inputSchema": {"type": "object"}} for name in tools]
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": listed}})
        elif method == "tools/call":
            params = message["params"]
            arguments = params.get("arguments") or {}
            n, wait = int(arguments.get("n", 0)), bool(arguments.get("wait"))
            values, last = int(arguments.get("values", 0)), bool(arguments.get("last"))
            if params["name"] == "cancelled":  # its stdin is read on meanwhile, by this loop
                threading.Thread(target=call, args=(request_id, "cancelled", n, wait), daemon=True).start()
            else:
                token = (params.get("_meta") or {}).get("progressToken")
                call(request_id, params["name"], n, wait, values, last, token)
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})
        else:
            error = {"code": -32601, "message": f"method not found: {method}"}
            send({"jsonrpc": "2.0", "id": request_id, "error": error})


if __name__ == "__main__":
    main()
