"""Content for the model: MCP tool results and sandbox executions as Anthropic content blocks.

Images stay images (``{"type": "image", "source": {"type": "base64", ...}}``), never base64
text. MCP content the Messages API cannot carry (audio, binary resources) becomes a one-line
note saying what was left out.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from sandbox.results import ExecutionResult, ToolCallRecord, image_type_matches
from tool_tree.text import size

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
LEDGER_LINES = 8


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def image_block(data_b64: str, mime_type: str) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": mime_type, "data": data_b64}}


def _mcp_image(block: dict[str, Any]) -> dict[str, Any]:
    data, mime = block.get("data"), block.get("mimeType")
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


def mcp_result_blocks(result: dict[str, Any]) -> list[dict[str, Any]]:
    """A ``tools/call`` result (wire format) as content blocks for a ``tool_result``."""
    blocks: list[dict[str, Any]] = []
    content = result.get("content")
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            blocks.append(text_block(str(block.get("text", ""))))
        elif kind == "image":
            blocks.append(_mcp_image(block))
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
    return blocks


def ledger(calls: Sequence[ToolCallRecord]) -> str:
    """The short call ledger: one line per call, or per tool when there are many calls."""
    if not calls:
        return ""
    total = sum(c.response_bytes for c in calls)
    head = f"tool calls from the script: {len(calls)}, {size(total)} of results kept in the sandbox"
    if len(calls) <= LEDGER_LINES:
        return head + "\n" + "\n".join(f"  {c.line()}" for c in calls)
    counts = Counter(f"{c.server}.{c.tool}" for c in calls)
    lines = [head]
    for name, n in sorted(counts.items()):
        group = [c for c in calls if f"{c.server}.{c.tool}" == name]
        failed = [c for c in group if not c.ok]
        status = "all ok" if not failed else f"{len(failed)} failed, first: {failed[0].error or 'error'}"
        lines.append(f"  {name} ×{n}: {status} ({size(sum(c.response_bytes for c in group))})")
    return "\n".join(lines)


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
        parts.append(ledger(result.tool_calls))
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
