"""An MCP server built with the official SDK's low-level ``Server`` that offers prompts and resources, some hostile.

    python prompts_server.py SCHEME [endless | wide]

Tools: ``ping`` (so that a tree can be generated from it).

Prompts:
    greet:       arguments ``name`` (required) and ``style``; answers a user and an assistant message
    echo_args:   one argument named with `ESCAPES` in it; answers the arguments it was given, as JSON
    report:      a description carrying `ESCAPES`; answers a text with `ESCAPES`, an image and an embedded resource
    huge:        answers one text of 1,000,000 characters
    crash:       the server exits (status 3) when asked for it
    refuse:      answers a JSON-RPC error whose text carries `ESCAPES`
    and two that are left out: one named with `ESCAPES`, one with a name of 5,000 characters

Resources (``SCHEME://...``): ``readme`` (text), ``big`` (1,000,000 characters), ``logo.png`` (a PNG blob), ``hostile``
(its name and description carry `ESCAPES`, its text too), ``shared://readme`` (listed by every instance: ambiguous),
and one whose URI carries `ESCAPES` (left out). Templates: ``SCHEME://items/{id}`` and ``shared://items/{id}``.
With ``endless``, every page of ``resources/list`` names a next one; with ``wide``, the list has `WIDE` more resources,
``SCHEME://wide/<n>``, each described in 2,000 characters (about 2 MB of JSON in all).

Test controls, from the environment: ``PROMPTS_SERVER_MARK`` a file a line is added to at each start;
``PROMPTS_SERVER_MORE`` a file whose lines, when it exists, name more prompts (read at each ``prompts/list``);
``PROMPTS_SERVER_GATE`` a file the server waits for (at most 60 s) before it starts answering;
``PROMPTS_SERVER_REFUSE_LISTS`` set: ``prompts/list`` and ``resources/templates/list`` answer an error;
``PROMPTS_SERVER_HANG_LISTS`` set: ``prompts/list`` never answers.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

SCHEME = sys.argv[1]
ENDLESS = sys.argv[2:3] == ["endless"]
WIDE = 900 if sys.argv[2:3] == ["wide"] else 0
ESCAPES = "\x1b]52;c;ZWNobyBwd25lZAo=\x07\x1b[2J\x1b[31mRED\u202eevil"
PNG = base64.b64encode(
    base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
).decode()
HUGE = 1_000_000


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[types.Tool(name="ping", input_schema={"type": "object"})])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text="pong")])


PROMPTS = [
    types.Prompt(
        name="greet",
        description="Greets someone.",
        arguments=[
            types.PromptArgument(name="name", description="Who to greet", required=True),
            types.PromptArgument(name="style", description="How"),
        ],
    ),
    types.Prompt(name="echo_args", arguments=[types.PromptArgument(name=f"tone{ESCAPES}", required=True)]),
    types.Prompt(name="report", title=f"Report{ESCAPES}", description=f"Writes a report.{ESCAPES}"),
    types.Prompt(name="huge"),
    types.Prompt(name="crash"),
    types.Prompt(name="refuse"),
    types.Prompt(name=f"evil{ESCAPES}"),
    types.Prompt(name="x" * 5_000),
]


async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
    if os.environ.get("PROMPTS_SERVER_HANG_LISTS"):
        await anyio.sleep_forever()
    if os.environ.get("PROMPTS_SERVER_REFUSE_LISTS"):
        raise MCPError(code=types.INTERNAL_ERROR, message="no prompts today")
    more = Path(os.environ.get("PROMPTS_SERVER_MORE") or "/nonexistent")
    names = more.read_text(encoding="utf-8").split() if more.is_file() else []
    return types.ListPromptsResult(prompts=[*PROMPTS, *(types.Prompt(name=n) for n in names)])


def user(text: str) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=types.TextContent(text=text))


async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    arguments = dict(params.arguments or {})
    if params.name == "greet":
        style = arguments.get("style", "plainly")
        return types.GetPromptResult(
            description=f"greeting from {SCHEME}",
            messages=[
                user(f"Greet {arguments.get('name')} {style}."),
                types.PromptMessage(role="assistant", content=types.TextContent(text=f"Hello from {SCHEME}!")),
            ],
        )
    if params.name == "echo_args":
        return types.GetPromptResult(messages=[user(json.dumps(arguments, sort_keys=True))])
    if params.name == "report":
        resource = types.TextResourceContents(uri=f"{SCHEME}://readme", mime_type="text/plain", text=f"doc{ESCAPES}")
        return types.GetPromptResult(
            messages=[
                user(f"Report{ESCAPES}"),
                types.PromptMessage(role="user", content=types.ImageContent(data=PNG, mime_type="image/png")),
                types.PromptMessage(role="user", content=types.EmbeddedResource(resource=resource)),
            ]
        )
    if params.name == "huge":
        return types.GetPromptResult(messages=[user("h" * HUGE)])
    if params.name == "crash":
        os._exit(3)
    if params.name == "refuse":
        raise MCPError(code=types.INVALID_PARAMS, message=f"refused{ESCAPES}")
    raise MCPError(code=types.INVALID_PARAMS, message=f"no prompt {params.name}")


def resources() -> list[types.Resource]:
    return [
        types.Resource(name="readme", uri=f"{SCHEME}://readme", mime_type="text/plain", description="The readme."),
        types.Resource(name="big", uri=f"{SCHEME}://big", mime_type="text/plain"),
        types.Resource(name="logo", uri=f"{SCHEME}://logo.png", mime_type="image/png"),
        types.Resource(name=f"hostile{ESCAPES}", uri=f"{SCHEME}://hostile", description=f"d{ESCAPES}" * 2_000),
        types.Resource(name="shared", uri="shared://readme"),
        types.Resource(name="bad uri", uri=f"{SCHEME}://bad{ESCAPES}"),
    ]


async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
    if ENDLESS:
        page = int(params.cursor if params is not None and params.cursor else "0")
        item = types.Resource(name=f"page {page}", uri=f"{SCHEME}://pages/{page}")
        return types.ListResourcesResult(resources=[item], next_cursor=str(page + 1))
    wide = [types.Resource(name=f"wide {n}", uri=f"{SCHEME}://wide/{n}", description="w" * 2_000) for n in range(WIDE)]
    return types.ListResourcesResult(resources=resources() + wide)


async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
    if os.environ.get("PROMPTS_SERVER_REFUSE_LISTS"):
        raise MCPError(code=types.INTERNAL_ERROR, message="no templates today")
    return types.ListResourceTemplatesResult(
        resource_templates=[
            types.ResourceTemplate(name="item", uri_template=f"{SCHEME}://items/{{id}}", mime_type="text/plain"),
            types.ResourceTemplate(name="shared item", uri_template="shared://items/{id}"),
        ]
    )


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    uri = str(params.uri)
    contents: types.TextResourceContents | types.BlobResourceContents
    if uri == f"{SCHEME}://big":
        contents = types.TextResourceContents(uri=uri, text="b" * HUGE)
    elif uri == f"{SCHEME}://logo.png":
        contents = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG)
    elif uri == f"{SCHEME}://hostile":
        contents = types.TextResourceContents(uri=uri, text=f"text{ESCAPES}")
    elif uri.startswith(f"{SCHEME}://items/"):
        contents = types.TextResourceContents(uri=uri, text=f"item {uri.rsplit('/', 1)[1]} of {SCHEME}")
    else:
        contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text=f"read {uri} from {SCHEME}")
    return types.ReadResourceResult(contents=[contents])


server: Server[Any] = Server(
    f"prompts-{SCHEME}",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_prompts=list_prompts,
    on_get_prompt=get_prompt,
    on_list_resources=list_resources,
    on_list_resource_templates=list_templates,
    on_read_resource=read_resource,
)


def started() -> None:
    if mark := os.environ.get("PROMPTS_SERVER_MARK"):
        with open(mark, "a", encoding="utf-8") as f:
            f.write(f"{SCHEME}\n")
    if gate := os.environ.get("PROMPTS_SERVER_GATE"):
        deadline = time.monotonic() + 60
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.05)


async def main() -> None:
    started()
    async with server.lifespan(server) as state, stdio_server() as (read, write):
        await serve_loop(server, read, write, lifespan_state=state, init_options=server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
