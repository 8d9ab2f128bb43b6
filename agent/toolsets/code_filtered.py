"""Code mode with the pre-filter: the admitted tools are shown in the system prompt, within a budget.

The model can then write its script in its first turn without browsing the tree for them. The
classifier admits about the same share of any catalog (~15 %: 76 tools of 527), so inlining every
admitted tool's signature would make the prompt grow with the catalog. Each admitted tool gets one
entry, in the first form that still fits:

- its signature (as ``search_tools`` shows it), if the classifier itself put it at or above the
  threshold (or it was loaded from the state file, decided in an earlier conversation), highest
  probability first, while the signatures take at most `SIGNATURE_CHARS`;
- one line, ``- <server>.<function> — <summary>``, while the lines take at most `LINE_CHARS`
  (siblings, and tools past the signature budget);
- its name only, ``<server>.<function>``, on one line per decision (~8 tokens a tool).

Both budgets are `INDEX_CHARS` (~1,000 tokens), the bound the prompt already puts on its other
part that grows with the catalog (the root index): the pre-filter adds at most about twice what
the index may take, plus the names past both budgets. They are a bound on the prompt's size, not a
choice made on any task. Tools pinned by hand keep their full signatures, outside the budgets.

Grow-only: each decision appends entries for the tools it added; an entry, once shown, never
changes (a tool shown as a line stays one: its stub is one ``read_file`` away), so the system
prompt changes only when the set grows, and only by appending. The tree stays whole (every stub can
still be read and imported), so when the pre-filter fails open nothing is shown beyond what it had
decided: the full catalog is already there to browse.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from agent.prefilter.gate import FilterStep, PreFilter
from agent.toolsets.code import INDEX_CHARS, CodeToolset, stub_hit
from tool_tree.search import render_hits
from tool_tree.text import one_line
from tool_tree.tree import ToolEntry

SIGNATURE_CHARS = INDEX_CHARS
"""Most characters of admitted tools' signatures in the prompt (pinned ones not counted)."""
LINE_CHARS = INDEX_CHARS
"""Most characters of one-line entries in the prompt."""
LINE_SUMMARY = 80
"""Characters of a tool's summary on its line (a line stays under ~120 characters)."""


class PrefilteredCodeToolset(CodeToolset):
    """`CodeToolset` whose prompt grows with the pre-filter's decisions, within the budgets.

    Args:
        tree: the generated tree.
        prefilter: decides which tools are shown.
        pinned: tools whose full signatures are always in the prompt (outside the budgets).
        index_chars: the longest ``INDEX.md`` inlined as is.
        signature_chars: budget of the signatures of admitted tools.
        line_chars: budget of the one-line entries.
        packages: the ``sandbox.pip_packages`` the image adds (`CodeToolset`).

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
        signature_chars: int = SIGNATURE_CHARS,
        line_chars: int = LINE_CHARS,
        config: str | None = None,
        packages: Sequence[str] = (),
    ) -> None:
        self._picked: list[str] = []
        """The entries shown for the pre-filter's tools, in the order they were appended."""
        super().__init__(tree, pinned=pinned, index_chars=index_chars, config=config, packages=packages)
        self.prefilter = prefilter
        self.signature_chars = signature_chars
        self.line_chars = line_chars
        self._entries = {self.prefilter.key(t.server, t.tool): t for t in self.manifest.tools}
        self.start_conversation()

    def start_conversation(self) -> None:
        super().start_conversation()
        self.prefilter.start()
        self._shown: dict[str, str] = {self.prefilter.key(t.server, t.tool): "pinned" for t in self.pinned}
        """Key → how the tool is shown: ``pinned``, ``signature``, ``line`` or ``name``."""
        self._picked = []
        self._spent = {"signature": 0, "line": 0}
        self._append(self.prefilter.decided, chosen=self.prefilter.decided)  # loaded from the state file
        self._system = self.prompt("system_code.md.j2")

    def before_request(self, messages: Sequence[dict[str, Any]]) -> FilterStep:
        step = self.prefilter.decide(messages)
        decided = [k for k in step.added if k in self.prefilter.decided]  # not what a fail-open admitted
        if decided and self._append(decided, chosen=step.chosen):
            self._system = self.prompt("system_code.md.j2")
        return step

    def shown(self) -> dict[str, str]:
        """How each tool in the prompt is shown (``pinned``, ``signature``, ``line``, ``name``), in order."""
        return dict(self._shown)

    def _picked_text(self) -> str:
        return "\n".join(self._picked)

    def _append(self, keys: Iterable[str], *, chosen: Iterable[str]) -> bool:
        """Append entries for the tools of ``keys`` not shown yet: signatures for those in ``chosen``
        (in its order) while they fit, then lines, then one line of names. Whether anything was added."""
        new = [k for k in dict.fromkeys(keys) if k in self._entries and k not in self._shown]
        first = [k for k in chosen if k in new]
        names: list[str] = []
        for key in [*first, *(k for k in new if k not in first)]:
            tool = self._entries[key]
            block = self._signature(tool) if key in first else ""
            line = f"- {tool.qualified_name} — {one_line(tool.summary, LINE_SUMMARY) or '(no description)'}"
            if block and self._fits("signature", block):
                self._show(key, "signature", block)
            elif self._fits("line", line):
                self._show(key, "line", line)
            else:
                self._shown[key] = "name"
                names.append(tool.qualified_name)
        if names:
            self._picked.append("- also picked: " + ", ".join(names))
        return bool(new)

    def _signature(self, tool: ToolEntry) -> str:
        return render_hits(self.tree, [stub_hit(tool)], "summary").strip()

    def _fits(self, kind: str, text: str) -> bool:
        room = self.signature_chars if kind == "signature" else self.line_chars
        return self._spent[kind] + len(text) + 1 <= room

    def _show(self, key: str, kind: str, text: str) -> None:
        self._spent[kind] += len(text) + 1
        self._shown[key] = kind
        self._picked.append(text)
