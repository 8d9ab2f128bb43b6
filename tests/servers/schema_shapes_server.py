"""An MCP server built with the official SDK (lowlevel ``Server``) whose tools declare unusual JSON Schemas and
check every call against them, as a strict server does.

    python schema_shapes_server.py

Tools:
    shapes:      property names that are keywords, builtins, not identifiers or the same after normalisation
                 (``from``, ``self``, ``class``, ``a-b`` beside ``a_b``, ``result``, ``arguments``), a recursive
                 ``$ref``, ``anyOf`` with null, ``allOf``, ``const``, an enum of mixed types, a typed
                 ``additionalProperties``, ``patternProperties``, the two together, a ``type`` list and a ``format``
    needs_token: requires ``token``, which its ``properties`` do not define
    report:      its output schema requires ``id``, which its ``properties`` do not define

A call whose arguments its schema refuses gets a tool error naming the problem; any other call answers its
arguments as JSON text (``report``: a structured result).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import jsonschema
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server

NODE = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
    "required": ["name"],
}
SHAPES = {
    "type": "object",
    "$defs": {"Node": NODE},
    "properties": {
        "from": {"type": "string"},
        "self": {"type": "integer"},
        "class": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "a-b": {"type": "number"},
        "a_b": {"type": "boolean"},
        "result": {"type": ["string", "integer"]},
        "arguments": {"type": "array", "items": {"type": "string"}},
        "tree": {"$ref": "#/$defs/Node"},
        "mode": {"const": "fast"},
        "level": {"enum": [1, "max", None]},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "labels": {"type": "object", "patternProperties": {"^x-": {"type": "string"}}},
        "limits": {
            "type": "object",
            "additionalProperties": {"type": "integer"},
            "patternProperties": {"^s_": {"type": "string"}},
        },
        "merged": {
            "allOf": [
                {"type": "object", "properties": {"p": {"type": "integer"}}, "required": ["p"]},
                {"type": "object", "properties": {"q": {"type": "string"}}},
            ]
        },
        "when": {"type": "string", "format": "date-time"},
    },
    "required": ["from", "a-b", "tree"],
}
NEEDS_TOKEN = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query", "token"]}
REPORT_OUT = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok", "id"]}
TOOLS = [
    types.Tool(name="shapes", description="Echo arguments of many shapes.", input_schema=SHAPES),
    types.Tool(name="needs_token", description="Search with a token.", input_schema=NEEDS_TOKEN),
    types.Tool(
        name="report",
        description="Report on the last run.",
        input_schema={"type": "object", "properties": {}},
        output_schema=REPORT_OUT,
    ),
]
SCHEMAS = {t.name: t.input_schema for t in TOOLS}


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    try:
        jsonschema.validate(arguments, SCHEMAS[params.name])
    except jsonschema.ValidationError as e:
        return types.CallToolResult(content=[types.TextContent(text=f"invalid arguments: {e.message}")], is_error=True)
    if params.name == "report":
        out = {"ok": True, "id": 7}
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(out))], structured_content=out)
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(arguments, sort_keys=True))])


server: Server[Any] = Server("shapes", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with server.lifespan(server) as state, stdio_server() as (read, write):
        await serve_loop(server, read, write, lifespan_state=state, init_options=server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
