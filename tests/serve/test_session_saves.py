"""Workspace saves of `tooltree serve`'s sessions: one at a time, but only the save holds the others up (before: a
session's whole close — its container's removal, its upstream servers' stop — held every other session's result
behind the lock of saves), and a save that failed is not tried again after each script.

In process: the registry with runtimes whose sandbox records its saves and whose close waits for the test.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent.serve.sessions import ClientSession, SessionRegistry
from agent.toolsets.base import ToolOutcome
from sandbox.errors import WorkspaceError

pytestmark = pytest.mark.anyio

WAIT = 30.0


class RecordingSandbox:
    """What a session needs of a sandbox here: a workspace folder, and saves that are recorded (or fail)."""

    def __init__(self, fail: bool = False) -> None:
        self.workspace = Path("/nowhere")
        self.workspace_notes: list[str] = []
        self.workspace_notes_total = 0
        self.saves = 0
        self.fail = fail

    def cancel(self) -> bool:
        return False  # no script runs

    def save_workspace_if_changed(self) -> bool:
        self.saves += 1
        if self.fail:
            raise WorkspaceError("could not save the workspace: a merge failed")
        return True


class SlowClosingRuntime:
    """A runtime whose close (the container's removal, the servers' stop) waits until the test lets it go."""

    def __init__(self, sandbox: RecordingSandbox) -> None:
        self.running_sandbox = sandbox
        self.sandbox_started = True
        self.closing = threading.Event()
        self.may_close = threading.Event()
        self.closed = threading.Event()

    def close(self) -> None:
        self.closing.set()
        self.may_close.wait(WAIT)
        self.closed.set()


def outcome() -> ToolOutcome:
    return ToolOutcome([{"type": "text", "text": "ran"}])


async def test_a_slow_close_does_not_hold_up_another_sessions_save() -> None:
    runtimes: dict[str, SlowClosingRuntime] = {}

    def make(key: str) -> Any:
        runtimes[key] = SlowClosingRuntime(RecordingSandbox())
        return runtimes[key]

    sessions = SessionRegistry(make, idle_timeout=3600, max_sessions=4)
    for key in ("leaving", "working"):
        async with sessions.use(key):
            pass
    working = sessions.get("working")
    assert working is not None
    async with anyio.create_task_group() as tg:
        tg.start_soon(sessions.end, "leaving")
        with anyio.fail_after(WAIT):
            await anyio.to_thread.run_sync(runtimes["leaving"].closing.wait, WAIT, abandon_on_cancel=True)
        assert runtimes["leaving"].running_sandbox.saves == 1  # its last save, before the close
        with anyio.fail_after(WAIT):  # abandoned when it waits too long: a thread that is not ignores the deadline
            await anyio.to_thread.run_sync(working._save_workspace, outcome(), abandon_on_cancel=True)
        assert not runtimes["leaving"].closed.is_set()  # before: the save waited for the other session's whole close
        runtimes["leaving"].may_close.set()
    assert runtimes["working"].running_sandbox.saves == 1


def test_a_merge_that_failed_after_a_script_is_tried_again_only_at_the_end() -> None:
    sandbox = RecordingSandbox(fail=True)
    session = ClientSession("k", SlowClosingRuntime(sandbox))  # type: ignore[arg-type]
    first = session._save_workspace(outcome())
    assert first.content[-1]["text"].endswith("until then what later scripts write is only in the sandbox]")
    second = session._save_workspace(outcome())
    assert sandbox.saves == 1 and len(second.content) == 1  # before: one more failed merge (and copy) per script


class ClosingSandbox(RecordingSandbox):
    """A sandbox whose saves fail once its session's close closed it."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    def save_workspace_if_changed(self) -> bool:
        if self.closed:
            raise WorkspaceError(
                "could not save the workspace (/nowhere is left as it was): the sandbox session is closed"
            )
        return super().save_workspace_if_changed()


def test_a_script_that_ends_after_its_session_closed_says_nothing_of_a_failed_save(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A script cancelled by its client, which then left: the session's end stopped it, saved the workspace and closed
    # the sandbox; the script's own save after it failed, and serve warned "could not save the workspace ... the
    # sandbox session is closed" (3 sessions in 96 of a soak), saying each later script would try again.
    sandbox = ClosingSandbox()
    runtime = SlowClosingRuntime(sandbox)
    runtime.may_close.set()
    session = ClientSession("k", runtime)  # type: ignore[arg-type]
    session.save_workspace()
    session.close()
    sandbox.closed = True
    result = session._save_workspace(outcome())
    assert result.content == outcome().content
    assert sandbox.saves == 1
    assert not [r for r in caplog.records if "could not save" in r.getMessage()]


class StartNotedSandbox(RecordingSandbox):
    """A sandbox whose start kept a note (its folder's ``skills`` was a file) and whose saves add one each."""

    def __init__(self) -> None:
        super().__init__()
        self.workspace_notes = ["its skills is a file: kept as skills.host"]
        self.workspace_notes_total = 1

    def save_workspace_if_changed(self) -> bool:
        self.workspace_notes = [*self.workspace_notes, f"save {self.saves + 1}"]
        self.workspace_notes_total += 1
        return super().save_workspace_if_changed()


def test_a_note_of_the_sessions_start_is_told_with_its_first_scripts_result_and_each_note_once() -> None:
    # Before: the notes counted at each save's start were taken as told, so the start's never reached the model.
    session = ClientSession("k", SlowClosingRuntime(StartNotedSandbox()))  # type: ignore[arg-type]
    first = session._save_workspace(outcome()).content[-1]["text"]
    assert "its skills is a file: kept as skills.host" in first and "save 1" in first
    second = session._save_workspace(outcome()).content[-1]["text"]
    assert "save 2" in second and "skills" not in second and "save 1" not in second
