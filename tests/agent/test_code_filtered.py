"""Code mode with a pre-filter: the admitted tools are shown in the prompt — signatures within a
budget, then one line each, then names — and the prompt only grows by appending (offline)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent import Agent
from agent.prefilter import FilterError, PreFilter
from agent.prefilter.state import STATE_FORMAT, STATE_VERSION
from agent.toolsets.code import stub_hit
from agent.toolsets.code_filtered import LINE_CHARS, SIGNATURE_CHARS, PrefilteredCodeToolset
from tests.agent.conftest import Project
from tests.agent.prefilter_support import ScriptedFilter, catalog, user
from tool_tree.config import Config
from tool_tree.search import render_hits
from tool_tree.tree import Manifest


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


# ---- the bounded form: signatures within a budget, lines, names ----------------------------------------------------


def toolset(project: Project, answers: list, **kwargs: Any) -> PrefilteredCodeToolset:
    prefilter = PreFilter(ScriptedFilter(answers), catalog(project.tree))  # type: ignore[arg-type]
    return PrefilteredCodeToolset(project.tree, prefilter=prefilter, **kwargs)


def signature_of(project: Project, key: str) -> str:
    entry = next(t for t in Manifest.load(project.tree).tools if f"{t.server}.{t.tool}" == key)
    return render_hits(project.tree, [stub_hit(entry)], "summary").strip()


def picked(system: str) -> str:
    return system[system.index("Tools picked for this task") :]


def test_the_step_says_which_added_tools_were_above_the_threshold_and_which_came_as_siblings(project: Project) -> None:
    f = PreFilter(ScriptedFilter([{"crm.get_record": 0.6, "docs.get_document": 0.9}]), catalog(project.tree))  # type: ignore[arg-type]
    f.start()
    step = f.decide([user("read the record")])
    assert step.chosen == ["docs.get_document", "crm.get_record"]  # highest first
    assert "crm.search_records" in step.added and "crm.search_records" not in step.chosen
    assert "chosen" not in step.to_json()


def test_a_sibling_is_shown_as_one_line_not_as_a_signature(project: Project) -> None:
    tools = toolset(project, [{"crm.get_record": 0.9}])
    tools.before_request([user("read the record")])
    system = tools.system_prompt()
    assert "def get_record(" in system and "def search_records(" not in system
    assert "\n- crm.search_records — " in picked(system)
    shown = tools.shown()
    assert shown["crm.get_record"] == "signature" and shown["crm.search_records"] == "line"
    assert set(shown.values()) == {"signature", "line"} and list(shown.values()).count("signature") == 1


def test_a_tool_past_the_signature_budget_is_one_line_and_the_best_keeps_its_signature(project: Project) -> None:
    room = len(signature_of(project, "docs.get_document")) + 1  # exactly one signature fits
    tools = toolset(project, [{"media.thumbnail": 0.6, "docs.get_document": 0.9}], signature_chars=room)
    tools.before_request([user("a thumbnail of the transcript")])
    system = tools.system_prompt()
    assert signature_of(project, "docs.get_document") in system and "def thumbnail(" not in system
    assert "\n- media.thumbnail — " in picked(system)
    assert tools.shown()["media.thumbnail"] == "line"


def test_past_both_budgets_a_tool_is_named_only_and_every_admitted_tool_stays_findable(project: Project) -> None:
    everything = {t.key: 0.9 for t in catalog(project.tree)}
    tools = toolset(project, [everything], signature_chars=0, line_chars=0)
    tools.before_request([user("do everything")])
    system = tools.system_prompt()
    assert "def " not in picked(system) and "\n- also picked: " in system
    for entry in Manifest.load(project.tree).tools:
        assert entry.qualified_name in picked(system)


def test_the_default_budgets_bound_what_the_prompt_shows_of_a_whole_catalog(project: Project) -> None:
    everything = {t.key: 0.9 for t in catalog(project.tree)}
    tools = toolset(project, [everything])
    tools.before_request([user("do everything")])
    system = tools.system_prompt()
    kinds = tools.shown()
    signatures = [signature_of(project, k) for k, kind in kinds.items() if kind == "signature"]
    assert signatures and all(s in system for s in signatures)
    assert sum(len(s) + 1 for s in signatures) <= SIGNATURE_CHARS
    assert len(kinds) == len(everything) and "line" in kinds.values()  # the sample catalog overflows the budget
    lines = [ln for ln in picked(system).splitlines() if ln.startswith("- ") and " — " in ln]
    assert sum(len(ln) + 1 for ln in lines) <= LINE_CHARS


def test_the_prompt_grows_only_by_appending_and_an_entry_shown_never_changes(project: Project) -> None:
    answers = [{"crm.get_record": 0.9}, {"crm.search_records": 0.9, "media.thumbnail": 0.9}, {"docs.get_document": 0.9}]
    tools = toolset(project, answers, line_chars=200)
    conversation = [user("read the record")]
    tools.before_request(conversation)
    first = tools.system_prompt()
    conversation += [user("search records and make a thumbnail")]
    step = tools.before_request(conversation)  # search_records was a line; now above the threshold: stays a line
    second = tools.system_prompt()
    assert step.added[0] == "media.thumbnail" and "crm.search_records" not in step.added
    assert second.startswith(first.rstrip("\n"))
    assert "def search_records(" not in second and "def thumbnail(" in second[len(first) - 1 :]
    again = tools.before_request(conversation)  # same text: not asked, nothing added
    assert not again.added and tools.system_prompt() == second
    conversation += [user("and the transcript")]
    tools.before_request(conversation)
    third = tools.system_prompt()
    assert third.startswith(second.rstrip("\n")) and "def get_document(" in third[len(second) - 1 :]
    assert tools.shown()["crm.search_records"] == "line"


def test_pinned_tools_keep_their_signatures_outside_the_budgets(project: Project) -> None:
    tools = toolset(project, [{"crm.update_record": 0.9}], pinned=["media.thumbnail"], signature_chars=0)
    tools.before_request([user("update the record")])
    system = tools.system_prompt()
    assert "def thumbnail(" in system and "def update_record(" not in system
    assert "\n- crm.update_record — " in picked(system)


def test_tools_loaded_from_the_state_file_get_signatures_within_the_budget(project: Project, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text(
        json.dumps({"format": STATE_FORMAT, "version": STATE_VERSION, "admitted": ["docs.get_document"]}),
        encoding="utf-8",
    )
    prefilter = PreFilter(ScriptedFilter([{}]), catalog(project.tree), state=state)  # type: ignore[arg-type]
    tools = PrefilteredCodeToolset(project.tree, prefilter=prefilter)
    assert "def get_document(" in picked(tools.system_prompt())
