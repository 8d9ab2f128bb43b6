"""Upgrading tooltree over what an older release left: its tree, read and rewritten by the current one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from generator.kept import KEPT_DIR
from tooltree_cli.main import main


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"Does {name}.", "inputSchema": {"type": "object", "properties": {}}}


def generate(tmp: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """Regenerate ``tmp/tree`` from stored snapshots of two servers; the ``--json`` summary."""
    snaps = tmp / "snaps"
    snaps.mkdir(exist_ok=True)
    for server, names in {"crm": ["get_record", "update_record"], "docs": ["get_document"]}.items():
        snapshot = {"server": server, "info": {}, "tools": [tool(t) for t in names]}
        (snaps / f"{server}.json").write_text(json.dumps(snapshot), encoding="utf-8")
    args = ["generate-tree", "--from-snapshot", str(snaps), "--out", str(tmp / "tree"), "--embeddings", "off"]
    capsys.readouterr()
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def as_older_release(tree: Path) -> None:
    """Make ``tree``'s manifest what a release before the manifest recorded its files' hashes wrote: no ``files``,
    another generator."""
    manifest = json.loads((tree / "manifest.json").read_text(encoding="utf-8"))
    del manifest["files"]
    manifest["generator"] = "0.1.0+889ff5dbb1309101"
    (tree / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")


def test_notes_added_to_a_tree_of_an_older_release_are_kept_when_it_is_regenerated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the manifest of a release before `files` holds no hash of a server's README.md, INDEX.md or the
    # __init__.py files, so the first run after the upgrade (or `tooltree serve`'s refresh) took them for
    # tooltree's and replaced them without a copy or a word: a user's notes in them were lost.
    tree = tmp_path / "tree"
    generate(tmp_path, capsys)
    as_older_release(tree)
    readme, index = tree / "servers/crm/README.md", tree / "servers/INDEX.md"
    edited_readme = readme.read_text(encoding="utf-8") + "\n## Our notes\nAlways search before updating.\n"
    edited_index = index.read_text(encoding="utf-8") + "\nAsk Dana before using docs.\n"
    readme.write_text(edited_readme, encoding="utf-8")
    index.write_text(edited_index, encoding="utf-8")
    (tree / "servers/crm/mine.py").write_text("def helper() -> None: ...\n", encoding="utf-8")

    summary = generate(tmp_path, capsys)

    assert "Our notes" not in readme.read_text(encoding="utf-8")  # the tree is brought up to date
    assert (tree / KEPT_DIR / "servers/crm/README.md").read_text(encoding="utf-8") == edited_readme
    assert (tree / KEPT_DIR / "servers/INDEX.md").read_text(encoding="utf-8") == edited_index
    assert (tree / "servers/crm/mine.py").read_text(encoding="utf-8") == "def helper() -> None: ...\n"
    [warning] = [w for w in summary["warnings"] if "older tooltree" in w]
    assert "servers/INDEX.md" in warning and "servers/crm/README.md" in warning
    assert f"copies are in {KEPT_DIR}/ (delete them if you did not edit them)" in warning

    # The manifest now records every file's hash: an ordinary rerun copies nothing more.
    assert json.loads((tree / "manifest.json").read_text(encoding="utf-8"))["files"]
    again = generate(tmp_path, capsys)
    assert not [w for w in again["warnings"] if "older tooltree" in w or KEPT_DIR in w]
    assert sorted(p.relative_to(tree / KEPT_DIR).as_posix() for p in (tree / KEPT_DIR).rglob("*.*")) == [
        "servers/INDEX.md",
        "servers/crm/README.md",
    ]


def test_a_tree_of_an_older_release_left_as_it_wrote_it_is_upgraded_with_copies_only_of_files_that_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Files whose bytes the new release writes again unchanged are neither replaced nor copied.
    tree = tmp_path / "tree"
    generate(tmp_path, capsys)
    as_older_release(tree)
    summary = generate(tmp_path, capsys)
    assert not (tree / KEPT_DIR).exists()
    assert not [w for w in summary["warnings"] if "older tooltree" in w]
