"""`tooltree serve`: what is refused before anything starts, and the tree it brings up to date first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO, TEST_OWNER, sample_config_yaml
from tooltree_cli.main import main


def test_a_non_loopback_host_needs_allow_remote(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--http", "--host", "0.0.0.0", "--no-regenerate"]) == 2
    err = capsys.readouterr().err
    assert "--host 0.0.0.0 is not loopback; add --allow-remote" in err


def test_help_says_what_allow_remote_exposes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "run code in the sandbox and call every tool of every configured server" in text


def test_no_regenerate_without_a_tree_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--no-regenerate", "--tree", str(tmp_path / "none")]) == 2
    assert "manifest" in capsys.readouterr().err


def test_a_passthrough_tool_that_is_not_in_the_tree_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm"), encoding="utf-8")
    tree = tmp_path / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    capsys.readouterr()
    argv = ["serve", "--config", str(config), "--tree", str(tree), "--no-regenerate", "--passthrough", "crm.nope"]
    assert main(argv) == 2
    assert "passthrough tool 'crm.nope' is not in the tree" in capsys.readouterr().err


@pytest.mark.docker
def test_serve_generates_a_missing_tree_then_ends_when_stdin_closes(docker_engine: object, tmp_path: Path) -> None:
    config = tmp_path / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm"), encoding="utf-8")
    tree = tmp_path / "tree"
    argv = [sys.executable, "-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree)]
    env = {"TOOLTREE_SANDBOX_OWNER": TEST_OWNER, "PATH": "/usr/local/bin:/usr/bin:/bin"}
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # stdout is the MCP channel: nothing but MCP goes there
    assert (tree / "servers" / "crm" / "list_leads.py").is_file()
    assert "written" in done.stderr
