"""`filtered` mode: native MCP tools as in `direct`, narrowed per request by the pre-filter.

Before each request the pre-filter asks about every tool; the ones it admits (with their
siblings) are appended to the tools array, which otherwise stays byte-identical, so the prompt
cache holds from the request after the last growth on. Calls go through the same routing as
`direct` (and ``batch_tool``), for admitted tools only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.prefilter.gate import FilterStep, PreFilter
from agent.prefilter.text import not_offered
from agent.toolsets.base import ToolOutcome, error
from agent.toolsets.direct import DirectToolset, unknown_tool

if TYPE_CHECKING:
    from sandbox.host import Runtime


class FilteredToolset(DirectToolset):
    """The admitted tools of the tree as native tools (pinned tools are always admitted).

    Args:
        tree: the generated tree.
        prefilter: decides what is admitted (its catalog is this tree's tools).
        pinned: tools admitted from the start.
        batch_max: offer ``batch_tool`` for up to this many calls (None: not offered).

    Raises:
        AgentSetupError: no manifest, a missing snapshot, or an unknown pinned tool.
    """

    mode = "filtered"

    def __init__(
        self,
        tree: str | Path,
        *,
        prefilter: PreFilter,
        pinned: Sequence[str] = (),
        batch_max: int | None = None,
        config: str | None = None,
    ) -> None:
        super().__init__(tree, pinned=pinned, batch_max=batch_max, config=config)
        self.prefilter = prefilter
        self._by_name = {d["name"]: d for d in self._definitions}
        self.start_conversation()

    def _template(self) -> str:
        return "system_filtered.md.j2"

    def start_conversation(self) -> None:
        self.prefilter.start()
        self.prefilter.pin([self.prefilter.key(t.server, t.tool) for t in self.pinned])

    def before_request(self, messages: Sequence[dict[str, Any]]) -> FilterStep:
        return self.prefilter.decide(messages)

    def tools(self) -> list[dict[str, Any]]:
        offered = [dict(self._by_name[t.name]) for t in self.prefilter.offered()]
        return [*self._batch(), *offered]

    def offered_names(self) -> list[str]:
        return [t.name for t in self.prefilter.offered()]

    def call_native(self, name: str, arguments: Mapping[str, Any], runtime: Runtime) -> ToolOutcome:
        entry = self.names.get(name)
        if entry is None:
            return error(unknown_tool(name, self.offered_names()))
        if self.prefilter.key(entry.server, entry.tool) not in self.prefilter.admitted:  # a tool of the tree
            return error(not_offered(name))
        return super().call_native(name, arguments, runtime)
