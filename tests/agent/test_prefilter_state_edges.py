"""The pre-filter's state file at its edges: read-only, a dangling link, unreadable at a save, pinned tools, a path
under ``~``. Real files and folders; runs with the real SDK (and the real CLI) against the fake API and the real sample
servers."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from agent import Agent
from agent.prefilter import CatalogTool, FilterError, PreFilter, Verdicts
from agent.prefilter.options import PrefilterOptions
from agent.prefilter.state import update_state
from agent.testing import FakeMessagesAPI, reply, tool_use
from sandbox.host import Runtime
from tests.agent.conftest import Project
from tests.agent.prefilter_support import ScriptedFilter, catalog, user
from tooltree_cli.main import main

STATE = '{"format":"tooltree-prefilter-state","version":1,"admitted":["crm.get_record"]}\n'


def test_a_read_only_state_file_is_not_replaced_and_the_step_says_so(project: Project, tmp_path: Path) -> None:
    # Before: replaced through a temporary file and a rename (the folder is writable), its content changed.
    state = tmp_path / "profile.json"
    state.write_text(STATE, encoding="utf-8")
    state.chmod(0o444)
    prefilter = PreFilter(ScriptedFilter([{"crm.list_leads": 0.9}]), catalog(project.tree), state=state)
    prefilter.start()
    step = prefilter.decide([user("how many leads?")])
    assert "crm.list_leads" in step.added and "crm.list_leads" in prefilter.admitted  # the run goes on narrowed
    assert step.state_error == (
        f"{state}: not saved: the file is read-only (mode 0444) and was kept as it is; this run goes on with the tools "
        "it offers (make the file writable to keep saving)"
    )
    assert state.read_text(encoding="utf-8") == STATE and step.saved == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile.json"]  # no temporary file left


def test_no_folder_is_made_through_a_dangling_link(tmp_path: Path) -> None:
    # Before: the link target's folders were made (mkdir parents=True on the resolved path), wherever it pointed.
    link = tmp_path / "profile.json"
    link.symlink_to(tmp_path / "elsewhere" / "deeper" / "s.json")
    with pytest.raises(FilterError, match=r"it is a link to .*whose folder does not exist") as caught:
        update_state(link, ["crm.get_record"])
    assert "create that folder or point the link at an existing one" in str(caught.value)
    assert not (tmp_path / "elsewhere").exists() and link.is_symlink()
    (tmp_path / "elsewhere" / "deeper").mkdir(parents=True)  # once it exists, the save goes through the link
    assert update_state(link, ["crm.get_record"]).keys() == ["crm.get_record"]
    assert json.loads((tmp_path / "elsewhere" / "deeper" / "s.json").read_text())["admitted"] == ["crm.get_record"]
    fresh = tmp_path / "profiles" / "work" / "s.json"  # not a link: a new profile's folders are made
    assert update_state(fresh, ["crm.get_record"]).keys() == ["crm.get_record"] and fresh.is_file()


class CorruptsOnSecondAsk:
    """Admits a tool at each question; before the second one, something else writes garbage into the state file."""

    name, default_threshold, offline = "corrupts", 0.5, True

    def __init__(self, state: Path) -> None:
        self.state = state
        self.asked = 0

    def classify(self, text: str, tools: Sequence[CatalogTool]) -> Verdicts:
        self.asked += 1
        if self.asked == 2:
            self.state.write_text("{garbage", encoding="utf-8")
        return Verdicts({["crm.get_record", "media.render_chart", "docs.get_document"][self.asked - 1]: 0.9})


def test_a_state_file_unreadable_at_a_save_says_what_is_true(project: Project, live: Runtime, tmp_path: Path) -> None:
    # Before: "fix or delete the file; until then every tool is offered" (the load's advice; the run stayed narrowed)
    # and "the state file holds 1 tool(s)", the count of a file that no longer held anything readable; and it was said
    # again at each later save.
    state = tmp_path / "profile.json"
    get = tool_use("crm__get_record", {"object_type": "opportunity", "record_id": "x"})
    script = [reply("Reading.", get), reply("Now a chart image of it.", get), reply("Done.")]
    with FakeMessagesAPI(script) as api:
        agent = Agent(project.config, tree=project.tree, mode="filtered", client=api.client(max_retries=0),
                      runtime=live, prefilter=CorruptsOnSecondAsk(state),  # type: ignore[arg-type]
                      prefilter_options=PrefilterOptions(state=state))  # fmt: skip
        result = agent.run("What stage is the opportunity in?")
    p = result.summary.prefilter
    assert p is not None and p.asked == 3 and len(p.state_errors) == 1 and not p.fail_open
    error = p.state_errors[0]
    assert error.startswith(f"{state}: corrupt pre-filter state (")
    assert error.endswith(
        "; not saved over: this run goes on with the tools it offers, and the next run offers every tool until the "
        "file is fixed or deleted"
    )
    assert "until then every tool is offered" not in error
    assert p.saved is None and p.admitted < p.catalog
    assert state.read_text(encoding="utf-8") == "{garbage"


def test_pinned_tools_are_not_saved_as_admitted(project: Project, live: Runtime, tmp_path: Path) -> None:
    # Before: saved with the decided ones, so they stayed offered in every later conversation once unpinned.
    state = tmp_path / "profile.json"
    options = PrefilterOptions(state=state)
    with FakeMessagesAPI([reply("Read.")]) as api:
        agent = Agent(project.config, tree=project.tree, mode="filtered", client=api.client(max_retries=0),
                      runtime=live, prefilter=ScriptedFilter([{"docs.get_document": 0.9}]),  # type: ignore[arg-type]
                      pinned=["crm.list_leads"], prefilter_options=options)  # fmt: skip
        agent.run("Read the onboarding document")
    assert "crm__list_leads" in [t["name"] for t in api.requests[0]["tools"]]  # offered, as pinned
    saved = json.loads(state.read_text(encoding="utf-8"))["admitted"]
    assert "docs.get_document" in saved and "crm.list_leads" not in saved
    unpinned = Agent(project.config, tree=project.tree, mode="filtered", prefilter=ScriptedFilter([{}]),  # type: ignore[arg-type]
                     prefilter_options=options)  # fmt: skip
    assert "crm__list_leads" not in [t["name"] for t in unpinned.first_request("Read it again")["tools"]]


def test_a_pinned_tool_a_decision_admits_too_is_saved(project: Project, tmp_path: Path) -> None:
    state = tmp_path / "profile.json"
    prefilter = PreFilter(ScriptedFilter([{"crm.list_leads": 0.9}]), catalog(project.tree), state=state)
    prefilter.start()
    prefilter.pin(["crm.list_leads", "media.thumbnail"])
    prefilter.decide([user("how many leads?")])
    assert json.loads(state.read_text(encoding="utf-8"))["admitted"] == ["crm.list_leads"]


@pytest.mark.parametrize("where", ["config", "option"])
def test_a_state_path_under_tilde_is_in_the_home_folder(
    project: Project, api: FakeMessagesAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    # Before: `prefilter_state: ~/...` in tooltree.yaml, or `--prefilter-state=~/...` (which the shell leaves as
    # written), made a folder named `~` beside the config or in the working folder.
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    config = tmp_path / "tooltree.yaml"
    agent = "agent:\n  prefilter_state: ~/.tooltree/work.json\n" if where == "config" else ""
    config.write_text(project.config_path.read_text(encoding="utf-8") + agent, encoding="utf-8")
    option = ["--prefilter-state=~/.tooltree/work.json"] if where == "option" else []
    verdicts = {"verdicts": [{"tool": "crm__get_record", "needed": True, "probability": 0.9}]}
    api.add(reply(tool_use("record_tool_verdicts", verdicts)), reply("Negotiation."))
    args = ["agent", "Read the Northwind deal", "--config", str(config), "--tree", str(project.tree)]
    assert main([*args, "--mode", "filtered", "--prefilter", "claude", *option, "--quiet"]) == 0
    saved = json.loads((home / ".tooltree" / "work.json").read_text(encoding="utf-8"))
    assert "crm.get_record" in saved["admitted"]
    assert not (tmp_path / "~").exists() and not (work / "~").exists()


def test_an_immutable_state_file_is_said_to_be_so_not_read_only(tmp_path: Path) -> None:
    # Before: "the file is read-only (mode 0644)", of a file whose mode lets it be written.
    state = tmp_path / "profile.json"
    state.write_text(STATE, encoding="utf-8")
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(state)], capture_output=True).returncode:
        pytest.skip("chattr +i needs root and a file system that has the attribute")
    try:
        with pytest.raises(FilterError) as caught:
            update_state(state, ["crm.list_leads"])
        assert str(caught.value) == (
            f"{state}: not saved: the file may not be changed (an attribute forbids it: immutable or append-only, see "
            "lsattr) and was kept as it is; this run goes on with the tools it offers (make the file writable to keep "
            "saving)"
        )
    finally:
        subprocess.run(["chattr", "-i", str(state)], check=True)
    assert state.read_text(encoding="utf-8") == STATE
