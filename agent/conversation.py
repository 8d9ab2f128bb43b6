"""A conversation over several runs (`Agent.run` with ``history``): its arguments checked, and what the model is
told when its sandbox did not carry over.

A run given no ``runtime=`` makes its own `Runtime` and closes it when it ends (an agent kept open would leave its
container running for a caller that never closes it). The next run of the conversation then scripts in a new
sandbox: its variables, imports and (without a workspace folder) files are gone. Before, nothing said so: the model's
``print(x)`` met a ``NameError`` it could only guess at. Now the first ``execute_python`` result of such a run starts
with a note that says it (`NewSandboxNote`), once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.config import SandboxConfig
    from sandbox.host import Runtime
    from tool_tree.config import Config

NEW_SANDBOX = "a new sandbox: variables, imports and workspace files of the earlier turns are gone"
"""The note of a run whose conversation scripted in a sandbox it no longer has."""
NEW_SANDBOX_WITH_WORKSPACE = (
    "a new sandbox: variables and imports of the earlier turns are gone; /workspace was restored from its host "
    "folder (as the earlier run saved it)"
)
"""The same, when a workspace folder carries the files over."""
SCRIPT_TOOL = "execute_python"
"""The tool whose calls use (and leave things in) the sandbox."""


def check_sandbox_args(
    runtime: object, *, workspace: object, sandbox_config: object, batch: object, tree: str | os.PathLike[str]
) -> None:
    """`Agent`'s arguments about its sandbox, before anything starts.

    Raises:
        TypeError: ``runtime`` is not a `Runtime` or None, ``batch`` not a bool or None (``"no"`` turned it on).
        AgentSetupError: ``workspace`` or ``sandbox_config`` given with ``runtime``: they are the runtime's to
            set, and were ignored (a script's files never reached the folder, silently); or ``runtime`` runs another
            tree than ``tree`` (the model read one tree's stubs and its scripts imported the other's).
    """
    from agent.errors import AgentSetupError
    from sandbox.host import Runtime

    if runtime is not None and not isinstance(runtime, Runtime):
        raise TypeError(f"runtime: expected a sandbox.host.Runtime (or None), got {type(runtime).__name__}")
    if batch is not None and not isinstance(batch, bool):
        raise TypeError(f"batch: expected True, False or None, got {type(batch).__name__} {batch!r:.40}")
    given = [
        name for name, value in (("workspace", workspace), ("sandbox_config", sandbox_config)) if value is not None
    ]
    if runtime is not None and given:
        raise AgentSetupError(
            f"{given[0]}= is for the runtime an Agent makes itself; with runtime=, give it to that Runtime instead "
            f"(Runtime(config, tree, {given[0]}=...)): here it would be ignored"
        )
    if runtime is not None and os.path.realpath(runtime.tree) != os.path.realpath(tree):
        raise AgentSetupError(
            f"the runtime runs the tree {runtime.tree}, not {os.fspath(tree)}: give the Agent the runtime's tree "
            f"(Agent(config, tree=runtime.tree, runtime=runtime))"
        )


def check_task(task: object, history: object) -> None:
    """`Agent.run`'s arguments, before anything starts (they used to reach the API: ``None`` as the task's text).

    Raises:
        TypeError: ``task`` is not a str, or ``history`` not a list of message dicts (or None).
        ValueError: ``task`` is empty or only white space.
    """
    if not isinstance(task, str):
        raise TypeError(f"task: expected the task as a string, got {type(task).__name__} {task!r:.60}")
    if not task.strip():
        raise ValueError("task: the task is empty")
    if history is None:
        return
    if isinstance(history, str | bytes) or not isinstance(history, Sequence):
        raise TypeError(
            f"history: expected the messages of the previous RunResult (result.messages), got {type(history).__name__}"
        )
    if not all(isinstance(m, dict) for m in history):
        raise TypeError("history: expected the messages of the previous RunResult (result.messages), a list of dicts")


def ran_scripts(messages: Sequence[dict[str, Any]]) -> bool:
    """Whether a reply among ``messages`` called ``execute_python``."""
    return any(
        isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") == SCRIPT_TOOL
        for m in messages
        if m.get("role") == "assistant" and isinstance(m.get("content"), list)
        for b in m["content"]
    )


class NewSandboxNote:
    """Puts the note that the sandbox is new in front of a run's first ``execute_python`` result, once.

    Args:
        history: the conversation the run goes on from.
        fresh: the run's runtime is new (made by the run), not the one the earlier runs used.
        workspace: a workspace folder restores the files of the earlier runs.
    """

    def __init__(self, history: Sequence[dict[str, Any]] | None, *, fresh: bool, workspace: bool) -> None:
        due = fresh and history is not None and ran_scripts(history)
        self.note = (NEW_SANDBOX_WITH_WORKSPACE if workspace else NEW_SANDBOX) if due else ""

    def add(self, reply: Sequence[dict[str, Any]], results: list[dict[str, Any]]) -> None:
        """Note the result answering the first ``execute_python`` call of ``reply`` (in place), if still due."""
        if not self.note:
            return
        ids = {b.get("id") for b in reply if b.get("type") == "tool_use" and b.get("name") == SCRIPT_TOOL}
        result = next((r for r in results if r.get("tool_use_id") in ids), None)
        if result is None:
            return
        content = result.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": str(content or "")}]
        first = blocks[0] if blocks else None
        if first is not None and first.get("type") == "text":  # as `agent.toolsets.base.with_note` writes a note
            blocks = [{**first, "text": f"[{self.note}]\n\n{first['text']}"}, *blocks[1:]]
        else:
            blocks = [{"type": "text", "text": f"[{self.note}]"}, *blocks]
        result["content"] = blocks
        self.note = ""


def sandbox_packages(config: Config, sandbox_config: SandboxConfig | None, runtime: Runtime | None) -> tuple[str, ...]:
    """The ``sandbox.pip_packages`` of the image the run's scripts run in (``runtime``'s when given, else
    ``sandbox_config``, else ``config``'s ``sandbox:`` section), which code mode's prompt names.

    Raises:
        ConfigError: the config's ``sandbox:`` section is not valid (as the runtime would say when it starts).
    """
    from sandbox.config import SandboxConfig

    if runtime is not None:
        config, sandbox_config = runtime.config, runtime.sandbox_config
    return (sandbox_config or SandboxConfig.from_config(config)).pip_packages
