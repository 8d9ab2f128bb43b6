"""`tooltree serve` reads the tree's manifest once as it starts, for everything that needs it (the check that the tree
is usable, the served toolset, the passthrough tools, the servers' prompts and resources, each session's runtime):
about 0.3 s for a tree of 20,000 tools, paid before by each of them. A tree regenerated while serving is read anew."""

from __future__ import annotations

from pathlib import Path

from tests.serve.raw_stdio import RawStdio
from tests.serve.test_refresh import _argv, _call, _env, _setup, crm_tree
from tests.support import sample_config_yaml
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
