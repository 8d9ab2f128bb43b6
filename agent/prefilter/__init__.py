"""The pre-filter: before each request, one independent yes/no probability per tool decides what
the model is offered.

- `ToolFilter` (``base``): the classifier seam; `LocalFilter` (``local``, offline, calibrated on
  the search index) and `ClaudeFilter` (``claude``, one request to a small model).
- `PreFilter` (``gate``): threshold, siblings (``catalog``), grow-only admitted set (``state``,
  optionally persisted), fail-open on every failure.

Used by ``filtered`` mode (native tools, narrowed) and by ``code`` mode with a pre-filter (the
admitted tools' signatures inlined).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from agent.defaults import DEFAULT_RETRIES
from agent.errors import AgentSetupError
from agent.prefilter.base import Attempt, CatalogTool, FilterError, ToolFilter, Verdicts, current_attempt
from agent.prefilter.catalog import SIBLINGS, Siblings, load_catalog, sibling_map
from agent.prefilter.claude import DEFAULT_FILTER_MODEL, ClaudeFilter
from agent.prefilter.gate import DEFAULT_TIMEOUT, FilterStep, PreFilter, request_text
from agent.prefilter.local import LocalFilter
from agent.prefilter.state import AdmittedSet, load_state, save_state
from sandbox.stored_definitions import shared_manifest
from tool_tree.tree import TreeError

if TYPE_CHECKING:
    import anthropic

__all__ = [
    "DEFAULT_FILTER_MODEL",
    "DEFAULT_TIMEOUT",
    "SIBLINGS",
    "AdmittedSet",
    "Attempt",
    "CatalogTool",
    "ClaudeFilter",
    "FilterError",
    "FilterStep",
    "LocalFilter",
    "PreFilter",
    "Siblings",
    "ToolFilter",
    "Verdicts",
    "current_attempt",
    "load_catalog",
    "load_state",
    "make_prefilter",
    "request_text",
    "save_state",
    "sibling_map",
]


def make_prefilter(
    tree: str | Path,
    classifier: str | ToolFilter,
    *,
    threshold: float | None = None,
    siblings: str = "named",
    timeout: float = DEFAULT_TIMEOUT,
    state: str | Path | None = None,
    model: str | None = None,
    client: anthropic.Anthropic | None = None,
    max_retries: int = DEFAULT_RETRIES,
) -> PreFilter:
    """A `PreFilter` over the tools of ``tree`` with the ``local`` or ``claude`` classifier (or one given). The
    ``claude`` classifier asks through ``client`` (default: one made from the environment at its first request, with
    ``max_retries`` retries).

    Raises:
        AgentSetupError: an unknown classifier or siblings mode, a threshold outside (0, 1], a timeout
            outside (0, `agent.defaults.MAX_PREFILTER_TIMEOUT`], or a tree without manifest or snapshots.
    """
    tree = Path(tree)
    if isinstance(classifier, str):
        if classifier == "local":
            classifier = LocalFilter(tree)
        elif classifier == "claude":  # sends no request once the pre-filter gave up (see `Attempt`)
            model = model or DEFAULT_FILTER_MODEL
            classifier = ClaudeFilter(client, model=model, timeout=timeout, max_retries=max_retries)
        else:
            raise AgentSetupError(f"unknown pre-filter {classifier!r}; use local or claude")
    if siblings not in SIBLINGS:
        raise AgentSetupError(f"unknown siblings mode {siblings!r}; use {' or '.join(SIBLINGS)}")
    mode: Siblings = "server" if siblings == "server" else "named"
    try:
        catalog = load_catalog(tree, shared_manifest(tree))  # the toolset's copy: its tools are read once
    except TreeError as e:
        raise AgentSetupError(str(e)) from None
    try:
        return PreFilter(classifier, catalog, threshold=threshold, siblings=mode, timeout=timeout, state=state)
    except ValueError as e:
        raise AgentSetupError(str(e)) from None
