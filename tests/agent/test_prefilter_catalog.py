"""The catalog the pre-filter decides about, and siblings: tools of one server that name each other."""

from __future__ import annotations

from agent.prefilter import CatalogTool, sibling_map
from tests.agent.conftest import Project
from tests.agent.prefilter_support import catalog


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
    assert whole["crm.list_leads"] == ["crm.search_records", "crm.get_record", "crm.get"]
