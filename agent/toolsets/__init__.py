"""The tools each mode offers the model: `code`, `direct` and `tool-search`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agent.defaults import MODES
from agent.errors import AgentSetupError
from agent.toolsets.base import ToolOutcome, Toolset
from agent.toolsets.code import CodeToolset
from agent.toolsets.direct import TOOL_SEARCH_NAME, TOOL_SEARCH_TYPE, DirectToolset, ToolSearchToolset

__all__ = [
    "MODES",
    "TOOL_SEARCH_NAME",
    "TOOL_SEARCH_TYPE",
    "CodeToolset",
    "DirectToolset",
    "ToolOutcome",
    "ToolSearchToolset",
    "Toolset",
    "make_toolset",
]


def make_toolset(mode: str, tree: str | Path, *, pinned: Sequence[str] = ()) -> Toolset:
    """The toolset of ``mode`` over ``tree``.

    Raises:
        AgentSetupError: an unknown mode, no manifest, or a pinned tool that is not in the tree.
    """
    if mode == "code":
        return CodeToolset(tree, pinned=pinned)
    if mode == "direct":
        return DirectToolset(tree, pinned=pinned)
    if mode == "tool-search":
        return ToolSearchToolset(tree, pinned=pinned)
    raise AgentSetupError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
