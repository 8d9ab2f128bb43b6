"""What the index is built from: one ``SearchDoc`` per tool, read from a tree on disk."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tool_tree.search._errors import SearchError
from tool_tree.tree import Manifest, ServerEntry, TreeError, load_snapshot

MAX_DESCRIPTION = 4000
"""Characters of a description that are indexed; the rest is ignored."""


@dataclass(frozen=True)
class SearchDoc:
    """One tool as the search index sees it."""

    server: str
    """The configured server name."""
    package: str
    """The Python package under ``servers/``."""
    tool: str
    """The original MCP tool name."""
    function: str
    """The stub's module and function identifier."""
    path: str
    """``servers/<package>/<function>.py``, relative to the tree root."""
    description: str
    params: list[tuple[str, str]] = field(default_factory=list)
    """``(wire name, description)`` of each top-level input property."""
    server_description: str = ""


def params_of(raw_tool: dict[str, Any]) -> list[tuple[str, str]]:
    """The ``(name, description)`` pairs of a raw tool's top-level input properties."""
    schema = raw_tool.get("inputSchema", raw_tool.get("input_schema"))
    if not isinstance(schema, dict):
        return []
    props = schema.get("properties")
    if not isinstance(props, dict):
        return []
    out: list[tuple[str, str]] = []
    for name, prop in props.items():
        desc = prop.get("description") if isinstance(prop, dict) else None
        out.append((str(name), desc if isinstance(desc, str) else ""))
    return out


def description_of(raw_tool: dict[str, Any]) -> str:
    """The raw tool's description (or its title), capped at ``MAX_DESCRIPTION`` characters."""
    for key in ("description", "title"):
        value = raw_tool.get(key)
        if isinstance(value, str) and value.strip():
            return value[:MAX_DESCRIPTION]
    return ""


def docs_from_tree(tree: Path) -> list[SearchDoc]:
    """One ``SearchDoc`` per stub in the tree's manifest, with text from the server snapshots.

    Raises:
        SearchError: the manifest or a snapshot is missing or malformed.
    """
    try:
        manifest = Manifest.load(tree)
        servers: dict[str, ServerEntry] = {s.name: s for s in manifest.servers}
        raw: dict[str, dict[str, dict[str, Any]]] = {}
        for server in manifest.servers:
            raw[server.name] = {str(t.get("name")): t for t in load_snapshot(tree, server)}
    except TreeError as e:
        raise SearchError(str(e)) from None
    docs: list[SearchDoc] = []
    for entry in sorted(manifest.tools, key=lambda t: (t.server, t.tool)):
        server_entry = servers.get(entry.server)
        raw_tool = raw.get(entry.server, {}).get(entry.tool, {})
        docs.append(
            SearchDoc(
                server=entry.server,
                package=entry.path.split("/")[1] if entry.path.count("/") >= 2 else entry.server,
                tool=entry.tool,
                function=entry.function,
                path=entry.path,
                description=description_of(raw_tool) or entry.summary,
                params=params_of(raw_tool),
                server_description=server_entry.description if server_entry else "",
            )
        )
    return docs
