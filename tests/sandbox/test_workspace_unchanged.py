"""A save costs the host what the sandbox changed, not what it touched: a file whose bytes the host already has is
neither sent again nor written into the staging folder, and a save over the caps is refused before its data is
sent. Before: a script that only touched 32,000 files cost the host 5-19 s of CPU and 134 MiB written per save, a
`print(1)` session on them 15-19 s and 150 MiB; a 1 TiB sparse file streamed 380 MiB into staging before the
refusal (4 s of host CPU)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from sandbox import DockerBackend, Sandbox, SandboxConfig, WorkspaceError
from sandbox._supervisor.transfer import CHUNK_BYTES, TreeWriter
from sandbox.errors import ProtocolError
from sandbox.workspace import WorkspaceReceiver
from tests.docker_cli import EngineWithCLI
from tests.sandbox.test_sandbox_workspace import folder, piece, restored, save, send, tree_of
from tests.support import TEST_OWNER

TOUCH = "import os\nfor root, _, names in os.walk('m'):\n    for n in names:\n        os.utime(os.path.join(root, n))\n"


def staged_files(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The files receivers write into their staging folders, as they write them: the real writer, counting (no
    file of the staging folder is left to look at after a commit)."""
    written: list[bytes] = []

    class CountingWriter(TreeWriter):
        def write(self, parts: Sequence[bytes], data: bytes | None, *, append: bool) -> None:
            if data is not None and not append:
                written.append(b"/".join(parts))
            super().write(parts, data, append=append)

    monkeypatch.setattr("sandbox.workspace.TreeWriter", CountingWriter)
    return written


def many_files(ws: Path, folders: int = 3, each: int = 1000) -> dict[Path, int]:
    """``folders`` × ``each`` one-byte files under ``ws/m``; each one's inode."""
    inodes = {}
    for d in range(folders):
        (ws / "m" / str(d)).mkdir(parents=True)
        for f in range(each):
            path = ws / "m" / str(d) / str(f)
            path.write_bytes(b"x")
            inodes[path] = path.stat().st_ino
    return inodes


def test_a_file_sent_with_the_bytes_the_record_holds_is_never_written_to_staging(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    (dest / "d").mkdir(parents=True)
    files = {"same.txt": b"same", "d/edited.txt": b"before", "grown.txt": b"abc", "cut.txt": b"abcdef"}
    for name, data in files.items():
        (dest / name).write_bytes(data)
    inode = (dest / "same.txt").stat().st_ino
    receiver = WorkspaceReceiver(dest, max_bytes=100_000, record=restored(dest))
    send(receiver, folder("d"), piece("same.txt", b"same"), piece("d/edited.txt", b"after"))
    send(receiver, piece("grown.txt", b"abc"))  # its first piece is what the record holds: held, then more comes
    send(receiver, piece("grown.txt", b"def", append=True), piece("cut.txt", b"abc"), piece("new.txt", b"new"))
    receiver.check({"files": 5, "same": 0, "dirs": 1, "bytes": 21})
    assert tree_of(receiver.staging) == {
        "cut.txt": b"abc",
        "d": "dir",
        "d/edited.txt": b"after",
        "grown.txt": b"abcdef",
        "new.txt": b"new",
    }
    assert receiver.unchanged == 1
    receiver.commit()
    assert tree_of(dest) == {
        "cut.txt": b"abc",
        "d": "dir",
        "d/edited.txt": b"after",
        "grown.txt": b"abcdef",
        "new.txt": b"new",
        "same.txt": b"same",
    }
    assert (dest / "same.txt").stat().st_ino == inode  # the host's very file
    assert receiver.next_record is not None and b"same.txt" in receiver.next_record.digests


def test_a_file_held_as_unchanged_and_then_sent_again_is_still_a_protocol_violation_and_never_written(
    tmp_path: Path,
) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "a.txt").write_bytes(b"a")
    record = save(dest, restored(dest), {"a.txt": b"a"}).next_record
    for items, staged in (
        ([piece("a.txt", b"a"), piece("a.txt", b"a")], {}),
        ([piece("a.txt", b"a"), folder("a.txt")], {}),
        ([piece("a.txt", b"a"), {"path": "a.txt", "same": True}], {}),
        ([folder("a.txt"), piece("a.txt", b"a")], {"a.txt": "dir"}),
    ):
        receiver = WorkspaceReceiver(dest, max_bytes=100_000, record=record, continues=True)
        with pytest.raises(ProtocolError, match="sent twice"):
            send(receiver, *items)
        assert tree_of(receiver.staging) == staged
        receiver.discard()
    assert tree_of(dest) == {"a.txt": b"a"}


def test_a_file_under_a_reserved_name_sent_as_unchanged_is_counted_and_left_out(tmp_path: Path) -> None:
    # Before: a protocol violation ("no save of this session sent it": its data had been left out), so a script
    # that made `.tooltree-save/blob` had its sandbox ended at the save after next.
    dest = tmp_path / "ws"
    dest.mkdir()
    first = WorkspaceReceiver(dest, max_bytes=100_000, record=restored(dest))
    send(first, folder(".tooltree-save"), piece(".tooltree-save/blob", b"b"), piece("a.txt", b"a"))
    first.check({"files": 2, "same": 0, "dirs": 1, "bytes": 2})
    first.commit()
    receiver = WorkspaceReceiver(dest, max_bytes=100_000, record=first.next_record, continues=True)
    send(receiver, folder(".tooltree-save"), {"path": ".tooltree-save/blob", "same": True})
    send(receiver, {"path": "a.txt", "same": True}, piece("b.txt", b"b"))
    receiver.check({"files": 1, "same": 2, "dirs": 1, "bytes": 1})
    receiver.commit()
    assert tree_of(dest) == {"a.txt": b"a", "b.txt": b"b"}
    assert receiver.notes[0].startswith("the sandbox's .tooltree-save (2 entries) was not saved")


@pytest.mark.docker
def test_a_script_that_only_touches_restored_files_has_none_of_them_written_on_the_host(
    backend: DockerBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    inodes = many_files(ws)
    (ws / "edited.txt").write_text("before", encoding="utf-8")
    written = staged_files(monkeypatch)
    with Sandbox(backend, workspace=ws) as sb:
        assert sb.execute(TOUCH + "open('edited.txt', 'w').write('after')").ok
        sb.save_workspace()  # the first save: every file comes with its data, the record has what was restored
    assert [name for name in written if not name.startswith(b"skills/")] == [b"edited.txt"]
    assert (ws / "edited.txt").read_text(encoding="utf-8") == "after"
    assert {path: (path.stat().st_ino, path.read_bytes()) for path in inodes} == {
        path: (inode, b"x") for path, inode in inodes.items()
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


@pytest.mark.docker
def test_a_later_save_sends_touched_files_without_their_data_and_a_changed_one_with_it(
    backend: DockerBackend, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    inodes = many_files(ws, folders=2)
    big = os.urandom(2 * CHUNK_BYTES + 1)
    (ws / "big.bin").write_bytes(big)
    with Sandbox(backend, workspace=ws) as sb:
        assert sb.execute("open('edited.txt', 'w').write('one')").ok
        assert sb.save_workspace_if_changed() is True
        script = TOUCH + "os.utime('big.bin')\nopen('m/0/0', 'w').write('x')\nopen('edited.txt', 'w').write('two')"
        assert sb.execute(script).ok
        assert sb.save_workspace_if_changed() is True
        assert (sb.last_save["files"], sb.last_save["bytes"]) == (1, 3)  # edited.txt alone crossed
        assert sb.last_save["same"] >= len(inodes) + 1
    assert (ws / "edited.txt").read_text(encoding="utf-8") == "two"
    assert (ws / "big.bin").read_bytes() == big
    assert {path: (path.stat().st_ino, path.read_bytes()) for path in inodes} == {
        path: (inode, b"x") for path, inode in inodes.items()
    }


@pytest.mark.docker
def test_a_save_over_the_cap_by_its_files_sizes_is_refused_before_any_data_reaches_the_host(
    docker_engine: EngineWithCLI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    receivers: list[WorkspaceReceiver] = []

    class Receiver(WorkspaceReceiver):
        def __init__(self, dest: Path, **kwargs: Any) -> None:
            super().__init__(dest, **kwargs)
            receivers.append(self)

    monkeypatch.setattr("sandbox.session_files.WorkspaceReceiver", Receiver)
    config = SandboxConfig(owner=TEST_OWNER, workspace_max_bytes=16 << 20)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "kept.txt").write_text("previous save", encoding="utf-8")
    with Sandbox(DockerBackend(config, docker=docker_engine), workspace=ws) as sb:
        made = "import os\nopen('a.bin', 'wb').write(os.urandom(8 << 20))\nopen('sparse', 'wb').truncate(1 << 40)"
        assert sb.execute(made).ok
        with pytest.raises(WorkspaceError, match=f"more than {16 << 20} bytes"):
            sb.save_workspace()
        assert sb.execute("import os\nos.remove('sparse')").ok
    (refused, at_close) = receivers
    assert refused.counts == {"files": 0, "same": 0, "dirs": 0, "bytes": 0}  # nothing was sent
    assert at_close.counts["bytes"] >= 8 << 20
    assert sorted(os.listdir(ws)) == ["a.bin", "kept.txt", "skills"]  # saved at close, once within the cap
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


@pytest.mark.docker
def test_a_script_that_makes_the_work_folders_name_keeps_its_sandbox_through_later_saves(
    backend: DockerBackend, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    with Sandbox(backend, workspace=ws) as sb:
        assert sb.execute("import os\nos.mkdir('.tooltree-save')\nopen('.tooltree-save/blob', 'w').write('b')").ok
        assert sb.save_workspace_if_changed() is True
        assert sb.execute("open('a.txt', 'w').write('a')").ok
        assert sb.save_workspace_if_changed() is True  # before: the sandbox was ended, a protocol violation
        assert sb.ended is None and sb.execute("print(1)").stdout == "1\n"
    assert (ws / "a.txt").read_text(encoding="utf-8") == "a" and not (ws / ".tooltree-save").exists()


def staged_folders(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The folders receivers make in their staging folders, as they make them (the real writer, counting)."""
    made: list[bytes] = []

    class CountingWriter(TreeWriter):
        def write(self, parts: Sequence[bytes], data: bytes | None, *, append: bool) -> None:
            if data is None:
                made.append(b"/".join(parts))
            super().write(parts, data, append=append)

    monkeypatch.setattr("sandbox.workspace.TreeWriter", CountingWriter)
    monkeypatch.setattr("sandbox.workspace_unstaged.TreeWriter", CountingWriter)
    return made


@pytest.mark.docker
def test_a_later_save_stages_only_the_folders_that_hold_what_changed_and_deletions_in_the_rest_still_go(
    backend: DockerBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    made = staged_folders(monkeypatch)
    with Sandbox(backend, workspace=ws) as sb:
        first = "import os\nfor i in range(300):\n    os.makedirs(f'd{i}/sub')\n"
        assert sb.execute(first + "for i in (5, 7):\n    open(f'd{i}/f.txt', 'w').write('0')").ok
        assert sb.save_workspace_if_changed() is True
        inodes = {path: path.stat().st_ino for path in ws.glob("d*")}
        made.clear()
        second = "import os\nopen('d5/f.txt', 'w').write('1')\nos.remove('d7/f.txt')\nos.rmdir('d9/sub')\n"
        assert sb.execute(second + "os.makedirs('n/m')\nopen('n/m/g.txt', 'w').write('g')").ok
        assert sb.save_workspace_if_changed() is True
        # Before: every folder the sandbox holds (602 and skills/) was made in staging, and removed again by the merge.
        assert sorted(made) == [b"d5", b"n", b"n/m"]
        assert (ws / "d5/f.txt").read_text(encoding="utf-8") == "1" and (ws / "d7").is_dir()
        made.clear()
        assert sb.execute("import os\nos.remove('d5/f.txt')\nos.rmdir('d8/sub')").ok
        assert sb.save_workspace_if_changed() is True
        assert made == []
    assert (ws / "n/m/g.txt").read_text(encoding="utf-8") == "g"
    assert not (ws / "d5/f.txt").exists() and not (ws / "d7/f.txt").exists()
    assert not (ws / "d8/sub").exists() and not (ws / "d9/sub").exists() and (ws / "d10/sub").is_dir()
    assert {path: path.stat().st_ino for path in ws.glob("d*")} == inodes  # the same folders, none made again


def test_folders_the_host_deleted_or_replaced_during_the_session_are_staged_and_merged_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / "ws"
    for name in ("gone", "filed", "linked", "kept"):
        (dest / name).mkdir(parents=True)
    (dest / "kept/f.txt").write_bytes(b"f")
    record = restored(dest)
    (dest / "gone").rmdir()
    (dest / "filed").rmdir()
    (dest / "filed").write_bytes(b"host")
    (dest / "linked").rmdir()
    (dest / "linked").symlink_to("kept")
    made = staged_folders(monkeypatch)
    receiver = save(dest, record, {"kept/f.txt": b"f"}, ("gone", "filed", "linked"))
    assert sorted(made) == [b"filed", b"gone", b"linked"]  # "kept" is the host's folder as it was: not staged
    assert tree_of(dest) == {
        "filed": "dir",
        "filed.host": b"host",
        "kept": "dir",
        "kept/f.txt": b"f",
        "linked": "dir",
        "linked.host": "-> kept",
    }
    assert len(receiver.notes) == 2
