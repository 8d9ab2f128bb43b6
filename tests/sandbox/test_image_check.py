"""An image is checked by its headers, not by its signature alone (`sandbox._supervisor.image_check`): what the
Messages API cannot process ("Could not process image", on every later request of the conversation) is refused
saying what is wrong; whole images of every type pass with their size."""

from __future__ import annotations

import base64
import struct
import zlib

import pytest

from sandbox._supervisor.image_check import MAX_STEPS, check_image
from tests import image_samples
from tests.servers.content_server import png

PNG = base64.b64decode(png(3, 2))


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def test_whole_images_of_every_type_pass_with_their_size() -> None:
    assert check_image(PNG, "image/png") == (None, (3, 2))
    assert check_image(image_samples.gif(5, 4), "image/gif") == (None, (5, 4))
    assert check_image(image_samples.jpeg(7, 6), "image/jpeg") == (None, (7, 6))
    assert check_image(image_samples.webp_lossless(9, 8), "image/webp") == (None, (9, 8))
    assert check_image(image_samples.webp_lossy(11, 10), "image/webp") == (None, (11, 10))
    assert check_image(image_samples.webp_extended(13, 12), "image/webp") == (None, (13, 12))
    assert check_image(PNG + b"trailing bytes", "image/png") == (None, (3, 2))  # as decoders read it


@pytest.mark.parametrize(
    ("data", "mime", "problem"),
    [
        (b"GIF89a" + bytes(30), "image/gif", "the GIF's logical screen is 0×0 pixels"),
        (b"GIF89a\x01\x00\x01\x00" + bytes(30), "image/gif", "the GIF's blocks are corrupt (byte 13 starts no block)"),
        (image_samples.gif(5, 4)[:-12], "image/gif", "the GIF is cut short (in its first image's descriptor)"),
        (b"GIF89a\x01\x00\x01\x00\x00\x00\x00\x3b", "image/gif", "the GIF holds no image (its trailer comes first)"),
        (b"\x89PNG\r\n\x1a\n" + bytes(30), "image/png", "the PNG does not begin with its IHDR chunk"),
        (PNG[:29] + b"\0\0\0\0" + PNG[33:], "image/png", "the PNG's IHDR chunk is corrupt (CRC mismatch)"),
        (PNG[:50], "image/png", "the PNG is cut short (its 'IDAT' chunk ends past its 50 bytes)"),
        (PNG[:-12], "image/png", "the PNG is cut short (no IEND chunk)"),
        (PNG[:33] + chunk(b"IEND", b""), "image/png", "the PNG holds no image data (no IDAT chunk)"),
        (
            b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 3, 2, 7, 2, 0, 0, 0)) + PNG[33:],
            "image/png",
            "the PNG's IHDR chunk is corrupt (bit depth 7 with colour type 2)",
        ),
        (
            b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 0, 2, 8, 2, 0, 0, 0)) + PNG[33:],
            "image/png",
            "the PNG says it is 0×2 pixels",
        ),
        (
            b"\xff\xd8\xff\xe0" + bytes(30),
            "image/jpeg",
            "the JPEG is cut short (its segment at byte 2 ends past its 34 bytes)",
        ),
        (
            image_samples.jpeg(7, 6)[:-2],
            "image/jpeg",
            "the JPEG is cut short (no end-of-image marker after its image data)",
        ),
        (
            b"\xff\xd8\xff\xda\x00\x02\xff\xd9",
            "image/jpeg",
            "the JPEG has no frame header (SOF marker) before its image data",
        ),
        (
            b"\xff\xd8\xff\xd9",
            "image/jpeg",
            "the JPEG's markers are corrupt (marker 0xD9 at byte 2 before its image data)",
        ),
        (image_samples.jpeg(0, 6), "image/jpeg", "the JPEG says it is 0×6 pixels"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 " + bytes(20), "image/webp", "the WebP's RIFF header says 8 bytes, not its 36"),
        (image_samples.webp_lossless(9, 8)[:-4], "image/webp", "the WebP's RIFF header says 28 bytes, not its 24"),
        (
            image_samples.webp_lossy(11, 10)[:23] + b"\0\0\0" + image_samples.webp_lossy(11, 10)[26:],
            "image/webp",
            "the WebP's VP8 chunk is corrupt (no key frame header)",
        ),
        (image_samples.webp_lossy(0, 10), "image/webp", "the WebP says it is 0×10 pixels"),
        (
            image_samples.webp_extended(13, 12)[:30] + b"XXXX" + image_samples.webp_extended(13, 12)[34:],
            "image/webp",
            "the WebP holds no image (no VP8, VP8L or ANMF chunk)",
        ),
        (
            b"RIFF\x0c\x00\x00\x00WEBPABCD\x00\x00\x00\x00",
            "image/webp",
            "the WebP's first chunk is 'ABCD', not VP8, VP8L or VP8X",
        ),
    ],
)
def test_an_image_only_its_signature_makes_is_refused_saying_what_is_wrong(
    data: bytes, mime: str, problem: str
) -> None:
    # Before: anything that started with a signature passed (`GIF89a` and 30 zero bytes was an image/gif), and the
    # Messages API refused the conversation from then on.
    assert check_image(data, mime) == (problem, None)


def test_the_walk_of_a_hostile_image_stops_after_max_steps() -> None:
    # 3.75 MB of empty chunks, markers or blocks: at most MAX_STEPS are walked, not hundreds of thousands.
    many = PNG[:33] + chunk(b"tEXt", b"") * (MAX_STEPS + 10) + PNG[33:]
    assert check_image(many, "image/png") == (None, (3, 2))  # past the walk, a whole PNG still ends with IEND
    assert check_image(many[:-12], "image/png")[0] == "the PNG is cut short (no IEND chunk)"
    fill = b"\xff\xd8" + b"\xff" * (2 * MAX_STEPS)
    assert (
        check_image(fill, "image/jpeg")[0]
        == f"the JPEG's markers are corrupt (more than {MAX_STEPS:,} before its image data)"
    )
