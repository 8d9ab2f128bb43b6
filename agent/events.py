"""Events a run reports as it goes (the CLI's live view listens to them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

from agent.summary import RunSummary, TokenUsage


@dataclass(frozen=True)
class ModelReplied:
    """One response of the Messages API."""

    turn: int
    stop_reason: str
    usage: TokenUsage
    """This response's usage."""
    total: TokenUsage
    """The run's usage so far."""
    seconds: float


@dataclass(frozen=True)
class ToolFinished:
    """One ``tool_use`` handled by the loop.

    A ``batch_tool`` call has its ``invocations`` and how many of them ``failed``, as the run summary counts them
    (`agent.summary.RunSummary`: ``tool_calls``, ``tool_errors``); the batch itself is no error when some of its
    invocations failed. Before, the event had ``is_error`` alone, and the live view said ``[ok]`` for a batch of five
    of which two failed.
    """

    turn: int
    name: str
    note: str
    is_error: bool
    seconds: float
    script_calls: int
    sandbox_bytes: int
    model_bytes: int
    invocations: int | None = None
    """A ``batch_tool`` call's invocations that ran (0 for a batch refused whole); None for any other call."""
    failed: int = 0
    """Of a batch's ``invocations``, those that failed."""


@dataclass(frozen=True)
class RunFinished:
    summary: RunSummary


Event: TypeAlias = ModelReplied | ToolFinished | RunFinished
EventHandler: TypeAlias = Callable[[Event], None]
