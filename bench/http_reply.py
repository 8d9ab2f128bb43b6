"""Host memory to receive one long reply from a Streamable HTTP MCP server: the SDK's client against tooltree's.

The SDK's client reads a JSON reply whole (``response.aread()``), however long; ``tool_tree.http_client``
cuts one off past ``MAX_MESSAGE_BYTES``. Each case runs in a child process holding a minimal MCP server
(the one of ``tests/tool_tree/test_http_client.py``, in a thread) and one client that calls its tool for a
JSON reply of N MiB; the child's peak RSS, wall time and outcome are reported, median of ``--runs``.

Run:  .venv/bin/python bench/http_reply.py [--sizes 3,300,1500] [--runs 1]   (writes bench/out/http_reply.json)
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import positive_int, write_json


def child(client: str, mib: int) -> dict[str, Any]:
    """One call in this process; returns its outcome, wall time and this process's peak RSS."""
    import anyio
    import mcp
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from tests.tool_tree.test_http_client import Replies
    from tool_tree.http_client import http_client
    from tool_tree.stdio import MAX_MESSAGE_BYTES

    handler = type("Handler", (Replies,), {"sent": [], "done": threading.Semaphore(0)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/mcp"

    async def call() -> str:
        if client == "sdk":
            http, size = create_mcp_http_client(), None
        else:
            http, size = http_client(), MAX_MESSAGE_BYTES
        async with http, mcp.Client(streamable_http_client(url, http_client=http, max_sse_event_size=size)) as c:
            try:
                result = await c.call_tool("big", {"chars": mib << 20, "form": "json"})
            except mcp.MCPError as e:
                return f"error: {str(e)[:80]}"
            text = "".join(getattr(b, "text", "") for b in result.content)
            return f"error: {text[:80]}" if result.is_error else f"{len(text):,} chars"

    start = time.perf_counter()
    outcome = anyio.run(call)
    seconds = time.perf_counter() - start
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"client": client, "mib": mib, "outcome": outcome, "seconds": seconds, "peak_rss_mib": rss_mib}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="3,300,1500", help="reply sizes in MiB, comma-separated")
    parser.add_argument("--runs", type=positive_int, default=1)
    parser.add_argument("--child", nargs=2, metavar=("CLIENT", "MIB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]))))
        return 0
    rows = []
    for mib in (int(s) for s in args.sizes.split(",")):
        for client in ("sdk", "tooltree"):
            runs = []
            for _ in range(args.runs):
                out = subprocess.run(
                    [sys.executable, __file__, "--child", client, str(mib)], capture_output=True, text=True, check=True
                ).stdout
                runs.append(json.loads(out.strip().splitlines()[-1]))
            row = {
                "client": client,
                "mib": mib,
                "outcome": runs[0]["outcome"],
                "seconds": statistics.median(r["seconds"] for r in runs),
                "peak_rss_mib": statistics.median(r["peak_rss_mib"] for r in runs),
            }
            rows.append(row)
            took = f"{row['seconds']:7.2f} s  {row['peak_rss_mib']:8.0f} MiB"
            print(f"{mib:>6} MiB  {client:<8}  {took}  {row['outcome']}")
    write_json("http_reply.json", {"runs": args.runs, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
