"""The supervisor's workspace operations, in-process: a save is complete or fails, a restore takes any saved tree."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest

from sandbox._supervisor.files import FileOpError, Workspace
from sandbox._supervisor.transfer import ENTRY_BYTES


def export(root: Path, **limits: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    sent: list[dict[str, Any]] = []
    caps = {"max_bytes": 1 << 30, "max_entries": 100_000, **limits}
    summary = Workspace(str(root)).export(sent.append, skip=frozenset({"servers"}), **caps)
    return sent, summary


def test_a_save_sends_every_folder_and_file_and_counts_what_it_left_out(tmp_path: Path) -> None:
    for i in range(1500):
        (tmp_path / f"f{i:04}").mkdir()
        (tmp_path / f"f{i:04}" / "x.txt").write_text(str(i), encoding="utf-8")
    os.symlink("/etc/passwd", tmp_path / "link")
    os.symlink("/opt/tree/servers", tmp_path / "servers")
    sent, summary = export(tmp_path)
    assert {m["method"] for m in sent} == {"workspace.entries"}
    files = [e["path"] for m in sent for e in m["params"]["entries"] if not e.get("dir")]
    assert len(files) == 1500 and files[-1] == "f1499/x.txt"
    assert summary == {"files": 1500, "dirs": 1500, "bytes": sum(len(str(i)) for i in range(1500)), "skipped": 1}


def test_a_save_over_a_cap_fails_and_says_which(tmp_path: Path) -> None:
    for i in range(10):
        (tmp_path / f"d{i}").mkdir()
    with pytest.raises(FileOpError, match="more than 5 files and folders"):
        export(tmp_path, max_entries=5)
    with pytest.raises(FileOpError, match=f"plus {ENTRY_BYTES} bytes per file and folder"):
        export(tmp_path, max_bytes=5 * ENTRY_BYTES)


def test_a_name_that_is_not_utf8_is_saved_as_its_bytes(tmp_path: Path) -> None:
    with open(os.fsencode(tmp_path) + b"/caf\xe9.txt", "wb") as f:
        f.write(b"x")
    sent, _ = export(tmp_path)
    assert [e["path"] for m in sent for e in m["params"]["entries"]] == [
        {"b64": base64.b64encode(b"caf\xe9.txt").decode()}
    ]


def test_a_restore_recreates_names_and_folders_but_never_follows_a_link(tmp_path: Path) -> None:
    root, outside = tmp_path / "ws", tmp_path / "outside"
    for folder in (root, outside):
        folder.mkdir()
    os.symlink(outside, root / "link")
    ws = Workspace(str(root))
    with pytest.raises(FileOpError, match="cannot restore 'a/b': the folder it is in was not sent before it"):
        ws.put_entries([{"path": "a/b", "dir": True}])
    assert sorted(os.listdir(root)) == ["link"]
    ws.put_entries(
        [
            {"path": "a", "dir": True},
            {"path": "a/b", "dir": True},
            {"path": {"b64": base64.b64encode(b"caf\xe9").decode()}, "dir": True},
        ]
    )
    ws.put_entries([{"path": "a/b/f", "data": base64.b64encode(b"one").decode(), "append": False}])
    ws.put_entries([{"path": "a/b/f", "data": base64.b64encode(b"two").decode(), "append": True}])
    assert (root / "a" / "b" / "f").read_bytes() == b"onetwo"
    assert os.path.isdir(os.fsencode(root) + b"/caf\xe9")
    with pytest.raises(FileOpError, match="link"):
        ws.put_entries([{"path": "link/x", "data": "", "append": False}])
    with pytest.raises(FileOpError, match="link"):
        ws.put_entries([{"path": "link/y", "dir": True}])
    with pytest.raises(FileOpError, match="refused path"):
        ws.put_entries([{"path": "../up", "dir": True}])
    assert os.listdir(outside) == []


def test_resetting_the_workspace_empties_a_tree_of_any_depth_and_keeps_the_tree_link(tmp_path: Path) -> None:
    os.symlink("/opt/tree/servers", tmp_path / "servers")
    fd = os.open(tmp_path, os.O_RDONLY)
    for _ in range(3000):  # far past the recursion limit and past PATH_MAX
        os.mkdir("d", dir_fd=fd)
        open(f"/proc/self/fd/{fd}/f", "wb").close()
        fd, parent = os.open("d", os.O_RDONLY, dir_fd=fd), fd
        os.close(parent)
    os.close(fd)
    (tmp_path / "read-only").mkdir()
    (tmp_path / "read-only" / "x").write_bytes(b"")
    (tmp_path / "read-only").chmod(0o500)
    Workspace(str(tmp_path)).wipe(keep=frozenset({"servers"}))
    assert os.listdir(tmp_path) == ["servers"]
