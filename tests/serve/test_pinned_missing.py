"""A pinned tool the tree does not have does not stop `tooltree serve`: it is said once, at its file, line and key,
and its signature joins the instructions once a regeneration brings it.

Before, serve exited with status 2 (a usage error): a server that failed when the tree was generated, or one added to
the config since, kept serve from starting at all (Claude Code said only "Failed to connect"), and its hint "(use
<server>.<tool>)" was wrong for a name of that very form. A background refresh that brought the tool could not be
served either.
"""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path

import pytest

from agent.serve.server import ToolServer
from agent.serve.settings import ServeSettings
from sandbox.config import SandboxConfig
from tests.serve.raw_stdio import RawStdio
from tests.support import TEST_OWNER, sample_config_yaml
from tool_tree.config import Config
from tooltree_cli.common import load
from tooltree_cli.main import main

PINNED = "agent:\n  pinned: [docs.get_document, crm.update_record]\n"


def _crm_tree(folder: Path) -> Path:
    """The tree of the crm sample server alone: the config's docs server is not in it (added since, or failed)."""
    config = folder / "crm.yaml"
    config.write_text(sample_config_yaml("crm"), encoding="utf-8")
    tree = folder / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    return tree


def _app(config: Config, tree: Path) -> ToolServer:
    return ToolServer(config, tree, settings=ServeSettings.from_config(config), sandbox_config=SandboxConfig())


def test_a_pinned_tool_of_a_server_the_tree_lacks_is_said_once_and_served_once_the_tree_has_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tree = _crm_tree(tmp_path)
    path = tmp_path / "tooltree.yaml"
    text = sample_config_yaml("crm", "docs")
    path.write_text(text + PINNED, encoding="utf-8")
    config = load(str(path))
    with caplog.at_level(logging.WARNING):
        app = _app(config, tree)
    said = [r.getMessage() for r in caplog.records if "agent.pinned" in r.getMessage()]
    line = text.count("\n") + 2
    assert said == [
        f"{path}:{line}: agent.pinned: pinned tool 'docs.get_document' is not in the tree: the tree has no server "
        "'docs' (a server that failed when the tree was generated, or one added to the config since, is in it once "
        f"it is regenerated: `tooltree generate-tree --config {path} --out {tree}`, or `tooltree serve "
        "--regenerate-first`); serving without it "
        "until the tree has it"
    ]
    assert [f"{t.server}.{t.tool}" for t in app.toolset.pinned] == ["crm.update_record"]
    assert "def update_record(" in app.instructions and "def get_document(" not in app.instructions

    caplog.clear()
    with caplog.at_level(logging.WARNING):
        app.reload_tree()  # the tree as before: said once only
    assert not [r for r in caplog.records if "agent.pinned" in r.getMessage()]

    # The refresh regenerates the tree with the docs server: the next sessions' instructions show its tool.
    assert main(["generate-tree", "--config", str(path), "--out", str(tree), "--embeddings", "off"]) == 0
    app.reload_tree()
    assert [f"{t.server}.{t.tool}" for t in app.toolset.pinned] == ["docs.get_document", "crm.update_record"]
    assert "def get_document(" in app.instructions and "def update_record(" in app.instructions


def test_a_misspelled_pinned_tool_still_names_the_regeneration_when_its_server_is_in_the_tree(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tree = _crm_tree(tmp_path)
    path = tmp_path / "tooltree.yaml"
    path.write_text(sample_config_yaml("crm") + "agent:\n  pinned: [crm.nope]\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        app = _app(load(str(path)), tree)
    (said,) = [r.getMessage() for r in caplog.records if "agent.pinned" in r.getMessage()]
    assert "pinned tool 'crm.nope' is not in the tree: its server listed no such tool" in said
    assert app.toolset.pinned == []


@pytest.mark.docker
def test_serve_starts_with_a_pinned_tool_the_tree_lacks_and_says_so(docker_engine: object, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    tree = folder / "tree"
    shutil.copytree(_crm_tree(tmp_path), tree)
    config = folder / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm", "docs") + PINNED, encoding="utf-8")
    argv = [sys.executable, "-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree),
            "--warm", "0"]  # fmt: skip
    raw = RawStdio(argv, {"TOOLTREE_SANDBOX_OWNER": TEST_OWNER, "PATH": "/usr/local/bin:/usr/bin:/bin"})
    try:
        raw.wait_for_stderr("pinned tool 'docs.get_document' is not in the tree: the tree has no server 'docs'")
        answer = raw.initialize()  # before: serve had exited with status 2
        assert "def update_record(" in answer["result"].get("instructions", "")
        raw.wait_for_stderr(f"{tree} is up to date (")  # the refresh brought docs: new sessions get its tool
        assert (tree / "servers" / "docs" / "get_document.py").is_file()
        assert raw.close_stdin() == 0
    finally:
        raw.close()
