"""An MCP server built with the official SDK (lowlevel ``Server``) whose tools grow when asked, across restarts.

    python growing_server.py STATE_FILE

Its tools are ``add_tool`` and one tool per name in STATE_FILE (a JSON list, read at each listing). A call of
``add_tool`` with ``name`` adds that name to the file and says ``notifications/tools/list_changed``, as a server
does whose tools change while a client is connected; a call of an added tool answers ``"<name> ran"``. It serves
the 2025 handshake era (the SDK's ``serve_loop``), where a server sends that notice unasked.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server

STATE = Path(sys.argv[1])
ADD = types.Tool(
    name="add_tool",
    description="Add a tool of this name.",
    input_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
)


def added() -> list[str]:
    return json.loads(STATE.read_text(encoding="utf-8")) if STATE.exists() else []


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    tools = [ADD, *(types.Tool(name=n, description=f"The {n} tool.", input_schema={"type": "object"}) for n in added())]
    return types.ListToolsResult(tools=tools)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "add_tool":
        name = str((params.arguments or {})["name"])
        STATE.write_text(json.dumps([*added(), name]), encoding="utf-8")
        await ctx.session.send_tool_list_changed()
        return types.CallToolResult(content=[types.TextContent(text=f"added {name}")])
    return types.CallToolResult(content=[types.TextContent(text=f"{params.name} ran")])


server: Server[Any] = Server("growing", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with server.lifespan(server) as state, stdio_server() as (read, write):
        await serve_loop(server, read, write, lifespan_state=state, init_options=options)


if __name__ == "__main__":
    anyio.run(main)
