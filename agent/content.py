"""Content for the model: MCP tool results and sandbox executions as Anthropic content blocks.

Images stay images (``{"type": "image", "source": {"type": "base64", ...}}``), never base64
text. MCP content the Messages API cannot carry (audio, binary resources, an image over the API's
5 MB) becomes a one-line note saying what was left out. A server's result is untrusted in size
too: its text is cut to `MAX_RESULT_CHARS` (head and tail kept) and its images to `MAX_IMAGES`,
so one call can neither fill the host's memory nor make every later request too large.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from sandbox._supervisor.limits import MAX_IMAGE_BYTES, MAX_IMAGES, base64_size
from sandbox.results import ExecutionResult, ToolCallRecord, image_type_matches
from tool_tree.text import size

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
LEDGER_LINES = 8
LEDGER_GROUPS = 20
"""Tools the short ledger names one line each when there are many calls (a script may call thousands of
distinct names, refused ones included); the rest are one line."""
MAX_RESULT_CHARS = 500_000
"""Characters of text one MCP tool result brings into the conversation (about 125,000 tokens: room
left in a 200,000-token context, and a 200 KB document still arrives whole); a longer text keeps its
head and tail, with a note. Past it, a result would fill the context and go out with every request."""


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def image_block(data_b64: str, mime_type: str) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": mime_type, "data": data_b64}}


def _mcp_image(block: dict[str, Any]) -> dict[str, Any]:
    data, mime = block.get("data"), block.get("mimeType")
    if isinstance(data, str) and len(data) > base64_size(MAX_IMAGE_BYTES):
        over = size(len(data) * 3 // 4)
        return text_block(f"[an image of {over} was left out: the API takes at most {size(MAX_IMAGE_BYTES)}]")
    if isinstance(data, str) and mime in IMAGE_TYPES:
        try:
            raw = base64.b64decode(data[:64], validate=False)
        except ValueError:
            raw = b""
        if image_type_matches(raw, str(mime)):
            return image_block(data, str(mime))
    return text_block(f"[an image of type {mime!s} that is not PNG, JPEG, GIF or WebP was left out]")


def _mcp_resource(block: dict[str, Any]) -> dict[str, Any]:
    resource = block.get("resource")
    if isinstance(resource, dict):
        if isinstance(resource.get("text"), str):
            return text_block(f"[resource {resource.get('uri', '')}]\n{resource['text']}")
        return text_block(f"[binary resource {resource.get('uri', '')} ({resource.get('mimeType', '?')}) left out]")
    return text_block("[a malformed resource was left out]")


def mcp_result_blocks(result: dict[str, Any], max_chars: int = MAX_RESULT_CHARS) -> list[dict[str, Any]]:
    """A ``tools/call`` result (wire format) as content blocks for a ``tool_result``: at most
    ``max_chars`` of text and `MAX_IMAGES` images."""
    blocks: list[dict[str, Any]] = []
    content = result.get("content")
    images = 0
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            blocks.append(text_block(str(block.get("text", ""))))
        elif kind == "image" and images >= MAX_IMAGES:
            blocks.append(text_block(f"[an image past the first {MAX_IMAGES} was left out]"))
        elif kind == "image":
            blocks.append(_mcp_image(block))
            images += blocks[-1]["type"] == "image"
        elif kind == "resource":
            blocks.append(_mcp_resource(block))
        elif kind == "resource_link":
            blocks.append(text_block(f"[resource link] {block.get('name', '')} {block.get('uri', '')}".strip()))
        else:
            blocks.append(text_block(f"[content of type {kind!s} left out]"))
    structured = result.get("structuredContent")
    if structured is not None and not any(b["type"] == "text" for b in blocks):
        blocks.append(text_block(json.dumps(structured, ensure_ascii=False)))
    if not blocks:
        blocks.append(text_block("(the tool returned no content)"))
    return cap_text(blocks, max_chars)


def cap_text(blocks: list[dict[str, Any]], max_chars: int) -> list[dict[str, Any]]:
    """``blocks`` with at most ``max_chars`` characters of text: the block that crosses the limit keeps
    its head and tail, the text blocks after it are left out, and a last block says what is missing."""
    total = sum(len(b["text"]) for b in blocks if b.get("type") == "text")
    if total <= max_chars:
        return blocks
    out: list[dict[str, Any]] = []
    left = max_chars
    for block in blocks:
        if block.get("type") != "text":
            out.append(block)
            continue
        text = str(block["text"])
        if len(text) <= left:
            out.append(block)
            left -= len(text)
        elif left > 0:
            head, tail = text[: left - left // 2], text[len(text) - left // 2 :]
            out.append(text_block(f"{head}\n[... {len(text) - left:,} characters left out ...]\n{tail}"))
            left = 0
    out.append(
        text_block(
            f"[the tool returned {total:,} characters of text; {max_chars:,} are shown (head and tail). "
            "Ask it for less: a filter, a page, fewer fields.]"
        )
    )
    return out


def ledger(calls: Sequence[ToolCallRecord], omitted: int = 0) -> str:
    """The short call ledger: one line per call, or per tool when there are many calls (at most
    `LEDGER_GROUPS` tools, those called most first); ``omitted`` calls past the listed ones are counted."""
    if not calls:
        return ""
    total = sum(c.response_bytes for c in calls)
    head = f"tool calls from the script: {len(calls) + omitted}, {size(total)} of results kept in the sandbox"
    more = [f"  … {omitted} more call(s) not listed"] if omitted else []
    if len(calls) <= LEDGER_LINES:
        return "\n".join([head, *(f"  {c.line()}" for c in calls), *more])
    groups: dict[str, list[ToolCallRecord]] = {}
    for c in calls:
        groups.setdefault(f"{c.server}.{c.tool}", []).append(c)
    named = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    lines = [head]
    for name, group in sorted(named[:LEDGER_GROUPS]):
        failed = [c for c in group if not c.ok]
        status = "all ok" if not failed else f"{len(failed)} failed, first: {failed[0].error or 'error'}"
        lines.append(f"  {name} ×{len(group)}: {status} ({size(sum(c.response_bytes for c in group))})")
    if rest := named[LEDGER_GROUPS:]:
        failures = sum(1 for _, group in rest for c in group if not c.ok)
        lines.append(f"  … {len(rest)} more tools, {sum(len(g) for _, g in rest)} calls ({failures} failed)")
    return "\n".join(lines + more)


def execution_blocks(result: ExecutionResult) -> list[dict[str, Any]]:
    """An execution as content blocks: one text block, then the images the script showed."""
    parts: list[str] = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    if result.timed_out:
        parts.append(f"[error] {result.error or 'timed out'}")
    elif result.traceback:
        parts.append("[error]\n" + result.traceback.rstrip("\n"))
    elif result.error:
        parts.append(f"[error] {result.error}")
    if result.state_reset:
        parts.append("[the interpreter was restarted: variables and imports are gone; files remain]")
    if result.tool_calls:
        parts.append(ledger(result.tool_calls, result.tool_calls_omitted))
    if not parts:
        parts.append("(the script printed nothing)")
    blocks = [text_block("\n\n".join(parts))]
    blocks += [image_block(image.base64(), image.mime_type) for image in result.images]
    return blocks


def blocks_bytes(blocks: Sequence[dict[str, Any]]) -> int:
    """Bytes of content that reaches the model: UTF-8 text plus base64 image data."""
    total = 0
    for b in blocks:
        if b.get("type") == "text":
            total += len(str(b.get("text", "")).encode("utf-8"))
        elif b.get("type") == "image":
            total += len(str(b.get("source", {}).get("data", "")))
        else:
            total += len(json.dumps(b, ensure_ascii=False).encode("utf-8"))
    return total
