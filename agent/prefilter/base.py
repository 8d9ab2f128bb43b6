"""The pre-filter's seam: `ToolFilter` (one independent probability per tool) and what it works on.

A classifier is asked, before a request, how likely each tool of the catalog is to be needed
by the conversation so far. It answers for every tool on its own (a probability per tool, not
a choice among them, so several tools can be likely at once) or raises `FilterError`, and the
pre-filter then sends the full catalog (fail open).

::

    FilterError             the classifier could not decide; ``kind`` says why
    (kinds: "error", "timeout", "missing_model", "corrupt_state")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from agent.errors import AgentError
from agent.summary import TokenUsage

FailKind = Literal["error", "timeout", "missing_model", "corrupt_state"]


class FilterError(AgentError):
    """A classifier or the admitted-set state failed; the pre-filter fails open.

    Attributes:
        kind: ``error`` (the classifier failed or answered nonsense), ``timeout``,
            ``missing_model`` (no such model, no index, or an embedding model that is not installed),
            ``corrupt_state`` (the persisted admitted set cannot be read).
        usage: tokens a model-based classifier spent on an answer it could not use (they are still paid for).
        requests: requests it sent before failing.
    """

    def __init__(
        self, message: str, *, kind: FailKind = "error", usage: TokenUsage | None = None, requests: int = 0
    ) -> None:
        super().__init__(message)
        self.kind: FailKind = kind
        self.usage = usage if usage is not None else TokenUsage()
        self.requests = requests


@dataclass(frozen=True)
class CatalogTool:
    """One tool the pre-filter decides about."""

    key: str
    """``<server>.<tool>`` with the original names: what the admitted set stores (a JSON array
    ``["<server>", "<tool>"]`` when two tools of the catalog would join to the same text:
    `agent.prefilter.catalog.tool_keys`)."""
    name: str
    """The native tool name the model sees (``<server>__<tool>``)."""
    server: str
    tool: str
    description: str


@dataclass
class Verdicts:
    """A classifier's answer: the probability that each tool is needed."""

    probabilities: dict[str, float]
    """``key → P(needed)`` in [0, 1]; a tool left out counts 0."""
    usage: TokenUsage = field(default_factory=TokenUsage)
    """Tokens a model-based classifier used (zero for the local one)."""
    requests: int = 0
    """Requests it sent to a model."""
    note: str = ""
    """One line on how it decided (e.g. ``lexical only``)."""
    threshold: float | None = None
    """The classifier's default threshold for this answer, when it depends on how it decided."""


class ToolFilter(Protocol):
    """Decides, for each tool independently, whether a request needs it."""

    name: str
    """``local``, ``claude``, ... (shown in the transcript and the summary)."""
    default_threshold: float
    """The probability above which a tool is admitted unless the user sets another."""

    def classify(self, text: str, catalog: Sequence[CatalogTool]) -> Verdicts:
        """The probability that answering ``text`` needs each tool of ``catalog``.

        Raises:
            FilterError: the classifier cannot decide (any kind); the caller sends every tool.
        """
        ...
