"""The catalog the pre-filter decides about, and siblings: tools of one server that name each other."""

from __future__ import annotations

import agent.prefilter.catalog
from agent.prefilter import CatalogTool, sibling_map
from tests.agent.conftest import Project
from tests.agent.prefilter_support import catalog
from tests.generator.work import lines_run


def tool(server: str, name: str, description: str) -> CatalogTool:
    return CatalogTool(f"{server}.{name}", f"{server}__{name}", server, name, description)


def test_the_catalog_has_every_tool_with_its_native_name_and_description(project: Project) -> None:
    tools = catalog(project.tree)
    assert len(tools) == 18 and len({t.key for t in tools}) == 18
    chart = next(t for t in tools if t.key == "media.render_chart")
    assert chart.name == "media__render_chart" and chart.description.startswith("Render a chart")


def test_siblings_are_the_tools_a_tool_names_or_that_name_it_on_the_same_server() -> None:
    tools = [
        tool("crm", "search_records", "Search records. Use get_record with an id from the results."),
        tool("crm", "get_record", "Read one record."),
        tool("crm", "list_leads", "Export leads."),
        tool("other", "get_record", "Another server's get_record."),
        tool("crm", "get", "Too short a name to count: get it."),
    ]
    named = sibling_map(tools)
    assert named["crm.get_record"] == ["crm.search_records"]
    assert named["crm.search_records"] == ["crm.get_record"]
    assert named["crm.list_leads"] == [] and named["other.get_record"] == []
    assert named["crm.get"] == []
    whole = sibling_map(tools, "server")
    assert whole["crm.list_leads"] == ("crm.search_records", "crm.get_record", "crm.list_leads", "crm.get")


def test_the_tools_of_a_server_share_one_list_of_its_tools_as_siblings() -> None:
    # Before, each tool had a list of all the others: a server of 8,000 tools held 64 million entries (550 MB), one of
    # 20,000 (the most a server keeps) about 3 GB, before a run with `--prefilter-siblings server` sent a request.
    tools = [tool("big", f"tool_{i}", "") for i in range(2000)] + [tool("small", "only", "")]
    whole = sibling_map(tools, "server")
    assert len(whole) == 2001 and whole["small.only"] == ("small.only",)
    assert {id(keys) for keys in whole.values()} == {id(whole["big.tool_0"]), id(whole["small.only"])}
    assert list(whole["big.tool_7"]) == [f"big.tool_{i}" for i in range(2000)]


def test_siblings_of_a_server_of_a_thousand_tools_by_word_and_by_a_name_of_other_characters() -> None:
    # Names made of word characters and hyphens are looked up by word; others (`v2.get`) by their pattern. Their
    # cost: `bench/prefilter_siblings.py` (before, every pair was searched with a pattern compiled anew: 1,000 tools
    # took about a minute).
    words = ["read", "write", "record", "list", "search", "update", "export", "import"]
    tools = [
        tool(
            "big",
            f"tool_{i:04d}",
            " ".join([*(words[(i * 7 + k) % 8] for k in range(40)), f"then tool_{(i + 1) % 1000:04d}"]),
        )
        for i in range(1000)
    ]
    tools.append(tool("big", "v2.get", "Reads; see tool_0000. Not v2.gets."))
    tools.append(tool("big", "reader", "Use v2.get first."))
    named = sibling_map(tools)
    assert named["big.tool_0005"] == ["big.tool_0004", "big.tool_0006"]
    assert named["big.tool_0000"] == ["big.tool_0001", "big.tool_0999", "big.v2.get"]
    assert named["big.v2.get"] == ["big.tool_0000", "big.reader"]


def test_siblings_of_a_server_whose_names_hold_a_dot_take_work_that_grows_with_its_size() -> None:
    # Names such as `grp7.tool_0007` (MCP allows the dot) were each searched for in every description, and every tool
    # went through the whole server to find who named it: 1,000 tools took 8.5 s before a run's first request, 2,000
    # took 37 s. Lines run, not time: the same on every machine (`tests/generator/work.py`).
    words = ["read", "write", "record", "list", "search", "update", "export", "import"]
    size = 1000

    def name(i: int) -> str:
        return f"grp{i % 50}.tool_{i % size:04d}"

    tools = [
        tool("big", name(i), " ".join([*(words[(i * 7 + k) % 8] for k in range(40)), f"then {name(i + 1)}."]))
        for i in range(size)
    ]
    tools.append(tool("big", "🚀🚀🚀🚀", "Launch; then grp1.tool_0001."))
    tools.append(tool("big", "launcher", "Use 🚀🚀🚀🚀 first, not x🚀🚀🚀🚀."))
    with lines_run(agent.prefilter.catalog) as lines:
        named = sibling_map(tools)
    assert named["big.grp5.tool_0005"] == ["big.grp4.tool_0004", "big.grp6.tool_0006"]
    assert named["big.grp1.tool_0001"] == ["big.grp0.tool_0000", "big.grp2.tool_0002", "big.🚀🚀🚀🚀"]
    assert named["big.🚀🚀🚀🚀"] == ["big.grp1.tool_0001", "big.launcher"]
    assert lines.count < 200 * size  # now about 65 per tool; was over 3,000


def test_siblings_of_names_that_share_a_word_every_description_holds_take_work_that_grows_with_the_server() -> None:
    # `7.list_items`, `8.list_items`, …: a name is looked for only where a description holds the run fewest names
    # share (`7`), not their longest (`list_items`, in every description here, which would search every name in each).
    size = 1000
    tools = [tool("big", f"{i}.list_items", f"Returns list_items of {(i + 1) % size}.list_items.") for i in range(size)]
    with lines_run(agent.prefilter.catalog) as lines:
        named = sibling_map(tools)
    assert named["big.5.list_items"] == ["big.4.list_items", "big.6.list_items"]
    assert lines.count < 200 * size
