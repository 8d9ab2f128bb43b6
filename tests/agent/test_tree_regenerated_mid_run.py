"""A run's tree regenerated under it (`tooltree generate-tree` while `tooltree agent` runs): the code tools say so once,
and a script that fails to import what the regeneration added is told why. Before: search_tools and read_file showed
the added server while the script's ``from servers.docs import …`` failed with ``ModuleNotFoundError``, unsaid.

Real parts: `generate-tree` of the sample servers, run twice; the sample servers; a real sandbox container.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.toolsets.code import CodeToolset
from agent.toolsets.tree_changed import TREE_CHANGED, TREE_CHANGED_IMPORT
from sandbox import SandboxConfig
from sandbox.host import Runtime
from tests.support import TEST_OWNER, sample_config_yaml
from tool_tree.config import load_config
from tooltree_cli.main import main


def generate(config: Path, tree: Path) -> None:
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0


def texts(outcome: object) -> list[str]:
    return [str(b.get("text", "")) for b in getattr(outcome, "content", [])]


@pytest.mark.docker
def test_a_run_whose_tree_gains_a_server_says_so_once_and_why_its_script_cannot_import_it(
    tmp_path: Path, docker_engine: object
) -> None:
    crm, both, tree = tmp_path / "crm.yaml", tmp_path / "both.yaml", tmp_path / "tree"
    crm.write_text(sample_config_yaml("crm"), encoding="utf-8")
    both.write_text(sample_config_yaml("crm", "docs"), encoding="utf-8")
    generate(crm, tree)
    toolset = CodeToolset(tree)
    settings = SandboxConfig(owner=TEST_OWNER, timeout=30.0)
    with Runtime(load_config(both), tree, sandbox_config=settings) as runtime:
        first = toolset.call("execute_python", {"code": "print(1)"}, runtime)
        assert not first.is_error and texts(first) == ["1"]  # nothing to say while the tree is the same
        generate(both, tree)

        found = toolset.call("search_tools", {"query": "list documents"}, runtime)
        assert texts(found)[0].startswith(f"[{TREE_CHANGED}]\n\n") and "docs.list_documents" in texts(found)[0]
        read = toolset.call("read_file", {"path": "servers/docs/list_documents.py", "limit": 3}, runtime)
        assert TREE_CHANGED not in "".join(texts(read))  # said once

        missed = toolset.call("execute_python", {"code": "from servers.docs import list_documents"}, runtime)
        assert missed.is_error
        said = texts(missed)
        assert "No module named 'servers.docs'" in said[0] and said[-1] == TREE_CHANGED_IMPORT
        assert TREE_CHANGED not in said[0]

        fine = toolset.call("execute_python", {"code": "from servers.crm import get_record\nprint(2)"}, runtime)
        assert not fine.is_error and texts(fine) == ["2"]


def test_each_conversation_of_a_toolset_whose_tree_was_regenerated_is_told_once(tmp_path: Path) -> None:
    crm, both, tree = tmp_path / "crm.yaml", tmp_path / "both.yaml", tmp_path / "tree"
    crm.write_text(sample_config_yaml("crm"), encoding="utf-8")
    both.write_text(sample_config_yaml("crm", "docs"), encoding="utf-8")
    generate(crm, tree)
    toolset = CodeToolset(tree)
    toolset.start_conversation()
    with Runtime(load_config(both), tree) as runtime:
        generate(both, tree)
        told = [texts(toolset.call("search_tools", {"query": "documents"}, runtime))[0] for _ in range(2)]
        toolset.start_conversation()  # an Agent's next run, on the same toolset and system prompt
        told.append(texts(toolset.call("list_files", {"path": "servers"}, runtime))[0])
    assert [t.startswith(f"[{TREE_CHANGED}]\n\n") for t in told] == [True, False, True]
    assert "docs" in told[2]


def test_a_run_whose_tree_is_unchanged_says_nothing_of_it(tmp_path: Path) -> None:
    config, tree = tmp_path / "crm.yaml", tmp_path / "tree"
    config.write_text(sample_config_yaml("crm"), encoding="utf-8")
    generate(config, tree)
    toolset = CodeToolset(tree)
    with Runtime(load_config(config), tree) as runtime:
        generate(config, tree)  # nothing changed: nothing is written, the manifest is the same file
        found = toolset.call("search_tools", {"query": "record"}, runtime)
        assert not found.is_error and "[the tree was regenerated" not in texts(found)[0]


def test_a_manifest_rewritten_for_its_configuration_file_alone_is_not_told_as_a_regeneration(tmp_path: Path) -> None:
    # Before: a generate-tree from another file naming the same servers (the file the tree named gone) rewrote the
    # manifest for its `config` alone, and the run was told its tree was regenerated, though no tool had changed.
    from agent.content import text_block
    from agent.toolsets.base import ToolOutcome
    from sandbox.stored_definitions import manifest_version

    first, other, both, tree = tmp_path / "crm.yaml", tmp_path / "other.yaml", tmp_path / "both.yaml", tmp_path / "tree"
    first.write_text(sample_config_yaml("crm"), encoding="utf-8")
    both.write_text(sample_config_yaml("crm", "docs"), encoding="utf-8")
    generate(first, tree)
    toolset = CodeToolset(tree)
    version = manifest_version(tree)
    first.rename(other)
    generate(other, tree)
    assert manifest_version(tree) != version  # the file was replaced, naming other.yaml
    said = toolset.tree_watch.tell("search_tools", ToolOutcome([text_block("found")]))
    assert texts(said) == ["found"]

    generate(both, tree)  # a tool added: that is a regeneration, told once
    said = toolset.tree_watch.tell("search_tools", ToolOutcome([text_block("found")]))
    assert texts(said) == [f"[{TREE_CHANGED}]\n\nfound"]
