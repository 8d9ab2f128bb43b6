"""Building Messages requests: fixed prefix with cache breakpoints, and blocks sent back as params.

Breakpoints (``cache_control: {"type": "ephemeral"}``) go on the last tool and on the system
prompt — the part that is byte-identical in every request of a run — and on the last block of
the conversation, so each request also reads the previous turns from the cache. The stored
conversation never carries markers; they are added to a copy per request (at most 3 of the
API's 4).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

EPHEMERAL = {"type": "ephemeral"}

# Fields of response blocks that may be sent back; anything else the SDK parsed is dropped.
_PARAM_FIELDS: dict[str, tuple[str, ...]] = {
    "text": ("type", "text", "citations"),
    "tool_use": ("type", "id", "name", "input", "caller"),
    "server_tool_use": ("type", "id", "name", "input", "caller"),
    "thinking": ("type", "thinking", "signature"),
    "redacted_thinking": ("type", "data"),
}


def block_param(block: Any) -> dict[str, Any]:
    """A response content block (SDK model or dict) as a request param block."""
    # warnings off: a block that does not match the SDK's types (an input that is not an object) is kept as sent
    data: dict[str, Any] = (
        block.model_dump(mode="json", exclude_none=True, warnings=False)
        if hasattr(block, "model_dump")
        else dict(block)
    )
    keep = _PARAM_FIELDS.get(str(data.get("type")))
    if keep is not None:
        data = {k: data[k] for k in keep if k in data}
    return data


def cached_tools(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools array with a breakpoint on the last tool."""
    out = [dict(t) for t in tools]
    if out:
        out[-1]["cache_control"] = dict(EPHEMERAL)
    return out


def cached_system(system: str) -> list[dict[str, Any]]:
    """The system prompt as one text block with a breakpoint."""
    return [{"type": "text", "text": system, "cache_control": dict(EPHEMERAL)}]


def with_last_breakpoint(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of ``messages`` with a breakpoint on the last block of the last message."""
    out = [dict(m) for m in messages]
    if not out:
        return out
    last = out[-1]
    content = last.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if isinstance(content, list) and content:
        content = list(content)
        tail = copy.copy(content[-1])
        if isinstance(tail, dict) and tail.get("type") not in ("thinking", "redacted_thinking"):
            tail["cache_control"] = dict(EPHEMERAL)
            content[-1] = tail
        last["content"] = content
    return out


def answer_text(content: Sequence[dict[str, Any]]) -> str:
    """The text blocks of a reply, joined."""
    return "\n".join(str(b.get("text", "")) for b in content if b.get("type") == "text").strip()
