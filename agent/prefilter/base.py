"""The pre-filter's seam: `ToolFilter` (one independent probability per tool) and what it works on.

A classifier is asked, before a request, how likely each tool of the catalog is to be needed
by the conversation so far. It answers for every tool on its own (a probability per tool, not
a choice among them, so several tools can be likely at once) or raises `FilterError`, and the
pre-filter then sends the full catalog (fail open).

::

    FilterError             the classifier could not decide; ``kind`` says why
    (kinds: "error", "timeout", "missing_model", "corrupt_state")

The pre-filter gives a classifier a deadline (its timeout) and gives up on it past that. A classifier
that sends requests to a model reads the `Attempt` it runs under (`current_attempt`): it sends a
request only when `Attempt.send` allows (never once the gate gave up), and reports each answer's
tokens to `Attempt.spent`, so what it sent is counted even when the gate no longer waits for it. A request that got
no answer (timed out, abandoned) may still have been billed: its tokens are unknown, and are reported as unknown
(`FilterError.unanswered`), never as 0.

A classifier that sends nothing anywhere (no request, no cost) says so with ``offline = True``; a dry run
(`agent.loop.Agent.first_request`) asks only such a classifier. One without the attribute counts as not offline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
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
        unanswered: of ``requests``, those no answer came back for (timed out, abandoned): the API may have billed
            them, their tokens are unknown (not counted in ``usage``, and not 0).
    """

    def __init__(
        self,
        message: str,
        *,
        kind: FailKind = "error",
        usage: TokenUsage | None = None,
        requests: int = 0,
        unanswered: int = 0,
    ) -> None:
        super().__init__(message)
        self.kind: FailKind = kind
        self.usage = usage if usage is not None else TokenUsage()
        self.requests = requests
        self.unanswered = unanswered


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


class Attempt:
    """One `ToolFilter.classify` call under a deadline, and what it has sent (thread-safe).

    The pre-filter makes one per question and gives up at ``deadline`` (`abandon`); the classifier sends a
    request only when `send` returns True, and reports the tokens of every answer it gets to `spent`.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        """`time.monotonic` time by which the answer is needed."""
        self.requests = 0
        """Requests sent so far."""
        self.answered = 0
        """Requests whose answer arrived (`spent`), before or after `abandon`."""
        self.usage = TokenUsage()
        """Tokens of the answers received before the pre-filter gave up."""
        self.abandoned = threading.Event()
        """Set when the pre-filter gave up waiting: a classifier's backoff can wait on it."""
        self.done = threading.Event()
        """Set by the pre-filter when ``classify`` returned or raised."""
        self._late = TokenUsage()
        self._lock = threading.Lock()

    def left(self) -> float:
        """Seconds until the deadline (negative past it)."""
        return self.deadline - time.monotonic()

    def send(self) -> bool:
        """Whether a request may be sent now (counted when it may): False past the deadline or once abandoned."""
        with self._lock:
            if self.abandoned.is_set() or self.left() <= 0:
                return False
            self.requests += 1
            return True

    def spent(self, usage: TokenUsage) -> None:
        """Count the tokens of an answer (one that arrives after `abandon` is kept for `late`)."""
        with self._lock:
            self.answered += 1
            (self._late if self.abandoned.is_set() else self.usage).add(usage)

    def abandon(self) -> tuple[int, TokenUsage]:
        """Give up waiting: no request is sent from now on. Returns the requests sent and the tokens counted so far."""
        with self._lock:
            self.abandoned.set()
            return self.requests, replace(self.usage)

    def unanswered(self) -> int:
        """Requests sent that no answer has come back for (yet): their tokens are unknown."""
        with self._lock:
            return self.requests - self.answered

    def late(self) -> TokenUsage:
        """The tokens of answers that arrived after `abandon` and were not taken yet (taken now)."""
        with self._lock:
            late, self._late = self._late, TokenUsage()
            return late


_current: ContextVar[Attempt | None] = ContextVar("tooltree_prefilter_attempt", default=None)


def current_attempt() -> Attempt | None:
    """The `Attempt` the running ``classify`` is under (None when called outside the pre-filter)."""
    return _current.get()


def set_current_attempt(attempt: Attempt) -> None:
    """Make ``attempt`` the current one in this thread (the pre-filter's worker thread, before ``classify``)."""
    _current.set(attempt)
