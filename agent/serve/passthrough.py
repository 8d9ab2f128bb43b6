"""Passthrough: chosen tools of the tree offered as ordinary MCP tools, besides the four of code mode.

``serve: passthrough: [crm.get_record]`` makes ``crm__get_record`` a tool of `tooltree serve`
with the server's own description and input schema (the names and definitions of ``direct``
mode, `agent.toolsets.direct`). A call goes through the same bridge as a script's (allowlist,
argument validation against the schema, audit) and its result comes back as the server sent it
(content, structured content, ``isError``) but for what a script's output gets too: every string is
cleaned of terminal escapes and control characters (`sandbox.results.clean_text`), and text beyond the
sandbox's ``output_chars`` is cut, with a note of how much. The descriptions in the definitions (the
tool's, and those of its schema) are cleaned as in the tree's stubs (`tool_tree.text.clean`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp_types as types
from pydantic import ValidationError

from agent.serve.content import error_result
from sandbox.results import clean_text
from tool_tree.text import clean
from tool_tree.tree import ToolEntry

if TYPE_CHECKING:
    from sandbox.host import Runtime


class Passthrough:
    """The passthrough tools of one tree.

    Args:
        tree: the generated tree.
        names: tools as ``server.tool`` (or the stub's ``package.function``).

    Raises:
        AgentSetupError: no manifest, a missing snapshot, or a name that is not in the tree.
    """

    def __init__(self, tree: str | Path, names: Sequence[str]) -> None:
        self.entries: dict[str, ToolEntry] = {}
        self.definitions: list[types.Tool] = []
        if not names:
            return
        from agent.toolsets.direct import DirectToolset

        direct = DirectToolset(tree)
        entries = direct.resolve_pinned(names, what="passthrough tool", setting="serve.passthrough")
        wanted = {(e.server, e.tool) for e in entries}
        for native in direct.tools():
            entry = direct.names[native["name"]]
            if (entry.server, entry.tool) in wanted:
                self.entries[native["name"]] = entry
                description = native.get("description")
                self.definitions.append(
                    types.Tool(
                        name=native["name"],
                        description=clean(description).strip() if isinstance(description, str) else None,
                        input_schema=_clean_descriptions(native["input_schema"]),
                    )
                )

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    def call(self, name: str, arguments: Mapping[str, Any], runtime: Runtime) -> types.CallToolResult:
        """Call the tool through the runtime's bridge (from a worker thread); a refusal is an error result."""
        from sandbox.bridge import ToolCallRefused
        from sandbox.calls import MAX_RESULT_BYTES
        from sandbox.config import SandboxConfig

        entry = self.entries[name]
        try:
            raw = runtime.call_tool(entry.server, entry.tool, dict(arguments))
        except ToolCallRefused as e:
            return error_result(f"{entry.server}.{entry.tool} refused: {e.message}")
        settings = runtime.sandbox_config or SandboxConfig.from_config(runtime.config)
        result = capped(cleaned(raw), settings.output_chars)
        size = len(json.dumps(result, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        if size > MAX_RESULT_BYTES:  # what is left is not text (images, blobs): refused as a script's call would be
            return error_result(f"{entry.server}.{entry.tool} sent a result of {size} bytes (limit {MAX_RESULT_BYTES})")
        try:
            return types.CallToolResult.model_validate(result, by_name=False)
        except ValidationError as e:
            return error_result(f"{entry.server}.{entry.tool} sent a result that is not a valid MCP result: {e}")


def cleaned(value: Any) -> Any:
    """A copy of a JSON value with every string, keys included, cleaned like a script's output.

    Walked without recursion: how deep a result nests is the server's choice.
    """
    box: list[Any] = [value]
    todo: list[tuple[Any, Any, Any]] = [(box, 0, value)]
    while todo:
        parent, key, item = todo.pop()
        if isinstance(item, str):
            parent[key] = clean_text(item)
        elif isinstance(item, dict):
            mapping: dict[str, Any] = {}
            parent[key] = mapping
            todo.extend((mapping, clean_text(k), v) for k, v in item.items())
        elif isinstance(item, list):
            items: list[Any] = [None] * len(item)
            parent[key] = items
            todo.extend((items, i, v) for i, v in enumerate(item))
    return box[0]


def _text_holder(block: Any) -> dict[str, Any] | None:
    """The dict holding a content block's text: a text block itself, or a resource block's resource."""
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    holder = block if kind == "text" else block.get("resource") if kind == "resource" else None
    return holder if isinstance(holder, dict) and isinstance(holder.get("text"), str) else None


def capped(result: Any, max_chars: int) -> Any:
    """``result`` with at most ``max_chars`` characters of text (its text blocks and text resources together)
    and its structured content only when that fits in as many characters of JSON; a note says what was cut."""
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        return result  # not a result: refused when it is validated
    left, total, content = max_chars, 0, []
    for block in result["content"]:
        holder = _text_holder(block)
        if holder is None:
            content.append(block)
            continue
        text = holder["text"]
        total += len(text)
        if left > 0:
            shown = {**holder, "text": text[:left]}
            content.append(shown if holder is block else {**block, "resource": shown})
        left -= len(text)  # past the cap, later text blocks are left out
    notes = [f"{-left:,} of {total:,} characters of text cut"] if left < 0 else []
    out = {**result, "content": content}
    structured = result.get("structuredContent")
    if structured is not None and len(json.dumps(structured, ensure_ascii=False)) > max_chars:
        del out["structuredContent"]
        notes.append("the structured content left out")
    if notes:
        content.append(
            {
                "type": "text",
                "text": f"\n[... {'; '.join(notes)}: a passthrough result is capped at {max_chars:,} characters; "
                "call the tool from execute_python to work with all of it ...]",
            }
        )
    return out


_VALUES = frozenset({"enum", "const", "default", "examples"})
"""Schema keywords whose values are data the model may send: never changed."""
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
"""Schema keywords whose values map names (any name, ``enum`` too) to schemas."""


def _clean_descriptions(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (the caller's own copy) with its ``description`` and ``title`` texts cleaned in place, as in
    the stubs; values a call may carry (``enum``, ``const``, ``default``, ``examples``) are left as they are."""
    todo: list[tuple[Any, bool]] = [(schema, False)]
    while todo:
        node, is_map = todo.pop()
        if isinstance(node, list):
            todo.extend((v, False) for v in node)
        elif isinstance(node, dict):
            for key, value in node.items():
                if is_map:
                    todo.append((value, False))
                elif key in ("description", "title") and isinstance(value, str):
                    node[key] = clean(value)
                elif key not in _VALUES:
                    todo.append((value, key in _SCHEMA_MAPS))
    return schema
