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
