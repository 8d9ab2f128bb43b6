"""What the index is built from: one ``SearchDoc`` per tool, read from a tree on disk.

Every text a server wrote is capped before it is indexed, as the stubs cap theirs: at most
``MAX_NAME`` characters of a name, ``MAX_DESCRIPTION`` of a description, ``MAX_PARAMS`` parameters
of ``MAX_PARAM_DESCRIPTION`` characters each and ``MAX_PARAMS_TEXT`` in all (here when a raw tool
is read, and again by ``_rank.doc_fields`` and ``_dense.embed_text`` for any ``SearchDoc``). A
tool then gives the index at most ``MAX_TOOL_TEXT`` characters of text, however large its
definition (before, three tools with 28 MB property descriptions made a 92 MB index). The whole
tool name is still kept for the hits: it is the tool's identity.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tool_tree.held_values import HeldValues
from tool_tree.search._errors import SearchError
from tool_tree.tree import Manifest, ServerEntry, TreeError, load_snapshot

MAX_DESCRIPTION = 4000
"""Characters of a description that are indexed; the rest is ignored."""
MAX_NAME = 256
"""Characters of a tool's or a parameter's name that are indexed."""
MAX_PARAMS = 100
"""Parameters of a tool that are indexed: the first, in the schema's order."""
MAX_PARAM_DESCRIPTION = 2000
"""Characters of each parameter's description that are indexed."""
MAX_PARAMS_TEXT = 8000
"""Characters of a tool's parameter names and descriptions together that are indexed."""
MAX_TOOL_TEXT = MAX_NAME + 2 * MAX_DESCRIPTION + MAX_PARAMS_TEXT
"""Characters of one tool that are indexed at most: name, description, parameters, server description."""


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


def capped_params(params: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The first ``MAX_PARAMS`` ``(name, description)`` pairs, each name cut at ``MAX_NAME`` characters and
    each description at ``MAX_PARAM_DESCRIPTION``, and all of them at ``MAX_PARAMS_TEXT`` together."""
    out: list[tuple[str, str]] = []
    room = MAX_PARAMS_TEXT
    for name, desc in itertools.islice(params, MAX_PARAMS):
        if room <= 0:
            break
        name = name[: min(MAX_NAME, room)]
        desc = desc[: min(MAX_PARAM_DESCRIPTION, room - len(name))]
        room -= len(name) + len(desc)
        out.append((name, desc))
    return out


def params_of(raw_tool: dict[str, Any]) -> list[tuple[str, str]]:
    """The ``(name, description)`` pairs of a raw tool's top-level input properties, capped (``capped_params``)."""
    schema = raw_tool.get("inputSchema", raw_tool.get("input_schema"))
    if not isinstance(schema, dict):
        return []
    props = schema.get("properties")
    if not isinstance(props, dict):
        return []
    return capped_params(_properties(props))


def _properties(props: dict[Any, Any]) -> Iterator[tuple[str, str]]:
    for name, prop in props.items():
        desc = prop.get("description") if isinstance(prop, dict) else None
        yield str(name), desc if isinstance(desc, str) else ""


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
        held = HeldValues.reading()  # every server's tools are held at once
        for server in manifest.servers:
            tools: dict[str, dict[str, Any]] = {}
            for t in load_snapshot(tree, server, held):
                tools.setdefault(str(t.get("name")), t)  # a name listed twice is its first definition, as in the stub
            raw[server.name] = tools
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
                description=description_of(raw_tool) or entry.summary[:MAX_DESCRIPTION],
                params=params_of(raw_tool),
                server_description=server_entry.description if server_entry else "",
            )
        )
    return docs
