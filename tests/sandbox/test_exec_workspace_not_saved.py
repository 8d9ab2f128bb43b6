"""`tooltree exec --workspace DIR` whose sandbox ended under the script says the workspace was not saved (in
``--json``: ``workspace_error``), once and in its own words; and one whose workspace could not be restored says no
script ran. Before: ``"workspace_error": null`` though nothing was saved, the only word of it a raw log line
(``sandbox tooltree-…: workspace not saved: …``); a restore refused over the quota ended with "the sandbox did not
report the script's end", as if a script had run.

Real parts: the sample servers, a real sandbox container, the container killed through the engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.docker_cli import EngineWithCLI
from tests.support import exec_killed_after, sample_project
from tooltree_cli.main import main

pytestmark = pytest.mark.usefixtures("sandbox_owner")  # the container to kill is found by the test label

SCRIPT = (
    "open('/workspace/made.txt', 'w').write('lost with its container')\n"
    "open('/workspace/kept.txt', 'w').write('changed in the sandbox')\n"
    "from servers.media import list_gallery\n"
    "list_gallery()\n"
    "import threading\n"
    "threading.Event().wait()  # until its container is killed\n"
)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return sample_project(tmp_path_factory.mktemp("exec-unsaved"), "media", timeout=60, workspace_size="2m")


@pytest.mark.docker
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_exec_whose_sandbox_was_killed_says_the_workspace_was_not_saved(
    docker_engine: EngineWithCLI,
    project: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    as_json: bool,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "kept.txt").write_text("the user's", encoding="utf-8")
    options = ["--workspace", str(workspace), *(["--json"] if as_json else [])]
    # Killed once the call is in the audit log: both files were written in the sandbox by then.
    code = exec_killed_after(docker_engine, project, tmp_path, SCRIPT, 1, *options)
    assert code == 4
    out, err = capsys.readouterr()
    said = (
        f"the workspace was not saved: the sandbox ended before it could be, so what the script wrote in /workspace "
        f"is lost and {workspace} is left as it was"
    )
    assert err.splitlines()[-1] == f"tooltree: error: {said}"
    assert "workspace not saved" not in err  # the raw log line, which said it in other words, is not printed
    if as_json:
        printed = json.loads(out)
        assert printed["workspace_error"] == said and "status 137" in printed["sandbox_error"]
    assert sorted(p.name for p in workspace.iterdir()) == ["kept.txt"]  # as it was
    assert (workspace / "kept.txt").read_text(encoding="utf-8") == "the user's"


@pytest.mark.docker
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_exec_whose_workspace_cannot_be_restored_says_no_script_ran(
    docker_engine: EngineWithCLI,
    project: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    as_json: bool,
) -> None:
    config, tree = project
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "big.bin").write_bytes(b"\0" * (3 << 20))  # over the 2m workspace
    argv = ["exec", "-c", "print('ran')", "--config", str(config), "--tree", str(tree), "--workspace", str(workspace)]
    assert main([*argv, *(["--json"] if as_json else [])]) == 4
    out, err = capsys.readouterr()
    (line,) = err.splitlines()  # the reason alone: no line about a script's end, none ran
    assert line.startswith(f"tooltree: error: the sandbox failed: could not restore the workspace {workspace}: ")
    assert "No space left on device" in line and "Nothing in it was changed" in line
    assert "workspace_size" in line  # what to do
    if as_json:
        printed = json.loads(out)
        assert printed["sandbox_error"] == line.removeprefix("tooltree: error: ") and printed["calls"] == []
    else:
        assert out == ""
    assert [p.name for p in workspace.iterdir()] == ["big.bin"]
