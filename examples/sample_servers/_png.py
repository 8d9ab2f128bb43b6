"""A tiny pure-Python PNG encoder and decoder (8-bit RGB only), and a canvas to draw charts on.

Only the standard library: ``zlib`` for the image data, ``struct`` for chunks. The same
pixels and text always encode to the same bytes.
"""

from __future__ import annotations

import itertools
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

SIGNATURE = b"\x89PNG\r\n\x1a\n"

Color = tuple[int, int, int]


class PNGError(ValueError):
    """The bytes are not a PNG this module can read."""


@dataclass
class Canvas:
    """An RGB pixel grid, row-major, white by default."""

    width: int
    height: int
    background: Color = (255, 255, 255)
    pixels: bytearray = field(init=False)

    def __post_init__(self) -> None:
        self.pixels = bytearray(bytes(self.background) * (self.width * self.height))

    def set(self, x: int, y: int, color: Color) -> None:
        """Paint one pixel; points outside the canvas are ignored."""
        if 0 <= x < self.width and 0 <= y < self.height:
            i = 3 * (y * self.width + x)
            self.pixels[i : i + 3] = bytes(color)

    def get(self, x: int, y: int) -> Color:
        """The colour of one pixel."""
        i = 3 * (y * self.width + x)
        r, g, b = self.pixels[i : i + 3]
        return r, g, b

    def fill_rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        """Fill the rectangle with corners (x0, y0) and (x1, y1), both inclusive, clipped to the canvas."""
        x0, x1 = sorted((max(0, x0), min(self.width - 1, x1)))
        y0, y1 = sorted((max(0, y0), min(self.height - 1, y1)))
        row = bytes(color) * (x1 - x0 + 1)
        for y in range(y0, y1 + 1):
            i = 3 * (y * self.width + x0)
            self.pixels[i : i + len(row)] = row

    def line(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        """Draw a one-pixel line (Bresenham)."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        while True:
            self.set(x0, y0, color)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def scaled(self, max_side: int) -> Canvas:
        """A nearest-neighbour copy whose longer side is at most ``max_side`` (never enlarged)."""
        ratio = min(1.0, max_side / max(self.width, self.height))
        out = Canvas(max(1, round(self.width * ratio)), max(1, round(self.height * ratio)))
        for y in range(out.height):
            sy = min(self.height - 1, int(y / ratio))
            for x in range(out.width):
                out.set(x, y, self.get(min(self.width - 1, int(x / ratio)), sy))
        return out


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def encode(canvas: Canvas, text: dict[str, str] | None = None) -> bytes:
    """Encode ``canvas`` as an 8-bit RGB PNG, with optional ``tEXt`` chunks (Latin-1 keys and values)."""
    stride = 3 * canvas.width
    raw = b"".join(b"\x00" + bytes(canvas.pixels[y * stride : (y + 1) * stride]) for y in range(canvas.height))
    out = [SIGNATURE, _chunk(b"IHDR", struct.pack(">IIBBBBB", canvas.width, canvas.height, 8, 2, 0, 0, 0))]
    for key, value in (text or {}).items():
        out.append(_chunk(b"tEXt", key.encode("latin-1", "replace") + b"\x00" + value.encode("latin-1", "replace")))
    out += [_chunk(b"IDAT", zlib.compress(raw, 9)), _chunk(b"IEND", b"")]
    return b"".join(out)


@dataclass(frozen=True)
class PNGInfo:
    """What the header and text chunks of a PNG say."""

    width: int
    height: int
    bit_depth: int
    color_type: int
    text: dict[str, str]
    chunk_types: list[str]


def _chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    if not data.startswith(SIGNATURE):
        raise PNGError("not a PNG: the 8-byte signature is missing")
    chunks: list[tuple[bytes, bytes]] = []
    pos = len(SIGNATURE)
    while pos + 8 <= len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if len(body) != length or pos + 12 + length > len(data):
            raise PNGError(f"truncated {kind!r} chunk at byte {pos}")
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        if crc != zlib.crc32(kind + body) & 0xFFFFFFFF:
            raise PNGError(f"bad CRC in {kind!r} chunk at byte {pos}")
        chunks.append((kind, body))
        pos += 12 + length
        if kind == b"IEND":
            break
    if not chunks or chunks[0][0] != b"IHDR":
        raise PNGError("the first chunk is not IHDR")
    return chunks


def read_info(data: bytes) -> PNGInfo:
    """Read the header and ``tEXt`` chunks of any PNG.

    Raises:
        PNGError: the bytes are not a well-formed PNG.
    """
    chunks = _chunks(data)
    width, height, depth, color_type = struct.unpack(">IIBB", chunks[0][1][:10])
    text: dict[str, str] = {}
    for kind, body in chunks:
        if kind == b"tEXt":
            key, _, value = body.partition(b"\x00")
            text[key.decode("latin-1")] = value.decode("latin-1")
    return PNGInfo(width, height, depth, color_type, text, [kind.decode("latin-1") for kind, _ in chunks])


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode(data: bytes) -> Canvas:
    """Decode an 8-bit, non-interlaced RGB PNG (any filter) into a canvas.

    Raises:
        PNGError: not a PNG, or a kind of PNG this decoder does not read.
    """
    chunks = _chunks(data)
    width, height, depth, color_type, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    if (depth, color_type, interlace) != (8, 2, 0):
        raise PNGError("only 8-bit, non-interlaced RGB PNGs can be decoded")
    try:
        raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    except zlib.error as exc:
        raise PNGError(f"corrupt image data: {exc}") from exc
    stride = 3 * width
    if len(raw) != height * (stride + 1):
        raise PNGError("image data does not match the declared size")
    canvas = Canvas(width, height)
    prev = bytearray(stride)
    for y in range(height):
        kind, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = row[i - 3] if i >= 3 else 0
            up_left = prev[i - 3] if i >= 3 else 0
            predictor = (0, left, prev[i], (left + prev[i]) // 2, _paeth(left, prev[i], up_left))[kind]
            row[i] = (row[i] + predictor) & 0xFF
        canvas.pixels[y * stride : (y + 1) * stride] = row
        prev = row
    return canvas


PALETTE: dict[str, Color] = {
    "blue": (78, 121, 167),
    "orange": (242, 142, 43),
    "green": (89, 161, 79),
    "red": (225, 87, 89),
    "purple": (176, 122, 161),
    "gray": (121, 112, 110),
}
_AXIS: Color = (90, 90, 90)
_GRID: Color = (228, 228, 228)


def chart(values: Sequence[float], kind: str, width: int, height: int, color: Color) -> Canvas:
    """Draw a bar, line or scatter chart of ``values`` on a white canvas with a zero axis and grid lines."""
    canvas = Canvas(width, height)
    pad = 6
    low, high = min(0.0, *values), max(0.0, *values)
    span = (high - low) or 1.0

    def y_of(v: float) -> int:
        return pad + round((high - v) / span * (height - 1 - 2 * pad))

    for i in range(1, 4):
        canvas.line(pad, pad + i * (height - 2 * pad) // 4, width - 1 - pad, pad + i * (height - 2 * pad) // 4, _GRID)
    zero = y_of(0.0)
    slot = (width - 2 * pad) / len(values)
    centers = [pad + round(slot * (i + 0.5)) for i in range(len(values))]
    if kind == "bar":
        half = max(0, round(slot * 0.35) - 1)
        for cx, v in zip(centers, values, strict=True):
            canvas.fill_rect(cx - half, y_of(v), cx + half, zero, color)
    elif kind == "line":
        points = [(cx, y_of(v)) for cx, v in zip(centers, values, strict=True)]
        for (xa, ya), (xb, yb) in itertools.pairwise(points):
            canvas.line(xa, ya, xb, yb, color)
        for x, y in points:
            canvas.fill_rect(x - 1, y - 1, x + 1, y + 1, color)
    else:
        for cx, v in zip(centers, values, strict=True):
            canvas.fill_rect(cx - 2, y_of(v) - 2, cx + 2, y_of(v) + 2, color)
    canvas.line(pad, zero, width - 1 - pad, zero, _AXIS)
    canvas.line(pad, pad, pad, height - 1 - pad, _AXIS)
    return canvas


def gradient(width: int, height: int, start: Color, end: Color) -> Canvas:
    """A left-to-right gradient between two colours."""
    canvas = Canvas(width, height)
    for x in range(width):
        t = x / max(1, width - 1)
        color = (
            round(start[0] + (end[0] - start[0]) * t),
            round(start[1] + (end[1] - start[1]) * t),
            round(start[2] + (end[2] - start[2]) * t),
        )
        canvas.fill_rect(x, 0, x, height - 1, color)
    return canvas


def checkerboard(width: int, height: int, cell: int, a: Color, b: Color) -> Canvas:
    """A checkerboard of ``cell``-pixel squares."""
    canvas = Canvas(width, height)
    for y in range(0, height, cell):
        for x in range(0, width, cell):
            canvas.fill_rect(x, y, x + cell - 1, y + cell - 1, a if (x // cell + y // cell) % 2 == 0 else b)
    return canvas
