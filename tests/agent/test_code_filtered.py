"""Code mode with a pre-filter: the admitted tools' signatures are inlined like pinned ones (offline)."""

from __future__ import annotations

from agent import Agent
from agent.prefilter import FilterError
from tests.agent.conftest import Project
from tests.agent.prefilter_support import ScriptedFilter, user
from tool_tree.config import Config


def code_agent(project: Project, answers: list, **kwargs: object) -> tuple[Agent, ScriptedFilter]:
    scripted = ScriptedFilter(answers)
    return Agent(Config(servers=()), tree=project.tree, mode="code", prefilter=scripted, **kwargs), scripted  # type: ignore[arg-type]


def test_the_admitted_signatures_are_in_the_first_prompt_without_pinning_by_hand(project: Project) -> None:
    agent, _ = code_agent(project, [{"docs.get_document": 0.9, "crm.update_record": 0.8}])
    request = agent.first_request("Copy the transcript into the opportunity")
    system = request["system"][0]["text"]
    assert "def get_document(" in system and "def update_record(" in system
    assert "def list_leads(" not in system
    assert [t["name"] for t in request["tools"]] == ["list_files", "read_file", "search_tools", "execute_python"]


def test_new_signatures_are_appended_to_the_prompt(project: Project) -> None:
    agent, _ = code_agent(project, [{"docs.get_document": 0.9}, {"crm.list_leads": 0.9}], pinned=["media.thumbnail"])
    toolset = agent.toolset
    toolset.start_conversation()
    toolset.before_request([user("read the transcript")])
    before = toolset.system_prompt()
    assert before.index("def thumbnail(") < before.index("def get_document(")  # pins first
    step = toolset.before_request([user("read the transcript"), user("now the leads")])
    after = toolset.system_prompt()
    assert step.added == ["crm.list_leads"] and after.startswith(before.rstrip("\n"))
    assert "def list_leads(" in after[len(before) - 1 :]


def test_failing_open_inlines_nothing_more_since_the_tree_holds_every_tool(project: Project) -> None:
    plain = Agent(Config(servers=()), tree=project.tree, mode="code").first_request("x")["system"][0]["text"]
    agent, _ = code_agent(project, [FilterError("down")])
    request = agent.first_request("x")
    assert request["system"][0]["text"] == plain
    assert agent.prefilter is not None and agent.prefilter.failed_open
