"""The README's snippets work as written."""

from __future__ import annotations

import json
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
    script, api, _ = blocks("python")
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


def test_the_claude_desktop_block_is_an_mcp_servers_config_that_starts_serve(tmp_path: Path) -> None:
    (snippet,) = blocks("json")
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(snippet, encoding="utf-8")
    from tool_tree.config import load_config

    (server,) = load_config(path).servers
    assert server.name == "tooltree" and server.args[:1] == ("serve",)
    assert json.loads(snippet)["mcpServers"]["tooltree"]["args"][1:3] == ["--config", "/path/to/tooltree.yaml"]


def test_the_claude_code_line_adds_the_serve_command() -> None:
    line = next(x for b in blocks("bash") for x in b.splitlines() if x.startswith("claude mcp add"))
    assert line.startswith("claude mcp add tooltree -- tooltree serve --config ")


@pytest.mark.docker
def test_the_python_client_snippet_runs_against_tooltree_serve(docker_engine: object, project: Path) -> None:
    *_, client = blocks("python")
    # The snippet starts `tooltree` from PATH; its sandboxes carry the test label.
    client = client.replace('"tree"])', f'"tree"], env={{"TOOLTREE_SANDBOX_OWNER": {TEST_OWNER!r}, "PATH": PATH}})')
    client = f"PATH = {os.pathsep.join([str(Path(sys.executable).parent), os.environ.get('PATH', '')])!r}\n" + client
    done = subprocess.run([sys.executable, "-c", client], cwd=project, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    names, count, *ledger = done.stdout.splitlines()
    assert names == "['list_files', 'read_file', 'search_tools', 'execute_python']" and count == "10000 leads"
    assert any("crm.list_leads ok" in line for line in ledger)
