"""The tools each mode offers the model: `code`, `direct`, `tool-search` and `filtered`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agent.defaults import MODES
from agent.errors import AgentSetupError
from agent.toolsets.base import ToolOutcome, Toolset
from agent.toolsets.batch import BATCH_NAME
from agent.toolsets.code import CodeToolset
from agent.toolsets.direct import TOOL_SEARCH_NAME, TOOL_SEARCH_TYPE, DirectToolset, ToolSearchToolset

if TYPE_CHECKING:
    from agent.prefilter.gate import PreFilter

__all__ = [
    "BATCH_NAME",
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


def make_toolset(
    mode: str,
    tree: str | Path,
    *,
    pinned: Sequence[str] = (),
    prefilter: PreFilter | None = None,
    batch_max: int | None = None,
    config: str | None = None,
    packages: Sequence[str] = (),
) -> Toolset:
    """The toolset of ``mode`` over ``tree``; ``config``, the configuration file in use, is named in the command to
    regenerate the tree (a pinned tool it lacks); ``packages``, the ``sandbox.pip_packages`` of the image, are named in
    code mode's system prompt, which says what the sandbox has (`agent.prompts.sandbox_holds`).

    ``prefilter`` narrows ``filtered`` mode (which needs one) and, in ``code`` mode, inlines the
    admitted tools' signatures; ``batch_max`` offers ``batch_tool`` in ``direct``, ``tool-search``
    and ``filtered`` modes.

    Raises:
        AgentSetupError: an unknown mode, no manifest, a pinned tool that is not in the tree, a
            ``filtered`` mode without pre-filter, or a pre-filter in a mode that cannot use one.
    """
    if mode not in MODES:
        raise AgentSetupError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    if prefilter is not None and mode not in ("code", "filtered"):
        raise AgentSetupError(f"the pre-filter works in code and filtered modes, not in {mode}")
    if mode == "code":
        if prefilter is not None:
            from agent.toolsets.code_filtered import PrefilteredCodeToolset

            return PrefilteredCodeToolset(tree, pinned=pinned, prefilter=prefilter, config=config, packages=packages)
        return CodeToolset(tree, pinned=pinned, config=config, packages=packages)
    if mode == "direct":
        return DirectToolset(tree, pinned=pinned, batch_max=batch_max, config=config)
    if mode == "tool-search":
        return ToolSearchToolset(tree, pinned=pinned, batch_max=batch_max, config=config)
    if prefilter is None:
        raise AgentSetupError("filtered mode needs a pre-filter (local or claude)")
    from agent.toolsets.filtered import FilteredToolset

    return FilteredToolset(tree, prefilter=prefilter, pinned=pinned, batch_max=batch_max, config=config)
