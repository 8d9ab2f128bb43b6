"""An MCP server built with the official SDK (``MCPServer``) whose one tool answers hostile content of every kind.

    python content_server.py

``show(case)`` answers the result named by ``case`` (see `CASES`) as a ``CallToolResult``, so what the
client gets is what the SDK writes for that content: images the Messages API refuses (over 5 MB of base64,
wider than 8,000 pixels, corrupt ones), a text of white space only, audio, an image sent as an embedded resource, a MIME
type with parameters and in upper case.
"""

from __future__ import annotations

import base64
import struct
import zlib

from mcp.server.mcpserver import MCPServer
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    TextContent,
)

server = MCPServer("content", log_level="WARNING")


def png(width: int, height: int, padding: int = 0) -> str:
    """Base64 of a PNG whose header states ``width`` × ``height``, whose chunks are whole (IHDR, a ``tEXt`` chunk
    of ``padding`` zero bytes when there are any, IDAT, IEND), and whose image data is a token: nothing here decodes
    the pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    pad = chunk(b"tEXt", b"pad\x00" + bytes(max(0, padding - 48))) if padding else b""  # as many bytes in all
    body = header + pad + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + body).decode()


SMALL = png(10, 10)
CASES: dict[str, list[ContentBlock]] = {
    # 4.5 MB of image, 6 MB of base64: under the old 5 MiB raw cap, over the API's 5 MB of base64
    "big_image": [ImageContent(data=png(10, 10, 4_500_000), mime_type="image/png")],
    "wide_image": [ImageContent(data=png(9_000, 10), mime_type="image/png")],
    "blank_text": [TextContent(text=" \n\t "), ImageContent(data=SMALL, mime_type="image/png")],
    "audio": [AudioContent(data=base64.b64encode(bytes(3_000)).decode(), mime_type="audio/wav")],
    "resource_image": [
        EmbeddedResource(resource=BlobResourceContents(uri="file:///chart.png", blob=SMALL, mime_type="image/png"))
    ],
    "mime_params": [ImageContent(data=SMALL, mime_type="IMAGE/PNG; charset=x")],
    # images whose signature is right and nothing after it: the API cannot process them
    "corrupt_images": [
        ImageContent(data=base64.b64encode(b"GIF89a" + bytes(30)).decode(), mime_type="image/gif"),
        ImageContent(data=SMALL[:40] + "AAAA" + SMALL[44:], mime_type="image/png"),  # the IHDR's CRC is wrong
    ],
    # whole PNGs labelled as another type the API takes (the API refuses an image whose bytes are not its type)
    "mislabelled_images": [
        ImageContent(data=SMALL, mime_type="image/jpeg"),
        EmbeddedResource(resource=BlobResourceContents(uri="file:///d.webp", blob=SMALL, mime_type="image/webp")),
    ],
    # the same as embedded resources, which a client shows as images too, and text that says it is a PNG
    "corrupt_resource_images": [
        EmbeddedResource(
            resource=BlobResourceContents(
                uri="file:///a.gif", blob=base64.b64encode(b"GIF89a" + bytes(30)).decode(), mime_type="image/gif"
            )
        ),
        EmbeddedResource(
            resource=BlobResourceContents(
                uri="file:///b.png", blob=SMALL[:40] + "AAAA" + SMALL[44:], mime_type="image/png"
            )
        ),
        EmbeddedResource(
            resource=BlobResourceContents(
                uri="file:///c.png", blob=base64.b64encode(b"not a picture").decode(), mime_type="image/png"
            )
        ),
    ],
}


@server.tool(name="show")
def show(case: str) -> CallToolResult:
    """Answer the hostile content named ``case``."""
    return CallToolResult(content=CASES[case])


if __name__ == "__main__":
    server.run()
