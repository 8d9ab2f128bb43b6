"""Workspace paths and walks shared by the container and the host: no link followed, nothing skipped."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox._supervisor.fswalk import (
    MAX_DEPTH,
    DirCursor,
    PathError,
    encode_path,
    split_path,
    walk,
)
from tests.support import REPO


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("name", [b"plain.txt", b"caf\xc3\xa9", b"caf\xe9", b"\xff\xfe", b"a\nb", b"\x1b[31m", b"\\"])
def test_every_name_linux_allows_crosses_byte_for_byte(name: bytes) -> None:
    wire = encode_path([b"dir", name])
    assert split_path(wire) == [b"dir", name]
    assert isinstance(wire, str) == (name.decode("utf-8", errors="ignore").encode() == name)


def test_a_lone_surrogate_is_refused_rather_than_reinterpreted() -> None:
    with pytest.raises(PathError):
        split_path("caf\udce9")
    assert split_path({"b64": base64.b64encode(b"caf\xe9").decode()}) == [b"caf\xe9"]


def test_a_wide_tree_is_walked_whole_holding_one_descriptor_per_level(tmp_path: Path) -> None:
    for i in range(1500):
        (tmp_path / f"f{i:04}").mkdir()
        (tmp_path / f"f{i:04}" / "x.txt").write_bytes(b"x")
    before = _open_fds()
    most = 0
    seen = []
    for entry in walk(tmp_path, skip=frozenset(), max_entries=10_000):
        most = max(most, _open_fds() - before)
        seen.append((entry.parts, entry.kind))
    assert len([p for p, kind in seen if kind == "file"]) == 1500
    assert len([p for p, kind in seen if kind == "dir"]) == 1500
    assert seen[:2] == [((b"f0000",), "dir"), ((b"f0000", b"x.txt"), "file")]
    assert most <= 2
    assert _open_fds() == before


WIDE_WALK = """\
import os, resource, sys
from sandbox._supervisor.fswalk import walk
root = sys.argv[1]
for i in range(1500):
    os.mkdir(f"{root}/f{i:04}")
    open(f"{root}/f{i:04}/x.txt", "wb").close()
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[2]), int(sys.argv[2])))
try:
    print(sum(1 for e in walk(root, skip=frozenset(), max_entries=10_000) if e.kind == "file"))
except OSError as e:
    print("raised", e.strerror)
"""


@pytest.mark.parametrize(("limit", "outcome"), [("64", "1500"), ("5", "raised Too many open files")])
def test_under_a_low_open_file_limit_the_walk_is_complete_or_raises(tmp_path: Path, limit: str, outcome: str) -> None:
    # The old walk opened every subfolder before descending: 1,012 of 1,500 files under a limit of 1,024.
    done = subprocess.run(
        [sys.executable, "-c", WIDE_WALK, str(tmp_path), limit], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == outcome


def test_links_are_reported_but_never_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f").write_bytes(b"")
    os.symlink(tmp_path / "real", tmp_path / "link-to-dir")
    os.symlink("/etc/passwd", tmp_path / "link-to-file")
    os.mkfifo(tmp_path / "fifo")
    kinds = {entry.parts: entry.kind for entry in walk(tmp_path, skip=frozenset(), max_entries=100)}
    assert kinds == {
        (b"fifo",): "other",
        (b"link-to-dir",): "other",
        (b"link-to-file",): "other",
        (b"real",): "dir",
        (b"real", b"f"): "file",
    }


def test_a_tree_too_deep_too_long_or_too_big_is_refused_not_cut(tmp_path: Path) -> None:
    deep = tmp_path / "deep"
    deep.joinpath(*["d"] * (MAX_DEPTH + 1)).mkdir(parents=True)
    with pytest.raises(PathError, match=f"deeper than {MAX_DEPTH}"):
        list(walk(deep, skip=frozenset(), max_entries=1000))
    long = tmp_path / "long"
    long.mkdir()
    fd = os.open(long, os.O_RDONLY)
    for _ in range(17):  # past PATH_MAX, so one folder at a time
        os.mkdir("n" * 250, dir_fd=fd)
        fd, parent = os.open("n" * 250, os.O_RDONLY, dir_fd=fd), fd
        os.close(parent)
    os.close(fd)
    with pytest.raises(PathError, match="longer than 4096 bytes"):
        list(walk(long, skip=frozenset(), max_entries=1000))
    with pytest.raises(PathError, match="more than 50 files and folders"):
        list(walk(deep, skip=frozenset(), max_entries=50))


def test_skipped_top_level_names_are_neither_listed_nor_counted(tmp_path: Path) -> None:
    (tmp_path / "servers" / "crm").mkdir(parents=True)
    (tmp_path / "keep").mkdir()
    (tmp_path / "sub" / "servers").mkdir(parents=True)
    entries = [e.parts for e in walk(tmp_path, skip=frozenset({b"servers"}), max_entries=3)]
    assert entries == [(b"keep",), (b"sub",), (b"sub", b"servers")]


def test_the_cursor_creates_and_reuses_folders_without_following_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(outside, root / "link")
    with DirCursor(root) as cursor:
        fd = cursor.open([b"a", b"b"], create=True)
        assert cursor.open([b"a", b"b"], create=True) == fd
        cursor.open([b"a", b"c"], create=True)
        with pytest.raises(OSError):
            cursor.open([b"link", b"x"], create=True)
        with pytest.raises(FileNotFoundError):
            cursor.open([b"missing"], create=False)
    assert sorted(os.listdir(root / "a")) == ["b", "c"]
    assert os.listdir(outside) == []
