"""A stdio MCP server (raw JSON-RPC, no SDK) whose one tool, ``blocks``, answers every call with the result read from
a file once at start: thousands of content blocks, an answer's worth of structured content, a ``_meta`` of its own.

    python blocks_server.py RESULT.json
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        result = f.read()
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        if message["method"] == "initialize":
            info = {"name": "blocks", "version": "1"}
            answer = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                      "serverInfo": info}  # fmt: skip
        elif message["method"] == "tools/list":
            answer = {"tools": [{"name": "blocks", "inputSchema": {"type": "object"}}]}
        else:  # the result as written, not parsed and dumped again
            sys.stdout.write(f'{{"jsonrpc": "2.0", "id": {json.dumps(message["id"])}, "result": {result}}}\n')
            sys.stdout.flush()
            continue
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": answer}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
