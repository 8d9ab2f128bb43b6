"""An MCP server built with the official SDK (lowlevel ``Server``) whose tools are renamed, removed or changed on a
call, as a server's are that is redeployed or reconfigured while a client is connected.

    python shifting_server.py STATE_FILE [--both-eras]

Its tools are ``shift``, ``listings`` and those STATE_FILE holds (a JSON object of tool name to input schema; ``{"echo":
{"type": "object"}}`` when the file does not exist). A call of ``shift`` with ``tools`` (an object of the same shape)
writes it to the file, so it is the server's tools from then on, and says ``notifications/tools/list_changed``
(``notices`` times, default once); a call of ``listings`` answers how many ``tools/list`` it answered; a call of a tool
it lists answers ``"<name> ran"``; one of a tool it does not list is answered as FastMCP answers it, an error result
``Unknown tool: <name>``. It serves the 2025 handshake era (the SDK's ``serve_loop``), where a server sends that
notice unasked; with ``--both-eras`` the session-less 2026-07-28 protocol too, to a client that speaks it
(``serve_dual_era_loop``), where it sends it on the client's ``subscriptions/listen`` streams alone.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.runner import serve_dual_era_loop, serve_loop
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.subscriptions import ToolsListChanged

STATE = Path(sys.argv[1])
BOTH_ERAS = "--both-eras" in sys.argv[2:]
BUS = InMemorySubscriptionBus()
SHIFT = types.Tool(
    name="shift",
    description="Make these the server's tools.",
    input_schema={
        "type": "object",
        "properties": {"tools": {"type": "object"}, "notices": {"type": "integer"}},
        "required": ["tools"],
    },
)
LISTINGS = types.Tool(name="listings", description="How many listings were answered.", input_schema={"type": "object"})
listings = 0


def tools() -> dict[str, Any]:
    return json.loads(STATE.read_text(encoding="utf-8")) if STATE.exists() else {"echo": {"type": "object"}}


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    global listings
    listings += 1
    listed = [types.Tool(name=n, description=f"The {n} tool.", input_schema=s) for n, s in tools().items()]
    return types.ListToolsResult(tools=[SHIFT, LISTINGS, *listed])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == SHIFT.name:
        STATE.write_text(json.dumps((params.arguments or {})["tools"]), encoding="utf-8")
        for _ in range(int((params.arguments or {}).get("notices", 1))):
            await ctx.session.send_tool_list_changed()
            await BUS.publish(ToolsListChanged())  # to the listen streams of a client of 2026-07-28 (none at 2025)
        return types.CallToolResult(content=[types.TextContent(text="shifted")])
    if params.name == LISTINGS.name:
        return types.CallToolResult(content=[types.TextContent(text=str(listings))])
    if params.name not in tools():
        return types.CallToolResult(content=[types.TextContent(text=f"Unknown tool: {params.name}")], is_error=True)
    return types.CallToolResult(content=[types.TextContent(text=f"{params.name} ran")])


server: Server[Any] = Server(
    "shifting",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_subscriptions_listen=ListenHandler(BUS) if BOTH_ERAS else None,
)


async def main() -> None:
    STATE.with_suffix(".pid").write_text(str(os.getpid()), encoding="utf-8")
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with server.lifespan(server) as state, stdio_server() as (read, write):
        serve = serve_dual_era_loop if BOTH_ERAS else serve_loop
        await serve(server, read, write, lifespan_state=state, init_options=options)


if __name__ == "__main__":
    anyio.run(main)
