"""Workspace transfer: nothing from the container can write outside the destination, and nothing is lost."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest

from sandbox._supervisor.transfer import CHUNK_BYTES
from sandbox.errors import ProtocolError, WorkspaceError
from sandbox.workspace import (
    BATCH_BYTES,
    ENTRY_BYTES,
    WorkspaceReceiver,
    check_relative_path,
    iter_restore_batches,
)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def piece(path: object, data: bytes, *, append: bool = False) -> dict[str, Any]:
    return {"path": path, "data": b64(data), "append": append}


def folder(path: object) -> dict[str, Any]:
    return {"path": path, "dir": True}


def send(receiver: WorkspaceReceiver, *entries: dict[str, Any]) -> None:
    receiver("workspace.entries", {"entries": list(entries)})


def test_received_files_replace_the_destination_on_commit(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "stale.txt").write_text("old", encoding="utf-8")
    receiver = WorkspaceReceiver(dest, max_bytes=100_000)
    send(receiver, folder("empty"))
    send(receiver, piece("notes/a.txt", b"hello "))
    send(receiver, piece("notes/a.txt", b"world", append=True))
    receiver.check({"files": 1, "dirs": 1, "bytes": 11})
    receiver.commit()
    assert (dest / "notes" / "a.txt").read_bytes() == b"hello world"
    assert (dest / "empty").is_dir()
    assert not (dest / "stale.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


def test_a_name_that_is_not_utf8_is_received_byte_for_byte(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    receiver = WorkspaceReceiver(dest, max_bytes=100_000)
    send(receiver, piece({"b64": b64(b"dir\xff/caf\xe9.txt")}, b"x"))
    receiver.check({"files": 1, "dirs": 0, "bytes": 1})
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
    with pytest.raises(ProtocolError, match=r"link/x\.txt"):
        send(receiver, piece("link/x.txt", b"x"))
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


def test_a_save_whose_counts_differ_from_the_sandbox_summary_is_refused(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "kept.txt").write_bytes(b"previous")
    receiver = WorkspaceReceiver(dest, max_bytes=100_000)
    send(receiver, piece("a", b"x"))
    with pytest.raises(WorkspaceError, match="arrived"):
        receiver.check({"files": 1500, "dirs": 1500, "bytes": 1})
    receiver.discard()
    assert os.listdir(dest) == ["kept.txt"]
    assert sorted(os.listdir(tmp_path)) == ["ws"]


def test_the_tree_entry_is_never_workspace_content(tmp_path: Path) -> None:
    receiver = WorkspaceReceiver(tmp_path / "ws", max_bytes=100_000)
    send(receiver, piece("servers/crm/evil.py", b"x"))
    receiver.check({"files": 0, "dirs": 0, "bytes": 0})
    receiver.commit()
    assert not (tmp_path / "ws" / "servers").exists()


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
