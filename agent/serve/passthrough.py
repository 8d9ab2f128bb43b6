"""Passthrough: chosen tools of the tree offered as ordinary MCP tools, besides the four of code mode.

``serve: passthrough: [crm.get_record]`` makes ``crm__get_record`` a tool of `tooltree serve`
with the server's own description and input schema (the names and definitions of ``direct``
mode, `agent.toolsets.direct`). A call goes through the same bridge as a script's (allowlist,
argument validation against the schema, audit) and its result comes back unchanged: content,
structured content and ``isError`` as the server sent them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp_types as types
from pydantic import ValidationError

from agent.serve.content import error_result
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
        wanted = {(e.server, e.tool) for e in direct.resolve_pinned(names, what="passthrough tool")}
        for native in direct.tools():
            entry = direct.names[native["name"]]
            if (entry.server, entry.tool) in wanted:
                self.entries[native["name"]] = entry
                self.definitions.append(
                    types.Tool(
                        name=native["name"], description=native.get("description"), input_schema=native["input_schema"]
                    )
                )

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    def call(self, name: str, arguments: Mapping[str, Any], runtime: Runtime) -> types.CallToolResult:
        """Call the tool through the runtime's bridge (from a worker thread); a refusal is an error result."""
        from sandbox.bridge import ToolCallRefused

        entry = self.entries[name]
        try:
            raw = runtime.call_tool(entry.server, entry.tool, dict(arguments))
        except ToolCallRefused as e:
            return error_result(f"{entry.server}.{entry.tool} refused: {e.message}")
        try:
            return types.CallToolResult.model_validate(raw, by_name=False)
        except ValidationError as e:
            return error_result(f"{entry.server}.{entry.tool} sent a result that is not a valid MCP result: {e}")
