"""Whole images of each type the Messages API takes, built from their headers: a GIF, a JPEG and WebPs of a given
size whose structure is what a decoder reads first (their pixel data is a token: nothing in the tests decodes it).
PNGs come from `tests.servers.content_server.png`, which the sample servers use too."""

from __future__ import annotations

import struct


def gif(width: int, height: int) -> bytes:
    """A GIF89a of ``width`` × ``height``: logical screen, a 2-colour table, one image, the trailer."""
    screen = struct.pack("<HHBBB", width, height, 0x80, 0, 0) + bytes(6)
    image = b"\x2c" + struct.pack("<HHHHB", 0, 0, width, height, 0) + b"\x02\x02\x44\x01\x00"
    return b"GIF89a" + screen + image + b"\x3b"


def jpeg(width: int, height: int) -> bytes:
    """A baseline JPEG of ``width`` × ``height``: SOI, APP0, SOF0, SOS, a token of scan data, EOI."""
    app0 = b"\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = b"\xff\xc0\x00\x11\x08" + struct.pack(">HH", height, width) + b"\x03\x01\x11\x00\x02\x11\x00\x03\x11\x00"
    sos = b"\xff\xda\x00\x0c\x03\x01\x00\x02\x11\x03\x11\x00\x3f\x00"
    return b"\xff\xd8" + app0 + sof0 + sos + b"\x12\x34\x00\x56" + b"\xff\xd9"


def _riff(*chunks: tuple[bytes, bytes]) -> bytes:
    body = b"".join(kind + struct.pack("<I", len(data)) + data + b"\x00" * (len(data) & 1) for kind, data in chunks)
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


def _vp8l(width: int, height: int) -> bytes:
    return b"\x2f" + struct.pack("<I", (width - 1) | (height - 1) << 14) + b"\x00\x00"


def webp_lossless(width: int, height: int) -> bytes:
    """A WebP of one VP8L chunk (lossless) stating ``width`` × ``height`` (each at most 16,384)."""
    return _riff((b"VP8L", _vp8l(width, height)))


def webp_extended(width: int, height: int) -> bytes:
    """A WebP whose VP8X chunk states a canvas of ``width`` × ``height``, then a VP8L chunk of 1 × 1."""
    vp8x = bytes(4) + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return _riff((b"VP8X", vp8x), (b"VP8L", _vp8l(1, 1)))


def webp_lossy(width: int, height: int) -> bytes:
    """A WebP of one VP8 chunk (lossy) whose key frame states ``width`` × ``height``."""
    frame = b"\x50\x01\x00\x9d\x01\x2a" + struct.pack("<HH", width, height) + bytes(8)
    return _riff((b"VP8 ", frame))


def png_expression(padding: int) -> str:
    """Python source of an expression a script can show: a whole 1 × 1 PNG of ``padding`` + 81 bytes (a ``tEXt``
    chunk of zeros makes up its size)."""
    chunk = "lambda k, d: len(d).to_bytes(4, 'big') + k + d + __import__('zlib').crc32(k + d).to_bytes(4, 'big')"
    header = "bytes.fromhex('00000001000000010802000000')"
    idat = "__import__('zlib').compress(b'')"
    return (
        f"(lambda c: b'\\x89PNG\\r\\n\\x1a\\n' + c(b'IHDR', {header}) + c(b'tEXt', b'pad\\x00' + bytes({padding})) "
        f"+ c(b'IDAT', {idat}) + c(b'IEND', b''))({chunk})"
    )
