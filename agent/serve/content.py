"""Tool outcomes as MCP results: the code-mode handlers' Anthropic content blocks turned into MCP content.

A text block becomes ``TextContent``, an image block ``ImageContent`` (the same base64 data and
type: images stay images), and ``is_error`` becomes ``isError`` (a failed script's text carries
its traceback). Passthrough results are MCP results already and are not touched here.
"""

from __future__ import annotations

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
