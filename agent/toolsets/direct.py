"""The baseline modes: every MCP tool as a native tool (`direct`), or deferred behind the API's
BM25 tool search (`tool-search`).

Definitions come from the tree's snapshots (the servers' raw ``tools/list``), filtered by the
manifest, so they are exactly what the servers offer. Calls go through the same bridge as a
sandboxed script (allowlist, argument validation, audit); results go straight into the
context, images as images. A call that fails shows its error as code mode's ledger does (`ledger_error`). A call
Ctrl-C stops while it runs goes out with the interrupt as a call made (`INTERRUPTED_OUTCOME`), as a stopped script
does: the run counts it (before: no call at all, though its server may have acted on it).

The tool search tool is ``{"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}``
(as typed by the ``anthropic`` SDK 2.14, ``ToolSearchToolBm25_20251119Param``). The API runs
the search itself and answers in the same response with ``server_tool_use`` and
``tool_search_tool_result`` blocks; the loop only sends those back with the rest of the turn.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.content import mcp_result_blocks
from agent.errors import AgentSetupError
from agent.naming import native_names
from agent.prompts import render
from agent.toolsets.base import INTERRUPTED_OUTCOME, ToolOutcome, Toolset, error
from agent.toolsets.batch import BATCH_NAME, batch_calls, batch_definition, run_batch
from agent.toolsets.schema_shape import schema_problem
from sandbox.results import ledger_error
from tool_tree.held_values import HeldValues
from tool_tree.text import one_line
from tool_tree.tree import Manifest, ToolEntry, TreeError, load_snapshot

if TYPE_CHECKING:
    from sandbox.host import Runtime

TOOL_SEARCH_TYPE = "tool_search_tool_bm25_20251119"
TOOL_SEARCH_NAME = "tool_search_tool_bm25"
SERVER_CHARS = 200
"""The most of a server's name or description the system prompt shows (the generator writes a description of one
sentence of at most 140 characters, cleaned); a manifest written elsewhere may hold anything (before: put in the
prompt as it was, escapes and all, however long)."""


DESCRIPTION_CHARS = 4_000
"""The most of a tool's description a native definition carries, as its stub's docstring does
(`generator.docstrings.MAX_DESCRIPTION`); the longest of the 527 tools of LiveMCPBench's 70 servers has 3,866."""
SCHEMA_CHARS = 64_000
"""The longest input schema (as JSON) a native definition carries; the longest of those 527 tools has 5,253. A longer
one is left out of the definition (the call's arguments are still checked against it)."""


def _native_text(description: object, schema: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The description and input schema a native definition carries: the description cut to `DESCRIPTION_CHARS`, a
    schema over `SCHEMA_CHARS` replaced by any object, each said at the description's end. Before, both went whole
    into every request (and every `tools/list` of serve's passthrough tools): one server's 1 MB description made
    each request of a run fail, or cost a quarter of a million tokens."""
    text = description if isinstance(description, str) and description.strip() else ""
    if len(text) > DESCRIPTION_CHARS:
        text = f"{text[:DESCRIPTION_CHARS]}… ({len(text) - DESCRIPTION_CHARS:,} characters more left out)"
    size = len(json.dumps(schema, ensure_ascii=False))
    note = None
    if size > SCHEMA_CHARS:
        note = (
            f"(Its input schema, {size:,} characters, is over {SCHEMA_CHARS:,} and left out here; the arguments are "
            "still checked against it.)"
        )
    elif (problem := schema_problem(schema)) is not None:  # the API would refuse every request with it
        note = (
            f"(Its input schema is left out here: it is not valid JSON Schema draft 2020-12, which the Messages API "
            f"takes: {one_line(problem, 160)}; the server checks the arguments.)"
        )
    if note is not None:
        schema = {"type": "object"}
        text = f"{text}\n\n{note}" if text else note
    return text, schema


def _input_schema(raw: Mapping[str, Any]) -> dict[str, Any]:
    schema = raw.get("inputSchema")
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    if schema.get("type") != "object":
        return {**schema, "type": "object"}
    return dict(schema)


STOPPED_NOTE = "stopped by Ctrl-C"
"""The live view's note of a call Ctrl-C stopped while it ran, no output of it known (its server may have acted)."""
SUGGESTIONS = 3
"""The most tool names an unknown tool's error suggests."""
CLOSE = 0.8
"""How alike (`difflib.SequenceMatcher.ratio`) a name must be to be suggested: the server prefix the names share
makes unrelated tools of one server about 0.6 alike (``crm__drop_tables``, ``crm__create_task``), a slip of one
name 0.8 and more (``get_record`` for ``crm__get_record``, ``crm__get_recrod``)."""


def unknown_tool(name: str, offered: Sequence[str]) -> str:
    """The error of a call of ``name``, which is no tool: with the closest of the ``offered`` names, when some are
    close (a model that wrote ``everything__get_tiny_image`` for ``everything__get-tiny-image``: before, the error
    named no tool, and the model had to find the name in the tools array again)."""
    import difflib

    folded = {n.replace("-", "_").lower(): n for n in offered}  # - and _ alike: the commonest slip of a name
    wanted = name.replace("-", "_").lower()
    close = [wanted] if wanted in folded else difflib.get_close_matches(wanted, list(folded), SUGGESTIONS, CLOSE)
    if not close:
        return f"unknown tool {name!r}"
    return f"unknown tool {name!r}; did you mean {' or '.join(repr(folded[c]) for c in close)}?"


NativeTools = tuple[dict[str, ToolEntry], list[dict[str, Any]]]
_last_native: list[tuple[Any, Manifest, NativeTools]] = []  # the last result, with its key and manifest
_native_lock = threading.Lock()


def native_tools(tree: Path, manifest: Manifest) -> NativeTools:
    """Every tool of the tree under its native name, and its definition (in the same order). Callers only read them.

    The last result is given again for the same ``manifest`` (the object: the process's shared copy of the file,
    `sandbox.stored_definitions.shared_manifest`) while the tree's snapshot files are the same: a pre-filtered run asks
    twice, for its pre-filter's catalog and for its toolset. Before, each read every snapshot and checked every schema
    (an 8,020-tool catalog of large schemas: 3.5 s each).

    Raises:
        AgentSetupError: a snapshot is missing or malformed.
    """
    key = (os.path.realpath(tree), tuple(_file_version(Path(tree, s.snapshot)) for s in manifest.servers))
    with _native_lock:
        if _last_native and _last_native[0][1] is manifest and _last_native[0][0] == key:
            return _last_native[0][2]
    found = _read_native_tools(tree, manifest)
    with _native_lock:
        _last_native[:] = [(key, manifest, found)]
    return found


def _file_version(path: Path) -> tuple[int, ...]:
    try:
        st = os.stat(path, follow_symlinks=False)
    except (OSError, ValueError):
        return ()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _read_native_tools(tree: Path, manifest: Manifest) -> NativeTools:
    names = native_names(manifest.tools)
    raw: dict[tuple[str, str], dict[str, Any]] = {}
    held = HeldValues.reading()  # every server's tools are held at once
    try:
        for server in manifest.servers:
            for tool in load_snapshot(tree, server, held):
                raw[(server.name, str(tool.get("name")))] = tool
    except TreeError as e:
        raise AgentSetupError(str(e)) from None
    definitions: list[dict[str, Any]] = []
    for name, entry in names.items():
        definition = raw.get((entry.server, entry.tool), {})
        native: dict[str, Any] = {"name": name}
        description, schema = _native_text(definition.get("description"), _input_schema(definition))
        if description:
            native["description"] = description
        native["input_schema"] = schema
        definitions.append(native)
    return names, definitions


class DirectToolset(Toolset):
    """Every tool of the tree as a native tool named ``<server>__<tool>``.

    Raises:
        AgentSetupError: no manifest or a missing snapshot.
    """

    mode = "direct"

    def __init__(
        self, tree: str | Path, *, pinned: Sequence[str] = (), batch_max: int | None = None, config: str | None = None
    ) -> None:
        super().__init__(tree, config=config)
        self.pinned = self.resolve_pinned(pinned)
        self.batch_max = batch_max
        self.names, self._definitions = native_tools(self.tree, self.manifest)
        self._system = render(self._template(), servers=self._servers(), search_tool=TOOL_SEARCH_NAME)

    def _template(self) -> str:
        return "system_direct.md.j2"

    def _servers(self) -> list[dict[str, str]]:
        return [
            {"name": one_line(s.name, SERVER_CHARS), "description": one_line(s.description, SERVER_CHARS)}
            for s in sorted(self.manifest.servers, key=lambda s: s.name)
        ]

    def tools(self) -> list[dict[str, Any]]:
        return [*self._batch(), *json.loads(json.dumps(self._definitions))]

    def _batch(self) -> list[dict[str, Any]]:
        """``batch_tool``'s definition, when it is offered."""
        return [batch_definition(self.batch_max)] if self.batch_max else []

    def system_prompt(self) -> str:
        return self._system

    def concurrent(self, name: str) -> bool:
        # Several tool_use blocks in one reply are independent calls (parallel tool use).
        return name in self.names or (name == BATCH_NAME and bool(self.batch_max))

    def calls_in(self, name: str, arguments: Mapping[str, Any]) -> int:
        if name == BATCH_NAME and self.batch_max:
            return batch_calls(arguments, self.batch_max)
        return 1

    def call(self, name: str, arguments: Mapping[str, Any], runtime: Runtime) -> ToolOutcome:
        if name == BATCH_NAME and self.batch_max:
            return run_batch(arguments, lambda n, a: self.call_native(n, a, runtime), self.batch_max)
        return self.call_native(name, arguments, runtime)

    def offered_names(self) -> list[str]:
        """The native names of the tools the model may call (every tool of the tree here)."""
        return list(self.names)

    def call_native(self, name: str, arguments: Mapping[str, Any], runtime: Runtime) -> ToolOutcome:
        """One call of an MCP tool by its native name, through the bridge."""
        from sandbox.bridge import ToolCallRefused

        entry = self.names.get(name)
        if entry is None:
            return error(unknown_tool(name, self.offered_names()))
        try:
            result = runtime.call_tool(entry.server, entry.tool, dict(arguments))
        except ToolCallRefused as e:
            # Refused before it was sent, or sent and no usable answer came back (the message says which). It
            # quotes the server: shown as code mode's ledger shows the same call's error, cleaned and at most
            # 2,000 characters (before: raw, escapes and all, and cut only by the reply's 500,000-character budget).
            return error(ledger_error(f"{entry.server}.{entry.tool} failed ({e.code}): {e.message}"))
        except KeyboardInterrupt as e:  # under way at Ctrl-C: a call made, and stopped (`agent.calls` counts it)
            setattr(e, INTERRUPTED_OUTCOME, ToolOutcome([], is_error=True, note=STOPPED_NOTE))
            raise
        is_error = result.get("isError") is True
        return ToolOutcome(
            mcp_result_blocks(result), is_error=is_error, note="the tool reported an error" if is_error else ""
        )


class ToolSearchToolset(DirectToolset):
    """Every tool deferred (``defer_loading: true``) except the pinned ones, plus the BM25 tool search tool."""

    mode = "tool-search"

    def _template(self) -> str:
        return "system_tool_search.md.j2"

    def tools(self) -> list[dict[str, Any]]:
        pinned = {(t.server, t.tool) for t in self.pinned}
        tools = json.loads(json.dumps(self._definitions))
        out: list[dict[str, Any]] = []
        for tool in tools:
            entry = self.names[tool["name"]]
            out.append(tool if (entry.server, entry.tool) in pinned else {**tool, "defer_loading": True})
        deferred = [t for t in out if t.get("defer_loading")]
        loaded = [t for t in out if not t.get("defer_loading")]
        return [*deferred, *loaded, *self._batch(), {"type": TOOL_SEARCH_TYPE, "name": TOOL_SEARCH_NAME}]
