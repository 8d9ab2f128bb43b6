"""A tree generated before the configuration's ``include``/``exclude`` left a tool out: the bridge refuses the tool,
naming the key and saying to regenerate (before: the manifest alone decided, and the call ran)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.bridge import ToolCallRefused
from sandbox.host import Runtime
from tests.support import sample_config_yaml
from tool_tree.config import load_config
from tooltree_cli.main import main

REGENERATE = "but this tree was generated before that: regenerate the tree (tooltree generate-tree)"


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
        assert info.value.message == f"crm.update_record is left out by servers.crm.{key} in {path}, {REGENERATE}"
        assert runtime.call_tool("crm", "list_leads", {})["isError"] is False  # a tool the filters keep still runs
