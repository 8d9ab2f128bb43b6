"""A script's result as `tooltree exec` prints it: for a person (`_print_human`) or as ``--json``'s object
(`result_json`), the marker of an output cut short naming where its whole is for the user (`_outputs_where`).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tool_tree.text import size
from tooltree_cli.exec_calls import calls_json, print_calls

if TYPE_CHECKING:
    from sandbox.results import ExecutionResult
    from tooltree_cli.exec_live import LiveOutput


def _script_status(result: ExecutionResult) -> str:
    """How the script's process ended: ``script exited 0``, ``script killed by signal 9``; a ``SystemExit`` code as
    the script gave it, a negative one too (``raise SystemExit(-1)``: before, "killed by signal 1")."""
    if result.exit_status < 0 and result.error != f"SystemExit: {result.exit_status}":
        return f"script killed by signal {-result.exit_status}"
    return f"script exited {result.exit_status}"


def _outputs_where(result: ExecutionResult, workspace: str | None, *, saved: bool) -> ExecutionResult:
    """``result`` as printed: the marker of an output that was cut, and ``stdout_path`` / ``stderr_path``, name where
    its whole is for the user. With the ``workspace`` folder ``saved``, the file in that folder (before: its path in
    the sandbox, ``/workspace/.tooltree/outputs/…``, which the user had to translate). Without a workspace, or when
    the folder was not saved, the sandbox's file went with its container: the marker says so (and, without a
    workspace, how to keep it) instead of naming it, and the result names no file.

    Every copy of the marker's words is rewritten: one the script printed itself names that same file. So is the
    marker of an output longer than a saved output holds ("its first N bytes are in …"; before, it was left naming
    the sandbox's file, which no longer existed or was not the host's path).
    """
    changes: dict[str, Any] = {}
    outputs = (("stdout", result.stdout, result.stdout_path), ("stderr", result.stderr, result.stderr_path))
    for name, text, path in outputs:
        if path is None:
            continue
        kept = path.removeprefix("/workspace/")
        where = rf"(the whole {name} is|its first ([\d,]+) bytes are) in {re.escape(path)}({_PART})? \.\.\.\]"
        if workspace is not None and saved:
            host = os.path.join(workspace, kept)
            there = re.compile(rf"; {where}")
            changes[name] = there.sub(functools.partial(_in_folder, host=host), text)
            changes[f"{name}_path"] = host
            continue
        said = r"(?:; saved outputs keep the newest [\d,]+ [KM]iB(?: \([\d,]+ older ones? deleted\))?)?"  # kept nowhere
        lost = re.compile(rf"{said}; {where}")
        changes[name] = lost.sub(functools.partial(_not_kept, name=name, kept=kept, workspace=workspace), text)
        changes[f"{name}_path"] = None
    if result.traceback is not None and _TRACEBACK_SAVED.search(result.traceback):
        told = functools.partial(_traceback_where, workspace=workspace, saved=saved)
        changes["traceback"] = _TRACEBACK_SAVED.sub(told, result.traceback)
    return dataclasses.replace(result, **changes) if changes else result


_PART = r" \(a saved output holds at most that\)"
"""What follows the sandbox's path in the marker of an output longer than a saved output holds."""

_TRACEBACK_SAVED = re.compile(
    r"; (the whole traceback is|its first ([\d,]+) bytes are) in /workspace/(\.tooltree/outputs/\d{1,9}-[0-9a-f]{6}"
    rf"-traceback\.txt)({_PART})? …\]"
)
"""The end of the line of a traceback cut short that names the file holding the whole of it in the sandbox."""


def _traceback_where(marker: re.Match[str], *, workspace: str | None, saved: bool) -> str:
    """The end of the ``marker`` of a traceback saved whole: its file in the workspace's folder when that was saved
    (before: the sandbox's path), else said not kept, as an output's is."""
    if workspace is not None and saved:
        return f"; {marker[1]} in {os.path.join(workspace, marker[3])}{marker[4] or ''} …]"
    return _not_kept(marker, name="traceback", kept=marker[3], workspace=workspace).removesuffix(" ...]") + " …]"


def _in_folder(marker: re.Match[str], *, host: str) -> str:
    """The end of the ``marker`` of an output saved in the workspace's folder, naming ``host``, its file there."""
    return f"; {marker[1]} in {host}{marker[3] or ''} ...]"


def _not_kept(marker: re.Match[str], *, name: str, kept: str, workspace: str | None) -> str:
    """The end of the ``marker`` of an output whose saved file went with the sandbox (its ``part``: how many of its
    first bytes a saved output would hold, None when it would hold the whole)."""
    part = marker[2]
    if workspace is not None:
        return f"; {'it' if part else f'the whole {name}'} was not kept: the workspace was not saved ...]"
    if part:
        return f"; it was not kept: run with --workspace DIR to keep its first {part} bytes (as DIR/{kept}) ...]"
    return f"; the whole {name} was not kept: run with --workspace DIR to keep it (as DIR/{kept}) ...]"


def result_json(result: ExecutionResult, saved: Sequence[Path] = (), images_error: str | None = None) -> dict[str, Any]:
    """The result as ``--json`` prints it; ``saved``: where ``--images`` wrote each image (the first ones), and
    ``images_error`` why the others were not saved."""
    tool_bytes = sum(c.response_bytes for c in result.tool_calls)
    return {
        "stdout": result.stdout,
        "stderr": result.stderr,
        "exit_code": result.exit_status,
        "timed_out": result.timed_out,
        "interrupted": result.cancelled,
        "duration_ms": round(result.duration * 1000, 1),
        "error": result.error,
        "traceback": result.traceback,
        "state_reset": result.state_reset,
        "stdout_path": result.stdout_path,
        "stderr_path": result.stderr_path,
        "stdout_truncated": result.stdout_truncated,
        "stderr_truncated": result.stderr_truncated,
        "calls": calls_json(result.tool_calls),
        "calls_not_listed": result.tool_calls_omitted,
        "images": [
            {
                "mime_type": i.mime_type,
                "bytes": len(i.data),
                "data": base64.b64encode(i.data).decode("ascii"),
                "saved_to": str(saved[n]) if n < len(saved) else None,
            }
            for n, i in enumerate(result.images)
        ],
        "image_notes": result.image_notes,
        "images_error": images_error,
        "tool_result_bytes": tool_bytes,
        "printed_bytes": len(result.stdout.encode("utf-8")) + len(result.stderr.encode("utf-8")),
    }


def _print_human(
    result: ExecutionResult,
    saved: list[Path],
    *,
    asked: bool = False,
    code: int = 0,
    why: str = "",
    live: LiveOutput | None = None,
) -> None:
    """The result for a person; ``saved``: the files ``--images`` wrote (``asked``: it was given). The last
    line says how the script ended and tooltree's exit ``code`` (with ``why``, when it is not 0): they differ
    when the script's process exited 0 but the run failed, or it was killed. ``live``: what of the output was
    shown as it came (the rest is printed here)."""
    stdout = live.rest("stdout", result.stdout) if live is not None else result.stdout
    stderr = live.rest("stderr", result.stderr) if live is not None else result.stderr
    if stdout:
        sys.stdout.write(stdout if stdout.endswith("\n") else stdout + "\n")
    if stderr:
        sys.stderr.write(stderr if stderr.endswith("\n") else stderr + "\n")
    if result.traceback:
        sys.stderr.write(result.traceback.rstrip("\n") + "\n")
    elif result.error:
        print(f"error: {result.error}", file=sys.stderr)
    print_calls(result.tool_calls, result.tool_calls_omitted, result.traceback)
    for n, image in enumerate(result.images):
        if n < len(saved):
            where = f" saved to {saved[n]}"
        else:
            where = " not saved (see below)" if asked else " (use --images DIR to save)"
        print(f"  image {n + 1}: {image.mime_type}, {size(len(image.data))}{where}", file=sys.stderr)
    for note in result.image_notes:  # before: an image left out was not said at all
        print(f"  {note}", file=sys.stderr)
    info = result_json(result)
    print(
        f"tooltree: {_script_status(result)} in {result.duration:.2f} s · "
        f"{len(result.tool_calls) + result.tool_calls_omitted} tool call(s) · "
        f"{size(info['tool_result_bytes'])} of tool results received in the sandbox · "
        f"{size(info['printed_bytes'])} printed · tooltree exit {code}" + (f" because {why}" if why else ""),
        file=sys.stderr,
    )
