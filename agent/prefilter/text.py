"""What the pre-filter judges in a conversation: the text of its latest turn, and the tools it called (moved out of
`agent.prefilter.gate`, which imports them from here)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MAX_TEXT = 4000
"""Characters of the conversation the classifier judges (the latest turn's text, its end kept)."""


def request_text(messages: Sequence[dict[str, Any]]) -> str:
    """What the next request is about: the text of the latest user turn (not tool results) and
    the text of the model's reply since then, at most `MAX_TEXT` characters (the end kept)."""
    user_at = -1
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user" and _texts(messages[i]):
            user_at = i
            break
    parts = _texts(messages[user_at]) if user_at >= 0 else []
    for message in messages[user_at + 1 :]:
        if message.get("role") == "assistant":
            parts += _texts(message)
    text = "\n".join(p for p in parts if p.strip())
    return text[-MAX_TEXT:]


def _texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"]


def called_names(messages: Sequence[dict[str, Any]]) -> list[str]:
    """The native names of the tools the model called in ``messages`` (``tool_use`` blocks, and the invocations
    of a ``batch_tool`` call), first call first."""
    names: list[str] = []
    for message in messages:
        content = message.get("content") if message.get("role") == "assistant" else None
        for block in content if isinstance(content, list) else ():
            if not (isinstance(block, dict) and block.get("type") == "tool_use"):
                continue
            names.append(str(block.get("name", "")))
            invocations = block.get("input", {}).get("invocations") if isinstance(block.get("input"), dict) else None
            if isinstance(invocations, list):
                names += [str(i["name"]) for i in invocations if isinstance(i, dict) and isinstance(i.get("name"), str)]
    return names
