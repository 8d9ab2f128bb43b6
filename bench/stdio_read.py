"""Host CPU to read one long message from a stdio MCP server: the SDK's reader against tooltree's.

The SDK's ``stdio_client`` joins its buffer with each 64 KiB chunk and splits the result
(``(buffer + chunk).split("\\n")``), which is quadratic in a line's length and runs on the event
loop every session's calls share; ``tool_tree.stdio.stdio_client`` scans only each new chunk and
caps a message at ``MAX_MESSAGE_BYTES``. Each reader receives one notification whose data is N MiB
of ``x`` from a child process; the CPU time of this process (not the child's) is reported, median
of ``--runs``.

Run:  .venv/bin/python bench/stdio_read.py [--sizes 1,10,30] [--runs 3]   (writes bench/out/stdio_read.json)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
from _common import positive_int, write_json
from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client as sdk_client

from tool_tree.stdio import stdio_client as tooltree_client


def server(mib: int) -> StdioServerParameters:
    message = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "@"}}
    head, tail = json.dumps(message).split("@")
    write = f"sys.stdout.write({head!r} + 'x' * {mib << 20} + {tail!r} + '\\n')"
    return StdioServerParameters(
        command=sys.executable, args=["-c", f"import sys; {write}; sys.stdout.flush(); sys.stdin.read()"]
    )


async def read_once(client: Any, mib: int) -> float:
    started = time.process_time()
    async with client(server(mib)) as (read, _write):
        with anyio.fail_after(600):
            await read.receive()
    return time.process_time() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,10,30", help="message sizes in MiB")
    parser.add_argument("--runs", type=positive_int, default=3)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    print(f"{'MiB':>5}  {'SDK reader, CPU s':>18}  {'tooltree reader, CPU s':>22}  ratio")
    for mib in (int(s) for s in args.sizes.split(",")):
        sdk = statistics.median(anyio.run(read_once, sdk_client, mib) for _ in range(args.runs))
        ours = statistics.median(anyio.run(read_once, tooltree_client, mib) for _ in range(args.runs))
        rows.append({"mib": mib, "sdk_cpu_s": round(sdk, 3), "tooltree_cpu_s": round(ours, 3)})
        print(f"{mib:5d}  {sdk:18.2f}  {ours:22.2f}  {sdk / max(ours, 1e-6):5.1f}×", flush=True)
    write_json("stdio_read.json", {"runs": args.runs, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
