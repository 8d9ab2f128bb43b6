"""A workspace folder whose ``skills`` is a file (a user's notes named so, or what a script left there) still starts
sessions: the file is not restored (the sandbox keeps its saved functions in ``skills/``), `tooltree exec` says so,
and the save keeps the file as ``skills.host``, so the folder is whole again and nothing is lost.
Before: exit 4 at every start ("its skills is a file … rename the file"), which under ``serve`` a model could not
mend, only the user; earlier still: "cannot restore 'skills': Is a directory … make it fit", advice about the size.

Real parts: the sample servers' tree, a real sandbox container.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docker_cli import EngineWithCLI
from tests.support import sample_config_yaml
from tooltree_cli.main import main


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("exec-skills")
    config = tmp / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm"), encoding="utf-8")
    tree = tmp / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree)]) == 0
    return config, tree


@pytest.mark.docker
def test_a_skills_file_left_by_a_script_is_kept_as_skills_host_and_sessions_start(
    docker_engine: EngineWithCLI, project: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, tree = project
    workspace = tmp_path / "ws"
    workspace.mkdir()
    argv = ["exec", "--config", str(config), "--tree", str(tree), "--workspace", str(workspace), "-c"]
    swap = "import shutil\nshutil.rmtree('skills')\nopen('skills', 'w').write('not a folder')"
    assert main([*argv, swap]) == 0
    assert (workspace / "skills").read_text(encoding="utf-8") == "not a folder"
    capsys.readouterr()

    look = "import os\nprint(sorted(os.listdir()), sorted(os.listdir('skills')))"
    assert main([*argv, look]) == 0
    out, err = capsys.readouterr()
    assert out == "['servers', 'skills'] ['SKILL.md', '__init__.py']\n"
    notes = [line for line in err.splitlines() if line.startswith("tooltree: workspace: ")]
    assert notes[0] == (
        "tooltree: workspace: its skills is a file, and the sandbox keeps the functions scripts save in a folder of "
        "that name (skills/): the file was not restored (the session started with a new skills/), and the save "
        "keeps it as it is, as skills.host (skills.host-2, … when that name is taken)"
    )
    assert any("skills.host" in note for note in notes[1:]), err
    assert (workspace / "skills").is_dir()
    assert (workspace / "skills.host").read_text(encoding="utf-8") == "not a folder"

    assert main([*argv, "import os\nprint(sorted(os.listdir()))"]) == 0
    out, err = capsys.readouterr()
    assert out == "['servers', 'skills', 'skills.host']\n"
    assert "skills" not in err
    assert (workspace / "skills.host").read_text(encoding="utf-8") == "not a folder"
