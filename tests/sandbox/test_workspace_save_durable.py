"""A save's files are on disk before the merge puts them in the host folder and removes the versions they replace.

Before: nothing was flushed, so a power loss (or a host crash) in the seconds after a save could leave the folder with
the script's files empty (their data never reached the disk, the renames had) and the user's versions of them, set
aside by the merge, removed. A power loss cannot be made in a test: the order of the flush and the moves is what
is checked (`sandbox.workspace_staging.flush_to_disk`, Linux's syncfs of the file system the staging folder is on, and
the merge's moves recorded; both still run)."""

from __future__ import annotations

from pathlib import Path

import pytest

import sandbox.workspace as workspace
import sandbox.workspace_inplace as inplace
import sandbox.workspace_staging as staging
from tests.sandbox.test_sandbox_workspace import restored, save, tree_of


def test_the_saved_files_are_flushed_to_disk_before_any_takes_the_place_of_a_host_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "notes.txt").write_bytes(b"the user's")
    events: list[str] = []
    flush, move_out = workspace.flush_to_disk, inplace.move_out

    def recorded_flush(folder: Path) -> None:
        assert folder.parent == dest.parent  # the staging folder beside it: the file system of the host folder
        events.append("sync")
        flush(folder)

    def recorded_move(src_fd: int, src_name: bytes, dst_fd: int, dst_name: bytes) -> None:
        events.append("move")
        move_out(src_fd, src_name, dst_fd, dst_name)

    monkeypatch.setattr(workspace, "flush_to_disk", recorded_flush)
    monkeypatch.setattr(inplace, "move_out", recorded_move)
    save(dest, restored(dest), {"notes.txt": b"the script's"})
    assert tree_of(dest) == {"notes.txt": b"the script's"}
    assert events[:1] == ["sync"] and "move" in events


def test_a_save_that_writes_no_file_flushes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "notes.txt").write_bytes(b"the user's")
    synced: list[bool] = []
    monkeypatch.setattr(workspace, "flush_to_disk", lambda folder: synced.append(True))
    save(dest, restored(dest), {"notes.txt": b"the user's"})  # the sandbox left it as it was sent
    assert tree_of(dest) == {"notes.txt": b"the user's"} and not synced


def test_the_flush_is_of_the_folders_file_system_alone_where_linux_has_syncfs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # os.sync flushes every file system of the host: a save would wait for whatever else the host is writing.
    synced: list[bool] = []
    monkeypatch.setattr(staging.os, "sync", lambda: synced.append(True))
    if staging._syncfs() is None:
        pytest.skip("this C library has no syncfs (not Linux)")
    staging.flush_to_disk(tmp_path)
    assert not synced
