"""Folders that saves which did not finish kept beside a workspace (``.<name>.unmerged-*``: the script's files not
merged in; ``.<name>.old-*``: host files taken out) are named once per session, in the save's notes, with what to
do; a live process's are not, and nothing is moved or removed. Before: no later save mentioned them, so a user whose
tooltree was killed while it merged never learned that files of theirs and of the script sat in hidden folders.

A merge is killed (or stopped, as one under way) by the saving process itself at its second move
(`tests.sandbox.test_workspace_merge_killed`); the sessions run in real containers.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox import DockerBackend, Sandbox
from sandbox.errors import SessionError, WorkspaceError
from sandbox.host_folders import move_out
from sandbox.workspace import leftovers, leftovers_note
from tests.docker_cli import EngineWithCLI
from tests.sandbox.test_sandbox_workspace import restored, save, tree_of
from tests.sandbox.test_workspace_merge_killed import KILLED_MIDWAY, ROOT
from tests.support import sample_project
from tooltree_cli.main import main


def killed_merge(dest: Path) -> None:
    """A save into ``dest`` (which holds ``a.txt``) killed after it set the host's ``a.txt`` aside, before it moved
    any of the script's ``a.txt``, ``b.txt``, ``c.txt`` in."""
    killed = subprocess.run([sys.executable, "-c", KILLED_MIDWAY, str(dest)], cwd=ROOT, capture_output=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()


def workspace_with_a_killed_merge(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The folder, and the saved copy and the host's files its killed save kept beside it."""
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "a.txt").write_bytes(b"the user's")
    killed_merge(dest)
    (unmerged,) = tmp_path.glob(".ws.unmerged-*")
    (old,) = tmp_path.glob(".ws.old-*")
    assert "a.txt" not in tree_of(dest)  # set aside, and the script's copy not moved in yet
    return dest, unmerged, old


def test_a_killed_merges_folders_are_named_with_what_to_do_and_left_as_they_are(tmp_path: Path) -> None:
    dest, unmerged, old = workspace_with_a_killed_merge(tmp_path)
    assert leftovers(dest) == [(old, "old"), (unmerged, "unmerged")]
    assert leftovers_note(dest) == (
        f"2 folder(s) kept by earlier saves into {dest} that did not finish (their tooltree was killed while merging, "
        f"or the merge failed) hold files no save puts back or removes: {old} (files of the folder a save took out); "
        f"{unmerged} (files of the script not merged in). Look inside each, move back into the folder what you want "
        "to keep, then delete it"
    )
    assert tree_of(old) == {"w": "dir", "w/a.txt": b"the user's"}
    assert tree_of(unmerged) == {name: b"from the sandbox" for name in ("a.txt", "b.txt", "c.txt")}


def test_the_folders_of_a_merge_under_way_in_a_live_process_are_not_named(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "a.txt").write_bytes(b"the user's")
    merging = subprocess.Popen(
        [sys.executable, "-c", KILLED_MIDWAY, str(dest), "SIGSTOP"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        try:
            _, status = os.waitpid(merging.pid, os.WUNTRACED)  # stopped at its second move
            assert os.WIFSTOPPED(status)
            assert len(list(tmp_path.glob(f".ws.unmerged-{merging.pid}-*"))) == 1
            assert len(list(tmp_path.glob(f".ws.old-{merging.pid}-*"))) == 1
            assert leftovers(dest) == []
            assert leftovers_note(dest) is None
        finally:
            merging.kill()
        # Dead, not yet reaped by its parent (a zombie): its merge goes no further.
        os.waitid(os.P_PID, merging.pid, os.WEXITED | os.WNOWAIT)
        assert [kind for _, kind in leftovers(dest)] == ["old", "unmerged"]
    finally:
        merging.wait()
    assert [kind for _, kind in leftovers(dest)] == ["old", "unmerged"]


def test_a_note_names_a_few_folders_and_counts_the_rest(tmp_path: Path) -> None:
    dest, unmerged, old = workspace_with_a_killed_merge(tmp_path)
    for n in range(4):  # an older tooltree's names carry no process id
        (tmp_path / f".ws.unmerged-zz{n:06}").mkdir()
    (tmp_path / ".ws.unmerged-notmine").mkdir()  # not a name a save gives
    (tmp_path / ".ws.old-12345678").write_bytes(b"a file, not a save's folder")
    (tmp_path / ".ws2.unmerged-ab345678").mkdir()  # another folder's
    note = leftovers_note(dest)
    assert note is not None
    assert note.startswith(f"6 folder(s) kept by earlier saves into {dest} ")
    assert f": {old} (files of the folder a save took out); {unmerged} (files of the script not merged in); " in note
    assert f"{tmp_path / '.ws.unmerged-zz000000'} (files of the script not merged in); and 3 more. Look " in note
    assert "zz000001" not in note


def test_this_processs_own_kept_folders_are_not_named_but_a_dead_one_of_the_same_id_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A container runs each tooltree as the same process id: another run's folders carry this process's id.
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "a.txt").write_bytes(b"the user's")

    def refused(src_fd: int, src_name: bytes, dst_fd: int, dst_name: bytes) -> None:
        if os.path.samestat(os.fstat(dst_fd), dest.stat()):
            raise OSError(5, "Input/output error")  # moving a saved entry in
        move_out(src_fd, src_name, dst_fd, dst_name)

    monkeypatch.setattr("sandbox.workspace_inplace.move_out", refused)
    with pytest.raises(WorkspaceError, match="could not merge the saved workspace"):
        save(dest, restored(dest), {"a.txt": b"from the sandbox"})
    assert len(list(tmp_path.glob(f".ws.unmerged-{os.getpid()}-*"))) == 1  # named by the save's error
    assert leftovers(dest) == []
    other_run = tmp_path / f".ws.unmerged-{os.getpid()}-abcdefgh"
    other_run.mkdir()
    assert leftovers(dest) == [(other_run, "unmerged")]


def test_a_mount_points_folders_are_looked_for_inside_it(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    (dest / ".tooltree-save" / ".ws.unmerged-abcdefgh").mkdir(parents=True)
    assert leftovers(dest) == [(dest / ".tooltree-save" / ".ws.unmerged-abcdefgh", "unmerged")]


@pytest.mark.docker
def test_a_session_names_a_killed_merges_folders_once(backend: DockerBackend, tmp_path: Path) -> None:
    dest, unmerged, old = workspace_with_a_killed_merge(tmp_path)
    with Sandbox(backend, workspace=dest) as sb:
        assert sb.execute("open('a.txt', 'w').write('the script, again')").ok
        assert sb.save_workspace_if_changed() is True
        notes = list(sb.workspace_notes)
        assert sb.execute("open('d.txt', 'w').write('more')").ok
    assert notes == [leftovers_note(dest)]
    assert str(unmerged) in notes[0] and str(old) in notes[0]
    assert sb.workspace_notes == notes  # the second save did not say it again
    assert tree_of(dest)["a.txt"] == b"the script, again"
    assert tree_of(unmerged) == {name: b"from the sandbox" for name in ("a.txt", "b.txt", "c.txt")}
    assert tree_of(old) == {"w": "dir", "w/a.txt": b"the user's"}


@pytest.mark.docker
def test_a_session_whose_sandbox_died_before_its_save_names_them_too(
    backend: DockerBackend, docker_engine: EngineWithCLI, tmp_path: Path
) -> None:
    dest, _, _ = workspace_with_a_killed_merge(tmp_path)
    sb = Sandbox(backend, workspace=dest).start()
    try:
        docker_engine.run(["kill", sb.name])
        with pytest.raises(SessionError):
            sb.execute("print('never runs')")
    finally:
        sb.close()
    assert sb.not_saved is not None
    assert sb.workspace_notes == [leftovers_note(dest)]
    assert sb.workspace_notes_total == 1


@pytest.mark.docker
@pytest.mark.usefixtures("docker_engine", "sandbox_owner")
def test_exec_prints_the_note_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "project").mkdir()
    config, tree = sample_project(tmp_path / "project", "media", timeout=60)
    dest, unmerged, old = workspace_with_a_killed_merge(tmp_path)
    capsys.readouterr()
    args = ["exec", "-c", "print('ran')", "--config", str(config), "--tree", str(tree), "--workspace", str(dest)]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert out == "ran\n"
    (said,) = [line for line in err.splitlines() if line.startswith("tooltree: workspace: ")]
    assert re.fullmatch(
        rf"tooltree: workspace: 2 folder\(s\) kept by earlier saves into {re.escape(str(dest))} .*: "
        rf"{re.escape(str(old))} .*; {re.escape(str(unmerged))} .*then delete it",
        said,
    )
