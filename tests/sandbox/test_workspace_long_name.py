"""A workspace folder whose name is near a file name's 255 bytes is saved into like any other: the folders a save
works in beside it (``.<name>.incoming-*``, ``.<name>.unmerged-*``, ``.<name>.old-*``) keep only the start of its
name, with a hash. Before: they took the name whole, past 255 bytes, so every save into a folder named with over
about 230 bytes failed "File name too long" (beside it and in its ``.tooltree-save/`` alike), and each script's work
in it was lost.

In-process saves (`tests.sandbox.test_sandbox_workspace`), and `tooltree exec` through a real container.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sandbox.errors import WorkspaceError
from sandbox.workspace import WorkspaceReceiver, leftovers
from sandbox.workspace_staging import work_name
from tests.docker_cli import EngineWithCLI
from tests.sandbox.test_sandbox_workspace import restored, save, tree_of
from tests.support import sample_project
from tooltree_cli.main import main

LONG = "é" * 120 + "w" * 15  # 255 bytes, a name cut inside a character


def test_a_save_into_a_folder_with_a_name_of_255_bytes_is_merged(tmp_path: Path) -> None:
    dest = tmp_path / LONG
    dest.mkdir()
    (dest / "a.txt").write_bytes(b"v1")
    (dest / "gone.txt").write_bytes(b"deleted by the script")
    receiver = save(dest, restored(dest), {"a.txt": b"v2", "new.txt": b"made"})
    assert tree_of(dest) == {"a.txt": b"v2", "new.txt": b"made"}
    assert receiver.notes == []
    assert os.listdir(tmp_path) == [LONG]  # nothing left beside it


def test_the_work_folders_of_long_names_fit_and_still_tell_folders_apart(tmp_path: Path) -> None:
    other = LONG[:-1] + "x"
    names = {work_name(tmp_path / name) for name in (LONG, other)}
    assert len(names) == 2
    for name in names:
        assert len(os.fsencode(f".{name}.unmerged-4194304-abcdefgh")) <= 255
    assert work_name(tmp_path / "ws") == "ws"  # a name of ordinary length is used whole, as before


def test_a_failed_merge_into_a_folder_with_a_long_name_keeps_the_copy_where_it_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / LONG
    dest.mkdir()

    def broken_merge(*args: Any, **kwargs: Any) -> Any:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("sandbox.workspace.merge", broken_merge)
    with pytest.raises(WorkspaceError, match="the saved copy is in") as raised:
        save(dest, restored(dest), {"work.txt": b"the session's work"})
    kept = Path(str(raised.value).rpartition("the saved copy is in ")[2])
    assert (kept / "work.txt").read_bytes() == b"the session's work"
    monkeypatch.setattr("sandbox.workspace_staging.alive", lambda pid: False)  # as seen by a later process
    monkeypatch.setattr("sandbox.workspace_staging._MADE_HERE", set())
    assert leftovers(dest) == [(kept, "unmerged")]
    WorkspaceReceiver(dest, max_bytes=1000).discard()  # a later save's start: the kept copy stays
    assert kept.is_dir()


def test_a_stale_staging_folder_of_a_long_named_folder_is_removed_by_the_next_save(tmp_path: Path) -> None:
    dest = tmp_path / LONG
    dest.mkdir()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    stale = tmp_path / f".{work_name(dest)}.incoming-{int(gone.stdout)}-abcdefgh"  # a process killed mid-save left it
    stale.mkdir()
    save(dest, restored(dest), {"a.txt": b"a"})
    assert os.listdir(tmp_path) == [LONG]


@pytest.mark.docker
@pytest.mark.usefixtures("sandbox_owner")
def test_exec_saves_into_a_workspace_with_a_name_of_255_bytes(
    docker_engine: EngineWithCLI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "project").mkdir()
    config, tree = sample_project(tmp_path / "project", "media", timeout=60)
    workspace = tmp_path / LONG
    workspace.mkdir()
    (workspace / "notes.txt").write_text("v1", encoding="utf-8")
    script = "open('/workspace/notes.txt', 'w').write('v2')\nopen('/workspace/made.txt', 'w').write('made')\n"
    code = main(["exec", "-c", script, "--config", str(config), "--tree", str(tree), "--workspace", str(workspace)])
    err = capsys.readouterr().err
    assert code == 0, err
    saved = {path: data for path, data in tree_of(workspace).items() if not path.startswith("skills")}
    assert saved == {"made.txt": b"made", "notes.txt": b"v2"}
    assert sorted(os.listdir(tmp_path)) == sorted(["project", LONG])
