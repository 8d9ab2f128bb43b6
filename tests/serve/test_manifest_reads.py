"""`tooltree serve` reads the tree's manifest once as it starts, for everything that needs it (the check that the tree
is usable, the served toolset, the passthrough tools, the servers' prompts and resources, each session's runtime):
about 0.3 s for a tree of 20,000 tools, paid before by each of them. A tree regenerated while serving is read anew."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import pytest

from agent.serve.server import ToolServer
from agent.serve.settings import ServeSettings
from sandbox.config import SandboxConfig
from tests.serve.raw_stdio import RawStdio
from tests.serve.test_refresh import _argv, _call, _env, _setup, crm_tree
from tests.support import sample_config_yaml
from tool_tree.config import load_config
from tool_tree.tree import Manifest
from tooltree_cli.main import main

__all__ = ["crm_tree"]  # the fixture, imported for the test here

COUNTED = """
import sys, threading
from tool_tree.tree import Manifest
load = Manifest.load.__func__

def counted(cls, tree):
    manifest = load(cls, tree)
    if threading.current_thread().name != "tooltree-refresh":  # the refresh's generation reads the tree it rewrites
        print("manifest read:", ",".join(sorted(s.name for s in manifest.servers)), file=sys.stderr, flush=True)
    return manifest

Manifest.load = classmethod(counted)
from tooltree_cli.main import main
sys.exit(main(sys.argv[1:]))
"""
"""`tooltree serve` with each whole read of a manifest said on stderr, with the servers it has."""


def test_serve_reads_the_manifest_once_at_start_and_once_more_when_the_tree_is_regenerated(
    crm_tree: Path, tmp_path: Path
) -> None:
    config, tree = _setup(tmp_path, crm_tree, sample_config_yaml("crm"))
    argv = _argv(config, tree, "--passthrough", "crm.list_leads")
    raw = RawStdio([argv[0], "-c", COUNTED, *argv[3:]], _env())
    try:
        raw.initialize()
        raw.wait_for_stderr(f"{tree} is up to date")  # the refresh at start, which changed nothing
        assert "crm." in str(_call(raw, 2, "search_tools", {"query": "list leads", "detail": "name"}))
        config.write_text(sample_config_yaml("crm", "docs"), encoding="utf-8")
        assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
        assert "docs." in str(_call(raw, 3, "search_tools", {"query": "list documents", "detail": "name"}))
        raw.wait_for_stderr(f"{tree} was regenerated while serving")
        assert raw.close_stdin() == 0
    finally:
        raw.close()
    reads = [line.strip() for line in raw.stderr if line.startswith("manifest read:")]
    # Before: five reads at start (the check, the toolset, the passthrough tools, the prompts and resources, the
    # session's runtime), three of the regenerated tree (the toolset, the prompts and resources, the new runtime).
    assert reads == ["manifest read: crm", "manifest read: crm,docs"]


def test_serves_own_refresh_reads_the_regenerated_manifest_once(crm_tree: Path, tmp_path: Path) -> None:
    # Before: twice, by the refresh's check that the tree is usable and again by the served toolset, so a manifest
    # replaced between the two was served unchecked (and its prompts and resources read from a third).
    config, tree = _setup(tmp_path, crm_tree, sample_config_yaml("crm", "docs"))  # the refresh at start adds docs
    raw = RawStdio([sys.executable, "-c", COUNTED_ALL, *_argv(config, tree)[3:]], _env())
    try:
        raw.initialize()
        raw.wait_for_stderr("sessions from now on get the refreshed tree's instructions")
        assert "docs." in str(_call(raw, 2, "search_tools", {"query": "list documents", "detail": "name"}))
        assert raw.close_stdin() == 0
    finally:
        raw.close()
    reads = [line.strip() for line in raw.stderr if line.startswith("manifest read:")]
    assert reads == ["manifest read: crm (MainThread)", "manifest read: crm,docs (tooltree-refresh)"]


COUNTED_ALL = """
import sys, threading, traceback
from tool_tree.tree import Manifest
load = Manifest.load.__func__

def counted(cls, tree):
    manifest = load(cls, tree)
    if not any(f.name == "generate" and f.filename.endswith("generate.py") for f in traceback.extract_stack()):
        servers = ",".join(sorted(s.name for s in manifest.servers))
        print(f"manifest read: {servers} ({threading.current_thread().name})", file=sys.stderr, flush=True)
    return manifest

Manifest.load = classmethod(counted)
from tooltree_cli.main import main
sys.exit(main(sys.argv[1:]))
"""
"""`COUNTED`, each read said with the thread that made it, the refresh's too, but the generation's (which reads the
tree it rewrites, and the new manifest for the search index)."""


def test_a_manifest_replaced_while_serve_reloads_the_tree_serves_one_tree_until_it_reads_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the toolset and the servers' prompts and resources each read the manifest, so one replaced between the
    # two reads had serve offer the stubs of one tree and the prompts and resources of another.
    path = tmp_path / "tooltree.yaml"
    path.write_text(sample_config_yaml("crm", "docs"), encoding="utf-8")
    config, tree, both = load_config(path), tmp_path / "tree", tmp_path / "both"
    assert main(["generate-tree", "--config", str(path), "--out", str(both), "--embeddings", "off"]) == 0
    (tmp_path / "crm.yaml").write_text(sample_config_yaml("crm"), encoding="utf-8")
    assert (
        main(["generate-tree", "--config", str(tmp_path / "crm.yaml"), "--out", str(tree), "--embeddings", "off"]) == 0
    )
    app = ToolServer(config, tree, settings=ServeSettings.from_config(config), sandbox_config=SandboxConfig())
    crm_only = tmp_path / "crm_only"
    shutil.copytree(tree, crm_only)
    shutil.copytree(both, tree, dirs_exist_ok=True)  # regenerated with docs, then ...
    load = Manifest.load.__func__  # type: ignore[attr-defined]
    replaced: list[str] = []

    def replacing(cls: type[Manifest], at: Path) -> Manifest:
        manifest = load(cls, at)
        if not replaced:  # ... replaced again (by the crm tree) just after serve read it
            replaced.append(str(at))
            shutil.copytree(crm_only, tree, dirs_exist_ok=True)
            (tree / "manifest.json").write_bytes((crm_only / "manifest.json").read_bytes())
        return manifest

    monkeypatch.setattr(Manifest, "load", classmethod(replacing))
    app.reload_tree()
    assert replaced
    served = {s.name for s in app.toolset.manifest.servers}
    assert served == {"crm", "docs"} and set(app.extras.found) == served  # the tree it read, whole
    monkeypatch.undo()
    assert asyncio.run(_follow(app)) and {s.name for s in app.toolset.manifest.servers} == {"crm"} == set(
        app.extras.found
    )


async def _follow(app: ToolServer) -> bool:
    """What serve does before each call: read the tree again when its manifest is not the one served."""
    await app._follow_tree_on_disk()
    return True


def test_a_manifest_rewritten_for_its_config_alone_is_not_a_regenerated_tree_to_the_sessions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A `generate-tree` from another file naming the same servers, the one the tree named gone: the manifest names the
    # new file and records the same tree. Before: serve read the tree again and told each session it was regenerated.
    first, serve = tmp_path / "tooltree.yaml", tmp_path / "serve.yaml"
    first.write_text(sample_config_yaml("crm"), encoding="utf-8")
    serve.write_text(sample_config_yaml("crm"), encoding="utf-8")
    tree = tmp_path / "tree"
    assert main(["generate-tree", "--config", str(first), "--out", str(tree), "--embeddings", "off"]) == 0
    config = load_config(serve)
    app = ToolServer(config, tree, settings=ServeSettings.from_config(config), sandbox_config=SandboxConfig())
    first.unlink()
    assert main(["generate-tree", "--config", str(serve), "--out", str(tree), "--embeddings", "off"]) == 0
    assert Manifest.load(tree).config == "../serve.yaml"
    assert asyncio.run(_follow(app))
    assert app.registry.tree_generation == 0 and "was regenerated while serving" not in caplog.text
    # A tool changed is a regeneration, as before.
    serve.write_text(sample_config_yaml("crm", "docs"), encoding="utf-8")
    assert main(["generate-tree", "--config", str(serve), "--out", str(tree), "--embeddings", "off"]) == 0
    assert asyncio.run(_follow(app))
    assert app.registry.tree_generation == 1 and "was regenerated while serving" in caplog.text
