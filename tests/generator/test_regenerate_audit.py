"""Rerunning `generate-tree` over a tree kept for months: what a change upstream, or of tooltree itself, does to it."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from generator.fingerprint import generator_fingerprint
from tests.support import REPO
from tool_tree.tree import Manifest, content_hash
from tooltree_cli.main import main

RAW = REPO / "tests" / "servers" / "raw_server.py"


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"Does {name}.", "inputSchema": {"type": "object", "properties": {}}}


def snapshots(tmp: Path, servers: dict[str, list[str]]) -> Path:
    """``tmp/snaps`` holding a snapshot of exactly ``servers`` (name → tool names)."""
    snaps = tmp / "snaps"
    snaps.mkdir(exist_ok=True)
    for old in snaps.glob("*.json"):
        old.unlink()
    for server, names in servers.items():
        snapshot = {"server": server, "info": {}, "tools": [tool(t) for t in names]}
        (snaps / f"{server}.json").write_text(json.dumps(snapshot), encoding="utf-8")
    return snaps


def generate(tmp: Path, servers: dict[str, list[str]], *args: str) -> int:
    """Regenerate ``tmp/tree`` from snapshots of ``servers`` (``--json`` summary on stdout); the exit code."""
    snaps = snapshots(tmp, servers)
    out = tmp / "tree"
    return main(
        ["generate-tree", "--from-snapshot", str(snaps), "--out", str(out), "--embeddings", "off", "--json", *args]
    )


def files(tree: Path) -> dict[str, tuple[bytes, int]]:
    return {
        p.relative_to(tree).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns) for p in tree.rglob("*") if p.is_file()
    }


def test_stubs_kept_across_an_upgrade_are_rendered_again_by_the_next_full_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: a `--server` run (or a server down) after an upgrade kept the other servers' stubs as the old release
    # rendered them but marked the manifest with the new generator, so every later run reused them as current.
    out = tmp_path / "tree"
    assert generate(tmp_path, {"one": ["a1"], "two": ["b1"]}) == 0
    fresh = (out / "servers/two/b1.py").read_bytes()
    # The tree as an older release left it: its stub of b1 differs, and the manifest names that release.
    old = fresh.replace(b"def b1(", b"def b1_old_release(")
    assert old != fresh
    (out / "servers/two/b1.py").write_bytes(old)
    manifest = Manifest.load(out)
    manifest.tools = [
        dataclasses.replace(t, stub_hash=content_hash(old)) if t.path == "servers/two/b1.py" else t
        for t in manifest.tools
    ]
    manifest.generator = "0.0.1+0000000000000000"
    (out / "manifest.json").write_text(manifest.to_json(), encoding="utf-8")

    assert generate(tmp_path, {"one": ["a1"], "two": ["b1"]}, "--server", "one") == 0
    assert (out / "servers/two/b1.py").read_bytes() == old  # not asked for: left as it is

    assert generate(tmp_path, {"one": ["a1"], "two": ["b1"]}) == 0
    assert (out / "servers/two/b1.py").read_bytes() == fresh
    assert Manifest.load(out).generator == generator_fingerprint()
    assert not (out / ".tooltree-kept").exists()  # what an older release wrote is replaced without a copy
    capsys.readouterr()


def test_a_server_that_now_lists_no_tools_loses_its_stubs_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tree"
    assert generate(tmp_path, {"one": ["a1"], "two": ["b1", "b2"]}) == 0
    capsys.readouterr()
    code = generate(tmp_path, {"one": ["a1"], "two": []})
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["deleted_paths"] == ["servers/two/b1.py", "servers/two/b2.py"]
    assert "two: listed no tools, where the tree had 2: its stubs are removed" in summary["warnings"]
    assert (out / "servers/one/a1.py").is_file()
    # Listing no tools again says nothing more: the tree has none of its tools left.
    generate(tmp_path, {"one": ["a1"], "two": []})
    assert not [w for w in json.loads(capsys.readouterr().out)["warnings"] if "listed no tools" in w]


def test_a_tree_whose_servers_all_list_no_tools_is_left_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: a server that answered with no tools (its token expired) emptied the tree, exit 0, without a word;
    # `tooltree serve` following the tree then served no tools, as when every server fails (which writes nothing).
    config = tmp_path / "c.yaml"
    spec = tmp_path / "svc.json"
    spec.write_text(json.dumps({"pages": [[tool("ping"), tool("pong")]]}), encoding="utf-8")
    config.write_text(
        f"servers:\n  svc:\n    command: {json.dumps(sys.executable)}\n"
        f"    args: [{json.dumps(str(RAW))}, {json.dumps(str(spec))}]\n    timeout: 10\n",
        encoding="utf-8",
    )
    out = tmp_path / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(out), "--embeddings", "off"]) == 0
    before = files(out)
    spec.write_text(json.dumps({"pages": [[]]}), encoding="utf-8")
    capsys.readouterr()
    assert main(["generate-tree", "--config", str(config), "--out", str(out), "--embeddings", "off"]) == 3
    err = capsys.readouterr().err
    line = next(ln for ln in err.splitlines() if ln.startswith("svc "))
    assert "failed" in line and "listed no tools, where the tree has 2 (kept previous stubs)" in line
    assert f"\n{out}: 0 written, 0 deleted, " in err
    assert files(out) == before  # search index too
    # --json says the same
    assert main(["generate-tree", "--config", str(config), "--out", str(out), "--embeddings", "off", "--json"]) == 3
    (server,) = json.loads(capsys.readouterr().out)["servers"]
    assert server["status"] == "failed" and server["kept_previous"] is True
    assert files(out) == before
    # --check says the same, and finds nothing to change
    assert main(["generate-tree", "--config", str(config), "--out", str(out), "--check", "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["drift"] == []
    # listing tools again, it is as before
    spec.write_text(json.dumps({"pages": [[tool("ping")]]}), encoding="utf-8")
    assert main(["generate-tree", "--config", str(config), "--out", str(out), "--embeddings", "off"]) == 0
    assert (out / "servers/svc/ping.py").is_file() and not (out / "servers/svc/pong.py").exists()


def test_check_says_when_there_is_no_tree_rather_than_that_its_files_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: a mistyped --out read "8 file(s) differ from the servers", as if a tree were there and out of date.
    snaps = snapshots(tmp_path, {"svc": ["ping"]})
    args = ["generate-tree", "--from-snapshot", str(snaps), "--embeddings", "off", "--check", "--out"]
    assert main([*args, str(tmp_path / "tre")]) == 1
    captured = capsys.readouterr()
    assert f"\n{tmp_path / 'tre'}: no tree there; a run without --check writes these 8 file(s):\n" in captured.err
    assert "differ from the servers" not in captured.err and "  servers/svc/ping.py\n" in captured.out
    assert not (tmp_path / "tre").exists()
    assert generate(tmp_path, {"svc": ["ping"]}) == 0
    capsys.readouterr()
    assert main([*args, str(tmp_path / "tree")]) == 0
    assert f"\n{tmp_path / 'tree'}: up to date\n" in capsys.readouterr().err
    (tmp_path / "tree/servers/svc/ping.py").write_text("# mine\n", encoding="utf-8")
    assert main([*args, str(tmp_path / "tree")]) == 1
    captured = capsys.readouterr()
    assert "\n1 file(s) differ from the servers:\n" in captured.err and captured.out == "  servers/svc/ping.py\n"


@pytest.mark.parametrize("inside", ["servers", "servers/svc", "snapshots", "servers/new/deeper"])
def test_out_inside_a_folder_another_tree_writes_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], inside: str
) -> None:
    # Before: `--out tree/servers` made a second tree there, which the first one's model then saw as a package
    # `servers.servers` beside a manifest.json and search_index.json in its servers/ folder.
    assert generate(tmp_path, {"svc": ["ping"]}) == 0
    out = tmp_path / "tree"
    before = files(out)
    capsys.readouterr()
    snaps = tmp_path / "snaps"
    for check in ([], ["--check"]):  # --check refuses it as the run does (before: it listed drift, exit 1)
        args = ["--from-snapshot", str(snaps), "--out", str(out / inside), "--embeddings", "off", *check]
        assert main(["generate-tree", *args]) == 2
        top = inside.split("/")[0]
        assert f"is inside {top}/ of the tree {out}, which tooltree writes" in capsys.readouterr().err
    assert files(out) == before
    # beside the tree, or in a folder of it that is not the tree's, a tree may go
    for elsewhere in (tmp_path / "other", out / "notes"):
        assert (
            main(["generate-tree", "--from-snapshot", str(snaps), "--out", str(elsewhere), "--embeddings", "off"]) == 0
        )
    capsys.readouterr()
