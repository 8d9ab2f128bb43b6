"""What the model is told of a script that ended without its result: its sandbox ended under it, or an interrupt
left it unreported. What it printed and the tool calls it made happened; they are said (`CodeToolset`'s
``execute_python``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.content import ledger, printed_parts, text_block
from agent.toolsets.base import ToolOutcome

if TYPE_CHECKING:
    from sandbox.errors import Unreported


def printed_before_end(stdout: str | None, stderr: str | None, *, ended: str = "the sandbox ended") -> str:
    """What a script printed before its sandbox ended under it (or before ``ended``), as the sandbox sent it
    (`sandbox.errors.SessionError.stdout`), shaped as an execution's text; "" when nothing came."""
    if not (parts := printed_parts(stdout, stderr)):
        return ""
    return "\n\n".join([f"[what the script printed before {ended}; its last moment may be missing]", *parts])


def unreported_outcome(unreported: Unreported) -> ToolOutcome:
    """What a script did that an interrupt left without a result, as far as the host knows: what it printed and the
    tool calls it made (they happened). Before: nothing, and the calls were not counted."""
    content: list[dict[str, Any]] = []
    if printed := printed_before_end(unreported.stdout, unreported.stderr, ended="the interrupt"):
        content.append(text_block(printed))
    if unreported.tool_calls:
        content.append(text_block(ledger(unreported.tool_calls, unreported.tool_calls_omitted)))
    note = f"interrupted before its result came · {len(unreported.tool_calls)} call(s) from the script"
    return ToolOutcome(content, is_error=True, script_calls=unreported.tool_calls, note=note)
