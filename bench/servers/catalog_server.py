"""An MCP server (the official SDK, stdio) that serves a given list of tools, for start-up benchmarks.

    python bench/servers/catalog_server.py TOOLS.json [--http PORT]

``TOOLS.json`` holds ``{"name": ..., "description": ..., "tools": [raw tool dicts]}``. ``tools/list``
answers those tools; ``tools/call`` answers one text block naming the tool and echoing its arguments,
except a tool named ``count``, which answers how many calls this process has served before it.
The point is the start-up cost of a typical small Python MCP server: it imports the SDK (~1 CPU-s),
as a real one does; it serves no real tool. With ``--http PORT`` it serves Streamable HTTP on 127.0.0.1:PORT
(``/mcp``) instead of stdio; it then looks a called tool's input schema up by name (``get_tool_input_schema``), as a
server of many tools would, rather than run its whole listing again to check each call's ``Mcp-Param-*`` headers.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import mcp.types as mt
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        spec: dict[str, Any] = json.load(f)
    tools = [mt.Tool.model_validate(t) for t in spec["tools"]]
    served = 0

    async def list_tools(ctx: Any, params: mt.PaginatedRequestParams | None) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: mt.CallToolRequestParams) -> mt.CallToolResult:
        nonlocal served
        if params.name == "count":
            text = str(served)
        else:
            text = json.dumps({"tool": params.name, "arguments": params.arguments or {}})
        served += 1
        return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)])

    schemas = {tool.name: tool.input_schema for tool in tools}
    server: Server[Any] = Server(
        spec["name"], version="1.0", description=spec.get("description") or None,
        on_list_tools=list_tools, on_call_tool=call_tool, get_tool_input_schema=schemas.get,
    )  # fmt: skip
    if sys.argv[2:3] == ["--http"]:
        import uvicorn

        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[3]), log_level="warning")
        return

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
