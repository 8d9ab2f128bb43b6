"""Passthrough: chosen tools of the tree offered as ordinary MCP tools, besides the four of code mode.

``serve: passthrough: [crm.get_record]`` makes ``crm__get_record`` a tool of `tooltree serve`
with the server's own description and input schema (the names and definitions of ``direct``
mode, `agent.toolsets.direct`). A call goes through the same bridge as a script's (allowlist,
argument validation against the schema, audit) and its result comes back as the server sent it
(content, structured content, ``isError``) but bounded and cleaned as a script's output is, an error
too (`agent.serve.bounded_result`). The descriptions in the definitions (the tool's, and those
of its schema) are cleaned as in the tree's stubs (`tool_tree.text.clean`). A regeneration of the tree while serving
changes them (`Passthrough.reload`: a changed tool offered as it is now, a removed one withdrawn, its call refused
saying why, `WITHDRAWN`).

The resource links of a client session's passthrough results are remembered (`Passthrough.linked`), so that the
client's ``resources/read`` of one goes to the server that returned it (`agent.serve.upstream_extras`): a resource a
tool makes (a file it wrote, a session's export) is often listed nowhere, and a read of it was refused as no server
listing it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp_types as types
from pydantic import ValidationError

from agent.content import MAX_BLOCKS
from agent.errors import AgentSetupError
from agent.serve.bounded_result import capped, failed
from agent.serve.content import error_result
from agent.toolsets.base import ToolOutcome, Toolset
from tool_tree.held_values import HeldValues
from tool_tree.text import clean, cut_name
from tool_tree.tree import ToolEntry, TreeError, load_snapshot

if TYPE_CHECKING:
    from sandbox.bridge import CallCancel
    from sandbox.host import Runtime
    from tool_tree.pool import ProgressListener
    from tool_tree.server_asks import Asker
    from tool_tree.tree import Manifest


class Passthrough:
    """The passthrough tools of one tree.

    Args:
        tree: the generated tree.
        names: tools as ``server.tool`` (or the stub's ``package.function``).
        config: the configuration file serve reads, which the command to regenerate the tree names in the error of a
            name the tree lacks (before: the one the tree was generated from, where a pinned tool's named serve's).

    Raises:
        AgentSetupError: no manifest, a missing snapshot, or a name that is not in the tree.
    """

    def __init__(self, tree: str | Path, names: Sequence[str], *, config: str | None = None) -> None:
        self.tree, self.config = Path(tree), config
        self.names = tuple(names)
        self.entries: dict[str, ToolEntry] = {}
        self.definitions: list[types.Tool] = []
        self.gone: dict[str, str] = {}
        """The tools offered before a regeneration of the tree that it does not have, each with why it is gone (a
        call of one is refused saying so, `WITHDRAWN`); one the tree has again is offered again."""
        self._links: weakref.WeakKeyDictionary[Runtime, dict[str, str]] = weakref.WeakKeyDictionary()
        """By client session (its runtime, whose servers returned them): the URIs of resource links its passthrough
        results carried, each to the server that returned it, the latest `MAX_LINKS`."""
        self._lock = threading.Lock()
        if names:
            self.entries, self.definitions = self._read(_Chosen(self.tree, config=self.config), missing=None)

    def _read(
        self, chosen: _Chosen, missing: Callable[[AgentSetupError], None] | None
    ) -> tuple[dict[str, ToolEntry], list[types.Tool]]:
        """The entries and definitions of the tools of `names` that ``chosen``'s manifest has (one it lacks is handed
        to ``missing``, or raises without it).

        Raises:
            AgentSetupError: a name that is not in the tree (without ``missing``), a missing or malformed snapshot.
        """
        from agent.naming import native_names
        from agent.toolsets.direct import _input_schema, _native_text

        entries = chosen.resolve_pinned(self.names, what="passthrough tool", setting="serve.passthrough",
                                        missing=missing)  # fmt: skip
        wanted = {(e.server, e.tool) for e in entries}
        raw = _snapshots(chosen, wanted)
        found: dict[str, ToolEntry] = {}
        definitions: list[types.Tool] = []
        # The names of direct mode, short enough for the client's prefix (`NAME_CHARS`).
        for name, entry in native_names(chosen.manifest.tools, limit=NAME_CHARS).items():
            if (entry.server, entry.tool) not in wanted:
                continue
            definition = raw.get((entry.server, entry.tool), {})
            description, schema = _native_text(definition.get("description"), _input_schema(definition))
            found[name] = entry
            definitions.append(
                types.Tool(
                    name=name,
                    title=_title(definition.get("title")),
                    description=clean(description).strip() if description else None,
                    input_schema=_clean_descriptions(schema),
                    annotations=_annotations(definition.get("annotations")),
                )
            )
        return found, definitions

    def reload(self, manifest: Manifest) -> bool:
        """Take the definitions of the regenerated tree (``manifest``, the served one): a tool it changed is offered
        as it is now, one it removed (or whose server it dropped) no more (`gone`), one it has again once more; the
        definitions of the others are the same objects. Whether what is offered changed (then the client is told:
        ``notifications/tools/list_changed``). Before, the definitions of serve's start were offered until serve
        ended, a removed tool too, though each call was checked against the regenerated tree.

        Raises:
            AgentSetupError: a chosen server's snapshot is missing or malformed (nothing changes).
        """
        if not self.names:
            return False
        entries, definitions = self._read(
            _Chosen(self.tree, manifest=manifest, config=self.config), missing=lambda e: None
        )
        before = {d.name: d for d in self.definitions}
        kept = [before[d.name] if _same(before.get(d.name), d) else d for d in definitions]
        servers = {s.name for s in manifest.servers}
        gone = {name: why for name, why in self.gone.items() if name not in entries}
        for name, entry in self.entries.items():
            if name not in entries:
                why = "its server no longer lists it" if entry.server in servers else "nor is its server"
                gone[name] = f"{entry.server}.{cut_name(entry.tool, 200)} is not in it ({why})"
        changed = [d.name for d in kept] != [d.name for d in self.definitions] or any(
            a is not b for a, b in zip(kept, self.definitions, strict=False)
        )
        with self._lock:
            self.entries, self.definitions, self.gone = entries, kept, gone
        return changed

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    def call(
        self,
        name: str,
        arguments: Mapping[str, Any],
        runtime: Runtime,
        cancel: CallCancel | None = None,
        progress: ProgressListener | None = None,
        asker: Asker | None = None,
    ) -> types.CallToolResult:
        """Call the tool through the runtime's bridge (from a worker thread); a refusal is an error result.
        ``cancel``: the client's cancel of the request cancels the call upstream with it. ``progress``: told the
        server's progress notifications for the call (`agent.serve.upstream_progress`). ``asker``: answers what the
        server asks during the call (`agent.serve.upstream_asks`)."""
        from sandbox.bridge import ToolCallRefused
        from sandbox.config import SandboxConfig

        entry = self.entries.get(name)
        if entry is None:  # the tree was regenerated since the call was let in
            return error_result(self.refusal(name))
        called = f"{entry.server}.{cut_name(entry.tool, 200)}"  # escaped, not cleaned: get\u200b_item is not get_item
        max_chars = (runtime.sandbox_config or SandboxConfig.from_config(runtime.config)).output_chars
        try:
            raw = runtime.call_tool(
                entry.server, entry.tool, dict(arguments), cancel=cancel, progress=progress, asker=asker
            )
        except ToolCallRefused as e:
            return failed(f"{called} failed ({e.code}): {e.message}", max_chars)
        result = capped(raw, max_chars)
        if result is None:
            return error_result(f"{called} sent a result that is not a valid MCP result: no content")
        try:
            validated = types.CallToolResult.model_validate(result, by_name=False)
        except ValidationError as e:
            return failed(f"{called} sent a result that is not a valid MCP result: {e}", max_chars)
        self._remember_links(runtime, entry.server, raw, validated)
        return validated

    def refusal(self, name: str) -> str:
        """What a call of ``name``, no tool offered now, is told: why it is gone (`gone`), else that it is unknown."""
        if (why := self.gone.get(name)) is not None:
            return WITHDRAWN.format(name=name, why=why)
        return f"unknown tool {name!r}"

    @property
    def links(self) -> Callable[[Runtime, str], str | None] | None:
        """`linked`, when a passthrough tool is offered (its results may link to resources, which a client reads
        through serve: `agent.serve.upstream_extras`), else None."""
        return self.linked if self.entries else None

    def linked(self, runtime: Runtime, uri: str) -> str | None:
        """The server whose passthrough result in ``runtime``'s client session carried a resource link to ``uri``
        (the latest, when several did), or None."""
        with self._lock:
            return self._links.get(runtime, {}).get(uri)

    def _remember_links(
        self, runtime: Runtime, server: str, raw: Mapping[str, Any], sent: types.CallToolResult
    ) -> None:
        """Remember the URIs of the resource links of ``raw`` (the server's result) as ``server``'s, for the client's
        reads of them: those the client was ``sent`` as the server wrote them (`capped` cleans a URI, and leaves out
        a link past its caps: a URI it changed is not the server's)."""
        from agent.serve.upstream_offer import URI_CHARS  # it imports this module

        shown = {b.uri for b in sent.content if isinstance(b, types.ResourceLink)}
        content = raw.get("content")
        if not shown or not isinstance(content, list):
            return
        uris = [
            uri
            for block in content[:MAX_BLOCKS]
            if isinstance(block, dict) and block.get("type") == "resource_link"
            if isinstance(uri := block.get("uri"), str) and uri in shown and len(uri) <= URI_CHARS
        ]
        with self._lock:
            links = self._links.setdefault(runtime, {})
            for uri in uris:
                links.pop(uri, None)  # the latest link to it says its server, and is the last forgotten
                links[uri] = server
            while len(links) > MAX_LINKS:
                del links[next(iter(links))]


WITHDRAWN = "{name} is no longer offered: the tree was regenerated while serving, and {why}"
"""A call of a passthrough tool that a regeneration of the tree removed (`Passthrough.gone`). Before, serve offered it
still, and its call was refused as "not in this tree's manifest (only generated tools can be called)"."""
MAX_LINKS = 1_000
"""The resource links of passthrough results remembered per client session (the oldest forgotten first)."""
_VALUES = frozenset({"enum", "const", "default", "examples"})
"""Schema keywords whose values are data the model may send: never changed."""
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
"""Schema keywords whose values map names (any name, ``enum`` too) to schemas."""


CLIENT_PREFIX = "mcp__tooltree__"
"""What Claude Code puts in front of each tool of an MCP server added as ``tooltree`` before it sends it to the
Messages API, whose tool names have at most 64 characters."""
NAME_CHARS = 64 - len(CLIENT_PREFIX)
"""The longest name of a passthrough tool: a longer one keeps its start and gets a short hash of the whole. Before,
64, and Claude Code's every request of the conversation failed (`400 tools.N.name: String should match pattern
'^[a-zA-Z0-9_-]{1,64}$'`) once the model loaded a passthrough tool whose name was over 49 characters."""

TITLE_CHARS = 200
"""The longest title of a passthrough tool (or in its annotations) that is offered; a longer one is left out."""


class _Chosen(Toolset):
    """The tree's manifest, to find the passthrough tools as pinned tools are found (`Toolset.resolve_pinned`)."""

    def tools(self) -> list[dict[str, Any]]:
        return []

    def system_prompt(self) -> str:
        return ""

    def call(self, name: str, arguments: Mapping[str, Any], runtime: Runtime) -> ToolOutcome:
        raise KeyError(name)


def _snapshots(chosen: _Chosen, wanted: set[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
    """The ``wanted`` tools' definitions as their servers listed them, each chosen server's snapshot read once (before:
    every server's, for direct mode's definitions of the whole tree, then the chosen ones' again for the ``title`` and
    ``annotations``: 0.6 s at serve's start on a tree of 200 servers of 50 tools). The client reads those hints: one
    that asks before calling a tool not ``readOnlyHint`` asked for each without them, Claude Code ran them in turn.

    Raises:
        AgentSetupError: a chosen server's snapshot is missing or malformed.
    """
    servers = {server for server, _ in wanted}
    found: dict[tuple[str, str], dict[str, Any]] = {}
    held = HeldValues.reading()  # not kept, but read whole: bounded as the readers of every snapshot are
    for server in chosen.manifest.servers:
        if server.name not in servers:
            continue
        try:
            for tool in load_snapshot(chosen.tree, server, held):
                if (key := (server.name, str(tool.get("name")))) in wanted:
                    found[key] = tool
        except TreeError as e:
            raise AgentSetupError(str(e)) from None
    return found


def _same(before: types.Tool | None, now: types.Tool) -> bool:
    """Whether ``now`` is offered as ``before`` was (then ``before`` is kept: the same bytes to the client)."""
    if before is None:
        return False
    return before.model_dump(mode="json", by_alias=True) == now.model_dump(mode="json", by_alias=True)


def _title(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    title = " ".join(clean(value).split())
    return title if title and len(title) <= TITLE_CHARS else None


def _annotations(value: Any) -> types.ToolAnnotations | None:
    """The hints a client reads (booleans; a title as `_title`), or None when there are none."""
    if not isinstance(value, dict):
        return None
    fields: dict[str, Any] = {k: v for k in _HINTS if isinstance(v := value.get(k), bool)}
    if (title := _title(value.get("title"))) is not None:
        fields["title"] = title
    return types.ToolAnnotations.model_validate(fields, by_name=False) if fields else None


_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


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
