"""Planning a tree: which tools a server's include and exclude patterns select, and the warnings they give."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from generator.layout import ServerListing, selected_tools
from tests.support import sample_config_yaml
from tooltree_cli.main import main


def tools(*names: str) -> list[dict[str, Any]]:
    return [{"name": n, "inputSchema": {"type": "object"}} for n in names]


def test_an_include_pattern_that_matches_no_tool_warns_with_the_closest_name() -> None:
    listing = ServerListing("crm", tools("list_leads", "get_record", "update_record"), include=["list_lead"])
    selected, warnings = selected_tools(listing)
    assert selected == []
    assert warnings == ["crm: include pattern 'list_lead' matches no tool (did you mean list_leads?)"]


def test_an_exclude_pattern_that_matches_no_tool_warns_without_a_guess_when_nothing_is_close() -> None:
    listing = ServerListing("crm", tools("list_leads", "delete_record"), exclude=["zzz_*", "delete_*"])
    selected, warnings = selected_tools(listing)
    assert [t["name"] for t in selected] == ["list_leads"]
    assert warnings == ["crm: exclude pattern 'zzz_*' matches no tool"]


def test_patterns_that_match_a_tool_give_no_warning() -> None:
    listing = ServerListing("crm", tools("list_leads", "delete_record"), include=["list_*", "delete_record"],
                            exclude=["delete_*"])  # fmt: skip
    assert selected_tools(listing) == (tools("list_leads"), [])


def test_a_suggested_name_from_a_server_is_shown_as_plain_text() -> None:
    listing = ServerListing("crm", tools("list_leads\x1b[2J\u202e"), include=["list_lead"])
    _, (warning,) = selected_tools(listing)
    assert warning == "crm: include pattern 'list_lead' matches no tool (did you mean list_leads[2J?)"


def test_generate_warns_on_stderr_about_an_include_typo_and_still_succeeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm") + "    include: [list_lead]\n", encoding="utf-8")
    code = main(["generate-tree", "--config", str(config), "--out", str(tmp_path / "tree"), "--embeddings", "off"])
    captured = capsys.readouterr()
    assert code == 0
    assert "warning: crm: include pattern 'list_lead' matches no tool (did you mean list_leads?)\n" in captured.err
    assert "list_lead" not in captured.out
