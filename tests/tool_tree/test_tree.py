from __future__ import annotations

import os
from pathlib import Path

import pytest

from tool_tree.tree import MANIFEST_FILE, Manifest, TreeError, read_in_tree, read_regular


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
    # Where to generate it (before: `tooltree generate-tree` alone, which writes ./tree, not the folder named).
    assert load_error(tmp_path) == (
        f"{tmp_path / MANIFEST_FILE}: no manifest; run `tooltree generate-tree --out {tmp_path}` first (with --config "
        "naming your servers' file, unless it is ./tooltree.yaml), or name the folder generate-tree wrote"
    )
    spaced = tmp_path / "my tree"
    spaced.mkdir()
    assert f"run `tooltree generate-tree --out '{spaced}'` first" in load_error(spaced)
    (tmp_path / MANIFEST_FILE).mkdir()
    assert load_error(tmp_path) == (  # the tree's folder named (before: "regenerate the tree" alone)
        f"{tmp_path / MANIFEST_FILE}: a folder, not a manifest; regenerate the tree with `tooltree generate-tree --out "
        f"{tmp_path}` with --config naming the servers' configuration, unless it is ./tooltree.yaml"
    )
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


def test_a_manifests_lookups_find_the_first_entry_of_a_name_and_are_made_once_for_every_bridge(tmp_path: Path) -> None:
    # Before, each bridge made its own table of the manifest's tools: 1.7 MiB in every `tooltree serve` client session
    # for a tree of 20,000 tools (bench/serve_session_memory.py).
    import tracemalloc

    from sandbox.mcp_bridge import McpBridge
    from tool_tree.pool import ServerPool
    from tool_tree.tree import ServerEntry, ToolEntry

    def tool(server: str, name: str, summary: str = "") -> ToolEntry:
        return ToolEntry(server, name, name, f"servers/{server}/{name}.py", "sha256:0", summary)

    tools = [tool("a", f"t{i}") for i in range(20_000)]
    manifest = Manifest(
        servers=[ServerEntry("a", "a", 20_000), ServerEntry("b", "b", 1), ServerEntry("a", "a2", 0)],
        tools=[*tools, tool("b", "t0"), tool("a", "t1", "again")],
    )
    assert manifest.tool_entry("a", "t1") is tools[1]  # the first of the pair named twice
    assert manifest.tool_entry("b", "t0") is not None and manifest.tool_entry("b", "t0").server == "b"  # type: ignore[union-attr]
    assert manifest.tool_entry("b", "t1") is None and manifest.tool_entry("c", "t0") is None
    assert manifest.server_entry("a") is manifest.servers[0] and manifest.server_entry("c") is None

    McpBridge(tmp_path, ServerPool([]), manifest=manifest)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        bridges = [McpBridge(tmp_path, ServerPool([]), manifest=manifest) for _ in range(4)]
        added = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert all(b.manifest is manifest for b in bridges)
    assert added < 4 * 200_000, f"{added:,} bytes for 4 bridges"  # before: about 1,700,000 each


def test_a_folder_where_a_tree_file_belongs_is_refused_naming_it_and_leaves_no_descriptor_open(tmp_path: Path) -> None:
    # Before: os.fdopen refused the folder naming its descriptor ("Is a directory: 3") and left it open, one more at
    # each read (a `tooltree serve` searching a tree whose index is a folder, every search).
    (tmp_path / "search_index.json").mkdir()
    open_before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        with pytest.raises(IsADirectoryError) as in_tree:
            read_in_tree(tmp_path, "search_index.json")
        with pytest.raises(IsADirectoryError) as regular:
            read_regular(tmp_path / "search_index.json")
    assert in_tree.value.filename == regular.value.filename == str(tmp_path / "search_index.json")
    assert len(os.listdir("/proc/self/fd")) == open_before
