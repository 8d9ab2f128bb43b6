"""Code mode with the pre-filter: the admitted tools' signatures are inlined like pinned tools.

The model can then write its script in its first turn without browsing the tree for them.
The tree stays whole (every stub can still be read and imported), so when the pre-filter fails
open nothing is inlined beyond what it had decided: the full catalog is already there to browse.
The system prompt changes only when the decided set grows, by appending signatures.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.prefilter.gate import FilterStep, PreFilter
from agent.toolsets.code import INDEX_CHARS, CodeToolset


class PrefilteredCodeToolset(CodeToolset):
    """`CodeToolset` whose pinned signatures grow with the pre-filter's decisions.

    Raises:
        AgentSetupError: no manifest, or a pinned tool is not in the tree.
    """

    def __init__(
        self,
        tree: str | Path,
        *,
        prefilter: PreFilter,
        pinned: Sequence[str] = (),
        index_chars: int = INDEX_CHARS,
    ) -> None:
        super().__init__(tree, pinned=pinned, index_chars=index_chars)
        self.prefilter = prefilter
        self._explicit = list(self.pinned)
        self._entries = {f"{t.server}.{t.tool}": t for t in self.manifest.tools}
        self.start_conversation()

    def start_conversation(self) -> None:
        self.prefilter.start()
        self._refresh()

    def before_request(self, messages: Sequence[dict[str, Any]]) -> FilterStep:
        step = self.prefilter.decide(messages)
        if step.added:
            self._refresh()
        return step

    def _refresh(self) -> None:
        decided = [self._entries[k] for k in self.prefilter.decided if k in self._entries]
        self.pinned = [*self._explicit, *(t for t in decided if t not in self._explicit)]
        self._system = self.prompt("system_code.md.j2")
