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
    """One ``tool_use`` handled by the loop."""

    turn: int
    name: str
    note: str
    is_error: bool
    seconds: float
    script_calls: int
    sandbox_bytes: int
    model_bytes: int


@dataclass(frozen=True)
class RunFinished:
    summary: RunSummary


Event: TypeAlias = ModelReplied | ToolFinished | RunFinished
EventHandler: TypeAlias = Callable[[Event], None]
