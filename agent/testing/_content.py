"""What the real Messages API refuses in a request's content, for the fake (`FakeMessagesAPI`) to refuse it too."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

# The API's numbers, written here again on purpose: the fake is the oracle the tests hold tooltree's own limits
# (`sandbox.results`, `agent.images`) to, so it does not read them from there.
_IMAGE_BASE64_MAX = 5 * 1024 * 1024
_IMAGE_SIDE_MAX, _MANY_IMAGES, _MANY_IMAGES_SIDE_MAX, _IMAGES_MAX = 8000, 20, 2000, 100
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_content(body: Any) -> str | None:
    """What the real API refuses in the content of ``body``'s messages (400 invalid_request_error), or None:
    a string holding a lone surrogate (invalid JSON to the API), a text block empty or of white space only, an
    image that is not base64 of a PNG, JPEG, GIF or WebP that is one (with whole headers: "Could not process
    image"), over 5 MB of base64 or 8,000 pixels a
    side (2,000 when the request holds more than 20 images), more than 100 images in a request."""
    from sandbox._supervisor.image_check import check_image
    from sandbox.results import IMAGE_TYPES, image_size, image_type_matches

    if _has_surrogate(body):
        return "The request body is not valid JSON: no low surrogate in string"
    images: list[tuple[str, tuple[int, int] | None]] = []
    todo: list[tuple[str, Any]] = [(f"messages.{n}", m) for n, m in enumerate(body.get("messages") or [])]
    while todo:
        where, node = todo.pop()
        if isinstance(node, list):
            todo += [(f"{where}.{i}", item) for i, item in enumerate(node)]
            continue
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("content"), list):
            todo.append((f"{where}.content", node["content"]))
        kind = node.get("type")
        if kind == "text" and isinstance(node.get("text"), str):
            if not node["text"]:
                return "messages: text content blocks must be non-empty"
            if node["text"].isspace():
                return "messages: text content blocks must contain non-whitespace text"
        source = node.get("source")
        if kind != "image" or not isinstance(source, dict) or source.get("type") != "base64":
            continue
        media, data = source.get("media_type"), source.get("data")
        if media not in IMAGE_TYPES:
            allowed = "'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
            return f"{where}.source.base64.media_type: Input should be {allowed}"
        if not isinstance(data, str) or len(data) > _IMAGE_BASE64_MAX:
            size = len(data) if isinstance(data, str) else 0
            return f"{where}.source.base64: image exceeds 5 MB maximum: {size} bytes > {_IMAGE_BASE64_MAX} bytes"
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            return f"{where}.source.base64.data: The image data is not valid base64"
        if not image_type_matches(raw, media):
            return f"{where}.source.base64.data: Image does not match the provided media type {media}"
        if check_image(raw, media)[0] is not None:  # the real API decodes it; the fake reads its headers
            return "Could not process image"
        images.append((where, image_size(raw, media)))
    if len(images) > _IMAGES_MAX:
        return f"messages: Too many images in the request: {len(images)} > {_IMAGES_MAX}"
    side = _MANY_IMAGES_SIDE_MAX if len(images) > _MANY_IMAGES else _IMAGE_SIDE_MAX
    for where, dims in images:
        if dims is not None and max(dims) > side:
            many = " for many-image requests" if side == _MANY_IMAGES_SIDE_MAX else ""
            return (
                f"{where}.source.base64.data: At least one of the image dimensions exceed max allowed size{many}: "
                f"{side} pixels"
            )
    return None


def _has_surrogate(value: Any) -> bool:
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, str) and _SURROGATE.search(item):
            return True
        if isinstance(item, dict):
            todo += [*item.keys(), *item.values()]
        elif isinstance(item, list):
            todo += item
    return False
