"""A workspace folder whose parent this user may not write (``--workspace ~``, whose ``/home`` is root's; a project
in a shared folder) is saved: the save is received inside the folder (``.tooltree-save/``, as for a mount point),
which it leaves as it found it. Before: every save failed with "a save is received beside it, in …, and that
failed: Permission denied", after the script had run, so what it wrote was lost (each time: `tooltree serve`
tried again after each script and failed again).

The parent is made unwritable with ``chmod 555`` (as root, which may write any folder, with ``chattr +i``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import DockerBackend, Sandbox


@pytest.fixture
def locked_parent(tmp_path: Path) -> Iterator[Path]:
    """A folder no entry can be made in (the workspace is made in it first); unlocked after the test."""
    parent = tmp_path / "home"
    (parent / "ws").mkdir(parents=True)
    if os.geteuid() != 0:
        parent.chmod(0o555)
        yield parent
        parent.chmod(0o755)
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(parent)], capture_output=True).returncode != 0:
        pytest.skip("as root, a folder is made unwritable with chattr +i, which this filesystem refuses")
    try:
        yield parent
    finally:
        subprocess.run([chattr, "-i", str(parent)], check=True)


def _tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): p.read_text(encoding="utf-8") if p.is_file() else "dir"
        for p in sorted(folder.rglob("*"))
        if p.parts[len(folder.parts)] != "skills"
    }


@pytest.mark.docker
def test_a_workspace_whose_parent_cannot_be_written_is_saved_inside_itself(
    backend: DockerBackend, locked_parent: Path
) -> None:
    folder = locked_parent / "ws"
    (folder / "notes.txt").write_text("the user's", encoding="utf-8")
    (folder / "old.txt").write_text("to delete", encoding="utf-8")
    with pytest.raises(OSError):
        (locked_parent / "probe").mkdir()  # the parent is locked indeed
    with Sandbox(backend, workspace=folder) as sb:
        script = (
            "import os\nopen('notes.txt', 'a').write(', and the script\\'s')\nos.remove('old.txt')\nos.mkdir('out')"
        )
        assert sb.execute(script + "\nopen('out/result.txt', 'w').write('42')").ok
        assert sb.save_workspace_if_changed() is True
        assert _tree(folder) == {"notes.txt": "the user's, and the script's", "out": "dir", "out/result.txt": "42"}
        assert sb.execute("open('out/result.txt', 'w').write('43')").ok
    assert _tree(folder) == {"notes.txt": "the user's, and the script's", "out": "dir", "out/result.txt": "43"}
    assert sorted(p.name for p in locked_parent.iterdir()) == ["ws"]
