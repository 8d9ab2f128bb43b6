"""`generate-tree` and disabled servers: a config whose every server is disabled, or that lists none it can start, does
not empty an existing tree, and ``--server`` does not list a disabled one (a full run deletes its stubs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import sample_config_yaml
from tool_tree.tree import Manifest
from tooltree_cli.main import main


@pytest.fixture
def generated(tmp_path: Path) -> tuple[Path, Path]:
    config = tmp_path / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm", "docs"), encoding="utf-8")
    tree = tmp_path / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    return config, tree


def _disable(config: Path, *names: str) -> None:
    text = config.read_text(encoding="utf-8")
    for name in names:
        text = text.replace(f"  {name}:\n", f"  {name}:\n    enabled: false\n")
    config.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("from_snapshot", [False, True], ids=["from the servers", "--from-snapshot"])
def test_every_server_disabled_leaves_the_tree_as_it_is_and_says_why(
    generated: tuple[Path, Path], capsys: pytest.CaptureFixture[str], from_snapshot: bool
) -> None:
    # Before: "… deleted", exit 0, every stub gone, while a run where every server failed wrote nothing; and with
    # --from-snapshot (exempt from the check until then) the tree was emptied, its snapshots too, exit 0.
    config, tree = generated
    before = len(Manifest.load(tree).tools)
    _disable(config, "crm", "docs")
    more = ["--from-snapshot"] if from_snapshot else []
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off", *more]) == 2
    said = capsys.readouterr().err
    assert f"every server is disabled (enabled: false), so this run would delete all {before} tools of" in said
    assert len(Manifest.load(tree).tools) == before and (tree / "servers" / "crm" / "list_leads.py").is_file()
    assert sorted(p.name for p in (tree / "snapshots").iterdir()) == ["crm.json", "docs.json"]


def test_one_server_disabled_is_still_removed_from_the_tree(
    generated: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config, tree = generated
    _disable(config, "docs")
    capsys.readouterr()
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    assert {s.name for s in Manifest.load(tree).servers} == {"crm"}
    assert "tooltree: listing tools from 1 server(s) (1 disabled: docs) …" in capsys.readouterr().err


def test_server_naming_a_disabled_server_is_refused(
    generated: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config, tree = generated
    _disable(config, "docs")
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--server", "docs"]) == 2
    assert "servers.docs.enabled is false: enable it to list it (--server docs)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text",
    [
        "servers: {}\n",
        '{"mcpServers": {"linear": {"type": "sse", "url": "http://h/sse"}}}',
        '{"mcpServers": {"tooltree": {"command": "tooltree", "args": ["serve"]}}}',
    ],
)
def test_a_config_with_no_server_to_list_leaves_the_tree_as_it_is_and_makes_none(
    generated: tuple[Path, Path], capsys: pytest.CaptureFixture[str], text: str
) -> None:
    # Before: "… 5 deleted", exit 0, every stub gone; into a new folder, a tree of no tools.
    config, tree = generated
    before = len(Manifest.load(tree).tools)
    config.write_text(text, encoding="utf-8")
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 2
    said = capsys.readouterr().err
    assert f"it lists no server tooltree can start, so this run would delete all {before} tools of" in said
    assert len(Manifest.load(tree).tools) == before and (tree / "servers" / "crm" / "list_leads.py").is_file()
    new = tree.parent / "new"
    assert main(["generate-tree", "--config", str(config), "--out", str(new), "--embeddings", "off"]) == 2
    assert "it lists no server tooltree can start: there is nothing to list; add or enable a server" in (
        capsys.readouterr().err
    )
    assert not new.exists()
