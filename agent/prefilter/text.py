"""What the pre-filter judges in a conversation: the text of its latest turn, and the tools it called (moved out of
`agent.prefilter.gate`, which imports them from here)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
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


def not_offered(name: str) -> str:
    """What a call in ``filtered`` mode of the tool ``name``, which the conversation was not offered, is answered with
    (`agent.toolsets.filtered`): `called_names` knows a call so refused by it."""
    return (f"tool {name!r} is not among the tools offered in this conversation (the pre-filter left it out, and it is "
            "not run); use one that is")  # fmt: skip


def called_names(messages: Sequence[dict[str, Any]]) -> list[str]:
    """The native names of the tools the model called in ``messages`` (``tool_use`` blocks, and the invocations
    of a ``batch_tool`` call), first call first; not a call refused as a tool the conversation was not offered
    (`not_offered`): before, a conversation continued with ``history`` offered it, and saved it in the state file,
    though the pre-filter had left it out."""
    answers = _answers(messages)
    names: list[str] = []
    for message in messages:
        content = message.get("content") if message.get("role") == "assistant" else None
        for block in content if isinstance(content, list) else ():
            if not (isinstance(block, dict) and block.get("type") == "tool_use"):
                continue
            answer = answers.get(str(block.get("id")), [])
            name = str(block.get("name", ""))
            if not_offered(name) not in answer:
                names.append(name)
            invocations = block.get("input", {}).get("invocations") if isinstance(block.get("input"), dict) else None
            if isinstance(invocations, list):
                names += [
                    str(item["name"])
                    for n, item in enumerate(invocations, 1)
                    if isinstance(item, dict)
                    and isinstance(item.get("name"), str)
                    and not _refused_in_batch(answer, n, item["name"])
                ]
    return names


def _answers(messages: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    """The texts of each ``tool_result`` of ``messages``, by the id of the ``tool_use`` it answers."""
    out: dict[str, list[str]] = {}
    for message in messages:
        content = message.get("content") if message.get("role") == "user" else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                texts = [inner] if isinstance(inner, str) else _texts({"content": inner})
                out[str(block.get("tool_use_id"))] = texts
    return out


def _refused_in_batch(texts: list[str], n: int, name: str) -> bool:
    """Whether the ``n``-th invocation, of ``name``, of a ``batch_tool`` call answered with ``texts`` was refused as
    a tool the conversation was not offered (its status line, then `not_offered`)."""
    label = f"[{n}] {name}: error"
    return any(a == label and b == not_offered(name) for a, b in pairwise(texts))
