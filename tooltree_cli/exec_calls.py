"""The tool calls of one `tooltree exec` script, as printed and as ``--json`` gives them, and what `exec` prints
when the sandbox failed under the script, or tooltree quit before its result came (`print_sandbox_failed`).

Before: a sandbox that ended mid-script (its container killed: past ``sandbox.memory`` under gVisor, ``docker
kill``) printed one error line and, with ``--json``, nothing on stdout; the calls the script had made, whose side
effects happened, were not reported anywhere but the audit log.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tool_tree.text import size
from tooltree_cli.output import print_json

if TYPE_CHECKING:
    from sandbox.results import ToolCallRecord

LEDGER_LINES = 100
"""Calls the printout lists one line each (``--json`` lists every one the ledger holds)."""


def calls_json(calls: Sequence[ToolCallRecord]) -> list[dict[str, Any]]:
    """The ``calls`` of ``--json``: one object per call."""
    return [c.to_json() for c in calls]


def print_calls(calls: Sequence[ToolCallRecord], omitted: int, shown: str | None = None) -> None:
    """The calls on stderr, one line each (the first `LEDGER_LINES`), and how many more there were. An error's
    lines under its first that ``shown`` (the traceback printed above) or an earlier line holds are not said again
    (`sandbox.results.SaidOnce`)."""
    from sandbox.results import SaidOnce

    said = SaidOnce(shown)
    for c in calls[:LEDGER_LINES]:
        status = "ok" if c.ok else f"error: {said.error(c.error)}"
        print(
            f"  call {c.server}.{c.tool}  {status}  {size(c.response_bytes)}  {c.duration_ms:.0f} ms", file=sys.stderr
        )
    if more := len(calls[LEDGER_LINES:]) + omitted:
        listed = f"the first {len(calls)}" if omitted else "them"
        print(f"  … {more} more call(s) (--json lists {listed})", file=sys.stderr)


def print_sandbox_failed(
    message: str,
    calls: Sequence[ToolCallRecord],
    omitted: int,
    *,
    code: int,
    as_json: bool,
    ran: bool = True,
    unsaved: str | None = None,
    stdout: str | None = None,
    stderr: str | None = None,
    quit_why: str | None = None,
) -> None:
    """What `exec` prints when the sandbox failed (``message``, cleaned, after ``tooltree: error:``), with the tool
    calls the script made before it did: the error line, the calls (not with ``as_json``), and a last line like a
    finished script's, ending ``tooltree exit CODE because the sandbox failed``. With ``as_json``, one object on
    stdout too, with the keys of a result: what the sandbox never reported (the script's output, its exit status,
    its duration) null, ``sandbox_error`` the message. When no script ran (``ran`` false: no engine, no image, a sandbox
    that did not start, a workspace that could not be restored), the error line is all it prints on stderr, as a usage
    error's is. ``unsaved``: why the workspace folder was not saved (``workspace_error``, and a line of its own;
    before: ``null``, though the sandbox never saved it). ``stdout``, ``stderr``: what the script printed as far as the
    sandbox sent it before it ended (`sandbox.errors.SessionError.stdout`), printed first as a finished script's
    output is, and in ``--json`` in place of null (before: lost with the sandbox). ``quit_why``: not the sandbox
    failed, but tooltree quit before the result came (a second Ctrl-C, SIGTERM with no result in time): why, as the
    last line's end (``--json``: ``interrupted`` true, ``sandbox_error`` null); ``message`` is then the JSON's
    ``error`` only (`sandbox.errors.interrupted_unreported`)."""
    received = sum(c.response_bytes for c in calls)
    if as_json:
        print_json(
            {
                "stdout": stdout,
                "stderr": stderr,
                "exit_code": None,
                "timed_out": False,
                "interrupted": quit_why is not None,
                "duration_ms": None,
                "error": message,
                "traceback": None,
                "state_reset": None,
                "stdout_path": None,
                "stderr_path": None,
                "stdout_truncated": None,
                "stderr_truncated": None,
                "calls": calls_json(calls),
                "calls_not_listed": omitted,
                "images": [],
                "image_notes": [],
                "images_error": None,
                "tool_result_bytes": received,
                "printed_bytes": None,
                "workspace_error": unsaved,
                "workspace_notes": [],
                "sandbox_error": message if quit_why is None else None,
            }
        )
    elif ran:
        for text, stream in ((stdout, sys.stdout), (stderr, sys.stderr)):
            if text:
                stream.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
    if quit_why is None:  # else the last line says it, and the JSON's ``error``
        print(f"tooltree: error: {message}", file=sys.stderr)
    if not ran:
        return
    if not as_json:  # ``--json`` lists them
        print_calls(calls, omitted)
    where = "the JSON's stdout and stderr hold" if as_json else "the output above is"
    sent = f" ({where} what it sent before)" if stdout or stderr else ""
    ended = "the sandbox did not report the script's end" if quit_why is None else "the script's end was not reported"
    print(
        f"tooltree: {ended}{sent} · {len(calls) + omitted} tool call(s) · {size(received)} of tool results received "
        f"in the sandbox · tooltree exit {code} because {quit_why or 'the sandbox failed'}",
        file=sys.stderr,
    )
    if unsaved is not None:
        print(f"tooltree: error: {unsaved}", file=sys.stderr)
