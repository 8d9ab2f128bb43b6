"""Workspace transfer: nothing from the container can write outside the destination."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from sandbox.errors import WorkspaceError
from sandbox.workspace import BATCH_BYTES, WorkspaceReceiver, check_relative_path, iter_restore_batches


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_received_files_replace_the_destination_on_commit(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "stale.txt").write_text("old", encoding="utf-8")
    receiver = WorkspaceReceiver(dest, max_bytes=1000)
    receiver("workspace.dir", {"path": "empty"})
    receiver("workspace.file", {"path": "notes/a.txt", "data": b64(b"hello "), "append": False})
    receiver("workspace.file", {"path": "notes/a.txt", "data": b64(b"world"), "append": True})
    receiver.commit()
    assert (dest / "notes" / "a.txt").read_bytes() == b"hello world"
    assert (dest / "empty").is_dir()
    assert not (dest / "stale.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


@pytest.mark.parametrize(
    "path", ["../escape", "/etc/passwd", "a/../../b", "a//b", "./a", "a/.", "", "a\x00b", "x/" * 70 + "y", 5, None]
)
def test_paths_that_could_escape_are_refused(path: object) -> None:
    with pytest.raises(WorkspaceError):
        check_relative_path(path)


def test_a_symlink_on_the_way_is_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    receiver = WorkspaceReceiver(tmp_path / "ws", max_bytes=1000)
    os.symlink(outside, receiver.staging / "link")
    with pytest.raises(WorkspaceError):
        receiver("workspace.file", {"path": "link/x.txt", "data": b64(b"x"), "append": False})
    os.symlink(outside / "target.txt", receiver.staging / "file-link")
    with pytest.raises(WorkspaceError):
        receiver("workspace.file", {"path": "file-link", "data": b64(b"x"), "append": False})
    assert list(outside.iterdir()) == []
    receiver.discard()


def test_the_size_and_count_caps_hold(tmp_path: Path) -> None:
    receiver = WorkspaceReceiver(tmp_path / "ws", max_bytes=10, max_files=2)
    receiver("workspace.file", {"path": "a", "data": b64(b"12345"), "append": False})
    with pytest.raises(WorkspaceError, match="larger than 10 bytes"):
        receiver("workspace.file", {"path": "b", "data": b64(b"123456"), "append": False})
    receiver = WorkspaceReceiver(tmp_path / "ws2", max_bytes=100, max_files=2)
    receiver("workspace.file", {"path": "a", "data": "", "append": False})
    receiver("workspace.file", {"path": "b", "data": "", "append": False})
    with pytest.raises(WorkspaceError, match="more than 2 files"):
        receiver("workspace.file", {"path": "c", "data": "", "append": False})


def test_bad_data_and_unknown_messages_are_refused(tmp_path: Path) -> None:
    receiver = WorkspaceReceiver(tmp_path / "ws", max_bytes=100)
    with pytest.raises(WorkspaceError, match="base64"):
        receiver("workspace.file", {"path": "a", "data": "!!", "append": False})
    with pytest.raises(WorkspaceError, match="unexpected"):
        receiver("workspace.exec", {"path": "a"})


def test_the_tree_entry_is_never_workspace_content(tmp_path: Path) -> None:
    receiver = WorkspaceReceiver(tmp_path / "ws", max_bytes=100)
    receiver("workspace.file", {"path": "servers/crm/evil.py", "data": b64(b"x"), "append": False})
    receiver.commit()
    assert not (tmp_path / "ws" / "servers").exists()


def test_restore_sends_directories_and_regular_files_but_no_links(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "sub" / "deep" / "f.txt").write_bytes(b"data")
    (root / "top.txt").write_bytes(b"")
    (root / "servers").mkdir()
    (root / "servers" / "x.py").write_bytes(b"x")
    os.symlink("/etc/passwd", root / "passwd-link")
    os.symlink(tmp_path, root / "dir-link")
    batches = list(iter_restore_batches(root, max_bytes=1000))
    assert batches[0] == ("workspace.mkdir", {"paths": ["sub", "sub/deep"]})
    files = [f for method, params in batches[1:] for f in params["files"]]
    assert sorted((f["path"], base64.b64decode(f["data"])) for f in files) == [
        ("sub/deep/f.txt", b"data"),
        ("top.txt", b""),
    ]


def test_restore_splits_large_files_and_enforces_the_cap(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "big.bin").write_bytes(b"x" * (BATCH_BYTES + 10))
    pieces = [f for _, params in iter_restore_batches(root, max_bytes=BATCH_BYTES * 2) for f in params["files"]]
    assert [f["append"] for f in pieces] == [False, True]
    assert sum(len(base64.b64decode(f["data"])) for f in pieces) == BATCH_BYTES + 10
    with pytest.raises(WorkspaceError, match="more than"):
        list(iter_restore_batches(root, max_bytes=100))
