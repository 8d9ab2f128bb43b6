"""`tooltree exec` end to end: a real container, the sample servers, the JSON result."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support import TEST_OWNER, sample_config_yaml
from tooltree_cli.main import main

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "examples" / "sample_servers"


@pytest.fixture(autouse=True)
def test_owner(monkeypatch: pytest.MonkeyPatch) -> None:
    """Containers and volumes of these runs carry the test label, which the engine fixture removes."""
    monkeypatch.setenv("TOOLTREE_SANDBOX_OWNER", TEST_OWNER)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("exec")
    config = tmp / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm", "media") + "sandbox:\n  timeout: 20\n", encoding="utf-8")
    tree = tmp / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree)]) == 0
    return config, tree


@pytest.mark.docker
def test_exec_json_reports_output_calls_and_bytes_kept_in_the_sandbox(
    docker_engine: object, project: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config, tree = project
    script = tmp_path / "top.py"
    script.write_text((REPO / "examples" / "top_leads.py").read_text(encoding="utf-8"), encoding="utf-8")
    audit = tmp_path / "audit.jsonl"
    code = main(["exec", str(script), "--config", str(config), "--tree", str(tree), "--json", "--audit", str(audit)])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    assert out["stdout"].startswith("10000 leads; the five biggest:")
    assert out["exit_code"] == 0 and out["timed_out"] is False and out["error"] is None
    assert [(c["server"], c["tool"], c["ok"]) for c in out["calls"]] == [("crm", "list_leads", True)]
    assert out["tool_result_bytes"] > 1_000_000 > 100 * out["printed_bytes"]
    (line,) = [json.loads(x) for x in audit.read_text(encoding="utf-8").splitlines()]
    assert line["tool"] == "list_leads" and line["outcome"] == "ok"


@pytest.mark.docker
def test_exec_failing_script_exits_1_with_its_traceback(
    docker_engine: object, project: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config, tree = project
    code = main(
        ["exec", "-c", "def f():\n    raise KeyError('lead')\nf()\n", "--config", str(config), "--tree", str(tree)]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "line 2, in f" in err and "KeyError: 'lead'" in err


@pytest.mark.docker
def test_exec_saves_images_the_script_shows(
    docker_engine: object, project: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config, tree = project
    code = main(
        [
            "exec",
            "-c",
            "from servers.media import render_chart\nshow_image(render_chart(title='t', values=[1, 2]).images[0])\n",
            "--config",
            str(config),
            "--tree",
            str(tree),
            "--images",
            str(tmp_path / "img"),
        ]
    )
    assert code == 0, capsys.readouterr().err
    assert (tmp_path / "img" / "image-1.png").read_bytes().startswith(b"\x89PNG")


def test_exec_without_an_engine_says_so_in_one_line(
    project: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config, tree = project
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    code = main(["exec", "-c", "print(1)", "--config", str(config), "--tree", str(tree)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 4
    assert len(err) == 1 and err[0].startswith("tooltree: error:")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["exec"], "give a SCRIPT or -c CODE"),
        (["exec", "x.py", "-c", "print(1)"], "give a SCRIPT or -c CODE"),
        (["exec", "-c", "print(1)", "--tree", "/nonexistent/tree"], "no manifest; run `tooltree generate-tree`"),
    ],
)
def test_exec_usage_errors_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.docker
def test_exec_prints_the_output_even_when_the_workspace_cannot_be_saved(
    docker_engine: object, project: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config, tree = project
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "kept.txt").write_text("previous save", encoding="utf-8")
    code = "import os\nopen('locked', 'w').write('x')\nos.chmod('locked', 0)\nprint('the output')\n"
    argv = ["exec", "-c", code, "--config", str(config), "--tree", str(tree), "--workspace", str(workspace)]
    assert main(argv) == 4
    out, err = capsys.readouterr()
    assert out == "the output\n"
    assert "tooltree: error: could not save the workspace" in err and "'locked': Permission denied" in err
    assert sorted(os.listdir(workspace)) == ["kept.txt"]
    assert main([*argv, "--json"]) == 4
    result = json.loads(capsys.readouterr().out)
    assert result["stdout"] == "the output\n" and "Permission denied" in result["workspace_error"]
