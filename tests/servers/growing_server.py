"""An MCP server built with the official SDK (lowlevel ``Server``) whose tools, prompts and resources grow when asked,
across restarts.

    python growing_server.py STATE_FILE [--both-eras]

Its tools are ``add_tool``, ``add_prompt``, ``add_resource`` and one tool per name added; its prompts ``start`` and
one per name added; its resources ``growing://start`` and ``growing://<name>`` per name added. STATE_FILE holds
what was added (a JSON object of lists by kind, read at each listing). A call of ``add_tool``, ``add_prompt`` or
``add_resource`` with ``name`` adds that name to the file and says ``notifications/tools/list_changed``,
``.../prompts/list_changed`` or ``.../resources/list_changed``, as a server does whose lists change while a client
is connected; a call of an added tool answers ``"<name> ran"``. It serves the 2025 handshake era (the SDK's
``serve_loop``), where a server sends those notices unasked; with ``--both-eras`` the session-less 2026-07-28 protocol
too, to a client that speaks it (``serve_dual_era_loop``), where it sends them on the client's ``subscriptions/listen``
streams alone, and has one more tool, ``end_listens``, which ends those streams as a server does that closes them
(gracefully: each answered).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.runner import serve_dual_era_loop, serve_loop
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged

STATE = Path(sys.argv[1])
BOTH_ERAS = "--both-eras" in sys.argv[2:]
KINDS = ("tool", "prompt", "resource")
EVENTS = {"tool": ToolsListChanged(), "prompt": PromptsListChanged(), "resource": ResourcesListChanged()}
BUS = InMemorySubscriptionBus()
LISTENS = ListenHandler(BUS)
END = types.Tool(name="end_listens", description="End the listen streams.", input_schema={"type": "object"})
ADD = [
    types.Tool(
        name=f"add_{kind}",
        description=f"Add a {kind} of this name.",
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    )
    for kind in KINDS
]


def added(kind: str) -> list[str]:
    state = json.loads(STATE.read_text(encoding="utf-8")) if STATE.exists() else {}
    return list(state.get(kind, []))


def add(kind: str, name: str) -> None:
    state = json.loads(STATE.read_text(encoding="utf-8")) if STATE.exists() else {}
    state[kind] = [*state.get(kind, []), name]
    STATE.write_text(json.dumps(state), encoding="utf-8")


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    more = [types.Tool(name=n, description=f"The {n} tool.", input_schema={"type": "object"}) for n in added("tool")]
    return types.ListToolsResult(tools=[*ADD, *([END] if BOTH_ERAS else []), *more])


async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
    names = ["start", *added("prompt")]
    return types.ListPromptsResult(prompts=[types.Prompt(name=n, description=f"The {n} prompt.") for n in names])


async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    text = types.TextContent(text=f"the {params.name} prompt")
    return types.GetPromptResult(messages=[types.PromptMessage(role="user", content=text)])


async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
    names = ["start", *added("resource")]
    return types.ListResourcesResult(resources=[types.Resource(name=n, uri=f"growing://{n}") for n in names])


async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(resource_templates=[])


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=str(params.uri), text="grown")])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == END.name:
        LISTENS.close()
        return types.CallToolResult(content=[types.TextContent(text="ended")])
    kind = params.name.removeprefix("add_")
    if kind in KINDS:
        name = str((params.arguments or {})["name"])
        add(kind, name)
        if kind == "tool":
            await ctx.session.send_tool_list_changed()
        elif kind == "prompt":
            await ctx.session.send_prompt_list_changed()
        else:
            await ctx.session.send_resource_list_changed()
        await BUS.publish(EVENTS[kind])  # to the listen streams of a client of 2026-07-28 (none at 2025)
        return types.CallToolResult(content=[types.TextContent(text=f"added {name}")])
    return types.CallToolResult(content=[types.TextContent(text=f"{params.name} ran")])


server: Server[Any] = Server(
    "growing",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_prompts=list_prompts,
    on_get_prompt=get_prompt,
    on_list_resources=list_resources,
    on_list_resource_templates=list_templates,
    on_read_resource=read_resource,
    on_subscriptions_listen=LISTENS if BOTH_ERAS else None,
)


async def main() -> None:
    options = server.create_initialization_options(
        NotificationOptions(tools_changed=True, prompts_changed=True, resources_changed=True)
    )
    async with server.lifespan(server) as state, stdio_server() as (read, write):
        serve = serve_dual_era_loop if BOTH_ERAS else serve_loop
        await serve(server, read, write, lifespan_state=state, init_options=options)


if __name__ == "__main__":
    anyio.run(main)
