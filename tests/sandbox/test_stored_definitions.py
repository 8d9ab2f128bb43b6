"""A tool's stored definition, which a bridge reads from the tree to check the tool's arguments
(`sandbox.stored_definitions`): its server's snapshot is parsed once for all its tools, read again once the file is
replaced, shared by the bridges of the process and let go with the last definition read from it.

Before, the first call of each tool parsed the server's whole snapshot again (60 ms a tool for a server of 20,000
tools, on the session's event loop, charged to no budget), and each bridge kept its own copy of each definition.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest

from sandbox import stored_definitions
from sandbox.stored_definitions import stored_definition
from tests.support import raw_server_tree
from tool_tree.tree import Manifest, ToolEntry, load_snapshot


def tools(n: int, suffix: str = "") -> list[dict[str, Any]]:
    return [
        {"name": f"t{i}", "description": f"tool {i}{suffix}", "inputSchema": {"type": "object", "x": [i] * (i + 1)}}
        for i in range(n)
    ]


def counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real = stored_definitions.load_snapshot

    def spy(tree: Any, server: Any, *args: Any) -> list[dict[str, Any]]:
        reads.append(server.name)
        return real(tree, server, *args)

    monkeypatch.setattr(stored_definitions, "load_snapshot", spy)
    return reads


def test_a_snapshot_is_parsed_once_for_all_its_tools_and_again_once_its_file_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree, _ = raw_server_tree(tmp_path, tools(6))
    manifest = Manifest.load(tree)
    (server,) = manifest.servers
    reads = counting_reads(monkeypatch)
    held = [stored_definition(tree, server, entry) for entry in manifest.tools]
    assert reads == ["raw"]  # before: once for each of the six tools
    stored = {t["name"]: t for t in load_snapshot(tree, server)}
    assert [h.value for h in held] == [stored[e.tool] for e in manifest.tools]
    assert stored_definition(tree, server, manifest.tools[2]) is held[2]  # asked again: the same copy
    missing = ToolEntry(server="raw", tool="gone", function="gone", path="", schema_hash="sha256:0")
    assert stored_definition(tree, server, missing).value is None and reads == ["raw"]

    # generate-tree writes the snapshot anew: the tools of the new version are read from the new file, once.
    (tmp_path / "raw.json").write_text(json.dumps({"pages": [tools(6, " again")]}), encoding="utf-8")
    from tooltree_cli.main import main

    assert main(["generate-tree", "--config", str(tmp_path / "tooltree.yaml"), "--out", str(tree)]) == 0
    manifest = Manifest.load(tree)
    again = [stored_definition(tree, manifest.servers[0], entry) for entry in manifest.tools]
    assert reads == ["raw", "raw"]
    assert [a.value["description"] for a in again if a.value] == [f"tool {i} again" for i in range(6)]


def test_what_was_read_is_let_go_with_the_last_definition_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree, _ = raw_server_tree(tmp_path, tools(3))
    manifest = Manifest.load(tree)
    reads = counting_reads(monkeypatch)
    first = stored_definition(tree, manifest.servers[0], manifest.tools[0])
    del first
    gc.collect()
    root = str(tree.resolve())
    assert not [k for k in stored_definitions._definitions if k[0] == root]
    assert not [k for k in stored_definitions._snapshots if k[0] == root]
    stored_definition(tree, manifest.servers[0], manifest.tools[1])
    assert reads == ["raw", "raw"]  # nothing held it: read again


def test_a_snapshot_naming_a_tool_twice_or_not_by_a_string_keeps_the_first_and_skips_the_rest() -> None:
    source = stored_definitions.SnapshotTexts(
        [{"name": "a", "n": 1}, {"name": ["a"], "n": 2}, {"name": "a", "n": 3}, {"n": 4}, {"name": "b", "n": 5}]
    )
    assert {name: json.loads(text)["n"] for name, text in source.texts.items()} == {"a": 1, "b": 5}


def test_runtimes_of_one_tree_share_its_manifest_until_the_file_is_replaced(tmp_path: Path) -> None:
    # Before, each runtime (each `tooltree serve` client session) read its own: about 17 MB for 20,000 tools.
    from sandbox.host import Runtime
    from tooltree_cli.common import load
    from tooltree_cli.main import main

    tree, _ = raw_server_tree(tmp_path, tools(3))
    config = load(str(tmp_path / "tooltree.yaml"))
    with Runtime(config, tree) as first, Runtime(config, tree) as second:
        assert first.bridge.manifest is second.bridge.manifest
        assert [t.tool for t in first.bridge.manifest.tools] == ["t0", "t1", "t2"]
        (tmp_path / "raw.json").write_text(json.dumps({"pages": [tools(4)]}), encoding="utf-8")
        assert main(["generate-tree", "--config", str(tmp_path / "tooltree.yaml"), "--out", str(tree)]) == 0
        with Runtime(config, tree) as third:
            assert [t.tool for t in third.bridge.manifest.tools] == ["t0", "t1", "t2", "t3"]
        assert [t.tool for t in first.bridge.manifest.tools] == ["t0", "t1", "t2"]  # a runtime keeps what it read
    del first, second, third
    gc.collect()
    assert not [k for k in stored_definitions._manifests if k[0] == str(tree.resolve())]


def test_a_file_rewritten_in_place_to_its_size_and_time_is_read_again(tmp_path: Path) -> None:
    # Its change time tells it apart: a restore that keeps times, or an editor that writes in place, makes one.
    import os

    tree, _ = raw_server_tree(tmp_path, tools(3))
    manifest = Manifest.load(tree)
    (server,) = manifest.servers
    held = stored_definition(tree, server, manifest.tools[0])  # holds the snapshot's texts as read
    held_manifest = stored_definitions.shared_manifest(tree)
    for name, old, new in [
        (server.snapshot or f"snapshots/{server.package}.json", "tool 1", "tool 9"),
        ("manifest.json", '"t0"', '"u0"'),
    ]:
        path = tree / name
        before = path.stat()
        text = path.read_text(encoding="utf-8")
        assert old in text
        with path.open("r+", encoding="utf-8") as f:  # the same file (inode), the same size
            f.write(text.replace(old, new))
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = path.stat()
        assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    second = stored_definition(tree, server, manifest.tools[1])
    assert second.value is not None and second.value["description"] == "tool 9"  # before: the old texts, "tool 1"
    assert second.source is not held.source
    assert stored_definitions.shared_manifest(tree).tools[0].tool == "u0"
    assert held_manifest.tools[0].tool == "t0"  # what a runtime read stays as it read it


def test_records_tree_says_whether_the_manifest_file_now_records_the_same_tree(tmp_path: Path) -> None:
    # One function for a run's `TreeWatch` and a session's `StaleTools`, which each read and compared it themselves.
    import dataclasses
    import os

    from sandbox.stored_definitions import manifest_version, records_tree

    tree, _ = raw_server_tree(tmp_path, tools(2))
    manifest = Manifest.load(tree)
    first = manifest_version(tree)
    assert records_tree(tree, manifest, first)

    def replace_with(other: Manifest) -> tuple[int, ...]:
        (tree / "manifest.new").write_text(other.to_json(), encoding="utf-8")
        os.replace(tree / "manifest.new", tree / "manifest.json")
        return manifest_version(tree)

    renamed = replace_with(dataclasses.replace(manifest, config=str(tmp_path / "other.yaml")))
    assert renamed != first
    assert records_tree(tree, manifest, renamed)  # the configuration file it names alone changed
    assert not records_tree(tree, manifest, first)  # a version the file is no longer at
    changed = replace_with(dataclasses.replace(manifest, tools=manifest.tools[:1]))
    assert not records_tree(tree, manifest, changed)
    (tree / "manifest.json").write_text("{", encoding="utf-8")
    assert not records_tree(tree, manifest, manifest_version(tree))  # unreadable
    (tree / "manifest.json").unlink()
    assert not records_tree(tree, manifest, manifest_version(tree))  # none
    assert not records_tree(tree, manifest, None)
