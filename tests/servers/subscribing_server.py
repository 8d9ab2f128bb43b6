"""An MCP server built with the official SDK's low-level ``Server`` whose resources can be subscribed to, and which
says one changed when a tool asks it to.

    python subscribing_server.py

It serves the 2025 handshake era only (the SDK's ``serve_loop``), where ``resources/subscribe`` is a request and the
server sends ``notifications/resources/updated`` unasked; it declares ``resources.subscribe`` (the SDK derives it from
the subscribe handler).

Resources: ``live://log`` and ``live://status``; template ``live://items/{id}``.

Tools:
    touch(uri, times=1, any=false)  sends ``notifications/resources/updated`` for ``uri`` ``times`` times on the session
                                     (only when ``uri`` is subscribed, unless ``any``); answers "touched N"
    subscribed()                     answers the URIs subscribed on this session, as a JSON list, sorted
    crash()                          the server exits (status 3) at once

Test controls, from the environment: ``SUBSCRIBING_SERVER_MARK`` a file a line is added to at each start.
"""

from __future__ import annotations

import json
import os
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server

subscribed: set[str] = set()

TOOLS = [
    types.Tool(
        name="touch",
        description="Say a resource changed.",
        input_schema={
            "type": "object",
            "properties": {"uri": {"type": "string"}, "times": {"type": "integer"}, "any": {"type": "boolean"}},
            "required": ["uri"],
        },
    ),
    types.Tool(name="subscribed", description="The URIs subscribed.", input_schema={"type": "object"}),
    types.Tool(name="crash", description="Exit at once.", input_schema={"type": "object"}),
]


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = dict(params.arguments or {})
    if params.name == "crash":
        os._exit(3)
    if params.name == "subscribed":
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(sorted(subscribed)))])
    uri, times = str(arguments["uri"]), int(arguments.get("times", 1))
    sent = 0
    if uri in subscribed or arguments.get("any"):
        for _ in range(times):
            await ctx.session.send_resource_updated(uri)
            sent += 1
    return types.CallToolResult(content=[types.TextContent(text=f"touched {sent}")])


async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[
            types.Resource(name="log", uri="live://log", mime_type="text/plain"),
            types.Resource(name="status", uri="live://status", mime_type="text/plain"),
        ]
    )


async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(
        resource_templates=[types.ResourceTemplate(name="item", uri_template="live://items/{id}")]
    )


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    uri = str(params.uri)
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=f"now: {uri}")])


async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
    subscribed.add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    subscribed.discard(str(params.uri))
    return types.EmptyResult()


server: Server[Any] = Server(
    "subscribing",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_resources=list_resources,
    on_list_resource_templates=list_templates,
    on_read_resource=read_resource,
    on_subscribe_resource=subscribe,
    on_unsubscribe_resource=unsubscribe,
)


async def main() -> None:
    if mark := os.environ.get("SUBSCRIBING_SERVER_MARK"):
        with open(mark, "a", encoding="utf-8") as f:
            f.write("started\n")
    async with server.lifespan(server) as state, stdio_server() as (read, write):
        await serve_loop(server, read, write, lifespan_state=state, init_options=server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
