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
    "api_error",  # the Messages API failed after retries (`ModelAPIError`)
    "unreadable_reply",  # the SDK could not read a reply: a tool call's input it cannot parse (`ModelAPIError`)
    "interrupted",  # Ctrl-C (KeyboardInterrupt) stopped the run: in the transcript's run_end; the exception goes on
    "sandbox_error",  # the sandbox (or the server pool) could not start: `SandboxError` (`agent.errors.failed_run`)
    "on_event_error",  # the on_event callback raised: `EventHandlerError`, its exception the cause
)


PRICE_RATIOS = {
    "input_tokens": 1.0,
    "cache_creation_input_tokens": 1.25,
    "cache_read_input_tokens": 0.1,
    "output_tokens": 5.0,
}
"""What one token of each count of `TokenUsage` costs next to one uncached input token: Anthropic's published price
ratios for Claude models (a cache write, of the 5-minute cache tooltree's requests ask for, 1.25×; a cache read 0.1×;
output 5×). `TokenUsage.cost_units` weighs the counts by them."""


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
        """Input (all kinds) plus output; with the pre-filter's, what the token budget counts (`RunSummary.spent`)."""
        return self.sent + self.output_tokens

    @property
    def cost_units(self) -> float:
        """The counts weighed by `PRICE_RATIOS`: what they would cost, in uncached input tokens. Input-token
        equivalents, not money (an input token's price differs by model); unlike ``total``, a cache read counts a
        tenth of an uncached token and an output token five. Exact: the ratios are whole hundredths."""
        hundredths = sum(round(100 * ratio) * int(getattr(self, count)) for count, ratio in PRICE_RATIOS.items())
        return hundredths / 100

    def to_json(self) -> dict[str, Any]:
        """The counts, with ``sent``, ``total`` and ``cost_units``."""
        return {**asdict(self), "sent": self.sent, "total": self.total, "cost_units": self.cost_units}


@dataclass
class PrefilterSummary:
    """What the pre-filter did and cost in one run.

    Attributes:
        classifier: ``local`` or ``claude``.
        asked: times the classifier was asked (once per request whose text changed).
        requests: requests it sent to a model (the ``claude`` classifier).
        seconds: time spent deciding, summed.
        usage: tokens of its model requests (not in the run's ``usage``).
        admitted: tools offered at the end of the run.
        catalog: tools in the catalog.
        growths: requests before which the admitted set grew.
        fail_open: why every tool was sent, one entry per failure (empty when it never failed).
        state_errors: why the admitted set could not be saved to the state file, once per failed save.
        saved: tools the state file holds at the end of the run (other catalogs' and runs' included): how big the
            persisted set has grown; None without a state file.
    """

    classifier: str
    asked: int = 0
    requests: int = 0
    seconds: float = 0.0
    usage: TokenUsage = field(default_factory=TokenUsage)
    admitted: int = 0
    catalog: int = 0
    growths: int = 0
    fail_open: list[str] = field(default_factory=list)
    state_errors: list[str] = field(default_factory=list)
    saved: int | None = None


@dataclass
class RunSummary:
    """The numbers of one run.

    Attributes:
        turns: requests to the Messages API.
        tool_calls: tool calls the loop ran (model-facing tools): one per ``tool_use`` block, but a ``batch_tool``
            block counts each invocation it ran (before: a batch of nine was one call).
        tool_errors: of those, the ones that failed: a block that came back with ``is_error``, each failed invocation
            of a batch (before: a batch whose invocations failed counted none, the batch itself being ok).
        batches: ``batch_tool`` calls (their invocations are in ``tool_calls``); a batch refused whole (too long,
            malformed) is one of them, one call of ``tool_calls`` and one error. Before, it was no batch, though a
            tool call of ``batch_tool``.
        refused_tool_calls: ``tool_use`` blocks not run because their reply held more than
            `agent.calls.MAX_TOOL_USES`, or because they repeated an earlier block's id (each answered with an error).
        interrupted_tool_calls: ``tool_use`` blocks Ctrl-C stopped while they ran (a ``batch_tool`` block counts
            once): each is in ``tool_calls`` (a batch: its invocations) and ``tool_errors``, in every mode. Before, a
            native call stopped so (``direct``, ``tool-search``) counted no call at all, though it may have acted,
            while a stopped ``execute_python`` counted one.
        script_tool_calls: MCP calls made from scripts inside the sandbox.
        sandbox_bytes: bytes of MCP tool results the scripts received in the sandbox: what a script prints of
            them reaches the model too (``model_bytes``), so this is not what stayed out of the context.
        model_bytes: bytes of tool results that reached the model (text, plus base64 of images).
        cache_invalidations: requests whose tools array or system prompt differed from the
            previous request's (the prompt cache could not be read past that point).
        api_retries: requests sent again after a failed attempt (a rate limit, an overload, a server error, a
            timeout, a stream cut short), each an ``api_error`` record of the transcript with its ``retry_in``; not
            in ``turns``. Before, the SDK's own retries were counted and recorded nowhere.
        prefilter: what the pre-filter did and cost, when the run had one.
        transcript_error: why the transcript stopped before the run ended (a full disk: the file keeps
            the records before it), or "".
    """

    mode: str
    model: str
    stop_reason: str = ""
    answer: str = ""
    turns: int = 0
    usage: TokenUsage = field(default_factory=TokenUsage)
    tool_calls: int = 0
    tool_errors: int = 0
    batches: int = 0
    refused_tool_calls: int = 0
    interrupted_tool_calls: int = 0
    script_tool_calls: int = 0
    sandbox_bytes: int = 0
    model_bytes: int = 0
    duration_s: float = 0.0
    cache_invalidations: int = 0
    api_retries: int = 0
    prefilter: PrefilterSummary | None = None
    transcript_error: str = ""

    @property
    def spent(self) -> int:
        """Every token the run paid for: the model's (``usage.total``) and the pre-filter's requests'; what the
        token budget counts."""
        return self.usage.total + (self.prefilter.usage.total if self.prefilter is not None else 0)

    @property
    def cost_units(self) -> float:
        """What ``spent`` counts, weighed by price (`TokenUsage.cost_units`): the model's tokens and the
        pre-filter's."""
        paid = TokenUsage()
        paid.add(self.usage)
        if self.prefilter is not None:
            paid.add(self.prefilter.usage)
        return paid.cost_units

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["usage"] = self.usage.to_json()
        data["duration_s"] = round(self.duration_s, 3)
        data["spent"] = self.spent
        data["cost_units"] = self.cost_units
        if self.prefilter is not None:
            data["prefilter"]["seconds"] = round(self.prefilter.seconds, 4)
            data["prefilter"]["usage"] = self.prefilter.usage.to_json()
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
