"""What each mode offers the model, built from the sample servers' tree (no container needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.errors import AgentSetupError
from agent.naming import NAME_PATTERN
from agent.toolsets import TOOL_SEARCH_NAME, CodeToolset, DirectToolset, ToolSearchToolset, make_toolset
from agent.toolsets.base import NOTE_CHARS, error
from agent.toolsets.code import MORE_ROOM
from sandbox.host import Runtime
from sandbox.results import clean_text
from tests.agent.conftest import Project
from tool_tree.tree import INDEX_FILE, Manifest


def test_code_mode_offers_exactly_four_tools(project: Project) -> None:
    toolset = CodeToolset(project.tree)
    assert [t["name"] for t in toolset.tools()] == ["list_files", "read_file", "search_tools", "execute_python"]
    assert toolset.tools() == toolset.tools()
    assert all("cache_control" not in t for t in toolset.tools())


def test_execute_python_says_how_to_call_tools_only_where_the_system_prompt_may_not_be_read(project: Project) -> None:
    def description(toolset: CodeToolset) -> str:
        return next(str(t["description"]) for t in toolset.tools() if t["name"] == "execute_python")

    # The agent's system prompt says it (before: every request carried it twice, ~70 tokens more).
    assert "from servers." not in description(CodeToolset(project.tree))
    served = description(CodeToolset(project.tree, standalone=True, timeout=45))
    assert "`from servers.<server> import <tool>`" in served and served.endswith(" A run stops after 45 s.")


def test_the_code_prompt_carries_the_root_index_and_how_to_import(project: Project) -> None:
    prompt = CodeToolset(project.tree).system_prompt()
    index = (project.tree / INDEX_FILE).read_text(encoding="utf-8").strip()
    assert index in prompt
    assert "from servers.<server> import <tool>" in prompt
    assert "print only what you need" in prompt
    assert "skills/" in prompt
    assert "Most used tools" not in prompt


def test_pinned_tools_have_their_signatures_inlined(project: Project) -> None:
    prompt = CodeToolset(project.tree, pinned=["crm.update_record", "docs/get_document"]).system_prompt()
    assert "Most used tools:" in prompt
    assert "def update_record(*, object_type: Literal[" in prompt
    assert "def get_document(*, document_id: str" in prompt
    with pytest.raises(AgentSetupError, match=r"'crm\.nope' is not in the tree"):
        CodeToolset(project.tree, pinned=["crm.nope"])


def test_a_catalog_too_big_to_inline_gets_a_compact_server_list(project: Project) -> None:
    prompt = CodeToolset(project.tree, index_chars=300).system_prompt()
    assert "3 servers, 18 tools" in prompt
    assert "servers/INDEX.md lists each server's tools" in prompt
    assert "- crm (6)" in prompt and "- docs (4)" in prompt
    assert "create_task, get_record" not in prompt  # the tool names stay in INDEX.md


def test_the_compact_server_list_stays_bounded_however_many_servers(project: Project) -> None:
    toolset = CodeToolset(project.tree, index_chars=135)
    prompt = toolset.system_prompt()
    assert len(toolset._index()) <= 135 + MORE_ROOM
    assert "3 servers, 18 tools" in prompt
    listed = [line for line in prompt.splitlines() if re.fullmatch(r"- \w+ \(\d+\)", line)]
    more = [line for line in prompt.splitlines() if "more: list_files('servers') or search_tools" in line]
    assert len(listed) < 3 and more == [f"- … {3 - len(listed)} more: list_files('servers') or search_tools"]


def test_direct_mode_offers_every_tool_with_its_server_schema(project: Project) -> None:
    toolset = DirectToolset(project.tree)
    tools = {t["name"]: t for t in toolset.tools()}
    manifest = Manifest.load(project.tree)
    assert len(tools) == len(manifest.tools) == 18
    assert all(NAME_PATTERN.match(n) for n in tools)
    update = tools["crm__update_record"]
    assert update["description"].startswith("Update fields of one CRM record.")
    assert update["input_schema"]["required"] == ["object_type", "record_id", "fields"]
    assert "Each tool is named <server>__<tool>" in toolset.system_prompt()
    assert "- crm — Customer relationship management" in toolset.system_prompt()


def test_tool_search_mode_defers_every_tool_but_the_pinned_ones(project: Project) -> None:
    tools = ToolSearchToolset(project.tree, pinned=["crm.update_record"]).tools()
    assert tools[-1] == {"type": "tool_search_tool_bm25_20251119", "name": TOOL_SEARCH_NAME}
    loaded = [t["name"] for t in tools[:-1] if not t.get("defer_loading")]
    assert loaded == ["crm__update_record"]
    assert sum(1 for t in tools if t.get("defer_loading") is True) == 17
    assert TOOL_SEARCH_NAME in ToolSearchToolset(project.tree).system_prompt()


def test_unknown_modes_and_missing_trees_are_setup_errors(project: Project, tmp_path: Path) -> None:
    with pytest.raises(AgentSetupError, match="unknown mode"):
        make_toolset("magic", project.tree)
    with pytest.raises(AgentSetupError, match="no manifest"):
        make_toolset("code", tmp_path)


def test_code_tools_browse_and_search_the_tree_without_a_container(project: Project, live: Runtime) -> None:
    toolset = CodeToolset(project.tree)
    listing = toolset.call("list_files", {"path": "servers/crm"}, live)
    assert "update_record.py" in listing.content[0]["text"] and not listing.is_error
    stub = toolset.call("read_file", {"path": "servers/crm/update_record.py", "limit": 5}, live)
    assert stub.content[0]["text"].startswith('"""crm.update_record')
    assert "offset=6" in stub.content[0]["text"]
    found = toolset.call("search_tools", {"query": "update a crm record", "limit": 2}, live)
    assert found.content[0]["text"].startswith("crm.update_record")
    assert not live.sandbox_started


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("read_file", {}, "read_file needs a path"),
        ("read_file", {"path": "servers/crm/update_record.py", "offset": "x"}, "offset must be an integer"),
        # Before: offset 0 and limit 0 were read as 1, although the schema says their minimum is 1.
        ("read_file", {"path": "servers/crm/update_record.py", "offset": 0}, "offset must be at least 1"),
        ("read_file", {"path": "servers/crm/update_record.py", "limit": 0}, "limit must be at least 1"),
        ("search_tools", {"query": "x", "limit": 500}, "limit must be an integer from 1 to 50"),
        ("search_tools", {"query": "x", "detail": "everything"}, "detail must be one of"),
        ("execute_python", {"code": "  "}, "execute_python needs code"),
        ("delete_everything", {}, "unknown tool 'delete_everything'"),
    ],
)
def test_bad_tool_input_is_an_error_the_model_can_read(
    project: Project, live: Runtime, name: str, arguments: dict[str, object], message: str
) -> None:
    outcome = CodeToolset(project.tree).call(name, arguments, live)
    assert outcome.is_error
    assert message in outcome.content[0]["text"]


ESCAPES = "\x1b]52;c;Y3VybCBldmlsfHNo\x07\x1b[2K\r\x9b8m\u202e"
"""OSC 52 (writes the clipboard), erase the line, a carriage return, an 8-bit CSI, a bidi override."""


@pytest.mark.parametrize(("name", "found"), [("read_file", "INDEX.md"), ("list_files", "crm")])
def test_the_live_view_note_of_a_code_tool_is_one_clean_bounded_line(
    project: Project, live: Runtime, name: str, found: str
) -> None:
    # Before: the model's path as it gave it, escapes and all, of any length (the note the live view prints).
    toolset = CodeToolset(project.tree)
    long = toolset.call(name, {"path": "servers/" + "./" * 5000 + found}, live)
    escaped = toolset.call(name, {"path": f"servers/{ESCAPES}x"}, live)
    assert not long.is_error and escaped.is_error
    for note in (long.note, escaped.note):
        assert len(note) <= NOTE_CHARS and note == " ".join(clean_text(note).split())


def test_an_error_note_is_the_first_line_cleaned_and_cut() -> None:
    note = error(f"servers/{ESCAPES}" + "x" * 1000 + "\nsecond line").note
    assert note.startswith("servers/") and note.endswith("…") and len(note) == NOTE_CHARS
    assert note == " ".join(clean_text(note).split()) and "second line" not in note
