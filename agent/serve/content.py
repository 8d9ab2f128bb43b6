"""Tool outcomes as MCP results: the code-mode handlers' Anthropic content blocks turned into MCP content.

A text block becomes ``TextContent``, an image block ``ImageContent`` (the same base64 data and
type: images stay images), and ``is_error`` becomes ``isError`` (a failed script's text carries
its traceback). Passthrough results are MCP results already and are not touched here.

`fit_result` cuts a result (any, passthrough too) to a size a transport can carry, saying what
it left out: over HTTP, one server-sent event the SDK client reads (`agent.serve.http`); `fit_read` a resource's
read or a prompt's messages alike.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import mcp_types as types

from agent.toolsets.base import ToolOutcome


def mcp_content(blocks: Sequence[dict[str, Any]]) -> list[types.ContentBlock]:
    """Anthropic ``text`` and ``image`` blocks (what `agent.content` builds) as MCP content."""
    out: list[types.ContentBlock] = []
    for block in blocks:
        kind = block.get("type")
        source = block.get("source")
        if kind == "image" and isinstance(source, dict) and source.get("type") == "base64":
            out.append(types.ImageContent(data=str(source.get("data", "")), mime_type=str(source.get("media_type"))))
        elif kind == "text":
            out.append(types.TextContent(text=str(block.get("text", ""))))
        else:  # not built by the handlers today; say so rather than drop it
            out.append(types.TextContent(text=f"[content of type {kind!s} left out]"))
    return out


def call_result(outcome: ToolOutcome) -> types.CallToolResult:
    """A handler's outcome as a ``tools/call`` result."""
    return types.CallToolResult(content=mcp_content(outcome.content), is_error=outcome.is_error)


def error_result(message: str) -> types.CallToolResult:
    """A failed call the model can act on: one text block, ``isError: true``."""
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def fit_result(result: dict[str, Any], limit: int, why: str) -> dict[str, Any]:
    """A ``tools/call`` result in its wire form, cut to at most ``limit`` bytes of JSON; unchanged when it fits.

    In order, until it fits: the largest images (and audio, and embedded binary resources) become
    a text note with their type and size, in their place; ``structuredContent`` is left out (the
    spec has a text block repeat it); the longest texts lose their middle (their start and end
    stay). What was left out is said in the result, ending with ``why``. A result still too big
    (thousands of blocks) becomes an error saying so.
    """
    size = whole = _json_size(result)
    if size <= limit:
        return result
    content: list[Any] = list(result.get("content") or [])
    sizes = [_json_size(block) for block in content]
    binary = [i for i, block in enumerate(content) if _binary(block) is not None]
    for i in sorted(binary, key=lambda i: -sizes[i]):
        if size <= limit:
            break
        note = {"type": "text", "text": _left_out(content[i], why)}
        size, content[i], sizes[i] = size - sizes[i] + _json_size(note), note, _json_size(note)
    fitted = {**result, "content": content}
    if size > limit and "structuredContent" in fitted:  # what the spec says a text block should repeat
        left_out = _json_size(fitted.pop("structuredContent"))
        content.append({"type": "text", "text": f"[structuredContent ({left_out:,} bytes) left out: {why}]"})
        size = _json_size(fitted)
        sizes.append(_json_size(content[-1]))
    texts = [i for i, block in enumerate(content) if isinstance(block, dict) and block.get("type") == "text"]
    for i in sorted(texts, key=lambda i: -sizes[i]):
        if size <= limit:
            break
        shorter = _shorten(content[i], sizes[i] - (size - limit), why)
        if _json_size(shorter) < sizes[i]:
            size, content[i], sizes[i] = size - sizes[i] + _json_size(shorter), shorter, _json_size(shorter)
    if _json_size(fitted) <= limit:
        return fitted
    return error_result(f"the result ({whole:,} bytes) was left out: {why}").model_dump(
        by_alias=True, mode="json", exclude_none=True
    )


def fit_read(result: dict[str, Any], limit: int, why: str) -> dict[str, Any]:
    """A ``resources/read`` or ``prompts/get`` result in its wire form, cut to at most ``limit`` bytes of JSON as
    `fit_result` cuts a tool's (their texts are short already: `agent.serve.upstream_extras` caps them); unchanged
    when it fits. A resource's largest binary contents become a text content of the same URI saying their type and
    size; a prompt's messages are fitted as one result's content. Before, only ``tools/call`` results were: over HTTP
    a read of a 1.5 MB PNG was an event the SDK client refused ("Server-sent event exceeded the 1048576 byte limit").
    """
    if _json_size(result) <= limit:
        return result
    if isinstance(messages := result.get("messages"), list):
        blocks = [m.get("content") if isinstance(m, dict) else None for m in messages]
        fitted = fit_result({"content": blocks}, limit - (_json_size(result) - _json_size(blocks)), why)
        if fitted.get("isError") or len(fitted["content"]) != len(messages):
            return {"messages": [{"role": "user", "content": fitted["content"][0]}]}
        return {**result, "messages": [{**m, "content": c} for m, c in zip(messages, fitted["content"], strict=True)]}
    contents: list[Any] = list(result.get("contents") or [])
    size, sizes = _json_size(result), [_json_size(item) for item in contents]
    blobs = [i for i, item in enumerate(contents) if isinstance(item, dict) and isinstance(item.get("blob"), str)]
    for i in sorted(blobs, key=lambda i: -sizes[i]):
        if size <= limit:
            break
        data, mime = contents[i]["blob"], contents[i].get("mimeType") or "unknown type"
        held = len(data) * 3 // 4 - data[-2:].count("=")
        note = {"uri": contents[i].get("uri"), "mimeType": "text/plain",
                "text": f"[{mime} content of {held:,} bytes left out: {why}]"}  # fmt: skip
        size, contents[i] = size - sizes[i] + _json_size(note), note
    return {**result, "contents": contents}


def _json_size(value: Any) -> int:
    """Bytes of ``value`` as the SDK writes it: UTF-8 JSON, non-ASCII unescaped."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode("utf-8", "surrogatepass"))


def _binary(block: Any) -> str | None:
    """The base64 data of an image, audio or embedded binary resource block; None for any other block."""
    if not isinstance(block, dict):
        return None
    if block.get("type") in ("image", "audio") and isinstance(block.get("data"), str):
        return str(block["data"])
    resource = block.get("resource")
    if block.get("type") == "resource" and isinstance(resource, dict) and isinstance(resource.get("blob"), str):
        return str(resource["blob"])
    return None


def _left_out(block: dict[str, Any], why: str) -> str:
    data = _binary(block) or ""
    size = len(data) * 3 // 4 - data[-2:].count("=")
    kind = str(block.get("type"))
    mime = block.get("mimeType") or (block.get("resource") or {}).get("mimeType") or "unknown type"
    if kind == "image":
        return f"[an image ({mime}, {size:,} bytes) left out: {why}; show it smaller (fewer pixels, or as JPEG)]"
    return f"[{kind} content ({mime}, {size:,} bytes) left out: {why}]"


def _shorten(block: dict[str, Any], target: int, why: str) -> dict[str, Any]:
    """A text block with the middle of its text left out, at most ``target`` bytes of JSON if it can be."""
    text = str(block.get("text", ""))
    size = _json_size(block)
    # A first guess from the average bytes per character, then more until it fits: every
    # character left out saves at least one byte, so each round asks for at least the excess.
    cut = min(len(text), math.ceil((size - target) * len(text) / max(size, 1)) + 200)
    while True:
        kept = len(text) - cut
        marker = f"\n[… {cut:,} characters left out here: {why}]\n"
        shorter = {**block, "text": text[: kept - kept // 2] + marker + text[len(text) - kept // 2 :]}
        excess = _json_size(shorter) - target
        if excess <= 0 or cut == len(text):
            return shorter
        cut = min(len(text), cut + excess + 16)


NEW_SESSION_HINT = (
    "[this was the first script of this sandbox session: names defined by scripts before it (in a session that "
    "ended, or before tooltree serve restarted, after which the client reconnects silently) are not here; files "
    "saved in /workspace remain]"
)


def new_session_hint(outcome: ToolOutcome) -> ToolOutcome:
    """``outcome`` of a session's first script, with `NEW_SESSION_HINT` after a ``NameError`` it raised: the model
    may have counted on variables of a sandbox session that is gone (over HTTP nothing else tells it so)."""
    first = outcome.content[0] if outcome.content else {}
    text = first.get("text") if first.get("type") == "text" else None
    if outcome.is_error and isinstance(text, str) and "\nNameError: " in text:
        outcome.content.insert(1, {"type": "text", "text": NEW_SESSION_HINT})
    return outcome
