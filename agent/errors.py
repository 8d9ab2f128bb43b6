"""The errors of the agent package.

::

    AgentError              base
    ├── AgentSetupError     the run cannot start: bad mode, missing tree, no API key (for the developer)
    └── ModelAPIError       the Messages API failed after the SDK's retries; ``result`` holds the run so far

Failures meant for the model (a tool failed, a script raised, a path was refused) are not
exceptions: they go back to the model as ``tool_result`` blocks with ``is_error: true``.

Ctrl-C is not turned into an error of this package: the ``KeyboardInterrupt`` goes on out of `Agent.run` as it
came (a caller's ``except KeyboardInterrupt`` still stops), carrying the run so far (`interrupted_result`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.summary import RunResult


class AgentError(Exception):
    """Base of the errors the agent package raises."""


class AgentSetupError(AgentError):
    """The run cannot start as configured.

    Attributes:
        setting: the config key whose value is wrong (``agent.pinned``), when it is one.
    """

    def __init__(self, message: str, *, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


class ModelAPIError(AgentError):
    """The Messages API failed (after retries) during a run, or its reply could not be read (a tool input the SDK
    cannot parse: ``stop_reason`` "unreadable_reply").

    Attributes:
        status_code: the HTTP status, when there was a response.
        result: the run up to the failure (turns, tokens, transcript), when one had started.
        advice: what to do about it, on one line (check the API key, the model id; start a new conversation), or "".
    """

    def __init__(
        self, message: str, *, status_code: int | None = None, result: RunResult | None = None, advice: str = ""
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.result = result
        self.advice = advice


def interrupted_result(interrupt: BaseException) -> RunResult | None:
    """The run a Ctrl-C stopped, as far as it went (``stop_reason`` ``interrupted``, its turns and tokens), taken
    from the ``KeyboardInterrupt`` that `Agent.run` let go on; None when the interrupt came from elsewhere or before
    the run started. As `ModelAPIError.result` is for a failed request::

        try:
            result = agent.run(task)
        except KeyboardInterrupt as e:
            if (stopped := interrupted_result(e)) is not None:
                print(stopped.summary.usage.total, "tokens spent before Ctrl-C")
            raise

    Its ``messages`` can go on as the ``history`` of a later run: a reply whose calls Ctrl-C stopped has their
    results after it (the one running with what it did until then, the others not run).
    """
    from agent.summary import RunResult

    result = getattr(interrupt, INTERRUPTED_RESULT, None)
    return result if isinstance(result, RunResult) else None


INTERRUPTED_RESULT = "result"
"""The attribute of the ``KeyboardInterrupt`` out of `Agent.run` that holds the run so far (`interrupted_result`)."""
