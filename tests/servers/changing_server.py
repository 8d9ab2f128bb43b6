"""An MCP server built with the official SDK (lowlevel ``Server``) that changes its tools while they are listed.

    python changing_server.py CHANGES

Its one tool is named ``tool_v<N>``, N its version, from 0. Each of its first CHANGES answers to ``tools/list``
lists the tools as they were when the request came in, then (before the answer goes out) moves on to the next
version and says so with ``notifications/tools/list_changed``, as a server does whose tools change while a client
lists them. It serves the 2025 handshake era only (the SDK's ``serve_loop``), where a server sends that notice
unasked; at 2026-07-28 only to a client that subscribed (``subscriptions/listen``).
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server

CHANGES = int(sys.argv[1])
version = 0
listed = 0


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    global version, listed
    tools = [types.Tool(name=f"tool_v{version}", input_schema={"type": "object"})]
    listed += 1
    if listed <= CHANGES:
        version += 1
        await ctx.session.send_tool_list_changed()
    return types.ListToolsResult(tools=tools)


server: Server[Any] = Server("changing", on_list_tools=list_tools)


async def main() -> None:
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with server.lifespan(server) as state, stdio_server() as (read, write):
        await serve_loop(server, read, write, lifespan_state=state, init_options=options)


if __name__ == "__main__":
    anyio.run(main)
