"""A save updates every folder that stays a folder in place: its inode, its mount, whatever holds it open."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.errors import WorkspaceError
from sandbox.workspace import WorkspaceReceiver
from tests.sandbox.test_sandbox_workspace import after_listing, piece, restored, save, send, tree_of, write_meanwhile


def is_mount(path: Path) -> bool:
    """Whether ``path`` is a mount point, a bind mount of a folder on the same filesystem too."""
    return subprocess.run(["mountpoint", "-q", str(path)]).returncode == 0


def inode(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_dev, st.st_ino


def test_a_save_keeps_sub_folders_so_a_shell_inside_one_sees_the_saved_files(tmp_path: Path) -> None:
    # Before: every sub-folder was replaced by the saved copy's, so `cd ws/sub` left the shell in a deleted folder.
    dest = tmp_path / "ws"
    (dest / "sub" / "deeper").mkdir(parents=True)
    (dest / "sub" / "edited.txt").write_bytes(b"v1")
    (dest / "sub" / "both.txt").write_bytes(b"v1")
    (dest / "sub" / "gone.txt").write_bytes(b"deleted by the script")
    (dest / "sub" / "deeper" / "same.txt").write_bytes(b"same")
    before = {p: inode(dest / p) for p in ("", "sub", "sub/deeper", "sub/deeper/same.txt")}
    record = restored(dest)
    (dest / "sub" / "both.txt").write_bytes(b"host v2")
    (dest / "sub" / "by_user.txt").write_bytes(b"user")
    lister = "import os, sys; sys.stdin.readline(); print(sorted(os.listdir('.')))"
    shell = subprocess.Popen(
        [sys.executable, "-c", lister], cwd=dest / "sub", stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    files = {"sub/edited.txt": b"v2", "sub/both.txt": b"sandbox v2", "sub/deeper/same.txt": b"same", "sub/n": b"n"}
    receiver = save(dest, record, files, ("sub", "sub/deeper", "sub/deeper/new"))
    out, _ = shell.communicate("go\n", timeout=30)
    assert out.strip() == "['both.txt', 'both.txt.host', 'by_user.txt', 'deeper', 'edited.txt', 'n']"
    assert {p: inode(dest / p) for p in before} == before
    assert tree_of(dest) == {
        "sub": "dir",
        "sub/both.txt": b"sandbox v2",
        "sub/both.txt.host": b"host v2",
        "sub/by_user.txt": b"user",
        "sub/deeper": "dir",
        "sub/deeper/new": "dir",
        "sub/deeper/same.txt": b"same",
        "sub/edited.txt": b"v2",
        "sub/n": b"n",
    }
    assert receiver.notes == [
        "sub/both.txt: both the host and the sandbox changed it; the sandbox's copy is saved as sub/both.txt and "
        "the host's is kept as sub/both.txt.host"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


def test_a_sub_folder_held_open_takes_the_saved_files_and_keeps_its_mode(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    (dest / "a" / "b").mkdir(parents=True)
    os.chmod(dest / "a", 0o750)
    fd = os.open(dest / "a" / "b", os.O_RDONLY | os.O_DIRECTORY)  # an editor or a watcher on the folder
    try:
        save(dest, restored(dest), {"a/b/new.txt": b"n"}, ("a", "a/b"))
        assert sorted(os.listdir(fd)) == ["new.txt"]
        os.close(os.open("late.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    assert tree_of(dest) == {"a": "dir", "a/b": "dir", "a/b/late.txt": b"", "a/b/new.txt": b"n"}
    assert (dest / "a").stat().st_mode & 0o777 == 0o750


def test_entries_another_process_makes_in_a_sub_folder_during_the_save_stay_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / "ws"
    (dest / "sub").mkdir(parents=True)
    (dest / "sub" / "mine.txt").write_bytes(b"mine")
    record = restored(dest)
    after_listing(monkeypatch, dest / "sub", write_meanwhile)  # the folder was listed: too late to merge
    receiver = save(dest, record, {"sub/mine.txt": b"mine", "sub/clash.txt": b"the sandbox's"}, ("sub",))
    assert tree_of(dest) == {
        "sub": "dir",
        "sub/clash.txt": b"the host's, meanwhile",
        "sub/during.txt": b"written meanwhile",
        "sub/mine.txt": b"mine",
    }
    (kept,) = tmp_path.glob(".ws.unmerged-*")
    assert tree_of(kept) == {"sub": "dir", "sub/clash.txt": b"the sandbox's"}
    assert receiver.notes == [
        f"1 saved entry took a name another process gave an entry of {dest} during the save, which stays; the "
        f"saved one is kept in {kept}: sub/clash.txt"
    ]


def test_a_sub_folder_replaced_by_a_file_and_a_file_replaced_by_a_folder_are_saved(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    (dest / "was_dir" / "inner").mkdir(parents=True)
    (dest / "was_dir" / "inner" / "x.txt").write_bytes(b"x")
    (dest / "was_file").write_bytes(b"f")
    os.symlink("/etc/hostname", dest / "link")
    record = restored(dest)
    receiver = save(dest, record, {"was_dir": b"now a file", "was_file/y.txt": b"y", "link/z": b"z"}, ("was_file",))
    assert tree_of(dest) == {
        "link": "dir",
        "link.host": "-> /etc/hostname",
        "link/z": b"z",
        "was_dir": b"now a file",
        "was_file": "dir",
        "was_file/y.txt": b"y",
    }
    assert len(receiver.notes) == 1
    assert receiver.notes[0].startswith("link: the host has a link or special file of that name")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


@contextlib.contextmanager
def mounted(kind: str, source: Path, target: Path) -> Iterator[None]:
    """``target`` as a bind mount of ``source`` or a tmpfs, unmounted at the end; a skip where mounting is denied."""
    if os.geteuid() != 0:
        pytest.skip("mounting needs root")
    how = ["--bind", str(source)] if kind == "bind" else ["-t", "tmpfs", "tmpfs"]
    done = subprocess.run(["mount", *how, str(target)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", str(target)], check=True)


@pytest.mark.parametrize("kind", ["bind", "tmpfs"])
def test_a_mount_point_inside_the_workspace_is_merged_in_place_and_stays_mounted(tmp_path: Path, kind: str) -> None:
    # Before: a mount point inside the workspace could not be moved aside: every save failed ("Device or resource
    # busy"), the host entries put back.
    dest, backing = tmp_path / "ws", tmp_path / "backing"
    (dest / "m").mkdir(parents=True)
    backing.mkdir()
    (dest / "top.txt").write_bytes(b"t")
    with mounted(kind, backing, dest / "m"):
        (dest / "m" / "sub").mkdir()
        for name in ("edited.txt", "both.txt", "gone.txt", "sub/same.txt"):
            (dest / "m" / name).write_bytes(b"v1")
        before = {p: inode(dest / p) for p in ("m", "m/sub", "m/sub/same.txt")}
        record = restored(dest)
        (dest / "m" / "both.txt").write_bytes(b"host v2")
        (dest / "m" / "by_user.txt").write_bytes(b"user")
        files = {"top.txt": b"t", "m/edited.txt": b"v2", "m/both.txt": b"sandbox v2", "m/sub/same.txt": b"v1"}
        receiver = save(dest, record, {**files, "m/new/deep.txt": b"d"}, ("m", "m/sub", "m/new"))
        assert is_mount(dest / "m")
        assert {p: inode(dest / p) for p in before} == before
        assert tree_of(dest / "m") == {
            "both.txt": b"sandbox v2",
            "both.txt.host": b"host v2",
            "by_user.txt": b"user",
            "edited.txt": b"v2",
            "new": "dir",
            "new/deep.txt": b"d",
            "sub": "dir",
            "sub/same.txt": b"v1",
        }
        assert len(receiver.notes) == 1 and receiver.notes[0].startswith("m/both.txt: both the host and the sandbox")
        if kind == "bind":
            assert tree_of(backing) == tree_of(dest / "m")
        # The script replaces the mount point with a file: the mount stays, the saved file is kept and named.
        again = save(dest, receiver.next_record, {"top.txt": b"t", "m": b"a file now"})
        assert is_mount(dest / "m") and (dest / "m" / "by_user.txt").read_bytes() == b"user"
        (kept,) = tmp_path.glob(".ws.unmerged-*")
        assert (kept / "m").read_bytes() == b"a file now"
        assert again.notes[-1].endswith(f"is kept in {kept}: m")
        assert sorted(os.listdir(dest / "m")) == ["both.txt.host", "by_user.txt"]  # the script deleted the rest
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["backing", "ws", kept.name])


@pytest.mark.parametrize("kind", ["tmpfs", "bind"])
def test_a_mounted_workspace_keeps_no_work_folder_after_a_save_or_a_failed_one(tmp_path: Path, kind: str) -> None:
    # Before: the empty `.tooltree-save/` stayed in the user's folder after every save; a bind mount of a folder
    # of the same filesystem was not seen as a mount point, and every save into it failed ("Invalid cross-device
    # link").
    dest, backing = tmp_path / "my ws", tmp_path / "backing"  # a space: escaped in /proc/self/mountinfo
    dest.mkdir()
    backing.mkdir()
    with mounted(kind, backing, dest):
        (dest / "mine.txt").write_bytes(b"mine")
        receiver = save(dest, restored(dest), {"mine.txt": b"mine", "new.txt": b"n"}, ("sub",))
        assert receiver.beside == dest / ".tooltree-save" and receiver.notes == []
        assert tree_of(dest) == {"mine.txt": b"mine", "new.txt": b"n", "sub": "dir"}
        failing = WorkspaceReceiver(dest, max_bytes=100_000, record=restored(dest))
        send(failing, piece("x", b"x"))
        with pytest.raises(WorkspaceError, match="arrived"):
            failing.check({"files": 2, "same": 0, "dirs": 0, "bytes": 1})
        failing.discard()
        assert tree_of(dest) == {"mine.txt": b"mine", "new.txt": b"n", "sub": "dir"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backing", "my ws"]


@pytest.mark.parametrize("sandbox_keeps_it", [False, True])
def test_a_host_file_written_after_the_merge_listed_its_folder_is_never_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandbox_keeps_it: bool
) -> None:
    dest = tmp_path / "ws"
    (dest / "sub").mkdir(parents=True)
    (dest / "sub" / "notes.txt").write_bytes(b"v1")
    record = restored(dest)
    # notes.txt looks unchanged since it was sent when its folder is listed: the sandbox decides
    after_listing(
        monkeypatch, dest / "sub", lambda _: (dest / "sub" / "notes.txt").write_bytes(b"the user's late edit")
    )
    files = {"sub/notes.txt": b"sandbox v2"} if sandbox_keeps_it else {}
    receiver = save(dest, record, files, ("sub",))
    if sandbox_keeps_it:
        assert tree_of(dest / "sub") == {"notes.txt": b"sandbox v2", "notes.txt.host": b"the user's late edit"}
        assert len(receiver.notes) == 1
    else:
        assert tree_of(dest / "sub") == {"notes.txt": b"the user's late edit"}
        assert receiver.notes == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


def test_a_folder_on_a_mount_inside_the_workspace_replaced_by_a_file_keeps_what_the_host_changed(
    tmp_path: Path,
) -> None:
    dest = tmp_path / "ws"
    (dest / "m").mkdir(parents=True)
    with mounted("tmpfs", tmp_path, dest / "m"):
        (dest / "m" / "d").mkdir()
        (dest / "m" / "d" / "same.txt").write_bytes(b"same")
        (dest / "m" / "d" / "edited.txt").write_bytes(b"v1")
        (dest / "m" / "gone").mkdir()
        (dest / "m" / "gone" / "x.txt").write_bytes(b"x")
        record = restored(dest)
        (dest / "m" / "d" / "edited.txt").write_bytes(b"host v2")
        receiver = save(dest, record, {"m/d": b"a file now", "m/gone": b"this one too"}, ("m",))
        assert tree_of(dest / "m") == {
            "d": b"a file now",
            "d.host": "dir",
            "d.host/edited.txt": b"host v2",
            "gone": b"this one too",
        }
        assert len(receiver.notes) == 1 and receiver.notes[0].endswith("the host's folder is kept as m/d.host")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]
