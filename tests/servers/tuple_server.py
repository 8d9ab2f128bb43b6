"""An MCP server built with the official SDK (``MCPServer``) whose tools take pydantic tuples and open objects.

    python tuple_server.py

pydantic writes ``tuple[int, str]`` as ``prefixItems`` with ``minItems`` / ``maxItems`` of its length, and a
model with ``extra="allow"`` as an object with ``properties`` and ``additionalProperties: true``. Each tool
answers with what pydantic made of its arguments, so a test sees them arrive (a tuple validates only from a
JSON array).
"""

from __future__ import annotations

import json

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, ConfigDict

server = MCPServer("tuples", log_level="WARNING")


class Style(BaseModel):
    """A style: a colour and any further settings."""

    model_config = ConfigDict(extra="allow")
    colour: str


@server.tool(name="move_to")
def move_to(point: tuple[int, int], label: tuple[str, float] | None = None) -> str:
    """Move the cursor to a point."""
    return json.dumps({"point": [type(point).__name__, *point], "label": None if label is None else list(label)})


@server.tool(name="draw")
def draw(style: Style) -> str:
    """Draw with a style."""
    return json.dumps(style.model_dump())


if __name__ == "__main__":
    server.run()
