"""A sample MCP server: charts and images, plus tools that fail, take time, report progress or wait for each other.

Run: ``python examples/sample_servers/media.py`` (stdio) or ``... media.py --http --port 8765`` (Streamable HTTP).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from typing import Annotated, Literal

import _png
import anyio
from _common import serve
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

server = MCPServer(
    "media",
    title="Chart & Image Service",
    description="Renders charts as PNG images, inspects and resizes images; includes diagnostic tools.",
    instructions="render_chart returns a PNG. Images in the gallery (list_gallery) can be inspected or "
    "thumbnailed by id; any PNG can also be passed inline as base64.",
    version="1.8.3",
    log_level="WARNING",
)
_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
ColorName = Literal["blue", "orange", "green", "red", "purple", "gray"]


@dataclass(frozen=True)
class _Entry:
    title: str
    png: bytes


def _seed_gallery() -> dict[str, _Entry]:
    forecast = _png.chart([4.1, 3.2, 2.7, 1.4, 0.9], "bar", 320, 180, _png.PALETTE["blue"])
    gradient = _png.gradient(160, 90, (255, 94, 58), (88, 40, 160))
    board = _png.checkerboard(64, 64, 8, (30, 30, 30), (235, 235, 235))
    return {
        "img_q3_forecast": _Entry("Q3 commit by region ($M)", _png.encode(forecast, {"Title": "Q3 commit by region"})),
        "img_brand_gradient": _Entry("Brand gradient", _png.encode(gradient, {"Title": "Brand gradient"})),
        "img_checkerboard": _Entry("Calibration checkerboard", _png.encode(board)),
    }


GALLERY = _seed_gallery()


class GalleryImage(BaseModel):
    """An image stored in the gallery, by id."""

    kind: Literal["gallery"] = Field(description="Always 'gallery'.")
    image_id: str = Field(description="Gallery id, e.g. 'img_q3_forecast'.")


class InlineImage(BaseModel):
    """An image passed in the request."""

    kind: Literal["inline"] = Field(description="Always 'inline'.")
    data: str = Field(description="Base64-encoded PNG bytes.")


ImageSource = Annotated[GalleryImage | InlineImage, Field(discriminator="kind")]


class ImageInfo(BaseModel):
    """What a PNG's header says, plus its size and checksum."""

    mime_type: Literal["image/png"] = "image/png"
    width: int
    height: int
    bit_depth: int
    color_type: Literal["grayscale", "rgb", "palette", "grayscale_alpha", "rgba"]
    size_bytes: int
    sha256: str
    text: dict[str, str] = Field(description="tEXt chunks, e.g. {'Title': ...}.")
    chunks: list[str] = Field(description="Chunk types in file order.")


_COLOR_TYPES: dict[int, Literal["grayscale", "rgb", "palette", "grayscale_alpha", "rgba"]] = {
    0: "grayscale",
    2: "rgb",
    3: "palette",
    4: "grayscale_alpha",
    6: "rgba",
}


def _load(source: GalleryImage | InlineImage) -> tuple[str, bytes]:
    if isinstance(source, GalleryImage):
        entry = GALLERY.get(source.image_id)
        if entry is None:
            raise ToolError(f"No image {source.image_id!r} in the gallery. Call list_gallery for the ids.")
        return source.image_id, entry.png
    try:
        return "inline image", base64.b64decode(source.data, validate=True)
    except binascii.Error as exc:
        raise ToolError(f"The inline image is not valid base64: {exc}") from None


@server.tool(annotations=_READ_ONLY)
async def render_chart(
    title: Annotated[str, Field(max_length=200, description="Stored in the PNG's Title text chunk.")],
    values: Annotated[list[float], Field(min_length=1, max_length=200, description="One value per bar or point.")],
    kind: Literal["bar", "line", "scatter"] = "bar",
    width: Annotated[int, Field(ge=32, le=1024)] = 200,
    height: Annotated[int, Field(ge=32, le=1024)] = 120,
    color: ColorName = "blue",
) -> Image:
    """Render a chart of the values as a PNG image.

    Draws a bar, line or scatter chart with a zero axis and light grid lines on a white
    background. The same arguments always give the same bytes. The image is also added to the
    gallery under an id derived from its content, so get_image_info and thumbnail can use it.
    """
    canvas = _png.chart(values, kind, width, height, _png.PALETTE[color])
    png = _png.encode(canvas, {"Title": title, "Software": "northpeak-charts 1.8"})
    GALLERY["img_" + hashlib.sha256(png).hexdigest()[:10]] = _Entry(title, png)
    return Image(data=png, format="png")


@server.tool(annotations=_READ_ONLY, structured_output=False)
async def list_gallery() -> str:
    """List the images in the gallery: id, title, size in pixels and bytes.

    Charts made with render_chart are added as they are rendered.
    """
    rows = []
    for image_id, entry in GALLERY.items():
        info = _png.read_info(entry.png)
        rows.append(
            {"id": image_id, "title": entry.title, "width": info.width, "height": info.height, "bytes": len(entry.png)}
        )
    return json.dumps({"images": rows})


@server.tool(annotations=_READ_ONLY)
async def get_image_info(source: ImageSource) -> ImageInfo:
    """Inspect a PNG from the gallery or passed inline: dimensions, colour type, text chunks, checksum.

    Only the header and text chunks are read, so any valid PNG works, including ones this
    service could not draw.
    """
    _, data = _load(source)
    try:
        info = _png.read_info(data)
    except _png.PNGError as exc:
        raise ToolError(str(exc)) from None
    return ImageInfo(
        width=info.width,
        height=info.height,
        bit_depth=info.bit_depth,
        color_type=_COLOR_TYPES.get(info.color_type, "rgb"),
        size_bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        text=info.text,
        chunks=info.chunk_types,
    )


@server.tool(annotations=_READ_ONLY)
async def thumbnail(
    source: ImageSource,
    max_size: Annotated[int, Field(ge=8, le=512, description="Longest side of the thumbnail, in pixels.")] = 64,
) -> tuple[Image, str]:
    """Make a smaller copy of an image (nearest-neighbour), returned as a PNG with a one-line caption.

    Images are never enlarged. Works on 8-bit RGB PNGs, which is what render_chart produces.
    """
    name, data = _load(source)
    try:
        canvas = _png.decode(data)
    except _png.PNGError as exc:
        raise ToolError(str(exc)) from None
    small = canvas.scaled(max_size)
    caption = f"Thumbnail of {name}: {small.width}x{small.height} (from {canvas.width}x{canvas.height})."
    return Image(data=_png.encode(small), format="png"), caption


@server.tool(structured_output=False)
async def fail(
    message: Annotated[str, Field(description="The error text to report.")],
    kind: Annotated[
        Literal["tool_error", "unexpected", "protocol_error"],
        Field(
            description="'tool_error': a result with isError and the message; 'unexpected': an isError result "
            "with a generic message (the text stays on the server); 'protocol_error': a JSON-RPC error response."
        ),
    ] = "tool_error",
) -> str:
    """Always fail, in the requested way. A diagnostic tool for testing how clients handle errors."""
    if kind == "protocol_error":
        raise MCPError(code=-32000, message=message)
    if kind == "unexpected":
        raise RuntimeError(message)
    raise ToolError(message)


@server.tool(annotations=_READ_ONLY, structured_output=False)
async def slow_echo(
    text: str,
    seconds: Annotated[float, Field(ge=0, le=60, description="How long to wait before answering.")] = 0.2,
) -> str:
    """Wait for the given number of seconds, then return the text unchanged.

    Calls run concurrently: several slow_echo calls made at once finish in about the time of one.
    """
    await anyio.sleep(seconds)
    return text


@server.tool(annotations=_READ_ONLY, structured_output=False)
async def long_task(
    ctx: Context,
    steps: Annotated[int, Field(ge=1, le=1000)] = 5,
    step_seconds: Annotated[float, Field(ge=0, le=10, description="Work time per step.")] = 0.01,
) -> str:
    """Run a job of several steps, sending a progress notification after each one.

    Progress is reported as (completed steps, total steps) with a message, to callers that asked
    for progress. Returns a summary when all steps are done.
    """
    for step in range(1, steps + 1):
        await anyio.sleep(step_seconds)
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return f"long_task finished {steps} steps"


_WAITING: dict[str, tuple[list[int], anyio.Event]] = {}


@server.tool(annotations=_READ_ONLY, structured_output=False)
async def rendezvous(
    group: Annotated[str, Field(min_length=1, description="Calls with the same group wait for each other.")],
    parties: Annotated[int, Field(ge=2, le=64, description="How many calls must arrive before all return.")],
    timeout: Annotated[float, Field(gt=0, le=120, description="Seconds to wait for the others.")] = 10.0,
) -> str:
    """Return only when `parties` calls with the same group are in progress at once.

    A diagnostic tool that proves calls run concurrently without timing anything: made one after
    another, the calls time out with an error; made in parallel, they all return.
    """
    arrived, released = _WAITING.setdefault(group, ([0], anyio.Event()))
    arrived[0] += 1
    if arrived[0] >= parties:
        del _WAITING[group]
        released.set()
    with anyio.move_on_after(timeout):
        await released.wait()
    if not released.is_set():
        arrived[0] -= 1
        raise ToolError(f"Only {arrived[0] + 1} of {parties} calls in group {group!r} arrived within {timeout} s.")
    return f"group {group!r}: {parties} parties met"


if __name__ == "__main__":
    serve(server)
