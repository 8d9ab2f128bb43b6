"""What a run reports: token usage, the summary, and the `RunResult`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STOP_REASONS = (
    "end_turn",  # the model finished
    "stop_sequence",
    "max_tokens",  # a reply hit max_tokens; the run stops there
    "refusal",
    "model_context_window_exceeded",
    "max_turns",  # the turn limit
    "token_budget",  # the run's token budget
)


@dataclass
class TokenUsage:
    """Token counts as the API reports them (``usage``), summed over requests."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    @classmethod
    def from_api(cls, usage: Any) -> TokenUsage:
        """From an SDK ``Usage`` object (missing cache fields count 0)."""
        return cls(
            input_tokens=int(getattr(usage, "input_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "output_tokens", 0) or 0),
            cache_creation_input_tokens=int(getattr(usage, "cache_creation_input_tokens", 0) or 0),
            cache_read_input_tokens=int(getattr(usage, "cache_read_input_tokens", 0) or 0),
        )

    def add(self, other: TokenUsage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_creation_input_tokens += other.cache_creation_input_tokens
        self.cache_read_input_tokens += other.cache_read_input_tokens

    @property
    def sent(self) -> int:
        """All input tokens: uncached, written to the cache, and read from it."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    @property
    def total(self) -> int:
        """Input (all kinds) plus output: what the token budget counts."""
        return self.sent + self.output_tokens


@dataclass
class RunSummary:
    """The numbers of one run.

    Attributes:
        turns: requests to the Messages API.
        tool_calls: ``tool_use`` blocks the loop ran (model-facing tools).
        tool_errors: of those, the ones that came back with ``is_error``.
        script_tool_calls: MCP calls made from scripts inside the sandbox.
        sandbox_bytes: bytes of MCP tool results that stayed in the sandbox.
        model_bytes: bytes of tool results that reached the model (text, plus base64 of images).
    """

    mode: str
    model: str
    stop_reason: str = ""
    answer: str = ""
    turns: int = 0
    usage: TokenUsage = field(default_factory=TokenUsage)
    tool_calls: int = 0
    tool_errors: int = 0
    script_tool_calls: int = 0
    sandbox_bytes: int = 0
    model_bytes: int = 0
    duration_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["usage"] = {**asdict(self.usage), "sent": self.usage.sent, "total": self.usage.total}
        data["duration_s"] = round(self.duration_s, 3)
        return data


@dataclass
class RunResult:
    """The outcome of `Agent.run`.

    Attributes:
        answer: the text of the model's last reply.
        stop_reason: why the run ended (one of `STOP_REASONS`).
        summary: turns, tokens, tool calls and bytes.
        messages: the whole conversation as sent to the API.
        transcript: the JSONL transcript file, when one was written.
    """

    answer: str
    stop_reason: str
    summary: RunSummary
    messages: list[dict[str, Any]]
    transcript: Path | None = None

    @property
    def completed(self) -> bool:
        """The model ended the run itself (not a limit, a refusal or ``max_tokens``)."""
        return self.stop_reason in ("end_turn", "stop_sequence")
