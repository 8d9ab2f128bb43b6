"""An MCP server built with the official SDK (``MCPServer``) whose one tool answers structured content.

    python structured_server.py

``show(case)`` answers the result named by ``case`` (see `CASES`) as a ``CallToolResult``: structured content
that repeats an image of the content (as server-filesystem's ``read_media_file`` does), that adds to an image
without a text block, or that comes alone and carries binary data as base64 (plain and as a ``data:`` URI).
``chart(title)`` declares an output schema (`Chart`) and answers its structured content, the same as JSON text (as
the spec asks), and beside them an image and a resource link that only its content holds.
"""

from __future__ import annotations

import json
from typing import Annotated, TypedDict

from content_server import png  # the script's folder is on sys.path when it runs as a script
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, ImageContent, ResourceLink, TextContent

server = MCPServer("structured", log_level="WARNING")

IMAGE = png(100, 80, 200_000)
"""A 195 KB PNG: 267,000 characters of base64."""
DIGEST = "0123456789abcdef" * 80
"""1,280 characters of hex: base64's alphabet, but no upper case, so not taken for binary data."""
CASES: dict[str, CallToolResult] = {
    "repeated": CallToolResult(
        content=[ImageContent(data=IMAGE, mime_type="image/png")],
        structured_content={"content": [{"type": "image", "data": IMAGE, "mimeType": "image/png"}]},
    ),
    "image_and_size": CallToolResult(
        content=[ImageContent(data=IMAGE, mime_type="image/png")], structured_content={"width": 100, "height": 80}
    ),
    "alone": CallToolResult(
        content=[],
        structured_content={
            "name": "chart.png",
            "png": IMAGE,
            "preview": "data:image/png;base64," + IMAGE,
            "digest": DIGEST,
        },
    ),
}


@server.tool(name="show")
def show(case: str) -> CallToolResult:
    """Answer the structured content named ``case``."""
    return CASES[case]


class Chart(TypedDict):
    """The output schema of ``chart``."""

    title: str
    width: int
    height: int


CHART_LINK = ResourceLink(name="data.csv", uri="file:///charts/data.csv", mime_type="text/csv", size=2_048)


@server.tool(name="chart")
def chart(title: str) -> Annotated[CallToolResult, Chart]:
    """Draw a chart: its size (structured), its image and a link to its data (content only)."""
    out = {"title": title, "width": 100, "height": 80}
    content = [TextContent(text=json.dumps(out)), ImageContent(data=IMAGE, mime_type="image/png"), CHART_LINK]
    return CallToolResult(content=content, structured_content=out)


if __name__ == "__main__":
    server.run()
