"""An MCP server built with the official SDK (lowlevel ``Server``) whose tools change from one release to the next.

    python evolving_server.py VERSION_FILE

VERSION_FILE holds the release whose tools it lists (``1``, ``2`` or ``3``; read at each listing), so a test
regenerates a tree across releases with the same configuration:

- ``1``: ``update_record(record_id, note?, status?, limit?: int, mode?: "a"|"b")``, ``delete_record(id)``,
  ``archive_record(id)``, ``get_record(record_id)``.
- ``2`` breaks callers: ``note`` removed, ``status`` required, ``limit`` one of 10 or 20, ``delete_record`` removed,
  ``archive_record`` requires ``reason``; and adds what breaks nothing: ``tags?``, ``mode`` also ``"c"``,
  ``export_records``; ``get_record`` says more of itself.
- ``3`` only adds: ``tags?``, ``mode`` also ``"c"``, ``status`` optional still, ``export_records``, ``get_record``
  says more of itself.

A call of any tool says its name, the release and the names of its arguments.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server

VERSION = Path(sys.argv[1])


def tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> types.Tool:
    schema = {"type": "object", "properties": properties, "required": required}
    return types.Tool(name=name, description=description, input_schema=schema)


def tools(version: str) -> list[types.Tool]:
    text = {"type": "string"}
    update: dict[str, Any] = {
        "record_id": text,
        "note": text,
        "status": text,
        "limit": {"type": "integer"},
        "mode": {"enum": ["a", "b"]},
    }
    listed = [
        tool("get_record", "Read one record.", {"record_id": text}, ["record_id"]),
        tool("archive_record", "Archive a record.", {"id": text}, ["id"]),
        tool("delete_record", "Delete a record.", {"id": text}, ["id"]),
    ]
    if version == "1":
        return [tool("update_record", "Update a record.", update, ["record_id"]), *listed]
    update["mode"] = {"enum": ["a", "b", "c"]}
    update["tags"] = {"type": "array", "items": text}
    required = ["record_id"]
    listed[0] = tool("get_record", "Read one record, with all of its fields.", {"record_id": text}, ["record_id"])
    if version == "2":
        del update["note"]
        update["limit"] = {"enum": [10, 20]}
        required.append("status")
        archive = {"id": text, "reason": text}
        listed[1:] = [tool("archive_record", "Archive a record.", archive, ["id", "reason"])]
    return [
        tool("update_record", "Update a record.", update, required),
        *listed,
        tool("export_records", "Export every record.", {}, []),
    ]


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=tools(VERSION.read_text(encoding="utf-8").strip()))


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    """Any tool it lists runs: it says its name, its release and the names of its arguments."""
    release = VERSION.read_text(encoding="utf-8").strip()
    named = ", ".join(sorted(params.arguments or {}))
    return types.CallToolResult(content=[types.TextContent(text=f"{params.name} ran in release {release} ({named})")])


server: Server[Any] = Server("evolving", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    options = server.create_initialization_options()
    async with server.lifespan(server) as state, stdio_server() as (read, write):
        await serve_loop(server, read, write, lifespan_state=state, init_options=options)


if __name__ == "__main__":
    anyio.run(main)
