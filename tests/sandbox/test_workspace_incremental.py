"""A save into a session's own workspace folder after its first sends only the files changed since the last save
(``workspace.save {since}``): the others cross as ``same``, without their data, and the merge keeps the host's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox import DockerBackend, Sandbox
from sandbox.errors import ProtocolError, WorkspaceError
from sandbox.workspace import WorkspaceReceiver
from tests.sandbox.test_sandbox_workspace import folder, piece, restored, save, send

BIG = 8 << 20


@pytest.mark.docker
def test_a_later_save_sends_only_what_the_script_changed(backend: DockerBackend, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "data.bin").write_bytes(os.urandom(BIG))
    with Sandbox(backend, workspace=ws) as sb:
        assert sb.save_workspace_if_changed() is True  # the first save sends everything
        assert sb.last_save["bytes"] >= BIG and sb.last_save["same"] == 0
        inode = os.stat(ws / "data.bin").st_ino
        assert sb.execute("open('summary.txt', 'w').write('42')").ok
        assert sb.save_workspace_if_changed() is True
        assert (sb.last_save["files"], sb.last_save["bytes"]) == (1, 2)  # summary.txt alone
        assert sb.last_save["same"] >= 1  # data.bin (and skills/) went without their data
        assert (ws / "summary.txt").read_text(encoding="utf-8") == "42"
        assert os.stat(ws / "data.bin").st_ino == inode  # the host's very file, untouched

        sb.save_workspace(tmp_path / "copy")  # a copy elsewhere sends everything, and the next save is still a delta
        assert (tmp_path / "copy" / "data.bin").read_bytes() == (ws / "data.bin").read_bytes()
        assert sb.execute("open('summary.txt', 'w').write('43')").ok
        assert sb.save_workspace_if_changed() is True and sb.last_save["bytes"] == 2

        sb.execute("with open('data.bin', 'r+b') as f:\n    f.seek(100)\n    f.write(b'CHANGED')")
        assert sb.save_workspace_if_changed() is True
        assert sb.last_save["bytes"] == BIG  # a changed file crosses whole
        assert (ws / "data.bin").read_bytes()[100:107] == b"CHANGED"


@pytest.mark.docker
def test_a_file_sent_as_unchanged_leaves_the_hosts_edit_and_deletion_standing(
    backend: DockerBackend, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in ("edited.txt", "deleted.txt", "both.txt"):
        (ws / name).write_text("as restored", encoding="utf-8")
    with Sandbox(backend, workspace=ws) as sb:
        sb.save_workspace_if_changed()
        (ws / "edited.txt").write_text("the user's edit", encoding="utf-8")
        (ws / "deleted.txt").unlink()
        (ws / "both.txt").write_text("the user's version", encoding="utf-8")
        sb.execute("open('new.txt', 'w').write('new')\nopen('both.txt', 'w').write('the script version')")
        assert sb.save_workspace_if_changed() is True
        assert sb.last_save["files"] == 2  # new.txt and both.txt; edited.txt and deleted.txt went as unchanged
        assert (ws / "edited.txt").read_text(encoding="utf-8") == "the user's edit"
        assert not (ws / "deleted.txt").exists()
        assert (ws / "new.txt").read_text(encoding="utf-8") == "new"
        assert (ws / "both.txt").read_text(encoding="utf-8") == "the script version"
        assert (ws / "both.txt.host").read_text(encoding="utf-8") == "the user's version"
        sb.execute("open('new.txt', 'a').write('er')")  # the next save still knows deleted.txt stays deleted
        assert sb.save_workspace_if_changed() is True
        assert not (ws / "deleted.txt").exists() and (ws / "new.txt").read_text(encoding="utf-8") == "newer"


@pytest.mark.docker
def test_after_a_save_that_was_not_put_in_place_the_next_sends_what_changed_since_the_last_that_was(
    backend: DockerBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    with Sandbox(backend, workspace=ws) as sb:
        sb.execute("open('a.txt', 'w').write('one')")
        sb.save_workspace_if_changed()
        sb.execute("open('a.txt', 'w').write('two')")
        real_commit = WorkspaceReceiver.commit

        def failing_commit(self: WorkspaceReceiver) -> None:
            raise WorkspaceError("the host's disk is full")

        monkeypatch.setattr(WorkspaceReceiver, "commit", failing_commit)
        with pytest.raises(WorkspaceError, match="disk is full"):
            sb.save_workspace()  # the sandbox sent a.txt's 'two'; the host did not keep it
        monkeypatch.setattr(WorkspaceReceiver, "commit", real_commit)
        assert (ws / "a.txt").read_text(encoding="utf-8") == "one"
        assert sb.save_workspace_if_changed() is True
        # a.txt changed since the save the host has: it crosses again, not as unchanged since the one that failed
        assert sb.last_save["files"] == 1 and (ws / "a.txt").read_text(encoding="utf-8") == "two"


BAD_SAMES = {
    "never sent": [{"path": "other.txt", "same": True}],
    "its folder not sent first": [{"path": "d/b.txt", "same": True}],
    "sent twice": [{"path": "a.txt", "same": True}, {"path": "a.txt", "same": True}],
    "sent with data, then as unchanged": [piece("a.txt", b"x"), {"path": "a.txt", "same": True}],
    "as unchanged, then with data": [{"path": "a.txt", "same": True}, piece("a.txt", b"x")],
    "a folder after": [{"path": "a.txt", "same": True}, folder("a.txt")],
    "a path out of the folder": [{"path": "../a.txt", "same": True}],
}


@pytest.mark.parametrize("items", BAD_SAMES.values(), ids=BAD_SAMES.keys())
def test_a_file_sent_as_unchanged_must_be_one_the_last_save_sent(
    tmp_path: Path, items: list[dict[str, object]]
) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "a.txt").write_text("a", encoding="utf-8")
    record = save(dest, restored(dest), {"a.txt": b"a", "d/b.txt": b"b"}).next_record
    assert record is not None
    receiver = WorkspaceReceiver(dest, max_bytes=100_000, record=record, continues=True)
    with pytest.raises(ProtocolError):
        send(receiver, *items)
    receiver.discard()
    assert (dest / "a.txt").read_text(encoding="utf-8") == "a"


def test_a_save_that_continues_none_takes_no_file_as_unchanged(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "a.txt").write_text("a", encoding="utf-8")
    record = save(dest, restored(dest), {"a.txt": b"a"}).next_record
    receiver = WorkspaceReceiver(dest, max_bytes=100_000, record=record)  # not continues=True
    with pytest.raises(ProtocolError, match="no save of this session sent it"):
        send(receiver, {"path": "a.txt", "same": True})
    receiver.discard()


@pytest.mark.docker
def test_writes_through_a_mapping_kept_between_executions_are_saved(backend: DockerBackend, tmp_path: Path) -> None:
    # On the workspace's tmpfs a write through a shared mapping changes the file's times at its first fault only:
    # before, a mapping kept in a variable (a numpy.memmap) made later writes invisible to the stamp and the save.
    ws = tmp_path / "ws"
    with Sandbox(backend, workspace=ws) as sb:
        opened = (
            "import mmap\nf = open('grid.bin', 'w+b')\nf.write(bytes(4096))\nf.flush()\nm = mmap.mmap(f.fileno(), 4096)"
        )
        assert sb.execute(opened).ok
        assert sb.execute("m[0:5] = b'first'").ok
        assert sb.save_workspace_if_changed() is True
        assert (ws / "grid.bin").read_bytes()[:5] == b"first"
        assert sb.execute("m[0:6] = b'second'").ok
        assert sb.save_workspace_if_changed() is True
        assert (ws / "grid.bin").read_bytes()[:6] == b"second"
        assert sb.execute("m[0:5] = b'third'\nm.close()\nf.close()").ok  # its last write, then unmapped
        assert sb.save_workspace_if_changed() is True
        assert (ws / "grid.bin").read_bytes()[:6] == b"thirdd"
        assert sb.save_workspace_if_changed() is False  # unmapped and saved: nothing changes unseen any more


@pytest.mark.docker
def test_a_mapped_file_is_known_by_its_inode_under_another_name_too(backend: DockerBackend, tmp_path: Path) -> None:
    # Found by an audit: mappings were matched by the path /proc/PID/maps shows, so a file mapped as `a` and since
    # linked as `b` and unlinked as `a` ("/workspace/a (deleted)") was sent as unchanged, its writes lost.
    ws = tmp_path / "ws"
    with Sandbox(backend, workspace=ws) as sb:
        setup = (
            "import mmap, os\nwith open('a', 'wb') as f:\n    f.write(b'v1' * 2048)\nfd = os.open('a', os.O_RDWR)\n"
            "M = mmap.mmap(fd, 4096)\nM[0:2] = b'v1'\nos.link('a', 'b')\nos.unlink('a')"
        )
        assert sb.execute(setup).ok
        assert sb.save_workspace_if_changed() is True
        assert sb.execute("M[0:4] = b'V2V2'").ok
        assert sb.save_workspace_if_changed() is True
        assert (ws / "b").read_bytes()[:4] == b"V2V2" and not (ws / "a").exists()


@pytest.mark.docker
def test_the_note_on_links_left_out_is_said_once_until_their_count_changes(
    backend: DockerBackend, tmp_path: Path
) -> None:
    # Before: every save said it again (serve, saving after each script, printed it after every call).
    link_note = "link(s) or special file(s) made in the sandbox's workspace were not saved"
    with Sandbox(backend, workspace=tmp_path / "ws") as sb:
        sb.execute("import os\nos.symlink('/etc/passwd', 'pw')")
        sb.save_workspace_if_changed()
        sb.execute("open('a.txt', 'w').write('a')")
        sb.save_workspace_if_changed()
        sb.execute("os.symlink('/etc/hosts', 'hosts')")
        sb.save_workspace_if_changed()
        said = [n for n in sb.workspace_notes if link_note in n]
    assert said == [f"1 {link_note} (they never leave the sandbox)", f"2 {link_note} (they never leave the sandbox)"]


def test_a_file_sent_as_unchanged_counts_its_host_copys_data_against_what_a_restore_can_write(
    tmp_path: Path,
) -> None:
    # 12 KiB of data may be saved (a workspace of that size). The first save sends a.bin's 8 KiB; the next sends it as
    # unchanged and 8 KiB more in b.bin (a sparse file in the sandbox costs it nothing): the folder would hold 16 KiB,
    # which no restore could write back. Before, a.bin counted nothing and the save was merged.
    dest = tmp_path / "ws"
    dest.mkdir()
    record = save(dest, restored(dest), {"a.bin": bytes(8192)}).next_record
    receiver = WorkspaceReceiver(dest, max_bytes=100_000, record=record, continues=True, max_data=12_288)
    send(receiver, {"path": "a.bin", "same": True}, piece("b.bin", bytes(8192)))
    with pytest.raises(WorkspaceError, match="more than the sandbox's workspace can"):
        receiver.check({"files": 1, "same": 1, "dirs": 0, "bytes": 8192})
    receiver.discard()
    assert sorted(os.listdir(dest)) == ["a.bin"]
    assert sorted(os.listdir(tmp_path)) == ["ws"]

    receiver = WorkspaceReceiver(dest, max_bytes=100_000, record=record, continues=True, max_data=12_288)
    send(receiver, {"path": "a.bin", "same": True}, piece("b.bin", bytes(4096)))  # 12 KiB in all: saved
    receiver.check({"files": 1, "same": 1, "dirs": 0, "bytes": 4096})
    receiver.commit()
    assert sorted(os.listdir(dest)) == ["a.bin", "b.bin"]


def test_each_file_counts_in_whole_pages_against_what_a_restore_can_write(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    receiver = WorkspaceReceiver(dest, max_bytes=100_000, max_data=2 * 4096)
    send(receiver, piece("a", b"x"), piece("b", b"y"), piece("c", b""))  # two pages; an empty file takes none
    receiver.check({"files": 3, "same": 0, "dirs": 0, "bytes": 2})
    receiver.commit()
    receiver = WorkspaceReceiver(dest, max_bytes=100_000, max_data=2 * 4096)
    send(receiver, piece("a", b"x"), piece("b", b"y"), piece("c", b"z"))  # three pages of one byte each
    with pytest.raises(WorkspaceError, match="more than the sandbox's workspace can"):
        receiver.check({"files": 3, "same": 0, "dirs": 0, "bytes": 3})
    receiver.discard()
    assert (dest / "c").read_bytes() == b""
