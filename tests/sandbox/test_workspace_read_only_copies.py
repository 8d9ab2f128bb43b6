"""A read-only host file a session's scripts keep changing has one copy of the sandbox's beside it, the latest,
whatever the number of saves (`tooltree serve` saves after every script). Before: each save added one more copy
(``notes.md.sandbox``, ``notes.md.sandbox-2``, …), each as large as the file the script wrote, so a script rewriting
one read-only file of the user's before each save grew the host folder without bound (the sandbox held one copy).
A copy the user changed or removed meanwhile is never replaced."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import DockerBackend, Sandbox

SAVED_AS = "notes.md: read-only on the host, so it is kept; the sandbox's copy is saved as notes.md.sandbox"
AGAIN = " (in place of the copy an earlier save of this session put there)"


def _rewrite(sb: Sandbox, text: str) -> None:
    script = f"import os\nos.chmod('notes.md', 0o644)\nopen('notes.md', 'w').write({text!r})"
    assert sb.execute(script).ok
    assert sb.save_workspace_if_changed() is True


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != "skills")


@pytest.mark.docker
def test_each_save_replaces_the_sessions_copy_of_a_read_only_file_instead_of_adding_one(
    backend: DockerBackend, tmp_path: Path
) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "notes.md").write_text("signed", encoding="utf-8")
    (folder / "notes.md").chmod(0o444)
    with Sandbox(backend, workspace=folder) as sb:
        for n in range(4):
            _rewrite(sb, f"version {n} " * 1000)
            assert _names(folder) == ["notes.md", "notes.md.sandbox"]
            assert (folder / "notes.md.sandbox").read_text(encoding="utf-8") == f"version {n} " * 1000
        assert (folder / "notes.md").read_text(encoding="utf-8") == "signed"
        assert sb.workspace_notes == [SAVED_AS] + [SAVED_AS + AGAIN] * 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]  # nothing left beside the folder


@pytest.mark.docker
def test_a_copy_the_user_changed_or_removed_is_never_replaced(backend: DockerBackend, tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "notes.md").write_text("signed", encoding="utf-8")
    (folder / "notes.md").chmod(0o444)
    with Sandbox(backend, workspace=folder) as sb:
        _rewrite(sb, "first")
        (folder / "notes.md.sandbox").write_text("first, merged by the user", encoding="utf-8")
        _rewrite(sb, "second")
        assert _names(folder) == ["notes.md", "notes.md.sandbox", "notes.md.sandbox-2"]
        assert (folder / "notes.md.sandbox").read_text(encoding="utf-8") == "first, merged by the user"
        assert (folder / "notes.md.sandbox-2").read_text(encoding="utf-8") == "second"
        (folder / "notes.md.sandbox-2").unlink()  # the user took it
        _rewrite(sb, "third")
        _rewrite(sb, "fourth")
        assert _names(folder) == ["notes.md", "notes.md.sandbox", "notes.md.sandbox-2"]
        assert (folder / "notes.md.sandbox").read_text(encoding="utf-8") == "first, merged by the user"
        assert (folder / "notes.md.sandbox-2").read_text(encoding="utf-8") == "fourth"
