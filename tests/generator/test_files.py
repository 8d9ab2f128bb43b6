from __future__ import annotations

import os
from pathlib import Path

import pytest

from generator.files import UnsafePathError, diff_plan, write_plan


def test_unchanged_files_are_not_rewritten_and_keep_their_mtime(tmp_path: Path) -> None:
    plan = {"servers/a/x.py": b"x = 1\n", "manifest.json": b"{}\n"}
    first = write_plan(tmp_path, plan, ["servers"])
    assert sorted(first.written) == ["manifest.json", "servers/a/x.py"]
    stub = tmp_path / "servers/a/x.py"
    os.utime(stub, (1_000_000, 1_000_000))
    second = write_plan(tmp_path, plan, ["servers"])
    assert second.written == [] and second.deleted == [] and second.unchanged == 2
    assert stub.stat().st_mtime == 1_000_000


def test_stale_files_in_owned_folders_are_deleted_and_others_kept(tmp_path: Path) -> None:
    write_plan(tmp_path, {"servers/a/x.py": b"1", "servers/b/y.py": b"2"}, ["servers"])
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    report = write_plan(tmp_path, {"servers/a/x.py": b"1"}, ["servers"])
    assert report.deleted == ["servers/b/y.py"]
    assert not (tmp_path / "servers/b").exists()
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_diff_lists_created_changed_and_deleted_files_without_writing(tmp_path: Path) -> None:
    write_plan(tmp_path, {"servers/a/x.py": b"1", "servers/a/y.py": b"2"}, ["servers"])
    drift = diff_plan(tmp_path, {"servers/a/x.py": b"changed", "servers/a/z.py": b"new"}, ["servers"])
    assert drift == ["servers/a/x.py", "servers/a/y.py", "servers/a/z.py"]
    assert (tmp_path / "servers/a/x.py").read_bytes() == b"1"


@pytest.mark.parametrize("rel", ["../x.py", "/etc/x", "a/../../x", "a\\b", "a/./b", "", "a\x00b"])
def test_paths_leaving_the_tree_are_refused(tmp_path: Path, rel: str) -> None:
    with pytest.raises(UnsafePathError):
        write_plan(tmp_path / "tree", {rel: b"x"}, [])


def test_a_symlinked_folder_is_never_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    tree = tmp_path / "tree"
    (tree / "servers").mkdir(parents=True)
    (tree / "servers" / "a").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePathError):
        write_plan(tree, {"servers/a/x.py": b"x"}, ["servers"])
    assert list(outside.iterdir()) == []


def test_a_symlinked_file_is_replaced_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("keep", encoding="utf-8")
    tree = tmp_path / "tree"
    (tree / "servers").mkdir(parents=True)
    (tree / "servers" / "x.py").symlink_to(target)
    with pytest.raises(UnsafePathError):
        write_plan(tree, {"servers/x.py": b"new"}, ["servers"])
    assert target.read_text(encoding="utf-8") == "keep"


def test_write_file_writes_only_changes_and_write_plan_reports_early_writes(tmp_path: Path) -> None:
    from generator.files import write_file

    root = tmp_path.resolve()
    assert write_file(root, "servers/a/x.py", b"1") is True
    assert write_file(root, "servers/a/x.py", b"1") is False
    assert write_file(root, "servers/a/x.py", b"2") is True
    assert (root / "servers/a/x.py").read_bytes() == b"2"
    stub = root / "servers/a/x.py"
    os.utime(stub, (1_000_000, 1_000_000))
    report = write_plan(root, {"servers/a/x.py": b"2", "servers/a/y.py": b"3"}, ["servers"], written={"servers/a/x.py"})
    assert report.written == ["servers/a/x.py", "servers/a/y.py"] and report.unchanged == 0
    assert stub.stat().st_mtime == 1_000_000  # written earlier in the run, not again


def test_the_manifest_is_written_after_every_other_file_of_the_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: files were written in name order, and manifest.json sorts before servers/ and snapshots/: a run
    # stopped halfway left a manifest naming stubs and snapshots that were not written yet.
    import generator.files

    write, order = generator.files.write_file, []

    def recording(root: Path, rel: str, data: bytes, **kwargs: object) -> bool:
        order.append(rel)
        return write(root, rel, data, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(generator.files, "write_file", recording)
    plan = {"manifest.json": b"{}\n", "servers/a/x.py": b"1", "snapshots/a.json": b"{}", "servers/INDEX.md": b"-"}
    report = write_plan(tmp_path, plan, ["servers", "snapshots"])
    assert order[-1] == "manifest.json" and sorted(order) == sorted(plan)
    assert report.written == order
