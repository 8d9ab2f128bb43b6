"""The supervisor's workspace operations, in-process: a save is complete or fails, a restore takes any saved tree."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest

from sandbox._supervisor.files import FileOpError, Workspace, mapped_for_writing
from sandbox._supervisor.transfer import ENTRY_BYTES


def unmapped() -> frozenset[int]:
    """No file of the workspace is mapped (on the host, another user's processes cannot be looked into)."""
    return frozenset()


def export(root: Path, **limits: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    sent: list[dict[str, Any]] = []
    caps = {"max_bytes": 1 << 30, "max_entries": 100_000, **limits}
    summary = Workspace(str(root), mapped=unmapped).export(sent.append, skip=frozenset({"servers"}), **caps)
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
    counts = {k: summary[k] for k in ("files", "same", "dirs", "bytes", "skipped")}
    assert counts == {
        "files": 1500,
        "same": 0,
        "dirs": 1500,
        "bytes": sum(len(str(i)) for i in range(1500)),
        "skipped": 1,
    }
    # the stamp of what it walked, as `workspace.stamp` takes it: the host needs no second walk after a save
    stamp = Workspace(str(tmp_path), mapped=unmapped).stamp(skip=frozenset({"servers"}), max_entries=100_000)
    assert summary["stamp"] == stamp is not None


def _items(sent: list[dict[str, Any]]) -> dict[str, str]:
    """Each file's path and how it was sent: ``data`` or ``same``."""
    items = (e for m in sent for e in m["params"]["entries"] if not e.get("dir") and not e.get("append"))
    return {e["path"]: "same" if e.get("same") else "data" for e in items}


def test_a_save_since_an_earlier_one_sends_only_the_files_changed_since(tmp_path: Path) -> None:
    for name in ("kept", "written", "touched", "renamed", "deleted"):
        (tmp_path / name).write_text(name, encoding="utf-8")
    mapped: set[int] = set()
    workspace = Workspace(str(tmp_path), mapped=lambda: frozenset(mapped))
    caps = {"max_bytes": 1 << 30, "max_entries": 1000}
    first: list[dict[str, Any]] = []
    save1 = workspace.export(first.append, skip=frozenset(), keep=True, **caps)
    assert set(_items(first).values()) == {"data"}

    before = os.stat(tmp_path / "touched")
    (tmp_path / "written").write_text("WRITTEN", encoding="utf-8")
    (tmp_path / "touched").write_text("TOUCHED", encoding="utf-8")  # same size, then its mtime set back:
    os.utime(tmp_path / "touched", ns=(before.st_atime_ns, before.st_mtime_ns))  # the ctime still tells
    (tmp_path / "renamed").rename(tmp_path / "moved")
    (tmp_path / "deleted").unlink()
    (tmp_path / "new").write_text("new", encoding="utf-8")
    second: list[dict[str, Any]] = []
    save2 = workspace.export(second.append, skip=frozenset(), since=save1["save"], keep=True, **caps)
    assert _items(second) == {"kept": "same", "moved": "data", "new": "data", "touched": "data", "written": "data"}
    assert (save2["files"], save2["same"]) == (4, 1) and save2["save"] != save1["save"]

    # a copy into another folder (not kept) leaves the saves kept as they are
    elsewhere = workspace.export([].append, skip=frozenset(), **caps)
    assert elsewhere["save"] is None and elsewhere["same"] == 0
    # the host may not have put the second save in place: it asks since the first, which is still known
    again: list[dict[str, Any]] = []
    workspace.export(again.append, skip=frozenset(), since=save1["save"], keep=True, **caps)
    assert _items(again) == _items(second)
    # a save id the sandbox does not know (or none) sends everything
    for since in ("not-a-save", None, 7):
        full: list[dict[str, Any]] = []
        workspace.export(full.append, skip=frozenset(), since=since, **caps)
        assert set(_items(full).values()) == {"data"}, since


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


def test_a_file_mapped_for_writing_is_sent_with_its_data_and_not_taken_as_unchanged_after(tmp_path: Path) -> None:
    # A write through a shared mapping changes no time after the first (tmpfs never writes back): while a file is
    # mapped, and at the save after, its data goes, and the stamp never says "unchanged".
    for name in ("mapped.bin", "plain.bin"):
        (tmp_path / name).write_bytes(b"\0" * 4096)
    mapped: set[int] = set()
    workspace = Workspace(str(tmp_path), mapped=lambda: frozenset(mapped))
    caps = {"max_bytes": 1 << 30, "max_entries": 1000}
    first = workspace.export([].append, skip=frozenset(), keep=True, **caps)
    mapped.add(os.stat(tmp_path / "mapped.bin").st_ino)
    assert workspace.stamp(skip=frozenset(), max_entries=1000) is None
    second: list[dict[str, Any]] = []
    summary = workspace.export(second.append, skip=frozenset(), since=first["save"], keep=True, **caps)
    assert _items(second) == {"mapped.bin": "data", "plain.bin": "same"} and summary["stamp"] is None
    mapped.clear()  # unmapped since, its last writes showing in no time: still sent once more
    third: list[dict[str, Any]] = []
    workspace.export(third.append, skip=frozenset(), since=summary["save"], keep=True, **caps)
    assert _items(third) == {"mapped.bin": "data", "plain.bin": "same"}


def test_mapped_for_writing_finds_the_inodes_of_shared_writable_mappings_only(tmp_path: Path) -> None:
    import mmap

    for name in ("shared.bin", "private.bin", "readonly.bin"):
        (tmp_path / name).write_bytes(b"\0" * 4096)
    os.link(tmp_path / "shared.bin", tmp_path / "linked.bin")  # another name of the mapped file: the same inode
    inode = {name: os.stat(tmp_path / name).st_ino for name in ("shared.bin", "private.bin", "readonly.bin")}
    files = [open(tmp_path / n, "r+b") for n in ("shared.bin", "private.bin", "readonly.bin")]  # noqa: SIM115
    me = [str(os.getpid())]
    try:
        maps = [
            mmap.mmap(files[0].fileno(), 4096),  # shared, writable
            mmap.mmap(files[1].fileno(), 4096, flags=mmap.MAP_PRIVATE),
            mmap.mmap(files[2].fileno(), 4096, prot=mmap.PROT_READ),
        ]
        found = mapped_for_writing(me)
        assert found is not None and inode["shared.bin"] in found
        assert inode["private.bin"] not in found and inode["readonly.bin"] not in found
        os.unlink(tmp_path / "shared.bin")  # mapped under a name that is gone: still found by its inode
        assert inode["shared.bin"] in (mapped_for_writing(me) or ())
        assert mapped_for_writing(["999999999"]) == frozenset()  # a process that ended meanwhile
        for m in maps:
            m.close()
        assert inode["shared.bin"] not in (mapped_for_writing(me) or ())
    finally:
        for f in files:
            f.close()


def test_a_listing_is_the_first_entries_folders_first_and_counts_them_all(tmp_path: Path) -> None:
    # Before: the first entries in directory order, sorted: a folder of 3,000 files and a subfolder gave an
    # arbitrary 500 of them, often without the subfolder, and no count.
    (tmp_path / "sub").mkdir()
    (tmp_path / "zz").mkdir()
    for i in range(3000):
        (tmp_path / f"f{i}.txt").write_bytes(b"q" * (i % 3))
    (tmp_path / "link").symlink_to("sub")
    entries, total = Workspace(str(tmp_path)).listdir("", 5)
    assert total == 3003
    assert entries == [
        {"name": "sub", "type": "dir", "size": entries[0]["size"]},
        {"name": "zz", "type": "dir", "size": entries[1]["size"]},
        {"name": "f0.txt", "type": "file", "size": 0},
        {"name": "f1.txt", "type": "file", "size": 1},
        {"name": "f10.txt", "type": "file", "size": 1},
    ]
    everything, total = Workspace(str(tmp_path)).listdir("", 10_000)
    assert total == len(everything) == 3003 and everything[-1] == {"name": "link", "type": "symlink", "size": 3}
