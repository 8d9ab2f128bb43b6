"""Whether PNG, JPEG, GIF or WebP bytes are an image a decoder can read, from their headers alone (`check_image`).

A signature is not an image: ``b'GIF89a' + bytes(30)`` starts as a GIF, and the Messages API refuses it ("Could not
process image") on that request and on every later one of the conversation. So the structure around the pixels is
checked: a PNG's IHDR chunk (its CRC, a size and a bit depth a PNG may have), its chunks up to IEND with an IDAT
among them; a JPEG's markers up to its first scan, a frame header (SOFn) with a size before it and an end-of-image
marker after; a GIF's logical screen and its blocks up to its first image; a WebP's RIFF size and its VP8, VP8L or
VP8X chunk with a size. Pixel data is not decoded: the cost is that of the headers (a walk of at most `MAX_STEPS`
chunks, markers or blocks), whatever the image's size.

Standard library only: the container's ``show_image`` and the host's `sandbox.results.ImageBudget` use it alike.
"""

from __future__ import annotations

import struct
import zlib

MAX_STEPS = 65_536
"""Chunks, markers or blocks walked at most (a real image has a few dozen); past them the rest is not looked at."""

_PNG_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
_PNG_IEND = b"\x00\x00\x00\x00IEND\xaeB`\x82"


def check_image(data: bytes, mime: str) -> tuple[str | None, tuple[int, int] | None]:
    """What makes ``data`` (which starts as a ``mime`` image must) no image a decoder reads ("the PNG's IHDR chunk
    is corrupt (CRC mismatch)"), or None and the width and height its headers state."""
    check = {"image/png": _png, "image/jpeg": _jpeg, "image/gif": _gif, "image/webp": _webp}.get(mime)
    if check is None:
        return f"{mime} is not an image type that is checked", None
    try:
        result = check(data)
    except (struct.error, IndexError):  # a header cut inside a field
        return f"the {_NAMES[mime]} is cut short ({len(data):,} bytes)", None
    if isinstance(result, str):
        return result, None
    width, height = result
    if width <= 0 or height <= 0:
        return f"the {_NAMES[mime]} says it is {width}×{height} pixels", None
    return None, result


_NAMES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP"}


def _png(data: bytes) -> tuple[int, int] | str:
    if data[8:16] != b"\x00\x00\x00\x0dIHDR":
        return "the PNG does not begin with its IHDR chunk"
    if len(data) < 33:
        return f"the PNG is cut short ({len(data):,} bytes)"
    if zlib.crc32(data[12:29]) != struct.unpack(">I", data[29:33])[0]:
        return "the PNG's IHDR chunk is corrupt (CRC mismatch)"
    width, height, depth, colour, compression, filtering, interlace = struct.unpack(">IIBBBBB", data[16:29])
    if width >= 1 << 31 or height >= 1 << 31:
        return f"the PNG's IHDR chunk is corrupt (it says {width}×{height} pixels)"
    if depth not in _PNG_DEPTHS.get(colour, ()) or compression or filtering or interlace > 1:
        return f"the PNG's IHDR chunk is corrupt (bit depth {depth} with colour type {colour})"
    pos, image_data = 33, False
    for _ in range(MAX_STEPS):
        if pos + 12 > len(data):
            return "the PNG is cut short (no IEND chunk)"
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if pos + 12 + length > len(data):
            return f"the PNG is cut short (its {kind.decode('latin-1')!r} chunk ends past its {len(data):,} bytes)"
        if kind == b"IEND":
            return (width, height) if image_data else "the PNG holds no image data (no IDAT chunk)"
        image_data = image_data or kind == b"IDAT"
        pos += 12 + length
    # More chunks than a real PNG has: the rest is not walked; a whole PNG still ends with IEND.
    return (width, height) if _PNG_IEND in data[-64:] else "the PNG is cut short (no IEND chunk)"


def _jpeg(data: bytes) -> tuple[int, int] | str:
    i, size = 2, None
    for _ in range(MAX_STEPS):
        if i + 2 > len(data):
            return "the JPEG is cut short (it ends before its image data)"
        if data[i] != 0xFF:
            return f"the JPEG's markers are corrupt (byte {i:,} is not a marker)"
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if 0xD0 <= marker <= 0xD7 or marker == 0x01:  # markers without a length
            i += 2
            continue
        if marker in (0x00, 0xD8, 0xD9):
            return f"the JPEG's markers are corrupt (marker 0x{marker:02X} at byte {i:,} before its image data)"
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        if length < 2 or i + 2 + length > len(data):
            return f"the JPEG is cut short (its segment at byte {i:,} ends past its {len(data):,} bytes)"
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            if length < 8 + 3 * data[i + 9] or not 1 <= data[i + 9] <= 4:
                return "the JPEG's frame header (SOF) is corrupt"
            size = (width, height)
        elif marker == 0xDA:  # start of scan: the image data follows
            if size is None:
                return "the JPEG has no frame header (SOF marker) before its image data"
            if data.rfind(b"\xff\xd9") < i + 2 + length:
                return "the JPEG is cut short (no end-of-image marker after its image data)"
            return size
        i += 2 + length
    return f"the JPEG's markers are corrupt (more than {MAX_STEPS:,} before its image data)"


def _gif(data: bytes) -> tuple[int, int] | str:
    width, height, packed = struct.unpack("<HHB", data[6:11])
    if not width or not height:
        return f"the GIF's logical screen is {width}×{height} pixels"
    if len(data) < 13:
        return f"the GIF is cut short ({len(data):,} bytes)"
    pos = 13 + (3 << ((packed & 7) + 1) if packed & 0x80 else 0)
    in_extension = False
    for _ in range(MAX_STEPS):
        if pos >= len(data):
            return "the GIF is cut short (it ends before its first image)"
        if in_extension:  # the extension's sub-blocks, up to an empty one
            in_extension = data[pos] != 0
            pos += 1 + data[pos]
            continue
        block = data[pos]
        if block == 0x2C:  # image descriptor
            if pos + 11 > len(data):
                return "the GIF is cut short (in its first image's descriptor)"
            return width, height
        if block == 0x3B:
            return "the GIF holds no image (its trailer comes first)"
        if block != 0x21:
            return f"the GIF's blocks are corrupt (byte {pos:,} starts no block)"
        pos, in_extension = pos + 2, True  # the extension's introducer and label
    return width, height  # more blocks than a real GIF has: the rest is not walked


def _webp(data: bytes) -> tuple[int, int] | str:
    (riff,) = struct.unpack("<I", data[4:8])
    if riff < 12 or riff + 8 > len(data):
        return f"the WebP's RIFF header says {riff + 8:,} bytes, not its {len(data):,}"
    end = riff + 8
    kind, (length,) = data[12:16], struct.unpack("<I", data[16:20])
    if 20 + length > end:
        return f"the WebP is cut short (its {kind.decode('latin-1')!r} chunk ends past its RIFF data)"
    body = data[20 : 20 + length]
    if kind == b"VP8 ":
        if len(body) < 10 or body[0] & 1 or body[3:6] != b"\x9d\x01\x2a":
            return "the WebP's VP8 chunk is corrupt (no key frame header)"
        width, height = struct.unpack("<HH", body[6:10])
        return width & 0x3FFF, height & 0x3FFF
    if kind == b"VP8L":
        if len(body) < 5 or body[0] != 0x2F:
            return "the WebP's VP8L chunk is corrupt (no signature)"
        (bits,) = struct.unpack("<I", body[1:5])
        if bits >> 29:
            return "the WebP's VP8L chunk is corrupt (an unknown version)"
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if kind == b"VP8X":
        if len(body) < 10:
            return "the WebP's VP8X chunk is cut short"
        size = 1 + int.from_bytes(body[4:7], "little"), 1 + int.from_bytes(body[7:10], "little")
        pos = 20 + length + (length & 1)
        for _ in range(MAX_STEPS):
            if pos + 8 > end:
                return "the WebP holds no image (no VP8, VP8L or ANMF chunk)"
            if data[pos : pos + 4] in (b"VP8 ", b"VP8L", b"ANMF"):
                return size
            (length,) = struct.unpack("<I", data[pos + 4 : pos + 8])
            pos += 8 + length + (length & 1)
        return size
    return f"the WebP's first chunk is {kind.decode('latin-1')!r}, not VP8, VP8L or VP8X"
