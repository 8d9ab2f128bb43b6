"""The README's snippets work as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import TEST_OWNER, sample_config_yaml
from tool_tree.config import parse_config
from tooltree_cli.main import main

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_the_first_screen_names_the_two_commands() -> None:
    first_screen = "\n".join(README.splitlines()[:20])
    assert "make demo" in first_screen and "make test" in first_screen


def test_the_yaml_config_snippet_is_a_valid_config() -> None:
    (snippet,) = blocks("yaml")
    config = parse_config(snippet, environ={"DRIVE_TOKEN": "t0ken"})
    assert [s.name for s in config.servers] == ["crm", "drive"]
    assert config.servers[1].headers == {"Authorization": "Bearer t0ken"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    config = tmp_path / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm"), encoding="utf-8")
    assert main(["generate-tree", "--config", str(config), "--out", str(tmp_path / "tree"), "--json"]) == 0
    return tmp_path


@pytest.mark.docker
def test_the_python_snippets_run(docker_engine: object, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script, api = blocks("python")
    (project / "script.py").write_text(script, encoding="utf-8")
    monkeypatch.setenv("TOOLTREE_SANDBOX_OWNER", TEST_OWNER)
    monkeypatch.chdir(project)
    assert main(["exec", "script.py", "--json"]) == 0
    # The API snippet, in a fresh interpreter started in the project folder.
    api = api.replace("Sandbox(tree=", f"Sandbox(config=SandboxConfig(owner={TEST_OWNER!r}), tree=")
    api = "from sandbox import SandboxConfig\n" + api
    done = subprocess.run(
        [sys.executable, "-c", api],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count('"id"') >= 3 and "list_leads" in done.stdout
