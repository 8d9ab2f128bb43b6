"""A session's workspace restore against an execute from another thread (a real container)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from sandbox import DockerBackend, ExecutionResult, Sandbox
from sandbox.channel import SupervisorChannel
from tests.support import in_thread

pytestmark = pytest.mark.docker


def test_an_execute_during_the_workspace_restore_waits_for_the_whole_workspace(
    backend: DockerBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the restore did not hold the session's lock, so a script sent meanwhile ran in a half-restored workspace.
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "data.txt").write_text("rows\n", encoding="utf-8")
    restoring, release = threading.Event(), threading.Event()
    request = SupervisorChannel.request

    def gated(self: SupervisorChannel, method: str, params: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if method == "workspace.put" and not restoring.is_set():
            restoring.set()
            assert release.wait(60)
        return request(self, method, params, **kwargs)

    monkeypatch.setattr(SupervisorChannel, "request", gated)
    sb = Sandbox(backend, workspace=workspace)
    listing: list[ExecutionResult] = []
    try:
        started, start_errors = in_thread(sb.start)
        assert restoring.wait(60), "the restore never began"
        ran, run_errors = in_thread(lambda: listing.append(sb.execute("import os\nprint(os.path.exists('data.txt'))")))
        assert not ran.wait(1.0), "the script ran while the workspace was still being restored"
        release.set()
        assert started.wait(60) and not start_errors, start_errors
        assert ran.wait(60) and not run_errors, run_errors
        assert listing[0].stdout == "True\n"
    finally:
        release.set()
        sb.close()


# Another process's save into the folder, paused in the middle of its merge (a.txt in place, b.txt not yet).
_PAUSED_SAVE = """
import os, sys
from pathlib import Path
import sandbox.workspace_inplace as inplace
from tests.sandbox.test_sandbox_workspace import restored, save

paused, go, dest = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
move, moves = inplace.move_out, []

def hooked(*args, **kwargs):
    move(*args, **kwargs)
    moves.append(args[3])
    if moves == [b"a.txt", b"a.txt"]:  # the host's a.txt moved aside, the saved one moved in
        os.write(paused, b"p")
        os.read(go, 1)

inplace.move_out = hooked
save(dest, restored(dest), {"a.txt": b"new", "b.txt": b"new"})
"""


def test_a_session_starting_while_another_process_merges_its_save_gets_the_folder_before_or_after_it(
    backend: DockerBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the restore read the folder while the other save was half merged: a.txt new beside an old b.txt (or a
    # file missing, moved aside for its replacement), a state of the folder no session ever saved.
    import fcntl
    import os
    import subprocess
    import sys

    from tests.generator.paused import wait_readable
    from tests.support import REPO

    workspace = tmp_path / "ws"
    workspace.mkdir()
    for name in ("a.txt", "b.txt"):
        (workspace / name).write_bytes(b"old")
    progressed, flock = threading.Event(), fcntl.flock  # set when the restore waits for the lock, or the read ended

    def hooked(fd: int, operation: int) -> None:
        try:
            flock(fd, operation)
        except BlockingIOError:
            progressed.set()  # the restore waits for the other process's lock
            raise

    monkeypatch.setattr(fcntl, "flock", hooked)
    paused_r, paused_w = os.pipe()
    go_r, go_w = os.pipe()
    saving = subprocess.Popen(
        [sys.executable, "-c", _PAUSED_SAVE, str(paused_w), str(go_r), str(workspace)],
        cwd=REPO, pass_fds=(paused_w, go_r), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    os.close(paused_w)
    os.close(go_r)
    seen: list[ExecutionResult] = []

    def start_and_read() -> None:
        try:
            with Sandbox(backend, workspace=workspace) as sb:
                seen.append(sb.execute("print(open('a.txt').read(), open('b.txt').read())"))
        finally:
            progressed.set()

    try:
        assert wait_readable(paused_r) == b"p"
        ran, errors = in_thread(start_and_read)
        assert progressed.wait(120)  # it waits for the merge (now), or it read the folder half merged (before)
        os.write(go_w, b"g")
        _, err = saving.communicate(timeout=60)
        assert saving.returncode == 0, err.decode()[-2000:]
        assert ran.wait(120) and not errors, errors
    finally:
        os.close(paused_r)
        os.close(go_w)
        if saving.poll() is None:
            saving.kill()
            saving.communicate()
    assert seen[0].stdout == "new new\n"
