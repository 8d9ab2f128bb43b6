"""A workspace save of `tooltree serve` that failed after a script is tried again after the later scripts, so what
they write is in the host folder when their result returns (before: no later script saved; the one promised save
was the session's end, which a client's exit sequence may kill midway, losing that work without a word).

End to end, a real serve process and the SDK client over stdio, a real sandbox whose workspace cap is made small;
then in process, the session with a stand-in sandbox, for what the model is told when a failure repeats, changes,
keeps a copy beside the folder, or ends.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agent.serve.sessions import ClientSession, SessionRegistry
from agent.toolsets.base import ToolOutcome
from sandbox.errors import WorkspaceError
from tests.serve.conftest import Serve, result_text

WAIT = 120.0
SPARSE = "with open('sparse.bin', 'wb') as f:\n    f.truncate(1 << 30)\nprint('made')"
"""A 1 GiB file holding no blocks: it fits the sandbox's 4 MiB workspace, and is over what a save takes."""
RESULTS = (
    "import os\nos.remove('sparse.bin')\nos.makedirs('results', exist_ok=True)\n"
    "for i in range(5):\n    open(f'results/{i}.json', 'w').write(str(i))\n"
    "open('result.txt', 'w').write('important result')\nprint('written')"
)


@pytest.mark.docker
@pytest.mark.anyio
async def test_what_a_script_writes_after_a_failed_save_is_in_the_folder_when_its_result_returns(
    make_serve: Callable[..., Serve], tmp_path: Path
) -> None:
    import mcp

    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "user.txt").write_text("user", encoding="utf-8")
    serve = make_serve(extra=["--workspace", str(workspace)])
    config = serve.config.read_text(encoding="utf-8")  # a save takes 4 MiB plus 4 KiB per entry (128 MiB)
    serve.config.write_text(config.replace("sandbox:\n", "sandbox:\n  workspace_size: 4m\n", 1), encoding="utf-8")
    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as client:
        failed = result_text(await client.call_tool("execute_python", {"code": SPARSE}))
        assert failed.startswith("made\n[workspace: could not save the workspace (") and "more than" in failed
        assert "each later script tries again" in failed and "when the session ends" not in failed
        assert sorted(p.name for p in workspace.iterdir()) == ["user.txt"]

        saved = result_text(await client.call_tool("execute_python", {"code": RESULTS}))
        # Before: nothing more was said, and none of it was there until the session's end.
        assert saved.startswith("written\n[workspace: saved into ") and "the save works again" in saved
        assert (workspace / "result.txt").read_text(encoding="utf-8") == "important result"
        assert sorted(p.name for p in (workspace / "results").iterdir()) == [f"{i}.json" for i in range(5)]
        assert not (workspace / "sparse.bin").exists()

        again = result_text(await client.call_tool("execute_python", {"code": "open('more.txt', 'w').write('more')"}))
        assert again == "(the script printed nothing)"  # saved, and nothing to say about it
        assert (workspace / "more.txt").read_text(encoding="utf-8") == "more"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".ws.")) == []  # no staging left beside


# ---- in process: what the model is told --------------------------------------------------------------------------


class FailingSandbox:
    """What a session needs of a sandbox to save: a workspace folder, and saves that fail with the errors queued."""

    def __init__(self, *errors: str | None) -> None:
        self.workspace = Path("/work/ws")
        self.workspace_notes: list[str] = []
        self.workspace_notes_total = 0
        self.errors = list(errors)
        self.saves = 0
        self.events: list[str] = []

    def cancel(self) -> bool:
        return False  # no script runs

    def kill(self) -> None:
        self.events.append("killed unsaved")

    def save_workspace_if_changed(self) -> bool:
        self.saves += 1
        error = self.errors.pop(0) if self.errors else None
        if error is not None:
            raise WorkspaceError(error)
        return True


class StandInRuntime:
    """What a session needs of a runtime here: its running sandbox."""

    def __init__(self, sandbox: FailingSandbox) -> None:
        self.running_sandbox = sandbox


OVER_CAP = "could not save the workspace (/work/ws is left as it was): the workspace holds more than 10 bytes"
FULL_DISK = "could not save the workspace (/work/ws is left as it was): cannot write 'a' into /work/.ws: No space left"
MERGE = "could not save the workspace: could not merge ... the rest of the saved copy is in /work/.ws.unmerged-1"


def saves(session: ClientSession, count: int) -> list[str]:
    """What the model is told after each of ``count`` scripts (one line per script; '' when nothing)."""
    told = []
    for _ in range(count):
        outcome = session._save_workspace(ToolOutcome([{"type": "text", "text": "ran"}]))
        told.append("\n".join(b["text"] for b in outcome.content[1:]))
    return told


def test_a_failure_is_told_once_in_full_then_in_one_line_until_its_reason_changes_or_the_save_works() -> None:
    sandbox = FailingSandbox(OVER_CAP, OVER_CAP, FULL_DISK, None, None)
    told = saves(ClientSession("k", StandInRuntime(sandbox)), 5)  # type: ignore[arg-type]
    assert sandbox.saves == 5  # before: 1, each later script left its work in the sandbox only
    assert told[0] == f"[workspace: {OVER_CAP}; each later script tries again, and says when the save works]"
    assert told[1] == "[workspace: still not saved into /work/ws, for the reason above; the next script tries again]"
    assert told[2].startswith(f"[workspace: {FULL_DISK}; each later script tries again")
    assert told[3] == "[workspace: saved into /work/ws: the save works again, the folder holds what the scripts wrote]"
    assert told[4] == ""


def test_a_failed_merge_that_kept_a_copy_beside_the_folder_is_not_tried_again_after_each_script() -> None:
    # Each failed merge keeps one more copy beside the folder: only the session's end tries again, and says so.
    sandbox = FailingSandbox(MERGE, MERGE)
    session = ClientSession("k", StandInRuntime(sandbox))  # type: ignore[arg-type]
    told = saves(session, 2)
    assert sandbox.saves == 1 and told[1] == ""
    assert told[0].startswith(f"[workspace: {MERGE}; not tried again after each script (each failed merge keeps")
    assert "until then what later scripts write is only in the sandbox" in told[0]


def test_a_new_sandbox_of_the_session_is_saved_after_its_scripts_even_after_its_predecessors_failed_merge() -> None:
    # Before: the session's one flag stopped the saves of every later sandbox too (one replaced after a crash).
    runtime = StandInRuntime(FailingSandbox(MERGE))
    session = ClientSession("k", runtime)  # type: ignore[arg-type]
    saves(session, 1)
    runtime.running_sandbox = FailingSandbox()
    assert saves(session, 2) == ["", ""] and runtime.running_sandbox.saves == 2


class ClosingRuntime(StandInRuntime):
    """A runtime whose close is recorded with its sandbox's events."""

    def close(self) -> None:
        self.running_sandbox.events.append("closed")


@pytest.mark.anyio
async def test_a_session_whose_last_save_failed_still_ends_its_sandbox_and_servers() -> None:
    # Before: a failed save at the session's end skipped its close: over HTTP, its container and upstream servers
    # stayed until serve stopped.
    sandbox = FailingSandbox(OVER_CAP)
    sessions = SessionRegistry(lambda key: ClosingRuntime(sandbox), idle_timeout=3600, max_sessions=1)  # type: ignore[arg-type,return-value]
    async with sessions.use("k"):
        pass
    await sessions.end("k")
    assert sandbox.saves == 1 and sandbox.events == ["killed unsaved", "closed"]
