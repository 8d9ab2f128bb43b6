"""A workspace folder whose ``skills`` is a file (a user's notes named so, or what a script left there) cannot be
restored, because the sandbox keeps its saved functions in ``skills/``; `tooltree exec` says so and what to do.
Before: "cannot restore 'skills': Is a directory. Nothing in it was changed; make it fit (at most 32768 files and
folders, 256m of data …)", at every start, advice about the size that fixed nothing.

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
def test_a_skills_file_left_by_a_script_is_named_with_what_to_do_and_nothing_is_changed(
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

    assert main([*argv, "print('ran')"]) == 4
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"tooltree: error: the sandbox failed: could not restore the workspace {workspace}: its skills is a file, "
        "and the sandbox keeps the functions scripts save in a folder of that name (skills/); rename the file (or "
        "make it a folder) and start again. Nothing in the workspace was changed"
    ]
    assert sorted(p.name for p in workspace.iterdir()) == ["skills"]

    (workspace / "skills").rename(workspace / "skills.txt")  # as it says
    assert main([*argv, "import os\nprint(sorted(os.listdir()))"]) == 0
    assert capsys.readouterr().out == "['servers', 'skills', 'skills.txt']\n"
    assert (workspace / "skills.txt").read_text(encoding="utf-8") == "not a folder"
