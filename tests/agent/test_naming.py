"""Native tool names: always valid for the API, unique, deterministic, mapped back exactly."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent.naming import NAME_PATTERN, native_names
from tool_tree.tree import ToolEntry


def entry(server: str, tool: str) -> ToolEntry:
    return ToolEntry(server=server, tool=tool, function="f", path="servers/s/f.py", schema_hash="sha256:0")


def test_plain_names_join_server_and_tool() -> None:
    names = native_names([entry("crm", "update_record"), entry("docs", "get-document")])
    assert list(names) == ["crm__update_record", "docs__get-document"]
    assert names["crm__update_record"].tool == "update_record"


def test_unsafe_characters_and_collisions_get_distinct_valid_names() -> None:
    entries = [entry("my.server", "read/file"), entry("my_server", "read_file"), entry("my-server", "ünïcode tool")]
    names = native_names(entries)
    assert all(NAME_PATTERN.match(n) for n in names)
    assert names["my-server___n_code_tool"].tool == "ünïcode tool"
    assert {names[n].server for n in ("my_server__read_file", "my_server__read_file_2")} == {"my.server", "my_server"}


def test_long_names_are_cut_with_a_hash_and_stay_unique() -> None:
    long_tool = "t" * 100
    names = native_names([entry("server", long_tool), entry("server", long_tool + "x")])
    assert len(names) == 2
    assert all(len(n) <= 64 and NAME_PATTERN.match(n) for n in names)


@given(st.lists(st.tuples(st.text(max_size=80), st.text(max_size=80)), max_size=20, unique=True))
def test_any_catalog_maps_to_valid_unique_names_that_map_back(pairs: list[tuple[str, str]]) -> None:
    entries = [entry(s, t) for s, t in pairs]
    names = native_names(entries)
    assert len(names) == len(entries)
    assert all(NAME_PATTERN.match(n) for n in names)
    assert sorted((e.server, e.tool) for e in names.values()) == sorted(pairs)
    assert native_names(reversed(entries)) == names
