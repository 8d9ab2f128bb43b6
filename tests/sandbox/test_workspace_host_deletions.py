"""A host deletion stands when the sandbox left the entry as it was sent: a save never brings back what the user
(or another session of the folder) deleted or renamed on the host while the session ran, unless the sandbox
changed it."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from sandbox import DockerBackend, Sandbox
from sandbox.workspace_merge import RestoreRecord, decide
from tests.sandbox.test_sandbox_workspace import restored, save, tree_of

DELETED_BUT_CHANGED = "the host deleted it during the session, but the sandbox changed it: the sandbox's copy is saved"


# ---- the merge (a real receiver and host folder, the sandbox's side given as what it saved) ----------------


def test_a_file_the_host_deleted_or_renamed_is_not_brought_back_when_the_sandbox_left_it(tmp_path: Path) -> None:
    # Before: every file the restore sent and the host no longer had was moved back in ("move").
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "a.txt").write_bytes(b"a")
    (dest / "b.txt").write_bytes(b"b")
    record = restored(dest)
    (dest / "a.txt").unlink()
    (dest / "b.txt").rename(dest / "b_renamed.txt")
    receiver = save(dest, record, {"a.txt": b"a", "b.txt": b"b", "c.txt": b"made by the script"})
    assert tree_of(dest) == {"b_renamed.txt": b"b", "c.txt": b"made by the script"}
    assert receiver.notes == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]  # nothing left beside the folder


def test_a_file_the_host_deleted_and_the_sandbox_changed_is_saved_with_a_note(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    (dest / "sub").mkdir(parents=True)
    (dest / "report.txt").write_bytes(b"v1")
    (dest / "sub" / "data.csv").write_bytes(b"v1")
    record = restored(dest)
    (dest / "report.txt").unlink()
    (dest / "sub" / "data.csv").unlink()
    receiver = save(dest, record, {"report.txt": b"v2 by the script", "sub/data.csv": b"v2"})
    assert tree_of(dest) == {"report.txt": b"v2 by the script", "sub": "dir", "sub/data.csv": b"v2"}
    assert receiver.notes == [f"report.txt: {DELETED_BUT_CHANGED}", f"sub/data.csv: {DELETED_BUT_CHANGED}"]


def test_a_folder_the_host_deleted_comes_back_with_only_what_the_sandbox_made_or_changed(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    (dest / "d" / "deep" / "empty").mkdir(parents=True)
    (dest / "d" / "same.txt").write_bytes(b"same")
    (dest / "d" / "edited.txt").write_bytes(b"v1")
    (dest / "d" / "deep" / "same.txt").write_bytes(b"same")
    (dest / "old" / "inner").mkdir(parents=True)
    (dest / "old" / "inner" / "x.txt").write_bytes(b"x")
    (dest / "empty").mkdir()
    os.chmod(dest / "d", 0o750)
    record = restored(dest)
    for folder in ("d", "old", "empty"):
        os.rename(dest / folder, tmp_path / f"{folder}.moved-away")  # the user moves them out of the workspace
    files = {
        "d/same.txt": b"same",
        "d/edited.txt": b"v2",
        "d/deep/same.txt": b"same",
        "d/new.txt": b"made by the script",
        "old/inner/x.txt": b"x",
    }
    dirs = ("d", "d/deep", "d/deep/empty", "d/made", "old", "old/inner", "empty")
    receiver = save(dest, record, files, dirs)
    assert tree_of(dest) == {"d": "dir", "d/edited.txt": b"v2", "d/made": "dir", "d/new.txt": b"made by the script"}
    assert (dest / "d").stat().st_mode & 0o777 == 0o750
    assert receiver.notes == [
        "d: the host deleted it during the session, but the sandbox made or changed entries in it: it is made "
        "again with only those"
    ]


def test_the_next_save_of_the_session_does_not_bring_back_what_the_host_deleted(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    (dest / "d").mkdir(parents=True)
    (dest / "d" / "x.txt").write_bytes(b"x")
    (dest / "a.txt").write_bytes(b"a")
    (dest / "kept.txt").write_bytes(b"k")
    record = restored(dest)
    os.remove(dest / "a.txt")
    os.remove(dest / "d" / "x.txt")
    os.rmdir(dest / "d")
    files = {"a.txt": b"a", "d/x.txt": b"x", "kept.txt": b"k"}
    first = save(dest, record, {**files, "new.txt": b"1"})
    second = save(dest, first.next_record, {**files, "new.txt": b"2"})  # the script wrote new.txt again
    assert tree_of(dest) == {"kept.txt": b"k", "new.txt": b"2"}
    assert first.notes == second.notes == []
    third = save(dest, second.next_record, {**files, "a.txt": b"a changed", "new.txt": b"2"})
    assert tree_of(dest) == {"a.txt": b"a changed", "kept.txt": b"k", "new.txt": b"2"}
    assert third.notes == [f"a.txt: {DELETED_BUT_CHANGED}"]


def test_a_file_the_host_made_again_after_deleting_it_is_kept(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "a.txt").write_bytes(b"v1")
    record = restored(dest)
    (dest / "a.txt").unlink()
    first = save(dest, record, {"a.txt": b"v1"})
    assert tree_of(dest) == {}
    (dest / "a.txt").write_bytes(b"the host's new one")
    second = save(dest, first.next_record, {"a.txt": b"v1"})
    assert tree_of(dest) == {"a.txt": b"the host's new one"} and second.notes == []


@pytest.mark.parametrize(
    ("sent", "saved", "action"),
    [
        (b"v1", b"v1", "gone"),  # left as sent: the host's deletion stands
        (b"v1", b"v2", "revive"),  # the sandbox changed it: saved, with a note
    ],
)
def test_decide_where_the_host_has_no_entry(
    tmp_path: Path, sent: bytes | None, saved: bytes | None, action: str
) -> None:
    record = RestoreRecord(digests={} if sent is None else {b"f": hashlib.sha256(sent).digest()})
    staged = tmp_path / "f"
    staged.write_bytes(saved or b"")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert decide(b"f", None, staged.stat(), record, {b"f": hashlib.sha256(saved or b"").digest()}, fd) == action
    finally:
        os.close(fd)


# ---- real sessions --------------------------------------------------------------------------------------


def workspace_files(folder: Path) -> dict[str, bytes | str]:
    """`tree_of` without the ``skills`` folder every session makes."""
    return {rel: v for rel, v in tree_of(folder).items() if rel.partition("/")[0] != "skills"}


@pytest.mark.docker
def test_files_deleted_or_renamed_on_the_host_during_a_session_stay_gone_after_its_saves(
    backend: DockerBackend, tmp_path: Path
) -> None:
    # The audit's reproduction A: a.txt and b.txt came back at the save (and again at every later save).
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "a.txt").write_text("a", encoding="utf-8")
    (folder / "b.txt").write_text("b", encoding="utf-8")
    with Sandbox(backend, workspace=folder) as sb:
        (folder / "a.txt").unlink()
        (folder / "b.txt").rename(folder / "b_renamed.txt")
        assert sb.execute("open('c.txt', 'w').write('c')").ok
        assert sb.save_workspace_if_changed() is True
        assert workspace_files(folder) == {"b_renamed.txt": b"b", "c.txt": b"c"}
        assert sb.execute("open('c.txt', 'a').write('2')").ok
        assert sb.save_workspace_if_changed() is True  # the next save merges against the first
        assert workspace_files(folder) == {"b_renamed.txt": b"b", "c.txt": b"c2"}
        assert sb.execute("open('b.txt', 'w').write('b by the script')").ok  # now the sandbox changes one
    assert workspace_files(folder) == {"b.txt": b"b by the script", "b_renamed.txt": b"b", "c.txt": b"c2"}
    assert sb.workspace_notes == [f"b.txt: {DELETED_BUT_CHANGED}"]


@pytest.mark.docker
def test_a_file_one_session_deleted_is_not_brought_back_by_another_session_of_the_folder(
    backend: DockerBackend, tmp_path: Path
) -> None:
    # The audit's reproduction B: session B, restored before session A's save deleted obsolete.txt, brought it back.
    folder = tmp_path / "ws"
    (folder / "cache").mkdir(parents=True)
    (folder / "obsolete.txt").write_text("old", encoding="utf-8")
    (folder / "cache" / "old.bin").write_bytes(b"\0" * 10)
    (folder / "notes.txt").write_text("n", encoding="utf-8")
    with Sandbox(backend, workspace=folder) as a, Sandbox(backend, workspace=folder) as b:
        assert a.execute("import os, shutil\nos.remove('obsolete.txt')\nshutil.rmtree('cache')").ok
        assert a.save_workspace_if_changed() is True
        assert workspace_files(folder) == {"notes.txt": b"n"}
        assert b.execute("open('b.txt', 'w').write('from b')").ok
        assert b.save_workspace_if_changed() is True
        assert workspace_files(folder) == {"b.txt": b"from b", "notes.txt": b"n"}
    assert workspace_files(folder) == {"b.txt": b"from b", "notes.txt": b"n"}  # after both closing saves too
    assert a.workspace_notes == b.workspace_notes == []
