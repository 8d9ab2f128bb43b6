"""The errors of the agent package.

::

    AgentError              base
    ├── AgentSetupError     the run cannot start: bad mode, missing tree, no API key (for the developer)
    ├── ModelAPIError       the Messages API failed after the SDK's retries; ``result`` holds the run so far
    └── EventHandlerError   the ``on_event`` callback raised; ``result`` holds the run so far

Failures meant for the model (a tool failed, a script raised, a path was refused) are not
exceptions: they go back to the model as ``tool_result`` blocks with ``is_error: true``.

Ctrl-C is not turned into an error of this package: the ``KeyboardInterrupt`` goes on out of `Agent.run` as it
came (a caller's ``except KeyboardInterrupt`` still stops), carrying the run so far (`interrupted_result`). Nor is
a sandbox that cannot start mid-run (no image, an engine that stopped answering): the `sandbox.errors.SandboxError`
goes on out of `Agent.run`, carrying the run so far (`failed_run`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

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
        status_code: the HTTP status, when there was a response (200 when the failure came inside the answer: an
            ``error`` event in its stream, a stream cut short, a reply that could not be read; `in_stream`).
        result: the run up to the failure (turns, tokens, transcript), when one had started.
        advice: what to do about it, on one line (check the API key, the model id; start a new conversation), or "".
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        result: RunResult | None = None,
        advice: str = "",
        error_type: str = "",
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.result = result
        self.advice = advice
        self._error_type = error_type

    @property
    def in_stream(self) -> bool:
        """The API answered 200 and the failure came inside its answer: ``status_code`` is no error status."""
        return self.status_code == 200

    @property
    def error_type(self) -> str:
        """The API's error type (``overloaded_error``, ``invalid_request_error``, ...) when its answer named one, else
        "": as given, or read from the SDK's error this one was raised while handling."""
        if self._error_type:
            return self._error_type
        from agent.request import error_type

        return error_type(self.__context__) if self.__context__ is not None else ""


class EventHandlerError(AgentError):
    """The ``on_event`` callback given to `Agent` raised; the run ended there. Its exception is ``__cause__``.

    Attributes:
        result: the run up to the event (``stop_reason`` ``on_event_error``; when the callback raised on `RunFinished`,
            the run had ended, with the reason it ended with). Before, the exception went on out of `Agent.run` alone,
            and the transcript's ``run_end`` said the stop reason ``""``.
    """

    def __init__(self, message: str, *, result: RunResult | None = None) -> None:
        super().__init__(message)
        self.result = result


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


RUN_SO_FAR = "run_summary"
"""The attribute of the `sandbox.errors.SandboxError` out of `Agent.run` holding the run's `RunSummary` so far, its
stop reason ``sandbox_error`` (set by `agent.calls.run_tool_uses`, where a call found the sandbox could not start)."""


def failed_run(error: BaseException, *, transcript: Path | None = None) -> RunResult | None:
    """The run a sandbox that could not start ended (``stop_reason`` ``sandbox_error``), as far as it went: its
    turns, tokens and tool calls (none when it ended before its first request, as a code-mode run's sandbox that
    cannot start does), taken from the `sandbox.errors.SandboxError` that `Agent.run` let go on; None when the error
    came from elsewhere. As
    `interrupted_result` is for Ctrl-C::

        try:
            result = agent.run(task)
        except SandboxError as e:
            if (so_far := failed_run(e)) is not None:
                print(so_far.summary.usage.total, "tokens spent before the sandbox failed")
            raise

    Before, those tokens were reported nowhere. The run's ``messages`` are not kept there (empty: the conversation
    cannot go on from it), unless the error carries a whole `RunResult` as its ``result``, as `ModelAPIError` does.
    ``transcript`` is the agent's transcript file, for the result to name it.
    """
    from agent.summary import RunResult, RunSummary

    whole = getattr(error, "result", None)
    if isinstance(whole, RunResult):
        return whole
    summary = getattr(error, RUN_SO_FAR, None)
    if not isinstance(summary, RunSummary):
        return None
    return RunResult(summary.answer, summary.stop_reason or "sandbox_error", summary, [], transcript)
