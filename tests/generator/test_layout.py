"""Planning a tree: which tools a server's include and exclude patterns select, the warnings they give, and
the work a rerun of many servers takes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import generator.layout
from generator.layout import ServerListing, plan_tree, selected_tools
from tests.generator.work import lines_run
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


def test_a_suggested_name_from_a_server_is_shown_escaped() -> None:
    # Escaped, not cleaned (before: "list_leads[2J", a name the server does not have).
    listing = ServerListing("crm", tools("list_leads\x1b[2J\u202e"), include=["list_lead"])
    _, (warning,) = selected_tools(listing)
    assert warning == "crm: include pattern 'list_lead' matches no tool (did you mean list_leads\\x1b[2J\\u202e?)"


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


def test_a_rerun_of_many_servers_reuses_every_stub_in_work_linear_in_the_servers() -> None:
    # Each server used to look for its previous names among every tool of the tree: quadratic in the
    # servers (3,000 servers of 5 tools: a no-op rerun took 6.0 s, now 3.6 s; bench/scale_shapes.py).
    listings = [ServerListing(f"s{n:03d}", tools("get_record")) for n in range(300)]
    first = plan_tree(listings)
    with lines_run(generator.layout) as lines:
        again = plan_tree(listings, previous=first.manifest, existing=first.files.get)
    assert again.files == first.files and again.manifest == first.manifest
    assert lines.count < 250 * len(listings)  # was 425 per server at 300 servers, and growing with them


@pytest.mark.parametrize(
    ("info", "line"),
    [
        # server-everything's instructions: a heading first, which was the line INDEX.md showed
        (
            {"instructions": "# Everything Server – Server Instructions\n\nThis server exercises all MCP features."},
            "This server exercises all MCP features.",
        ),
        ({"instructions": "## Usage\n", "title": "Everything Reference Server"}, "Everything Reference Server"),
        ({"description": "#1 tool for invoices."}, "#1 tool for invoices."),  # not a heading
        # server-everything 2.0's instructions open with a sentence about themselves, which was its line
        (
            {
                "instructions": "# Everything Server – Server Instructions\n\nAudience: These instructions are "
                "written for an LLM or autonomous agent integrating with the Everything MCP Server.\nFollow them.",
                "title": "Everything Reference Server",
            },
            "Everything Reference Server",
        ),
        ({"instructions": "This guide explains the tools.\n\nMore."}, ""),
        ({"instructions": "Note: requires a token. Searches the web."}, ""),
        ({"instructions": "Manages the guide dogs' schedule."}, "Manages the guide dogs' schedule."),
    ],
)
def test_a_servers_line_skips_markdown_headings_and_sentences_about_the_text(info: dict[str, Any], line: str) -> None:
    from generator.layout import server_description

    assert server_description(ServerListing(name="s", tools=[], info=info)) == line


def test_a_tool_that_runs_only_as_a_task_is_left_out_with_a_warning() -> None:
    listing = ServerListing("lab", [*tools("echo"), {**tools("research")[0], "execution": {"taskSupport": "required"}}])
    listing.tools.append({**tools("maybe")[0], "execution": {"taskSupport": "optional"}})
    selected, warnings = selected_tools(listing)
    assert [t["name"] for t in selected] == ["echo", "maybe"]
    assert warnings == [
        "lab: left out tool 'research': it runs only as an MCP task (execution.taskSupport: required), and "
        "tooltree calls tools directly"
    ]
