"""Which names pick a tool for ``--pin``, ``agent.pinned`` and ``serve.passthrough``: the stub's, and the tool's own
MCP name after its server's, even when that name holds a "/" (as MCP allows)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agent.errors import AgentSetupError
from agent.toolsets.base import Toolset
from tool_tree.tree import ToolEntry

ASK = ToolEntry("raw ask", "sampling/createMessage", "sampling_create_message", "servers/raw_ask/x.py", "h")
CRM = ToolEntry("crm", "update_record", "update_record", "servers/crm/update_record.py", "h")


def resolve(*names: str) -> list[ToolEntry]:
    servers = [SimpleNamespace(name="raw ask"), SimpleNamespace(name="crm")]
    manifest = SimpleNamespace(tools=[ASK, CRM], servers=servers)
    toolset = SimpleNamespace(manifest=manifest, tree="tree", config_file="tooltree.yaml")
    return Toolset.resolve_pinned(toolset, names)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "name",
    [
        "raw ask.sampling/createMessage",  # the server's name and the tool's own (before: not in the tree)
        "raw ask/sampling/createMessage",
        "raw_ask.sampling_create_message",  # the stub's
        "raw_ask/sampling_create_message",
    ],
)
def test_a_tool_whose_own_name_holds_a_slash_is_found_by_it(name: str) -> None:
    assert resolve(name) == [ASK]


def test_the_usual_names_still_pick_their_tool_once() -> None:
    assert resolve("crm.update_record", "crm/update_record") == [CRM]
    with pytest.raises(AgentSetupError, match=r"'crm\.nope' is not in the tree"):
        resolve("crm.nope")


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("crm.update_recrd", "crm.update_record"),  # a typo of the tool
        ("crm-update_record", "crm.update_record"),  # a dash for the dot
        ("cmr.update_record", "crm.update_record"),  # a typo of the server
        ("raw ask.sampling/createMesage", "raw ask.sampling/createMessage"),  # of the tool's own name
    ],
)
def test_a_name_a_typo_away_from_a_tool_says_which_tool_was_meant(name: str, meant: str) -> None:
    # Before: "its server listed no such tool when the tree was generated; … regenerate the tree", which never brings
    # a misspelt tool, and no word of the tool the tree has.
    with pytest.raises(AgentSetupError) as info:
        resolve(name)
    assert str(info.value).startswith(f"pinned tool {name!r} is not in the tree (did you mean {meant!r}?)")


def test_a_name_like_no_tool_suggests_none() -> None:
    with pytest.raises(AgentSetupError) as info:
        resolve("crm.nope")
    assert "did you mean" not in str(info.value)
