"""Code mode's answer to a call of a tool it does not offer whose name is a tool of the tree
(`agent.toolsets.code_unknown`): the model is told it is a function to call in ``execute_python``, and its import."""

from __future__ import annotations

import pytest

from agent.toolsets import CodeToolset
from sandbox.host import Runtime
from tests.agent.conftest import Project

FOUR = "the tools are list_files, read_file, search_tools, execute_python"


NAMES = ["crm__get_record", "crm.get_record", "crm/get_record", "get_record", "CRM.Get-Record"]


@pytest.mark.parametrize("name", NAMES)
def test_a_tool_of_the_tree_called_as_a_tool_of_its_own_is_told_how_to_call_it_in_a_script(
    project: Project, live: Runtime, name: str
) -> None:
    # Before: "unknown tool 'crm__get_record'; the tools are list_files, …" alone, and the model had to guess why the
    # tool it had read of (in direct mode's name, or the stub's) was not one.
    outcome = CodeToolset(project.tree).call(name, {"object_type": "opportunity"}, live)
    assert outcome.is_error and outcome.script_calls == []
    assert outcome.content[0]["text"] == (
        f"unknown tool {name!r}; {FOUR}. crm.get_record is a Python function of the tree, to call in a script with "
        "execute_python: from servers.crm import get_record"
    )


def test_a_name_no_tool_of_the_tree_has_lists_the_four_tools_alone(project: Project, live: Runtime) -> None:
    outcome = CodeToolset(project.tree).call("run_shell", {"cmd": "ls"}, live)
    assert outcome.is_error and outcome.content[0]["text"] == f"unknown tool 'run_shell'; {FOUR}"
