"""A stated local approximation of token counts, applied the same way to every mode.

Used by the fake Messages API for its ``usage`` blocks and ``count_tokens`` answers, and by the
benchmarks when no API key is set (with a key they ask the real ``count_tokens`` endpoint).

The rules:

- text (system prompt, messages, tool results): one token per 4 characters, rounded up;
- a tool definition or a ``tool_use`` input: its compact JSON, 4 characters per token
  (``cache_control`` markers are not counted);
- a tool with ``defer_loading: true`` is not in the context until a tool search returns a
  ``tool_reference`` to it; from then on its definition counts where the reference is;
- an image: ``width × height / 750`` tokens, at most 1,600 (the API scales larger images down);
  an image whose size cannot be read counts 1,600.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import struct
from collections.abc import Iterable, Mapping
from typing import Any

CHARS_PER_TOKEN = 4
IMAGE_TOKENS_MAX = 1_600

APPROXIMATION = (
    "local approximation: 4 characters per token for text and compact JSON (tool definitions, tool inputs), "
    "width*height/750 (at most 1,600) per image, deferred tools counted only once a tool search references them"
)


def text_tokens(text: str) -> int:
    """Tokens of a piece of text: its length in characters / 4, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def json_tokens(value: Any) -> int:
    """Tokens of a JSON value written compactly, without ``cache_control`` markers."""
    return text_tokens(json.dumps(_without_cache_control(value), ensure_ascii=False, separators=(",", ":")))


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


def image_size(data: bytes) -> tuple[int, int] | None:
    """Width and height of a PNG, GIF, JPEG or WebP image, from its header; None when unreadable."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        w, h = struct.unpack(">II", data[16:24])
        return int(w), int(h)
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        w, h = struct.unpack("<HH", data[6:10])
        return int(w), int(h)
    if data.startswith(b"\xff\xd8"):
        return _jpeg_size(data)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        if data[12:16] == b"VP8X":
            return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
        if data[12:16] == b"VP8 ":
            w, h = struct.unpack("<HH", data[26:30])
            return int(w) & 0x3FFF, int(h) & 0x3FFF
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return int(w), int(h)
        i += 2 + length
    return None


def image_tokens(source: Mapping[str, Any]) -> int:
    """Tokens of an image block's ``source`` (base64 data)."""
    data = source.get("data")
    if not isinstance(data, str):
        return IMAGE_TOKENS_MAX
    try:
        head = base64.b64decode(data[: 4 * 2048], validate=True)
    except (binascii.Error, ValueError):
        return IMAGE_TOKENS_MAX
    size = image_size(head)
    if size is None:
        return IMAGE_TOKENS_MAX
    return max(1, min(IMAGE_TOKENS_MAX, math.ceil(size[0] * size[1] / 750)))


def block_tokens(block: Any, deferred: Mapping[str, Any]) -> int:
    """Tokens of one content block; ``deferred`` maps deferred tool names to their definitions."""
    if isinstance(block, str):
        return text_tokens(block)
    if not isinstance(block, Mapping):
        return json_tokens(block)
    kind = block.get("type")
    if kind == "text":
        return text_tokens(str(block.get("text", "")))
    if kind == "image":
        source = block.get("source")
        return image_tokens(source) if isinstance(source, Mapping) else IMAGE_TOKENS_MAX
    if kind in ("tool_use", "server_tool_use"):
        return text_tokens(str(block.get("name", ""))) + json_tokens(block.get("input", {}))
    if kind == "tool_result":
        return content_tokens(block.get("content", ""), deferred)
    if kind == "tool_reference":
        name = str(block.get("tool_name", ""))
        return text_tokens(name) + (json_tokens(deferred[name]) if name in deferred else 0)
    if kind == "tool_search_tool_result":
        content = block.get("content")
        refs = content.get("tool_references", []) if isinstance(content, Mapping) else []
        return sum(block_tokens(r, deferred) for r in refs if isinstance(r, Mapping))
    return json_tokens(block)


def content_tokens(content: Any, deferred: Mapping[str, Any] | None = None) -> int:
    """Tokens of a message's ``content`` (a string or a list of blocks)."""
    if isinstance(content, str):
        return text_tokens(content)
    if isinstance(content, list):
        return sum(block_tokens(b, deferred or {}) for b in content)
    return json_tokens(content)


def system_tokens(system: Any) -> int:
    """Tokens of the ``system`` parameter (a string or a list of text blocks)."""
    if system is None:
        return 0
    return content_tokens(system)


def deferred_tools(tools: Iterable[Any]) -> dict[str, Any]:
    """The tools with ``defer_loading: true``, by name."""
    return {str(t.get("name")): t for t in tools if isinstance(t, Mapping) and t.get("defer_loading") is True}


def tools_tokens(tools: Iterable[Any]) -> int:
    """Tokens of the tool definitions that are in the context from the start (deferred ones are not)."""
    return sum(json_tokens(t) for t in tools if not (isinstance(t, Mapping) and t.get("defer_loading") is True))


def request_tokens(body: Mapping[str, Any]) -> int:
    """Input tokens of a Messages request body (``system``, ``tools``, ``messages``)."""
    tools = body.get("tools") or []
    deferred = deferred_tools(tools)
    total = tools_tokens(tools) + system_tokens(body.get("system"))
    for message in body.get("messages") or []:
        if isinstance(message, Mapping):
            total += content_tokens(message.get("content", ""), deferred)
    return total
