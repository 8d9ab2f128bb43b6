"""The exceptions of the sandbox package.

::

    SandboxError                    base of everything raised here
    ├── EngineError                 the container engine is missing, unreachable, or a command failed
    │   └── EngineUnavailableError  no engine answers (install/start Docker, or set DOCKER_HOST)
    ├── ImageError                  the sandbox image is missing or could not be built
    ├── HardeningError              a container is not confined as required; it was removed, nothing ran
    ├── ProtocolError               the container sent something that is not a valid message (hostile or broken)
    ├── SessionError                the session cannot be used (closed, crashed, failed to start)
    ├── IncompleteTreeError         a sandbox's tree volume held no whole copy of the tree (started once more first)
    └── WorkspaceError              the workspace could not be restored or saved

These are errors meant for the developer running the sandbox. Errors meant for the model —
the script raised, timed out, or a tool call failed — are not exceptions: they are reported in
the `ExecutionResult`, so the model can read them and try again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.results import ExecutionResult, ToolCallRecord


class SandboxError(Exception):
    """Base class of every exception the sandbox package raises."""


class EngineError(SandboxError):
    """A container engine command failed.

    Attributes:
        command: the argument vector that failed (without the executable).
        returncode: the exit status, or None when the command could not be run.
        stderr: what the command printed on stderr.
        output: what it printed on stdout and stderr (a build log, say).
    """

    def __init__(
        self,
        message: str,
        *,
        command: list[str] | None = None,
        returncode: int | None = None,
        stderr: str = "",
        output: str = "",
    ):
        super().__init__(message)
        self.command = command or []
        self.returncode = returncode
        self.stderr = stderr
        self.output = output or stderr


class EngineUnavailableError(EngineError):
    """No container engine answers."""


class ImageError(SandboxError):
    """The sandbox image is missing or could not be built."""


class HardeningError(SandboxError):
    """A container lacks a required confinement setting. ``violations`` lists each one."""

    def __init__(self, container: str, violations: list[str]) -> None:
        super().__init__(f"container {container} is not confined as required: " + "; ".join(violations))
        self.container = container
        self.violations = violations

    def __reduce__(self) -> tuple[Any, ...]:
        """Made again from its own arguments (pickle and `copy` call the class with ``args``: before, TypeError)."""
        return type(self), (self.container, self.violations), self.__dict__


class ProtocolError(SandboxError):
    """A message from the container was malformed, oversized or otherwise invalid."""


class SessionError(SandboxError):
    """The session cannot be used: not started, closed, crashed, or it failed to start.

    Attributes:
        tool_calls: out of `Sandbox.execute` when the sandbox ended or stopped answering under the script (its
            container killed: past ``sandbox.memory`` under gVisor, ``docker kill``), the ledger of the tool calls the
            host's bridge handled for that script meanwhile: their side effects happened, so a caller says so rather
            than have them made again. Empty otherwise. Before: the error's text only, and the calls went unreported.
        tool_calls_omitted: calls past those, counted only (as `ExecutionResult.tool_calls_omitted`).
        stdout, stderr: out of `Sandbox.execute` in the same cases, what the script had printed, as far as the
            sandbox sent it while the script ran (its last 0.3 s may be missing), shaped as a result's
            (`ExecutionResult.stdout`); None when nothing of that stream came. Before: lost with the sandbox.
    """

    def __init__(self, message: str, *, tool_calls: Sequence[ToolCallRecord] = (), tool_calls_omitted: int = 0) -> None:
        super().__init__(message)
        self.tool_calls: tuple[ToolCallRecord, ...] = tuple(tool_calls)
        self.tool_calls_omitted = tool_calls_omitted
        self.stdout: str | None = None
        self.stderr: str | None = None


class IncompleteTreeError(SandboxError):
    """The tree volume a sandbox mounted held no whole copy of the tree, so it did not start: the volume was removed
    between the backend's lookup and the container's create (`tooltree sandbox prune`, or another tooltree process
    removing a copy it no longer uses: a copy is named by its content and shared) and the engine made an empty one,
    or it held a copy cut short. `sandbox.session.open_channel` starts the sandbox once more, which copies the tree
    again first; raised when that start finds no whole copy either."""


class WorkspaceError(SandboxError):
    """The workspace could not be restored into, or saved out of, the container. ``unreadable``: an entry of the
    host folder could not be read (a restore's advice is then to make it readable, not to make the folder fit);
    ``busy``: another process's save into the folder did not end in time (the advice is then to try again)."""

    unreadable = False
    busy = False


class QuitNow(KeyboardInterrupt):
    """A Ctrl-C that `Sandbox.execute` does not wait out: it goes on at once, without stopping the script and waiting
    for its result as a plain KeyboardInterrupt does (its caller has already stopped it and waited: `tooltree exec`'s
    second Ctrl-C)."""


INTERRUPTED_EXECUTION = "execution"
"""The attribute of a ``KeyboardInterrupt`` out of `Sandbox.execute` holding the stopped script's result."""


def interrupted_execution(interrupt: BaseException) -> ExecutionResult | None:
    """What the script a Ctrl-C stopped did before it stopped (its output so far, ``cancelled=True``, its tool
    calls), taken from the ``KeyboardInterrupt`` that `Sandbox.execute` let go on; None when the interrupt came from
    elsewhere, or the sandbox did not report the script within the wait (10 s, or a second Ctrl-C)."""
    from sandbox.results import ExecutionResult

    result = getattr(interrupt, INTERRUPTED_EXECUTION, None)
    return result if isinstance(result, ExecutionResult) else None


INTERRUPTED_UNREPORTED = "unreported"
"""The attribute of a ``KeyboardInterrupt`` out of `Sandbox.execute` holding what the script did as far as the host
knows, when the stopped script's result did not come (`interrupted_unreported`)."""


@dataclass(frozen=True)
class Unreported:
    """What a script did that an interrupt left without a result, as far as the host knows: what it printed as the
    sandbox sent it while it ran (shaped as a result's output; None when nothing of that stream came; its last
    0.3 s may be missing) and the tool calls the bridge handled for it (their side effects happened)."""

    stdout: str | None
    stderr: str | None
    tool_calls: tuple[ToolCallRecord, ...]
    tool_calls_omitted: int


def interrupted_unreported(interrupt: BaseException) -> Unreported | None:
    """What the script had done when a Ctrl-C (or SIGTERM) left `Sandbox.execute` without its result (a second
    Ctrl-C, or none within the wait); None when the interrupt came from elsewhere or the result came (then
    `interrupted_execution` has it). Before: its output and tool calls were lost."""
    unreported = getattr(interrupt, INTERRUPTED_UNREPORTED, None)
    if interrupted_execution(interrupt) is not None or not isinstance(unreported, Unreported):
        return None
    return unreported
