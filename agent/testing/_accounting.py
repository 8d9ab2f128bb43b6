"""The fake API's bookkeeping: a prompt cache that behaves like the real one, and request checks.

The cache follows the documented rules closely enough for usage numbers to mean something:
the prompt is the sequence tools → system → message blocks; a ``cache_control`` marker makes
the prefix ending there a cache entry (when it has at least ``min_tokens`` tokens); a request
reads the longest cached prefix that ends at one of its markers or at one of the 20 block
boundaries before a marker, and writes the prefixes up to its markers that were not cached yet.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.tokens import block_tokens, deferred_tools, json_tokens

LOOKBACK_BLOCKS = 20
MAX_BREAKPOINTS = 4
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int


def _strip(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _segments(body: Mapping[str, Any]) -> list[tuple[Any, int, bool]]:
    """(block without markers, tokens, has a cache marker) in prompt order."""
    tools = body.get("tools") or []
    deferred = deferred_tools(tools)
    out: list[tuple[Any, int, bool]] = []
    for tool in tools:
        if isinstance(tool, Mapping):
            tokens = 0 if tool.get("defer_loading") is True else json_tokens(tool)
            out.append((_strip(tool), tokens, "cache_control" in tool))
    system = body.get("system")
    if isinstance(system, str):
        out.append((system, block_tokens(system, deferred), False))
    elif isinstance(system, list):
        out += [(_strip(b), block_tokens(b, deferred), isinstance(b, Mapping) and "cache_control" in b) for b in system]
    for message in body.get("messages") or []:
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        role = message.get("role")
        if isinstance(content, str):
            out.append(((role, content), block_tokens(content, deferred), False))
        elif isinstance(content, list):
            for b in content:
                marked = isinstance(b, Mapping) and "cache_control" in b
                out.append(((role, _strip(b)), block_tokens(b, deferred), marked))
    return out


class PromptCache:
    """Prefix hashes seen so far, and the usage block of each request."""

    def __init__(self, min_tokens: int = 1024) -> None:
        self.min_tokens = min_tokens
        self._entries: set[str] = set()

    def usage(self, body: Mapping[str, Any]) -> Usage:
        """The usage of ``body``, recording its new cache entries."""
        segments = _segments(body)
        digest = hashlib.sha256()
        hashes: list[str] = []
        totals: list[int] = []
        running = 0
        for block, tokens, _ in segments:
            digest.update(json.dumps(block, sort_keys=True, ensure_ascii=False).encode("utf-8"))
            running += tokens
            hashes.append(digest.copy().hexdigest())
            totals.append(running)
        marks = [i for i, (_, _, marked) in enumerate(segments) if marked]
        read = 0
        for m in marks:
            for i in range(m, max(-1, m - LOOKBACK_BLOCKS - 1), -1):
                if hashes[i] in self._entries:
                    read = max(read, totals[i])
                    break
        written = 0
        for m in marks:
            if totals[m] >= self.min_tokens and hashes[m] not in self._entries:
                self._entries.add(hashes[m])
                written = max(written, totals[m])
        creation = max(0, written - read)
        return Usage(max(0, running - read - creation), creation, read)


def check_request(body: Any) -> str | None:
    """What the real API would refuse in ``body`` (400 invalid_request_error), or None."""
    if not isinstance(body, Mapping):
        return "the request body must be a JSON object"
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            return f"{key}: Field required"
    tools = body.get("tools") or []
    names: set[str] = set()
    for i, tool in enumerate(tools):
        name = tool.get("name") if isinstance(tool, Mapping) else None
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            return f"tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
        if name in names:
            return f"tools: Tool names must be unique ({name!r})"
        names.add(name)
    if tools and all(isinstance(t, Mapping) and t.get("defer_loading") is True for t in tools):
        return "tools: at least one tool must not be deferred"
    markers = sum(1 for _, _, marked in _segments(body) if marked)
    if markers > MAX_BREAKPOINTS:
        return f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {markers}."
    return _check_messages(body["messages"])


def _check_messages(messages: Any) -> str | None:
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    if not isinstance(messages[0], Mapping) or messages[0].get("role") != "user":
        return "messages: the first message must use the user role"
    pending: set[str] = set()
    used: set[str] = set()  # tool_use ids of the whole request
    for n, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant", "system"):
            return f"messages.{n}: role must be user, assistant or system"
        content = message.get("content")
        blocks = [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []
        if not content and not (n == len(messages) - 1 and message["role"] == "assistant"):
            return (
                f"messages.{n}: all messages must have non-empty content except for the optional final assistant "
                "message"
            )
        if message["role"] == "system":
            # Mid-conversation system text (Claude Code 2.1 sends it under the per-turn-control beta): text
            # only, and it stands outside the pairing of tool uses with their results.
            if n == 0 or any(b.get("type") != "text" for b in blocks) or not isinstance(content, str | list):
                return f"messages.{n}: a system message holds text and cannot open the conversation"
            continue
        repeated = _repeated_id(content, "tool_result" if message["role"] == "user" else "tool_use", used)
        if repeated is not None and message["role"] == "user":
            m, extra = repeated
            return (
                f"messages.{n}.content.{m}: each tool_use must have a single result. Found multiple `tool_result` "
                f"blocks with id: {extra}"
            )
        if repeated is not None and message["role"] == "assistant":
            return f"messages.{n}.content.{repeated[0]}: `tool_use` ids must be unique"
        if message["role"] == "user":
            results = {str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"}
            if pending - results:
                missing = sorted(pending - results)[0]
                return (
                    f"messages.{n}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{missing}. Each `tool_use` block must have a corresponding `tool_result` block "
                    "in the next message."
                )
            if results - pending:
                extra = sorted(results - pending)[0]
                return (
                    f"messages.{n}.content: unexpected `tool_use_id` found in `tool_result` blocks: {extra}. Each "
                    "`tool_result` block must have a corresponding `tool_use` block in the previous message."
                )
            pending = set()
        else:
            if pending:
                return f"messages.{n}: tool_use blocks of the previous assistant message have no tool_result"
            pending = {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}
    return None


def _repeated_id(content: Any, kind: str, used: set[str]) -> tuple[int, str] | None:
    """The index and id of the first ``kind`` block of ``content`` whose id came before: in ``content`` for a
    ``tool_result`` (one result per ``tool_use``), anywhere in the request (``used``, grown here) for a ``tool_use``."""
    key = "tool_use_id" if kind == "tool_result" else "id"
    seen = used if kind == "tool_use" else set()
    for m, block in enumerate(content if isinstance(content, list) else []):
        if isinstance(block, Mapping) and block.get("type") == kind:
            value = str(block.get(key))
            if value in seen:
                return m, value
            seen.add(value)
    return None
