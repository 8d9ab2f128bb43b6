"""An MCP server built with the official SDK (``MCPServer``) whose one tool answers structured content.

    python structured_server.py

``show(case)`` answers the result named by ``case`` (see `CASES`) as a ``CallToolResult``: structured content
that repeats an image of the content (as server-filesystem's ``read_media_file`` does), that adds to an image
without a text block, or that comes alone and carries binary data as base64 (plain and as a ``data:`` URI).
"""

from __future__ import annotations

from content_server import png  # the script's folder is on sys.path when it runs as a script
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, ImageContent

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


if __name__ == "__main__":
    server.run()
