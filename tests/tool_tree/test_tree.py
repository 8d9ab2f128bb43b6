from __future__ import annotations

from pathlib import Path

import pytest

from tool_tree.tree import MANIFEST_FILE, Manifest, TreeError


def load_error(tree: Path) -> str:
    with pytest.raises(TreeError) as info:
        Manifest.load(tree)
    return str(info.value)


def test_a_tree_that_is_a_file_is_a_tree_error_saying_so(tmp_path: Path) -> None:
    tree = tmp_path / "tree.txt"
    tree.write_text("not a tree\n", encoding="utf-8")
    assert load_error(tree) == f"{tree}: not a folder; a tree is the folder `tooltree generate-tree` writes"
    assert load_error(tree / "sub") == f"{tree}/sub: not a folder; a tree is the folder `tooltree generate-tree` writes"


def test_a_missing_unreadable_or_undecodable_manifest_is_a_tree_error(tmp_path: Path) -> None:
    assert load_error(tmp_path) == f"{tmp_path / MANIFEST_FILE}: no manifest; run `tooltree generate-tree` first"
    (tmp_path / MANIFEST_FILE).mkdir()
    assert load_error(tmp_path) == f"{tmp_path / MANIFEST_FILE}: a folder, not a manifest; regenerate the tree"
    (tmp_path / MANIFEST_FILE).rmdir()
    (tmp_path / MANIFEST_FILE).write_bytes(b'{"version": 1, "generator": "\xff"}')
    assert load_error(tmp_path).startswith(f"{tmp_path / MANIFEST_FILE}: malformed manifest (")


@pytest.mark.parametrize(
    ("text", "which"),
    [('{"version": 2, "tools": []}', "version 2"), ("[]", "no version"), ('{"version": true}', "no version")],
)
def test_a_manifest_of_another_version_says_which_and_to_regenerate(tmp_path: Path, text: str, which: str) -> None:
    (tmp_path / MANIFEST_FILE).write_text(text, encoding="utf-8")
    assert load_error(tmp_path) == (
        f"{tmp_path / MANIFEST_FILE}: not a version-1 tooltree manifest ({which}); regenerate the tree with "
        "`tooltree generate-tree`"
    )


def test_a_manifest_round_trips(tmp_path: Path) -> None:
    (tmp_path / MANIFEST_FILE).write_text(Manifest(generator="g").to_json(), encoding="utf-8")
    assert Manifest.load(tmp_path) == Manifest(generator="g")
