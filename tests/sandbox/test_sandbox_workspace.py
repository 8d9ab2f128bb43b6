"""Workspace transfer: nothing from the container can write outside the destination, and nothing is lost."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import sandbox.workspace_inplace as inplace
from sandbox._supervisor.fswalk import DirCursor
from sandbox._supervisor.transfer import CHUNK_BYTES
from sandbox.errors import ProtocolError, WorkspaceError
from sandbox.host_folders import move_out
from sandbox.workspace import (
    BATCH_BYTES,
    ENTRY_BYTES,
    MAX_ENTRIES,
    WorkspaceReceiver,
    check_relative_path,
    iter_restore_batches,
)
from sandbox.workspace_merge import RestoreRecord
from tests.support import ran_where_permissions_bind


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def piece(path: object, data: bytes, *, append: bool = False) -> dict[str, Any]:
    return {"path": path, "data": b64(data), "append": append}


def folder(path: object) -> dict[str, Any]:
    return {"path": path, "dir": True}


def send(receiver: WorkspaceReceiver, *entries: dict[str, Any]) -> None:
    receiver("workspace.entries", {"entries": list(entries)})


def restored(root: Path) -> RestoreRecord:
    """What a session's restore of ``root`` records (the batches themselves are dropped here)."""
    record = RestoreRecord.before_restore(root)
    for _ in record.sent(iter_restore_batches(root, max_bytes=10_000_000)):
        pass
    return record


def save(
    dest: Path,
    record: RestoreRecord | None,
    files: dict[str, bytes],
    dirs: tuple[str, ...] = (),
    *,
    max_data: int | None = None,
    max_entries: int = MAX_ENTRIES,
) -> WorkspaceReceiver:
    """A save of ``files`` and ``dirs`` (what the sandbox holds at its end) into ``dest``, committed; the folders
    the files are in are sent too, each before what it holds, as the sandbox sends them."""
    parents = {"/".join(p.split("/")[:n]) for p in files for n in range(1, p.count("/") + 1)}
    folders = sorted({*dirs, *parents}, key=lambda d: d.count("/"))
    receiver = WorkspaceReceiver(dest, max_bytes=10_000_000, record=record, max_data=max_data, max_entries=max_entries)
    send(receiver, *(folder(d) for d in folders), *(piece(p, data) for p, data in files.items()))
    receiver.check({"files": len(files), "same": 0, "dirs": len(folders), "bytes": sum(map(len, files.values()))})
    receiver.commit()
    return receiver


def tree_of(root: Path) -> dict[str, bytes | str]:
    """Each path below ``root``: a file's bytes, ``"dir"``, or ``"-> target"`` for a link."""
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = f"-> {os.readlink(path)}"
        else:
            out[rel] = "dir" if path.is_dir() else path.read_bytes() if path.is_file() else "special"
    return out


def test_received_files_replace_the_destination_on_commit(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "stale.txt").write_text("old", encoding="utf-8")
    receiver = WorkspaceReceiver(dest, max_bytes=100_000, record=restored(dest))
    send(receiver, folder("empty"), folder("notes"))
    send(receiver, piece("notes/a.txt", b"hello "))
    send(receiver, piece("notes/a.txt", b"world", append=True))
    receiver.check({"files": 1, "same": 0, "dirs": 2, "bytes": 11})
    receiver.commit()
    assert (dest / "notes" / "a.txt").read_bytes() == b"hello world"
    assert (dest / "empty").is_dir()
    assert not (dest / "stale.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


def test_a_name_that_is_not_utf8_is_received_byte_for_byte(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    receiver = WorkspaceReceiver(dest, max_bytes=100_000)
    send(receiver, folder({"b64": b64(b"dir\xff")}), piece({"b64": b64(b"dir\xff/caf\xe9.txt")}, b"x"))
    receiver.check({"files": 1, "same": 0, "dirs": 1, "bytes": 1})
    receiver.commit()
    assert os.listdir(os.fsencode(dest)) == [b"dir\xff"]
    assert os.listdir(os.fsencode(dest) + b"/dir\xff") == [b"caf\xe9.txt"]
    with open(os.fsencode(dest) + b"/dir\xff/caf\xe9.txt", "rb") as f:
        assert f.read() == b"x"


@pytest.mark.parametrize(
    "path",
    [
        "../escape",
        "/etc/passwd",
        "a/../../b",
        "a//b",
        "./a",
        "a/.",
        "",
        "a\x00b",
        "x/" * 70 + "y",
        "a" * 256,
        "caf\udce9",  # a lone surrogate: raw bytes must travel as {"b64": ...}
        {"b64": b64(b"../escape")},
        {"b64": b64(b"/etc/passwd")},
        {"b64": b64(b"a\x00b")},
        {"b64": "!!not base64"},
        {"b64": b64(b"a"), "extra": "x"},
        5,
        None,
    ],
)
def test_paths_that_could_escape_are_refused(path: object) -> None:
    with pytest.raises(WorkspaceError):
        check_relative_path(path)


def test_a_symlink_on_the_way_is_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    receiver = WorkspaceReceiver(tmp_path / "ws", max_bytes=100_000)
    os.symlink(outside, receiver.staging / "link")
    with pytest.raises(ProtocolError, match="'link'"):
        send(receiver, folder("link"), piece("link/x.txt", b"x"))
    os.symlink(outside / "target.txt", receiver.staging / "file-link")
    with pytest.raises(ProtocolError, match="file-link"):
        send(receiver, piece("file-link", b"x"))
    receiver.discard()
    assert list(outside.iterdir()) == []


def test_the_size_and_entry_caps_count_folders_too(tmp_path: Path) -> None:
    receiver = WorkspaceReceiver(tmp_path / "ws", max_bytes=ENTRY_BYTES + 10)
    send(receiver, piece("a", b"12345"))
    with pytest.raises(ProtocolError, match=f"more than {ENTRY_BYTES + 10} bytes"):
        send(receiver, piece("a", b"123456", append=True))
    receiver = WorkspaceReceiver(tmp_path / "ws2", max_bytes=3 * ENTRY_BYTES)
    for name in ("a", "b", "c"):
        send(receiver, folder(name))
    with pytest.raises(ProtocolError, match="bytes"):
        send(receiver, folder("d"))
    receiver = WorkspaceReceiver(tmp_path / "ws3", max_bytes=1 << 30, max_entries=2)
    send(receiver, folder("a"))
    send(receiver, piece("a/b", b""))
    with pytest.raises(ProtocolError, match="more than 2 files and folders"):
        send(receiver, folder("c"))


@pytest.mark.parametrize(
    ("method", "params", "reason"),
    [
        ("workspace.entries", {"entries": [{"path": "a", "data": "!!", "append": False}]}, "base64"),
        ("workspace.entries", {"entries": [{"path": "a", "data": 5, "append": False}]}, "base64 data or dir"),
        ("workspace.entries", {"entries": ["a"]}, "must be an object"),
        ("workspace.entries", {"entries": "a"}, "unexpected"),
        ("workspace.file", {"path": "a", "data": ""}, "unexpected"),
        ("workspace.entries", {"entries": [piece("a", b"", append=True)]}, "not the file being saved"),
        ("workspace.entries", {"entries": [piece("a", b"x"), folder("b"), piece("a", b"", append=True)]}, "not the"),
    ],
)
def test_bad_data_and_unknown_messages_are_protocol_violations(
    tmp_path: Path, method: str, params: dict[str, Any], reason: str
) -> None:
    receiver = WorkspaceReceiver(tmp_path / "ws", max_bytes=100_000)
    with pytest.raises(ProtocolError, match=reason):
        receiver(method, params)
    receiver.discard()


def test_a_file_sent_twice_or_inside_a_file_is_a_protocol_violation(tmp_path: Path) -> None:
    receiver = WorkspaceReceiver(tmp_path / "ws", max_bytes=100_000)
    send(receiver, piece("a", b"first"))
    send(receiver, piece("b", b"other"))
    with pytest.raises(ProtocolError, match="already exists"):
        send(receiver, piece("a", b"second"))
    with pytest.raises(ProtocolError, match="a/x"):
        send(receiver, folder("a/x"))
    receiver.discard()


def test_an_entry_whose_folder_was_not_sent_before_it_is_a_protocol_violation(tmp_path: Path) -> None:
    # Before: the folders on the way were made, neither counted nor charged: 2,000 files 63 folders deep, sent
    # with no folder, were saved as 2,000 files and 0 folders and put 124,001 folders (485 MB) into the host folder.
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "kept.txt").write_bytes(b"previous")
    deep = "/".join(["d0", *["a"] * 61, "f"])
    for entries, received in (
        ([piece(deep, b"")], {}),
        ([folder("d1/a")], {}),
        ([folder("d2"), piece("d2/a/f", b"x")], {"d2": "dir"}),
        ([piece("d3", b"a file"), piece("d3/f", b"x")], {"d3": b"a file"}),
    ):
        receiver = WorkspaceReceiver(dest, max_bytes=100_000)
        with pytest.raises(ProtocolError, match="before its folder was sent"):
            send(receiver, *entries)
        assert tree_of(receiver.staging) == received  # no folder made on the way
        receiver.discard()
    assert tree_of(dest) == {"kept.txt": b"previous"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


def test_a_save_whose_counts_differ_from_the_sandbox_summary_is_refused(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "kept.txt").write_bytes(b"previous")
    receiver = WorkspaceReceiver(dest, max_bytes=100_000)
    send(receiver, piece("a", b"x"))
    with pytest.raises(WorkspaceError, match="arrived"):
        receiver.check({"files": 1500, "same": 0, "dirs": 1500, "bytes": 1})
    receiver.discard()
    assert os.listdir(dest) == ["kept.txt"]
    assert sorted(os.listdir(tmp_path)) == ["ws"]


def test_the_reserved_top_level_names_are_never_saved_and_nothing_piles_up_beside_the_folder(tmp_path: Path) -> None:
    # Before: a sandbox's `servers/` was dropped but its `.tooltree-save/` (the work folder's name) was received:
    # the first save moved it into the host folder, and every later save left a full copy of it beside the folder
    # in `.ws.unmerged-*`, never removed, with a note that another process had taken the name.
    dest = tmp_path / "ws"
    (dest / ".tooltree-save").mkdir(parents=True)
    (dest / ".tooltree-save" / "mine.txt").write_bytes(b"the user's own")
    record = restored(dest)
    for _ in range(3):
        receiver = WorkspaceReceiver(dest, max_bytes=100_000, record=record)
        send(
            receiver,
            folder(".tooltree-save"),
            piece(".tooltree-save/blob", b"12345"),
            piece(".tooltree-save/blob", b"678", append=True),
            piece("servers/crm/evil.py", b"x"),
            piece("work.txt", b"w"),
        )
        receiver.check({"files": 3, "same": 0, "dirs": 1, "bytes": 10})  # what the sandbox sent, all counted
        receiver.commit()
        record = receiver.next_record
        assert receiver.notes == [
            "the sandbox's .tooltree-save (2 entries) was not saved: that name at the top of a workspace is "
            "tooltree's own (where saves are received); give it another name to keep it",
            "the sandbox's servers (1 entry) was not saved: that name at the top of a workspace is tooltree's own "
            "(the read-only tree of servers); give it another name to keep it",
        ]
        assert tree_of(dest) == {
            ".tooltree-save": "dir",
            ".tooltree-save/mine.txt": b"the user's own",
            "work.txt": b"w",
        }
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


def _flatten(batches: list[tuple[str, dict[str, Any]]]) -> tuple[list[Any], list[dict[str, Any]]]:
    assert {method for method, _ in batches} <= {"workspace.put"}
    entries = [e for _, params in batches for e in params["entries"]]
    return [e["path"] for e in entries if e.get("dir")], [e for e in entries if not e.get("dir")]


def test_restore_sends_directories_and_regular_files_but_no_links(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "sub" / "deep" / "f.txt").write_bytes(b"data")
    (root / "top.txt").write_bytes(b"")
    (root / "servers").mkdir()
    (root / "servers" / "x.py").write_bytes(b"x")
    os.symlink("/etc/passwd", root / "passwd-link")
    os.symlink(tmp_path, root / "dir-link")
    dirs, files = _flatten(list(iter_restore_batches(root, max_bytes=100_000)))
    assert dirs == ["sub", "sub/deep"]
    assert sorted((f["path"], base64.b64decode(f["data"])) for f in files) == [
        ("sub/deep/f.txt", b"data"),
        ("top.txt", b""),
    ]


def test_restore_sends_a_name_that_is_not_utf8_as_its_bytes(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    with open(os.fsencode(root) + b"/caf\xe9.txt", "wb") as f:
        f.write(b"x")
    _, files = _flatten(list(iter_restore_batches(root, max_bytes=100_000)))
    assert [f["path"] for f in files] == [{"b64": b64(b"caf\xe9.txt")}]


def test_restore_splits_large_files_and_enforces_the_cap(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "big.bin").write_bytes(b"x" * (CHUNK_BYTES + 10))
    _, pieces = _flatten(list(iter_restore_batches(root, max_bytes=BATCH_BYTES * 2)))
    assert [f["append"] for f in pieces] == [False, True]
    assert sum(len(base64.b64decode(f["data"])) for f in pieces) == CHUNK_BYTES + 10
    with pytest.raises(WorkspaceError, match="more than 100 bytes"):
        list(iter_restore_batches(root, max_bytes=100))


def test_restore_refuses_a_folder_over_the_entry_cap_and_says_so(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    for i in range(20):
        (root / f"d{i}").mkdir(parents=True)
    with pytest.raises(WorkspaceError, match="more than 10 files and folders"):
        list(iter_restore_batches(root, max_bytes=1 << 30, max_entries=10))
    with pytest.raises(WorkspaceError, match="bytes"):
        list(iter_restore_batches(root, max_bytes=10 * ENTRY_BYTES))


# ---- the merge: what the sandbox never held or never changed is kept --------------------------------


def test_what_the_sandbox_changed_or_deleted_is_saved_and_what_it_never_held_is_kept(tmp_path: Path) -> None:
    dest, outside = tmp_path / "ws", tmp_path / "data.csv"
    outside.write_bytes(b"a,b")
    (dest / "servers").mkdir(parents=True)
    (dest / "servers" / "notes.txt").write_bytes(b"the user's own servers folder")
    (dest / "sub").mkdir()
    (dest / "sub" / "gone.txt").write_bytes(b"deleted by the script")
    (dest / "edited.txt").write_bytes(b"v1")
    (dest / "same.txt").write_bytes(b"unchanged")
    os.symlink(outside, dest / "latest.csv")
    os.mkfifo(dest / "pipe")
    record = restored(dest)
    receiver = save(dest, record, {"edited.txt": b"v2", "same.txt": b"unchanged", "new.txt": b"made"})
    assert tree_of(dest) == {
        "edited.txt": b"v2",
        "latest.csv": f"-> {outside}",
        "new.txt": b"made",
        "pipe": "special",
        "same.txt": b"unchanged",
        "servers": "dir",
        "servers/notes.txt": b"the user's own servers folder",
    }
    assert (dest / "pipe").is_fifo() and receiver.notes == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv", "ws"]


def test_files_written_on_the_host_during_the_session_are_kept(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "report.txt").write_bytes(b"v1")
    (dest / "both.txt").write_bytes(b"v1")
    (dest / "untouched_by_sandbox.txt").write_bytes(b"v1")
    first, second = restored(dest), restored(dest)  # two sessions of one folder
    # the user writes while they run; then the second session saves first
    (dest / "by_user.txt").write_bytes(b"user")
    os.makedirs(dest / "user_dir" / "deep")
    (dest / "user_dir" / "deep" / "x.txt").write_bytes(b"x")
    save(dest, second, {"report.txt": b"v1", "both.txt": b"v1", "untouched_by_sandbox.txt": b"v1", "s2.txt": b"2"})
    (dest / "untouched_by_sandbox.txt").write_bytes(b"user v2")
    (dest / "both.txt").write_bytes(b"user v2")
    receiver = save(dest, first, {"report.txt": b"v1", "both.txt": b"sandbox v2", "untouched_by_sandbox.txt": b"v1"})
    assert tree_of(dest) == {
        "both.txt": b"sandbox v2",
        "both.txt.host": b"user v2",
        "by_user.txt": b"user",
        "report.txt": b"v1",
        "s2.txt": b"2",
        "untouched_by_sandbox.txt": b"user v2",
        "user_dir": "dir",
        "user_dir/deep": "dir",
        "user_dir/deep/x.txt": b"x",
    }
    assert receiver.notes == [
        "both.txt: both the host and the sandbox changed it; the sandbox's copy is saved as both.txt and the "
        "host's is kept as both.txt.host"
    ]


def test_a_host_edit_beats_a_deletion_in_the_sandbox(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    (dest / "dir").mkdir(parents=True)
    (dest / "dir" / "a.txt").write_bytes(b"v1")
    (dest / "dir" / "b.txt").write_bytes(b"v1")
    os.chmod(dest / "dir", 0o700)
    record = restored(dest)
    (dest / "dir" / "a.txt").write_bytes(b"edited on the host")
    save(dest, record, {})  # the script deleted everything
    assert tree_of(dest) == {"dir": "dir", "dir/a.txt": b"edited on the host"}
    assert (dest / "dir").stat().st_mode & 0o777 == 0o700


def test_a_save_keeps_the_modes_of_the_host_files(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    (dest / "private").mkdir(parents=True)
    (dest / "private" / "credentials.json").write_bytes(b"{}")
    (dest / "run.sh").write_bytes(b"#!/bin/sh\n")
    os.chmod(dest / "private" / "credentials.json", 0o600)
    os.chmod(dest / "private", 0o700)
    os.chmod(dest / "run.sh", 0o4755)
    os.chmod(dest, 0o700)
    record = restored(dest)
    files = {"private/credentials.json": b'{"k": 1}', "run.sh": b"#!/bin/sh\necho\n", "new.txt": b"n"}
    save(dest, record, files, dirs=("private",))
    modes = {p: (dest / p).stat().st_mode & 0o7777 for p in ("", "private", "private/credentials.json", "run.sh")}
    assert modes == {"": 0o700, "private": 0o700, "private/credentials.json": 0o600, "run.sh": 0o755}
    assert (dest / "private" / "credentials.json").read_bytes() == b'{"k": 1}'


def test_a_mode_the_host_gave_a_file_during_the_session_stands_when_the_sandboxs_copy_is_saved(tmp_path: Path) -> None:
    # Before: the saved copy took the mode at the restore: a file made 0600 on the host meanwhile was widened back
    # to 0644, and one made executable lost the bit, with no note.
    dest = tmp_path / "ws"
    dest.mkdir()
    for name in ("secret.env", "tool.sh", "same.txt"):
        (dest / name).write_bytes(b"v1\n")
        os.chmod(dest / name, 0o644)
    record = restored(dest)
    os.chmod(dest / "secret.env", 0o600)
    os.chmod(dest / "tool.sh", 0o755)
    save(dest, record, {"secret.env": b"v1\nmore\n", "tool.sh": b"v1\nmore\n", "same.txt": b"v2\n"})
    modes = {name: (dest / name).stat().st_mode & 0o7777 for name in ("secret.env", "tool.sh", "same.txt")}
    assert modes == {"secret.env": 0o600, "tool.sh": 0o755, "same.txt": 0o644}
    assert (dest / "secret.env").read_bytes() == b"v1\nmore\n"


def test_a_second_save_of_a_session_merges_against_the_first(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    first = save(dest, restored(dest), {"a.txt": b"1"})
    # the script deletes a.txt; a second save must delete it (the host did not change it since the first save)
    second = save(dest, first.next_record, {})
    assert tree_of(dest) == {} and second.notes == []


def test_a_save_without_a_restore_keeps_every_host_file(tmp_path: Path) -> None:
    dest = tmp_path / "other"
    dest.mkdir()
    (dest / "mine.txt").write_bytes(b"mine")
    (dest / "clash.txt").write_bytes(b"host")
    receiver = save(dest, None, {"clash.txt": b"sandbox", "new.txt": b"n"})
    assert tree_of(dest) == {"clash.txt": b"sandbox", "clash.txt.host": b"host", "mine.txt": b"mine", "new.txt": b"n"}
    assert len(receiver.notes) == 1


def test_a_save_killed_midway_leaves_nothing_and_its_leftovers_are_removed_by_the_next(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "keep.txt").write_bytes(b"k")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    stale = tmp_path / f".ws.incoming-{int(gone.stdout)}-abc"  # what a process killed mid-save leaves
    stale.mkdir()
    (stale / "half.bin").write_bytes(b"x" * 100)
    live = WorkspaceReceiver(dest, max_bytes=1000)  # a save still receiving: its staging folder stays
    save(dest, restored(dest), {"keep.txt": b"k"})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["ws", live.staging.name])
    live.discard()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


# ---- the merge against hostile shapes and awkward host folders --------------------------------------


def test_a_folder_the_sandbox_replaced_with_a_file_is_saved(tmp_path: Path) -> None:
    # Before: every save failed ("Not a directory") once a script replaced a restored folder with a file.
    dest = tmp_path / "ws"
    (dest / "notes").mkdir(parents=True)
    (dest / "notes" / "a.txt").write_bytes(b"v1")
    (dest / "edited").mkdir()
    (dest / "edited" / "b.txt").write_bytes(b"v1")
    (dest / "edited" / "c.txt").write_bytes(b"v1")
    record = restored(dest)
    (dest / "edited" / "b.txt").write_bytes(b"edited on the host")
    receiver = save(dest, record, {"notes": b"now a file", "edited": b"also a file"})
    # What the host changed stays in the workspace, in its folder kept beside the sandbox's file (before: the folder
    # went out of the workspace, into .ws.old-*, and a note named what was left there).
    assert tree_of(dest) == {
        "edited": b"also a file",
        "edited.host": "dir",
        "edited.host/b.txt": b"edited on the host",
        "notes": b"now a file",
    }
    assert receiver.notes == [
        "edited: the sandbox made a file in place of this folder, which holds entries that stay (changed, made or "
        "read-only on the host, or never sent to the sandbox); the sandbox's copy is saved as edited and the host's "
        "folder is kept as edited.host"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


def test_a_folder_replaced_by_a_file_keeps_its_read_only_files_folders_made_meanwhile_and_git(tmp_path: Path) -> None:
    # Before: the folder was set aside whole and what in it was unchanged since sent was deleted, a read-only file
    # too; folders the host made during the session, holding no file, were deleted with no note; a .git left the
    # workspace.
    dest = tmp_path / "ws"
    for name in ("proj", "results", "repo", "plain"):
        (dest / name).mkdir(parents=True)
    (dest / "proj" / "keep.txt").write_bytes(b"precious")
    (dest / "proj" / "keep.txt").chmod(0o444)
    (dest / "proj" / "other.txt").write_bytes(b"other")
    (dest / "repo" / ".git").mkdir()
    (dest / "repo" / ".git" / "HEAD").write_bytes(b"ref: refs/heads/main\n")
    (dest / "repo" / "src.py").write_bytes(b"x = 1\n")
    (dest / "plain" / "p.txt").write_bytes(b"p")
    record = restored(dest)
    (dest / "results" / "2024" / "q1").mkdir(parents=True)  # made on the host while the script ran
    files = {"proj": b"proj file", "results": b"results file", "repo": b"repo file", "plain": b"plain file"}
    receiver = save(dest, record, files)
    assert tree_of(dest) == {
        "plain": b"plain file",  # nothing in it stays: it goes, as before
        "proj": b"proj file",
        "proj.host": "dir",
        "proj.host/keep.txt": b"precious",
        "repo": b"repo file",
        "repo.host": "dir",
        "repo.host/.git": "dir",
        "repo.host/.git/HEAD": b"ref: refs/heads/main\n",
        "results": b"results file",
        "results.host": "dir",
        "results.host/2024": "dir",
        "results.host/2024/q1": "dir",
    }
    assert (dest / "proj.host" / "keep.txt").stat().st_mode & 0o777 == 0o444
    assert receiver.notes[0] == "proj/keep.txt: read-only on the host, so it is kept (the sandbox deleted it)"
    assert [n.split(":")[0] for n in receiver.notes[1:]] == ["proj", "repo", "results"]
    assert all(n.endswith(f"folder is kept as {n.split(':')[0]}.host") for n in receiver.notes[1:])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]  # nothing set aside out of the workspace

    # The session goes on: its next save replaces its own file and leaves the folders kept alone.
    files["proj"] = b"proj file, again"
    again = save(dest, receiver.next_record, files)
    assert (dest / "proj").read_bytes() == b"proj file, again"
    assert (dest / "proj.host" / "keep.txt").read_bytes() == b"precious" and again.notes == []


def test_paths_longer_than_path_max_below_the_host_folder_are_merged(tmp_path: Path) -> None:
    # Before: a saved path of 4,000 bytes under a host folder whose own path is long went over PATH_MAX,
    # and every later save of that folder failed with "File name too long".
    dest = tmp_path / ("p" * 200) / "ws"
    dest.mkdir(parents=True)
    parts = [b"x" * 250] * 16
    with DirCursor(dest) as cursor:  # the path is too long to make by name
        fd = os.open("f.txt", os.O_WRONLY | os.O_CREAT, dir_fd=cursor.open(parts, create=True))
        os.write(fd, b"deep")
        os.close(fd)
    assert len(os.fsencode(dest)) + 1 + len(b"/".join([*parts, b"f.txt"])) > 4096
    record = restored(dest)
    dirs = tuple("/".join(["x" * 250] * n) for n in range(1, 17))
    receiver = save(dest, record, {f"{dirs[-1]}/f.txt": b"deep", "new.txt": b"n"}, dirs)
    assert receiver.notes == [] and (dest / "new.txt").read_bytes() == b"n"
    with DirCursor(dest) as cursor:
        fd = os.open("f.txt", os.O_RDONLY, dir_fd=cursor.open(parts, create=False))
        assert os.read(fd, 100) == b"deep"
        os.close(fd)
    save(dest, receiver.next_record, {"new.txt": b"n"})  # the script deleted the deep tree
    assert tree_of(dest) == {"new.txt": b"n"}
    assert sorted(p.name for p in dest.parent.iterdir()) == ["ws"]


def test_names_in_notes_are_escaped_and_conflict_copies_never_take_a_host_name(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    hostile = b"e\x1b]52;c;SGk=\x07\nforged \xe9\xe2\x80\xae"
    for name in (hostile, b"a"):
        with open(os.fsencode(dest) + b"/" + name, "wb") as f:
            f.write(b"v1")
    record = restored(dest)
    for name in (hostile, b"a"):
        with open(os.fsencode(dest) + b"/" + name, "wb") as f:
            f.write(b"host v2")
    (dest / "a.host").write_bytes(b"the user's own a.host")
    receiver = WorkspaceReceiver(dest, max_bytes=100_000, record=record)
    send(receiver, piece({"b64": b64(hostile)}, b"sandbox v2"), piece("a", b"sandbox v2"))
    receiver.check({"files": 2, "same": 0, "dirs": 0, "bytes": 20})
    receiver.commit()
    shown = "e\\x1b]52;c;SGk=\\x07\\nforged \\xe9\\u202e"
    assert receiver.notes == [
        "a: both the host and the sandbox changed it; the sandbox's copy is saved as a and the host's is kept as "
        "a.host-2",
        f"{shown}: both the host and the sandbox changed it; the sandbox's copy is saved as {shown} and the "
        f"host's is kept as {shown}.host",
    ]
    assert (dest / "a.host").read_bytes() == b"the user's own a.host"
    assert (dest / "a.host-2").read_bytes() == b"host v2"
    with open(os.fsencode(dest) + b"/" + hostile + b".host", "rb") as f:
        assert f.read() == b"host v2"


def test_a_workspace_named_by_a_relative_path_like_dot_is_saved_into_that_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: `tooltree exec --workspace .` staged the save inside the workspace, then could not move
    # "." aside: every save failed ("Device or resource busy") and the session's files were lost.
    dest = tmp_path / "ws"
    (dest / "sub").mkdir(parents=True)
    (dest / "mine.txt").write_bytes(b"mine")
    monkeypatch.chdir(dest / "sub")
    save(Path(".."), restored(Path("..")), {"mine.txt": b"mine", "new.txt": b"n"})
    assert tree_of(dest) == {"mine.txt": b"mine", "new.txt": b"n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


def test_a_save_that_cannot_be_staged_beside_the_folder_is_a_workspace_error(tmp_path: Path) -> None:
    # Before: a bare OSError, which `tooltree exec` did not catch: a traceback, and the output never printed.
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(WorkspaceError, match=r"cannot save the workspace into .*file/ws"):
        WorkspaceReceiver(tmp_path / "file" / "ws", max_bytes=1000)


def test_a_failed_merge_keeps_the_saved_copy_where_no_later_save_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the saved copy (and host files already moved into it) stayed in the staging folder, which
    # the next save removed as left over by a dead process.
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "mine.txt").write_bytes(b"mine")

    def broken_merge(*args: Any, **kwargs: Any) -> Any:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("sandbox.workspace.merge", broken_merge)
    with pytest.raises(WorkspaceError, match="the saved copy is in") as raised:
        save(dest, restored(dest), {"work.txt": b"the session's work"})
    kept = Path(str(raised.value).rpartition("the saved copy is in ")[2])
    monkeypatch.setattr("sandbox.workspace_staging.alive", lambda pid: False)  # as seen by a later process
    WorkspaceReceiver(dest, max_bytes=1000).discard()
    assert (kept / "work.txt").read_bytes() == b"the session's work"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["ws", kept.name])
    assert tree_of(dest) == {"mine.txt": b"mine"}


def test_folders_the_host_made_read_only_are_merged_and_stay_read_only(tmp_path: Path) -> None:
    # Before (as any user but root): the saved copy's folder was made read-only before host entries
    # moved into it, and host entries could not move out of a read-only host folder: the save failed.
    if ran_where_permissions_bind(f"{__file__}::test_folders_the_host_made_read_only_are_merged_and_stay_read_only"):
        return
    dest = tmp_path / "ws"
    (dest / "docs").mkdir(parents=True)
    (dest / "docs" / "a.txt").write_bytes(b"a")
    os.symlink("/etc/hostname", dest / "docs" / "link")
    os.chmod(dest / "docs", 0o555)
    os.chmod(dest, 0o555)
    record = restored(dest)
    try:
        save(dest, record, {"docs/a.txt": b"a", "docs/new.txt": b"n"}, ("docs",))
        assert tree_of(dest) == {
            "docs": "dir",
            "docs/a.txt": b"a",
            "docs/link": "-> /etc/hostname",
            "docs/new.txt": b"n",
        }
        assert [(dest / p).stat().st_mode & 0o777 for p in ("", "docs")] == [0o555, 0o555]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]
    finally:
        for folder in (dest, dest / "docs"):
            os.chmod(folder, 0o755)


# ---- the folder itself stays: its inode, its mount, whatever another process holds of it ---------------


def test_a_save_keeps_the_folder_itself_so_a_shell_inside_it_sees_the_saved_files(tmp_path: Path) -> None:
    # Before: the folder was renamed aside and the saved copy renamed in its place, so `cd ws; tooltree exec
    # --workspace . s.py` left the shell in a deleted folder where `ls` showed nothing.
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "mine.txt").write_bytes(b"mine")
    before = dest.stat()
    lister = "import os, sys; sys.stdin.readline(); print(sorted(os.listdir('.')))"
    shell = subprocess.Popen(
        [sys.executable, "-c", lister], cwd=dest, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )  # its cwd is taken when it starts: before the save
    save(dest, restored(dest), {"mine.txt": b"mine", "new.txt": b"n"})
    out, _ = shell.communicate("go\n", timeout=30)
    assert out.strip() == "['mine.txt', 'new.txt']"
    assert (dest.stat().st_ino, dest.stat().st_dev) == (before.st_ino, before.st_dev)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


def after_listing(monkeypatch: pytest.MonkeyPatch, folder: Path, then: Callable[[int], None]) -> None:
    """Make the merge call ``then(descriptor of folder)`` right after it lists ``folder``: what ``then`` does
    comes too late for the merge to see (another process writing through the folder meanwhile)."""
    real_snapshot = inplace._snapshot

    def listed_then(host_fd: int, stage_fd: int | None) -> Any:
        names = real_snapshot(host_fd, stage_fd)
        if os.path.samestat(os.fstat(host_fd), folder.stat()):
            then(host_fd)
        return names

    monkeypatch.setattr(inplace, "_snapshot", listed_then)


def write_meanwhile(folder_fd: int) -> None:
    """Another process makes ``during.txt`` and ``clash.txt`` in the folder."""
    for name, data in ((b"during.txt", b"written meanwhile"), (b"clash.txt", b"the host's, meanwhile")):
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=folder_fd)
        os.write(out, data)
        os.close(out)


def test_files_another_process_makes_in_the_folder_during_the_save_stay_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: a file made through the folder's descriptor (a process whose cwd it was) after the merge had
    # read the host folder went into the copy moved aside: kept there, but gone from the folder.
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "mine.txt").write_bytes(b"mine")
    after_listing(monkeypatch, dest, write_meanwhile)  # too late for the merge to see them
    receiver = save(dest, restored(dest), {"mine.txt": b"mine", "clash.txt": b"the sandbox's"})
    assert tree_of(dest) == {
        "clash.txt": b"the host's, meanwhile",
        "during.txt": b"written meanwhile",
        "mine.txt": b"mine",
    }
    (kept,) = tmp_path.glob(".ws.unmerged-*")
    assert tree_of(kept) == {"clash.txt": b"the sandbox's"}
    assert receiver.notes == [
        f"1 saved entry took a name another process gave an entry of {dest} during the save, which stays; the "
        f"saved one is kept in {kept}: clash.txt"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["ws", kept.name])


def test_a_merge_that_fails_midway_says_where_every_entry_is_and_loses_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / "ws"
    (dest / "sub").mkdir(parents=True)
    (dest / "a.txt").write_bytes(b"a")
    (dest / "sub" / "b.txt").write_bytes(b"b")
    (dest / "sub" / "mine.txt").write_bytes(b"mine")
    os.chmod(dest, 0o550)
    record = restored(dest)
    real_move_out = move_out

    def move_out_failing_on_the_saved_b(src_fd: int, src_name: bytes, dst_fd: int, dst_name: bytes) -> None:
        if src_name == dst_name == b"b.txt" and os.path.samestat(os.fstat(dst_fd), (dest / "sub").stat()):
            raise OSError(5, "Input/output error")  # the host's b.txt is already set aside
        real_move_out(src_fd, src_name, dst_fd, dst_name)

    monkeypatch.setattr("sandbox.workspace_inplace.move_out", move_out_failing_on_the_saved_b)
    receiver = WorkspaceReceiver(dest, max_bytes=100_000, record=record)
    send(receiver, piece("a.txt", b"a2"), folder("sub"), piece("sub/b.txt", b"b2"), piece("sub/mine.txt", b"mine"))
    receiver.check({"files": 3, "same": 0, "dirs": 1, "bytes": 8})
    with pytest.raises(WorkspaceError, match=f"could not merge the saved workspace into {re.escape(str(dest))}") as e:
        receiver.commit()
    assert receiver.merging  # so the session keeps the saved copy, which the message names
    receiver.discard()
    (old,) = tmp_path.glob(".ws.old-*")
    (kept,) = tmp_path.glob(".ws.unmerged-*")
    assert f"host entries it took out are in {old / 'w'}; the rest of the saved copy is in {kept}" in str(e.value)
    assert tree_of(dest) == {"a.txt": b"a2", "sub": "dir", "sub/mine.txt": b"mine"}
    assert tree_of(old / "w") == {"a.txt": b"a", "sub": "dir", "sub/b.txt": b"b"}
    assert tree_of(kept) == {"sub": "dir", "sub/b.txt": b"b2"}  # mine.txt, sent as restored, was never written to it
    assert dest.stat().st_mode & 0o777 == 0o550
    os.chmod(dest, 0o755)


def test_a_folder_that_is_a_mount_point_is_saved_into_and_stays_mounted(tmp_path: Path) -> None:
    # Before: the save renamed the folder aside, which a mount point refuses ("Device or resource busy").
    dest = tmp_path / "ws"
    dest.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(dest)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        (dest / "mine.txt").write_bytes(b"mine")
        (dest / "gone.txt").write_bytes(b"deleted by the script")
        before = dest.stat()
        first = save(dest, restored(dest), {"mine.txt": b"mine", "new.txt": b"n"}, ("sub",))
        second = save(dest, first.next_record, {"mine.txt": b"mine v2", "new.txt": b"n"}, ("sub",))
        assert first.notes == second.notes == []
        assert os.path.ismount(dest) and dest.stat().st_dev == before.st_dev
        assert tree_of(dest) == {"mine.txt": b"mine v2", "new.txt": b"n", "sub": "dir"}
        _, files = _flatten(list(iter_restore_batches(dest, max_bytes=100_000)))  # its work folder is never sent
        assert sorted(f["path"] for f in files) == ["mine.txt", "new.txt"]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]
    finally:
        subprocess.run(["umount", str(dest)], check=True)


def test_a_save_of_deep_folder_chains_opens_each_folder_a_few_times_not_once_per_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 20 chains of 40 folders: looked up in any order but a walk's, each entry reopens its whole path (62 opens an
    # entry here; at the entry cap, 32,760 folders 63 deep, 30 s of host CPU per save).
    dest = tmp_path / "ws"
    items = []
    for c in range(20):
        rel = f"c{c}"
        items.append(folder(rel))
        for _ in range(40):
            rel += "/a"
            items.append(folder(rel))
        (dest / rel).mkdir(parents=True)
        (dest / rel / "f.txt").write_text("x", encoding="utf-8")
        items.append(piece(rel + "/f.txt", b"changed" if c == 0 else b"x"))
    record = restored(dest)
    receiver = WorkspaceReceiver(dest, max_bytes=10_000_000, record=record)
    send(receiver, *items)
    opens = 0
    real_open = os.open

    def counting_open(*args: Any, **kwargs: Any) -> int:
        nonlocal opens
        opens += 1
        return real_open(*args, **kwargs)

    monkeypatch.setattr(os, "open", counting_open)
    receiver.commit()
    monkeypatch.undo()
    assert (dest / "c0" / "/".join(["a"] * 40) / "f.txt").read_text(encoding="utf-8") == "changed"
    assert opens < 8 * len(record.entries), opens


def test_a_hosts_link_or_fifo_in_the_way_of_a_saved_entry_is_kept_beside_and_the_note_says_what_it_is(
    tmp_path: Path,
) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    (tmp_path / "target").mkdir()
    os.symlink("../target", dest / "data")
    os.mkfifo(dest / "pipe")
    receiver = save(dest, restored(dest), {"data/x.txt": b"x", "pipe": b"p"})
    assert os.readlink(dest / "data.host") == "../target" and (dest / "data" / "x.txt").read_bytes() == b"x"
    assert (dest / "pipe").read_bytes() == b"p" and (dest / "pipe.host").is_fifo()
    assert sorted(receiver.notes) == [
        f"{name}: the host has a link or special file of that name (never sent to the sandbox), and the sandbox made "
        f"an entry there; the sandbox's copy is saved as {name} and the host's is kept as {name}.host"
        for name in ("data", "pipe")
    ]


def test_a_read_only_host_file_the_sandbox_changed_or_deleted_is_kept_and_its_copy_saved_beside(
    tmp_path: Path,
) -> None:
    # Before: the sandbox's copy replaced it (and took its 0444), and a deletion deleted it.
    dest = tmp_path / "ws"
    (dest / "sub").mkdir(parents=True)
    for name in ("sub/contract.txt", "gone.txt", "same.txt"):
        (dest / name).write_text("signed", encoding="utf-8")
        (dest / name).chmod(0o444)
    receiver = save(dest, restored(dest), {"sub/contract.txt": b"rewritten", "same.txt": b"signed"})
    assert (dest / "sub" / "contract.txt").read_text(encoding="utf-8") == "signed"
    assert (dest / "sub" / "contract.txt").stat().st_mode & 0o777 == 0o444
    assert (dest / "sub" / "contract.txt.sandbox").read_text(encoding="utf-8") == "rewritten"
    assert (dest / "gone.txt").read_text(encoding="utf-8") == "signed"
    assert (dest / "same.txt").read_text(encoding="utf-8") == "signed" and not (dest / "same.txt.sandbox").exists()
    assert sorted(receiver.notes) == [
        "gone.txt: read-only on the host, so it is kept (the sandbox deleted it)",
        "sub/contract.txt: read-only on the host, so it is kept; the sandbox's copy is saved as "
        "sub/contract.txt.sandbox",
    ]


def test_copies_of_a_read_only_file_are_saved_only_while_the_folder_can_still_be_restored(tmp_path: Path) -> None:
    # Before: each session that changed the read-only file saved one more copy as large (the copies of earlier
    # sessions are restored with the folder), until the folder held more than the sandbox's workspace and no session
    # of it could start ("cannot restore 'model.bin.sandbox-3': No space left on device").
    dest = tmp_path / "ws"
    dest.mkdir()
    model = b"m" * 40 * 1024
    (dest / "model.bin").write_bytes(model)
    (dest / "model.bin").chmod(0o444)
    limit = 100 * 1024  # the sandbox's workspace: two of the file, not three
    changed = b"X" + model[1:]
    first = save(dest, restored(dest), {"model.bin": changed}, max_data=limit)
    assert first.notes == [
        "model.bin: read-only on the host, so it is kept; the sandbox's copy is saved as model.bin.sandbox"
    ]
    # The next session: its restore sends the file and the copy; the script changes the file again.
    second = save(dest, restored(dest), {"model.bin": changed, "model.bin.sandbox": changed}, max_data=limit)
    assert second.notes == [
        "model.bin: read-only on the host, so it is kept; the sandbox's copy is not saved: with it and the file the "
        "folder would hold more data than the sandbox's workspace can restore (sandbox setting workspace_size); make "
        "the file writable, or remove earlier copies of it"
    ]
    assert sorted(p.name for p in dest.iterdir()) == ["model.bin", "model.bin.sandbox"]
    assert (dest / "model.bin").read_bytes() == model and (dest / "model.bin.sandbox").read_bytes() == changed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]  # the copy not saved went with the staging folder
    # Without a bound (a receiver told none), copies are saved as before.
    assert (
        save(dest, restored(dest), {"model.bin": changed, "model.bin.sandbox": changed})
        .notes[0]
        .endswith("saved as model.bin.sandbox-2")
    )


@pytest.mark.parametrize("as_same", [False, True], ids=["sent whole", "sent as unchanged"])
def test_a_hosts_edit_kept_by_one_save_is_not_replaced_by_the_next_without_a_note(
    tmp_path: Path, as_same: bool
) -> None:
    # Before: the save that kept the user's edit recorded the edited file as the sandbox's, so the next save of a
    # change the script made to its own older copy replaced the edit with no note (found by an audit; serve saves
    # after every script, and two sessions of one folder did the same to each other's saves).
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "notes.md").write_text("original", encoding="utf-8")
    first = save(dest, restored(dest), {"notes.md": b"original"}).next_record
    (dest / "notes.md").write_text("the user's edit", encoding="utf-8")  # during the session
    if as_same:
        receiver = WorkspaceReceiver(dest, max_bytes=10_000_000, record=first, continues=True)
        send(receiver, {"path": "notes.md", "same": True}, piece("other.txt", b"x"))
        receiver.check({"files": 1, "same": 1, "dirs": 0, "bytes": 1})
        receiver.commit()
    else:
        receiver = save(dest, first, {"notes.md": b"original", "other.txt": b"x"})
    assert (dest / "notes.md").read_text(encoding="utf-8") == "the user's edit" and receiver.notes == []
    third = save(dest, receiver.next_record, {"notes.md": b"original + the script's line", "other.txt": b"x"})
    assert (dest / "notes.md").read_bytes() == b"original + the script's line"
    assert (dest / "notes.md.host").read_text(encoding="utf-8") == "the user's edit"
    assert third.notes == [
        "notes.md: both the host and the sandbox changed it; the sandbox's copy is saved as notes.md and the host's "
        "is kept as notes.md.host"
    ]


def test_a_save_merged_past_what_a_restore_takes_says_so_and_keeps_every_file(tmp_path: Path) -> None:
    # Before: sessions sharing a folder (`tooltree serve` clients, `tooltree exec` runs at once) each saved within the
    # caps, their saves merged into a folder past them, and nothing was said until every later session failed to
    # start ("could not restore the workspace ws: more than 32768 files and folders").
    dest = tmp_path / "ws"
    dest.mkdir()
    record = restored(dest)  # this session began with the folder empty
    for n in range(2):  # another session's save, meanwhile
        (dest / f"theirs-{n}.bin").write_bytes(b"t" * 40 * 1024)
    mine = save(dest, record, {"mine.bin": b"m" * 40 * 1024}, max_data=100 * 1024)
    assert sorted(p.name for p in dest.iterdir()) == ["mine.bin", "theirs-0.bin", "theirs-1.bin"]
    assert mine.notes == [
        "the folder now holds more than a session can restore (more than 102400 bytes of file data, each file in "
        "whole 4 KiB pages), with what other sessions' saves or the host added since this session began: every "
        "later session of it will fail to start until some of it is removed (sandbox setting workspace_size)"
    ]

    def crowded(max_entries: int) -> list[str]:
        made = tmp_path / f"crowded-{max_entries}"
        made.mkdir()
        record = restored(made)
        for n in range(3):
            (made / f"theirs-{n}.txt").write_bytes(b"t")
        return save(made, record, {"mine.txt": b"m"}, max_entries=max_entries).notes

    assert crowded(3) == [
        "the folder now holds more than a session can restore (more than 3 files and folders), with what other "
        "sessions' saves or the host added since this session began: every later session of it will fail to start "
        "until some of it is removed (sandbox setting workspace_size)"
    ]
    assert crowded(4) == []
