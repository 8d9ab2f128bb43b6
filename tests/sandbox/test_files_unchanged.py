"""The supervisor's save, in-process: a file whose bytes a later save already sent goes without them, whatever its
times say, and a save over the caps by its files' sizes is refused before anything is sent."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from sandbox._supervisor.files import FileOpError, Workspace
from sandbox._supervisor.transfer import BATCH_BYTES, CHUNK_BYTES


def unmapped() -> frozenset[int]:
    """No file of the workspace is mapped (on the host, another user's processes cannot be looked into)."""
    return frozenset()


def _items(sent: list[dict[str, Any]]) -> dict[str, str]:
    """Each file's path and how it was sent: ``data`` or ``same``."""
    items = (e for m in sent for e in m["params"]["entries"] if not e.get("dir") and not e.get("append"))
    return {e["path"]: "same" if e.get("same") else "data" for e in items}


def test_a_file_touched_or_written_again_with_the_same_bytes_goes_as_unchanged(tmp_path: Path) -> None:
    # Before: a changed mtime or ctime sent the file's data again; the host wrote it into staging and found it
    # unchanged (32,000 touched files: 5-19 s of host CPU and 134 MiB written per save).
    big = os.urandom(2 * CHUNK_BYTES + 5)
    files = {"touched": b"t" * 10, "rewritten": b"r" * 10, "replaced": b"p" * 10, "edited": b"e" * 10, "big": big}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    workspace = Workspace(str(tmp_path), mapped=unmapped)
    caps = {"max_bytes": 1 << 30, "max_entries": 1000}
    first = workspace.export([].append, skip=frozenset(), keep=True, **caps)

    os.utime(tmp_path / "touched", ns=(1, 1))
    os.utime(tmp_path / "big")
    (tmp_path / "rewritten").write_bytes(b"r" * 10)  # the same bytes, written again
    (tmp_path / "new-inode").write_bytes(b"p" * 10)
    (tmp_path / "new-inode").replace(tmp_path / "replaced")  # another file, the same bytes
    (tmp_path / "edited").write_bytes(b"E" * 10)  # the same size, other bytes: its data goes
    second: list[dict[str, Any]] = []
    summary = workspace.export(second.append, skip=frozenset(), since=first["save"], keep=True, **caps)
    assert _items(second) == {**dict.fromkeys(files, "same"), "edited": "data"}
    assert (summary["files"], summary["same"], summary["bytes"]) == (1, 4, 10)

    # what was taken as unchanged is known for the save after, by its new identity; a later edit still goes
    (tmp_path / "touched").write_bytes(b"T" * 10)
    third: list[dict[str, Any]] = []
    workspace.export(third.append, skip=frozenset(), since=summary["save"], keep=True, **caps)
    assert _items(third) == {**dict.fromkeys(files, "same"), "touched": "data"}
    with open(tmp_path / "big", "ab") as f:  # grown by one byte: never taken for the bytes sent
        f.write(b"!")
    fourth: list[dict[str, Any]] = []
    workspace.export(fourth.append, skip=frozenset(), since=summary["save"], keep=True, **caps)
    assert _items(fourth)["big"] == "data"


def test_a_save_over_the_byte_cap_by_its_files_sizes_sends_nothing(tmp_path: Path) -> None:
    # Before: the save streamed data up to the cap (a 1 TiB sparse file: 380 MiB into the host's staging, 4-5 s of
    # its CPU) before refusing it.
    (tmp_path / "a.bin").write_bytes(os.urandom(CHUNK_BYTES))
    with open(tmp_path / "sparse", "wb") as f:
        f.truncate(1 << 40)
    workspace = Workspace(str(tmp_path), mapped=unmapped)
    sent: list[dict[str, Any]] = []
    cap = 4 * BATCH_BYTES
    with pytest.raises(FileOpError, match=f"more than {cap} bytes"):
        workspace.export(sent.append, skip=frozenset(), max_bytes=cap, max_entries=10)
    assert sent == []

    # counted as the save counts: a file known unchanged by its identity costs no data, so a later save fits
    os.unlink(tmp_path / "sparse")
    (tmp_path / "kept.bin").write_bytes(os.urandom(3 * CHUNK_BYTES))
    first = workspace.export([].append, skip=frozenset(), keep=True, max_bytes=1 << 30, max_entries=10)
    (tmp_path / "new.bin").write_bytes(os.urandom(CHUNK_BYTES))
    workspace.export(sent.append, skip=frozenset(), since=first["save"], max_bytes=2 * CHUNK_BYTES, max_entries=10)
    assert _items(sent) == {"a.bin": "same", "kept.bin": "same", "new.bin": "data"}
