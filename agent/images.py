"""The Messages API's limits on the images of one request, kept as a conversation grows.

Each result holds its own images to the API's rules (`sandbox.results.ImageBudget`), but the limits of a request
count the whole conversation: at most `MAX_REQUEST_IMAGES` images, and none over `MANY_IMAGES_SIDE` pixels a side
once there are more than `MANY_IMAGES`. A conversation past either would be refused with a 400 on every later
request. So the request's copy of the messages has the oldest images that break a limit replaced by a note (the
conversation itself keeps them); nothing changes while the limits hold, so the prompt cache is kept until then.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Sequence
from typing import Any

from sandbox.results import image_size

MANY_IMAGES = 20
MANY_IMAGES_SIDE = 2000
MAX_REQUEST_IMAGES = 100
HEADER_BASE64 = 256 * 1024
"""Base64 characters decoded to read an image's size from its header (a JPEG's frame may follow its EXIF)."""
LEFT_OUT = (
    "[an image shown earlier, left out of this request: the API takes at most {most} images in one, and none over "
    "{side:,} pixels a side once there are more than {many}]"
)

Place = tuple[int, int, int | None]
"""An image's place: message, block, and the block inside a ``tool_result`` (None: the message's own block)."""


def within_image_limits(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` (copied where an image is replaced) within the API's image limits: the oldest images over
    `MANY_IMAGES_SIDE` pixels go while there are more than `MANY_IMAGES`, then the oldest ones past
    `MAX_REQUEST_IMAGES`."""
    places = list(_images(messages))
    drop: set[Place] = set()
    if len(places) > MANY_IMAGES:
        for place, block in places:
            if len(places) - len(drop) <= MANY_IMAGES:
                break
            side = _side(block)
            if side is not None and side > MANY_IMAGES_SIDE:
                drop.add(place)
    excess = len(places) - len(drop) - MAX_REQUEST_IMAGES
    for place, _ in places:
        if excess <= 0:
            break
        if place not in drop:
            drop.add(place)
            excess -= 1
    if not drop:
        return list(messages)
    note = {"type": "text", "text": LEFT_OUT.format(most=MAX_REQUEST_IMAGES, side=MANY_IMAGES_SIDE, many=MANY_IMAGES)}
    out = list(messages)
    for m, b, inner in sorted(drop):
        message = out[m] = dict(out[m])
        content = message["content"] = list(message["content"])
        if inner is None:
            content[b] = dict(note)
        else:
            result = content[b] = dict(content[b])
            blocks = result["content"] = list(result["content"])
            blocks[inner] = dict(note)
    return out


def _images(messages: Sequence[dict[str, Any]]) -> Iterator[tuple[Place, dict[str, Any]]]:
    for m, message in enumerate(messages):
        content = message.get("content")
        for b, block in enumerate(content if isinstance(content, list) else ()):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "image":
                yield (m, b, None), block
            elif block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                for i, inner in enumerate(block["content"]):
                    if isinstance(inner, dict) and inner.get("type") == "image":
                        yield (m, b, i), inner


def _side(block: dict[str, Any]) -> int | None:
    """The longer side of a base64 image block, from its header; None when it cannot be read."""
    source = block.get("source")
    if not isinstance(source, dict) or not isinstance(source.get("data"), str):
        return None
    data = source["data"][:HEADER_BASE64]
    try:
        raw = base64.b64decode(data[: len(data) // 4 * 4])
    except (binascii.Error, ValueError):
        return None
    dims = image_size(raw, str(source.get("media_type")))
    return max(dims) if dims is not None else None
