"""`Sandbox.save_workspace_if_changed`: a save into the workspace folder exactly when the workspace changed since it
was restored or last saved (`tooltree serve` calls it after each script), told by the sandbox's `workspace.stamp`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandbox import DockerBackend, Sandbox
from sandbox.errors import WorkspaceError

pytestmark = pytest.mark.docker

CHANGES = {
    "a new file": "open('new.txt', 'w').write('x')",
    "a write of the same size": "open('kept.txt', 'w').write('HOST')",
    "an mtime alone": "import os\nos.utime('kept.txt', ns=(1, 1))",
    "a mode": "import os\nos.chmod('kept.txt', 0o600)",
    "a deletion": "import os\nos.remove('kept.txt')",
    "a rename": "import os\nos.rename('kept.txt', 'moved.txt')",
    "an empty folder": "import os\nos.mkdir('empty')",
    "a file deep down": "import os\nos.makedirs('a/b/c')\nopen('a/b/c/d.txt', 'w').write('x')",
    "a link (never saved, but looked at)": "import os\nos.symlink('kept.txt', 'link')",
    "a write with its mtime set back": "import os\nst = os.stat('kept.txt')\nopen('kept.txt', 'w').write('HOST')\n"
    "os.utime('kept.txt', ns=(st.st_atime_ns, st.st_mtime_ns))",
}


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_every_kind_of_change_is_saved_and_nothing_else_is(backend: DockerBackend, tmp_path: Path, change: str) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "kept.txt").write_text("host", encoding="utf-8")
    with Sandbox(backend, workspace=folder) as sb:
        assert sb.save_workspace_if_changed() is True  # the first always: the sandbox's skills/ reach the folder
        assert sb.execute("print(open('kept.txt').read())").stdout == "host\n"  # read only
        assert sb.save_workspace_if_changed() is False
        assert sb.execute(change).ok
        (folder / "host-only.txt").write_text("made on the host meanwhile", encoding="utf-8")
        assert sb.save_workspace_if_changed() is True
        assert sb.save_workspace_if_changed() is False  # saved: nothing new since
        inside = json.loads(sb.execute("import json, os\nprint(json.dumps(os.listdir('.')))").stdout)
    on_host = sorted(p.name for p in folder.iterdir())
    assert "host-only.txt" in on_host  # kept: the save merges, never replaces the folder
    assert sorted(n for n in on_host if n not in ("host-only.txt",)) == sorted(
        n for n in inside if n not in ("servers", "link")
    )


def test_a_save_in_the_middle_of_a_session_is_there_on_the_host_at_once(backend: DockerBackend, tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    with Sandbox(backend, workspace=folder) as sb:
        sb.execute("open('report.md', 'w').write('# first')")
        assert sb.save_workspace_if_changed() is True
        assert (folder / "report.md").read_text(encoding="utf-8") == "# first"
        (folder / "report.md").write_text("# the user's edit", encoding="utf-8")
        sb.execute("open('report.md', 'w').write('# second')")  # both sides changed it since the last save
        assert sb.save_workspace_if_changed() is True
        assert (folder / "report.md").read_text(encoding="utf-8") == "# second"
        assert (folder / "report.md.host").read_text(encoding="utf-8") == "# the user's edit"
        assert any("both the host and the sandbox changed it" in n for n in sb.workspace_notes)
        sb.execute("import os\nos.remove('report.md')")
        assert sb.save_workspace_if_changed() is True
        assert not (folder / "report.md").exists() and (folder / "report.md.host").exists()


def test_without_a_workspace_folder_there_is_nothing_to_save_into(backend: DockerBackend) -> None:
    with Sandbox(backend) as sb, pytest.raises(WorkspaceError, match="no workspace directory"):
        sb.save_workspace_if_changed()


def test_a_workspace_over_the_entry_cap_is_saved_and_the_save_says_why_it_failed(
    backend: DockerBackend, tmp_path: Path
) -> None:
    # The stamp cannot be taken past MAX_ENTRIES: the save is tried, and its error names the cap.
    folder = tmp_path / "ws"
    with Sandbox(backend, workspace=folder) as sb:
        many = sb.execute("import os\nos.mkdir('many')\nfor i in range(32_800):\n    open(f'many/{i}', 'w').close()")
        assert many.error is None or "No space left on device" in many.error  # the tmpfs's inodes run out near it
        with pytest.raises(WorkspaceError, match="more than 32768 files and folders"):
            sb.save_workspace_if_changed()
        assert not folder.exists()  # left as it was
        assert sb.execute("import shutil\nshutil.rmtree('many')").ok
        assert sb.save_workspace_if_changed() is True  # no save succeeded yet: this is the first
        assert sb.execute("open('one.txt', 'w').write('1')").ok
        assert sb.save_workspace_if_changed() is True
    assert (folder / "one.txt").read_text(encoding="utf-8") == "1"


def test_two_sessions_of_one_folder_keep_their_cut_outputs_apart(backend: DockerBackend, tmp_path: Path) -> None:
    # Before: each sandbox named its first cut output 1-stdout.txt; the second session's save put its own over the
    # first's, or (after a save in the middle of both) beside it as a conflict, with a note on every script.
    folder = tmp_path / "ws"
    with Sandbox(backend, workspace=folder) as first, Sandbox(backend, workspace=folder) as second:
        paths = []
        for sb in (first, second):
            result = sb.execute("print('x' * 30_000)")
            assert result.stdout_truncated and result.stdout_path is not None
            paths.append(result.stdout_path)
            assert sb.save_workspace_if_changed() is True
        assert paths[0] != paths[1]
        notes = first.workspace_notes + second.workspace_notes
    saved = sorted(p.name for p in (folder / ".tooltree" / "outputs").iterdir())
    assert saved == sorted(path.rsplit("/", 1)[1] for path in paths) and notes == []
    assert all(p.read_text(encoding="utf-8") == "x" * 30_000 + "\n" for p in (folder / ".tooltree/outputs").iterdir())


def test_close_saves_only_what_changed_since_the_last_save(backend: DockerBackend, tmp_path: Path) -> None:
    # Before: a close always sent the whole workspace again, after `tooltree serve` had saved each script's changes
    # (a normal client exit with 200 MB took 4 s and was killed midway, leaving its copy beside the folder).
    folder = tmp_path / "ws"
    sb = Sandbox(backend, workspace=folder).start()
    saves: list[object] = []
    save = sb.save_workspace
    sb.save_workspace = lambda dest=None: saves.append(dest) or save(dest)  # type: ignore[method-assign]
    sb.execute("open('a.txt', 'w').write('1')")
    assert sb.save_workspace_if_changed() is True and len(saves) == 1
    sb.close()
    assert len(saves) == 1 and (folder / "a.txt").read_text(encoding="utf-8") == "1"
    again = Sandbox(backend, workspace=folder).start()
    again.execute("open('b.txt', 'w').write('2')")
    again.close()  # changed since its restore: saved
    assert (folder / "b.txt").read_text(encoding="utf-8") == "2"
