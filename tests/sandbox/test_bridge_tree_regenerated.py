"""A tree regenerated under a running session (`tooltree generate-tree` while `tooltree agent` runs in a native-tool
mode, or a `tooltree serve` session goes on with the tree it began with): a call the session's stale manifest lets
through is told that the session is stale, not that the tree is. Before: "regenerate the tree", though it was, and a
call of a server the regeneration dropped went out unchecked, with a warning that the snapshot was missing.

Real parts: `generate-tree` of the test servers, run twice; the evolving test server and the sample servers.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from agent.toolsets.direct import DirectToolset
from sandbox.bridge import ToolCallRefused
from sandbox.host import Runtime
from tests.support import sample_config_yaml
from tool_tree.config import load_config
from tooltree_cli.main import main

EVOLVING = Path(__file__).resolve().parents[1] / "servers" / "evolving_server.py"


def generate(config: Path, tree: Path) -> None:
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0


def evolving(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A config of the evolving server as ``evo`` at release 1, the file that says its release, and its tree."""
    version, config, tree = tmp_path / "version", tmp_path / "tooltree.yaml", tmp_path / "tree"
    version.write_text("1", encoding="utf-8")
    config.write_text(
        f"servers:\n  evo:\n    command: {json.dumps(sys.executable)}\n"
        f"    args: [{json.dumps(str(EVOLVING))}, {json.dumps(str(version))}]\n    timeout: 30\n",
        encoding="utf-8",
    )
    generate(config, tree)
    return config, version, tree


def text(outcome: object) -> str:
    return "".join(str(b.get("text", "")) for b in getattr(outcome, "content", []))


def test_a_direct_call_of_a_tool_a_regeneration_changed_says_to_start_a_new_run_not_to_regenerate(
    tmp_path: Path,
) -> None:
    config, version, tree = evolving(tmp_path)
    toolset = DirectToolset(tree)
    with Runtime(load_config(config), tree) as runtime:
        version.write_text("2", encoding="utf-8")
        generate(config, tree)
        removed = toolset.call("evo__delete_record", {"id": "r1"}, runtime)
        changed = toolset.call("evo__update_record", {"record_id": "r1", "note": "n"}, runtime)
    for outcome in (removed, changed):
        assert outcome.is_error
        said = text(outcome)
        assert "the tree was regenerated since this session began" in said and "start a new run" in said, said
        assert "regenerate the tree" not in said and "invalid arguments" not in said


def test_a_tool_the_server_changed_since_the_tree_was_generated_still_says_to_regenerate(tmp_path: Path) -> None:
    config, version, tree = evolving(tmp_path)
    toolset = DirectToolset(tree)
    with Runtime(load_config(config), tree) as runtime:
        version.write_text("2", encoding="utf-8")  # the server changed; the tree is as it was
        said = text(toolset.call("evo__delete_record", {"id": "r1"}, runtime))
    assert "no longer offered by the server; regenerate the tree (tooltree generate-tree" in said
    assert "regenerated since" not in said


def test_a_call_of_a_server_a_regeneration_dropped_is_refused_as_a_stale_session(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    both, crm, tree = tmp_path / "both.yaml", tmp_path / "crm.yaml", tmp_path / "tree"
    both.write_text(sample_config_yaml("crm", "docs"), encoding="utf-8")
    crm.write_text(sample_config_yaml("crm"), encoding="utf-8")
    generate(both, tree)
    with Runtime(load_config(both), tree) as runtime:
        generate(crm, tree)  # docs dropped: its snapshot is gone
        with caplog.at_level(logging.WARNING), pytest.raises(ToolCallRefused) as refused:
            runtime.call_tool("docs", "list_documents", {"limit": "not a number"})
        kept = runtime.call_tool("crm", "list_leads", {"limit": 1})  # unchanged by the regeneration: called
        with pytest.raises(ToolCallRefused) as checked:  # and its arguments checked as before
            runtime.call_tool("crm", "list_leads", {"limit": "one"})
    assert refused.value.code == "tool_changed"
    assert "the tree was regenerated since this session began" in refused.value.message
    assert "docs.list_documents" in refused.value.message
    assert "cannot read the definition" not in caplog.text
    assert not kept.get("isError"), kept
    assert checked.value.code == "invalid_arguments"


def test_a_tool_called_before_the_regeneration_changed_or_dropped_it_is_refused_as_one_never_called(
    tmp_path: Path,
) -> None:
    config, version, tree = evolving(tmp_path)
    with Runtime(load_config(config), tree) as runtime:
        before = [
            runtime.call_tool("evo", "update_record", {"record_id": "r1", "note": "n"}),
            runtime.call_tool("evo", "delete_record", {"id": "r1"}),
            runtime.call_tool("evo", "get_record", {"record_id": "r1"}),
        ]
        version.write_text("2", encoding="utf-8")
        generate(config, tree)  # update_record changed, delete_record removed, get_record only described anew
        refused = []
        for tool, arguments in (("update_record", {"record_id": "r1", "note": "n"}), ("delete_record", {"id": "r1"})):
            with pytest.raises(ToolCallRefused) as caught:
                runtime.call_tool("evo", tool, arguments)
            refused.append(caught.value)
    assert all(not result.get("isError") for result in before), before
    for error, held in zip(refused, ("holds another definition of it", "no longer holds it"), strict=True):
        assert error.code == "tool_changed", error.message
        assert f"the regenerated tree {held}" in error.message
        assert "the tree was regenerated since this session began" in error.message
