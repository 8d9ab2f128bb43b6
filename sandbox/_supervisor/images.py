"""What a script's ``show_image`` accepts, read into checked image bytes (`images_of`); the worker sends them
(`sandbox._supervisor.worker.show_image`, which counts them against the execution's limits). Also the worker's reads
of a file without following a symlink (`read_regular_file`).
"""

from __future__ import annotations

import base64
import io
import os
import stat
from collections.abc import Iterator
from typing import Any

from .image_check import check_image
from .limits import MAX_IMAGE_BYTES, MAX_IMAGE_SIDE

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def sniff_image_type(data: bytes) -> str | None:
    """The MIME type of PNG, JPEG, GIF or WebP bytes, else None."""
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


class FileTooLarge(OSError):
    """A file larger than a read takes (`read_regular_file`); ``size``: its bytes, or None when it grew past the limit
    while read."""

    def __init__(self, message: str, size: int | None) -> None:
        super().__init__(message)
        self.size = size


def read_regular_file(path: str, max_bytes: int) -> bytes:
    """Read a regular file without following a symlink at its last component.

    Raises:
        OSError: missing, a symlink, not a regular file, or larger than ``max_bytes``.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path}: not a regular file")
        if info.st_size > max_bytes:
            raise FileTooLarge(f"{path}: {info.st_size} bytes is over the {max_bytes}-byte limit", info.st_size)
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, 1 << 20):
            total += len(chunk)
            if total > max_bytes:
                raise FileTooLarge(f"{path}: over the {max_bytes}-byte limit", None)
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


_ACCEPTED = (
    "a path, bytes, an image object (a tool result's .images[i], a figure), an MCP image content block "
    "({'type': 'image', 'data': <base64>, 'mimeType': ...}), a tool result with images (or a tool's structured "
    "result of image blocks, {'content': [...]}), or a list of these"
)


def _block_bytes(block: dict[Any, Any]) -> bytes:
    """The image of an MCP image content block, such as a tool's structured output holds (server-filesystem's
    ``read_media_file``); before, a dict was refused. Its base64 is decoded strictly, its size checked first."""
    if block.get("type") != "image":
        raise TypeError(f"show_image() takes {_ACCEPTED}, not a dict with type {str(block.get('type'))[:40]!r}")
    data = block.get("data")
    if not isinstance(data, str):
        raise ValueError("show_image(): the image block's 'data' is not a base64 string")
    if len(data) > (MAX_IMAGE_BYTES + 2) // 3 * 4:  # larger than any base64 of an image within the limit
        raise _too_large(f"the image block's data is {len(data):,} characters of base64")
    try:
        return base64.b64decode(data, validate=True)
    except ValueError:  # binascii.Error, and non-ASCII characters
        raise ValueError("show_image(): the image block's 'data' is not valid base64") from None


def _too_large(what: str) -> ValueError:
    """Why an image is refused for its size, and what to do (as a result's note says of one left out:
    `sandbox.results.ImageBudget`). Before: "5881918 bytes is over the 3932160-byte limit", and nothing more."""
    return ValueError(
        f"show_image(): {what}, over the {MAX_IMAGE_BYTES:,} bytes one image may have: show it smaller (fewer pixels, "
        "or as JPEG)"
    )


def _is_tool_result(value: Any) -> bool:
    """Whether ``value`` is a tool call's result (`tool_tree.runtime.ToolResult`, not imported here)."""
    return type(value).__name__ == "ToolResult" and hasattr(value, "images") and hasattr(value, "content")


def _image_bytes(image: Any) -> tuple[bytes, str | None]:
    if isinstance(image, dict):
        return _block_bytes(image), None
    if isinstance(image, (bytes, bytearray, memoryview)):
        return bytes(image), None
    if isinstance(image, (str, os.PathLike)):
        path = os.fspath(image)
        try:
            return read_regular_file(path, MAX_IMAGE_BYTES), None
        except FileTooLarge as e:
            raise _too_large(f"{path} is {e.size:,} bytes" if e.size is not None else f"{path} grew past it") from None
    data, mime = getattr(image, "data", None), getattr(image, "mime_type", None)
    if isinstance(data, bytes):
        return data, mime if isinstance(mime, str) else None
    if hasattr(image, "savefig"):  # a matplotlib figure
        buf = io.BytesIO()
        image.savefig(buf, format="png")
        return buf.getvalue(), "image/png"
    if hasattr(image, "save"):  # a PIL image
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        return buf.getvalue(), "image/png"
    raise TypeError(f"show_image() takes {_ACCEPTED}, not {type(image).__name__}")


def images_of(image: Any) -> Iterator[tuple[bytes, str]]:
    """The images ``image`` holds, in order, each as ``(data, its MIME type)``, read and checked one at a time (so
    that those before a bad one are shown): a file path, PNG/JPEG/GIF/WebP bytes, a tool's image, an MCP image content
    block (a dict), or a figure; a tool result (``ToolResult``), a tool's structured result (the images of the result
    it came from, or else the blocks its ``content`` lists, as server-filesystem's ``read_media_file``'s), or a list
    or tuple of these (not nested).

    Raises:
        ValueError: not a supported image, too large (in bytes, or over `MAX_IMAGE_SIDE` pixels a side), or its
            headers not whole (`image_check`: "the PNG's IHDR chunk is corrupt (CRC mismatch)"); a tool result or a
            list without an image.
        TypeError: an argument of an unsupported kind.
        OSError: the file cannot be read.
    """
    result: Any = getattr(image, "tool_result", None)
    if (
        isinstance(image, dict)
        and _is_tool_result(result)
        and (result.images or not isinstance(image.get("content"), list))
    ):
        # A stub's structured result (`tool_tree.runtime.StructuredResult`): the images of the result it came from,
        # which its dict may not hold (before: "not a dict with type None", though the tool returned an image)
        image = result
    if isinstance(image, dict) and "type" not in image and isinstance(image.get("content"), list):
        # A structured result of content blocks, as read_media_file's stub returns (before: "not a dict with type None")
        image = [b for b in image["content"] if isinstance(b, dict) and b.get("type") == "image"]
        if not image:
            raise ValueError("show_image(): the structured result's content holds no image block")
    if isinstance(image, list | tuple) or _is_tool_result(image):
        images = list(image.images if _is_tool_result(image) else image)
        if not images:
            what = "tool result holds" if _is_tool_result(image) else f"{type(image).__name__} holds"
            raise ValueError(f"show_image(): the {what} no image")
        for one in images:
            if isinstance(one, list | tuple) or _is_tool_result(one):
                raise TypeError(f"show_image() takes {_ACCEPTED}, not a {type(one).__name__} inside a list")
            yield from images_of(one)
        return
    data, _ = _image_bytes(image)
    mime = sniff_image_type(data)
    if mime is None:
        # A file is named (before: "the data is …" of a path too); an empty one is said to be empty (a file not yet
        # written or closed, a figure saved elsewhere), not to be of another type.
        what = os.fspath(image) if isinstance(image, (str, os.PathLike)) else "the data"
        if not data:
            raise ValueError(f"show_image(): {what} is empty (0 bytes)")
        raise ValueError(f"show_image(): {what} is not a PNG, JPEG, GIF or WebP image")
    if len(data) > MAX_IMAGE_BYTES:
        raise _too_large(f"the image is {len(data):,} bytes")
    problem, dims = check_image(data, mime)
    if problem is not None:
        # Before: anything starting with a signature was shown (b'GIF89a' + bytes(30) as an image/gif), and the
        # Messages API then refused the conversation ("Could not process image"), where the script could not act.
        raise ValueError(f"show_image(): {problem}")
    if dims is not None and max(dims) > MAX_IMAGE_SIDE:
        # Before: shown, then left out by the host with a note the script never saw (the host still checks).
        raise ValueError(
            f"show_image(): the image is {dims[0]:,}×{dims[1]:,} pixels, over the {MAX_IMAGE_SIDE:,} pixels a side the "
            "Messages API takes: show it smaller (fewer pixels, or cut into parts)"
        )
    yield data, mime
