"""A tree generated before the configuration's ``include``/``exclude`` left a tool out: the bridge refuses the tool,
naming the key and saying to regenerate (before: the manifest alone decided, and the call ran)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sandbox.bridge import ToolCallRefused
from sandbox.host import Runtime
from tests.support import SAMPLE_SERVERS, sample_config_yaml
from tool_tree.config import load_config
from tooltree_cli.main import main

REGENERATE = (
    "but this tree was generated before that: regenerate the tree "
    "(tooltree generate-tree --config {config} --out {tree})"
)
"""Before: ``tooltree generate-tree`` alone, which reads ./tooltree.yaml and writes ./tree."""


@pytest.fixture(scope="module")
def crm_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("filters")
    config = tmp / "generated-from.yaml"
    config.write_text(sample_config_yaml("crm"), encoding="utf-8")
    out = tmp / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(out), "--embeddings", "off"]) == 0
    return out


@pytest.mark.parametrize(
    ("filters", "key"),
    [("    exclude: [update_*]\n", "exclude"), ("    include: [search_records, list_leads]\n", "include")],
)
def test_a_tool_the_config_now_filters_out_is_refused_naming_the_key_and_to_regenerate(
    crm_tree: Path, tmp_path: Path, filters: str, key: str
) -> None:
    path = tmp_path / "tooltree.yaml"
    path.write_text(sample_config_yaml("crm") + filters, encoding="utf-8")
    with Runtime(load_config(path), crm_tree) as runtime:
        with pytest.raises(ToolCallRefused) as info:
            runtime.call_tool("crm", "update_record", {"object_type": "lead", "record_id": "L-1", "fields": {}})
        assert info.value.code == "not_allowed"
        again = REGENERATE.format(config=path, tree=crm_tree)
        assert info.value.message == f"crm.update_record is left out by servers.crm.{key} in {path}, {again}"
        assert runtime.call_tool("crm", "list_leads", {})["isError"] is False  # a tool the filters keep still runs


def _crm_entry(**lists: list[str]) -> dict[str, object]:
    return {"command": sys.executable, "args": [str(SAMPLE_SERVERS / "crm.py")], **lists}


@pytest.mark.parametrize(
    ("name", "text", "key"),
    [
        (".mcp.json", json.dumps({"mcpServers": {"crm": _crm_entry(disabledTools=["update_record"])}}),
         "mcpServers.crm.disabledTools"),
        (".gemini/settings.json", json.dumps({"mcpServers": {"crm": _crm_entry(includeTools=["list_leads"])}}),
         "mcpServers.crm.includeTools"),
        ("config.toml", f"[mcp_servers.crm]\ncommand = {json.dumps(sys.executable)}\n"
         f"args = [{json.dumps(str(SAMPLE_SERVERS / 'crm.py'))}]\ndisabled_tools = ['update_record']\n",
         "mcp_servers.crm.disabled_tools"),
        (".mcp.json", json.dumps({"mcpServers": {"crm": _crm_entry(exclude=["update_*"])}}), "mcpServers.crm.exclude"),
    ],
)  # fmt: skip
def test_a_tool_another_clients_list_now_leaves_out_is_refused_naming_that_list(
    crm_tree: Path, tmp_path: Path, name: str, text: str, key: str
) -> None:
    # Before: named as tooltree's own keys (mcpServers.crm.exclude for disabledTools, servers.crm.exclude for Codex)
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    with Runtime(load_config(path), crm_tree) as runtime:
        with pytest.raises(ToolCallRefused) as info:
            runtime.call_tool("crm", "update_record", {"object_type": "lead", "record_id": "L-1", "fields": {}})
        again = REGENERATE.format(config=path, tree=crm_tree)
        assert info.value.message == f"crm.update_record is left out by {key} in {path}, {again}"
