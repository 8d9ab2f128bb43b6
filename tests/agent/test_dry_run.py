"""A dry run (`tooltree agent --dry-run`, `Agent.first_request`) calls nothing and writes nothing, whatever the
pre-filter: the CLI as a subprocess against the fake Messages API, and the real ``anthropic`` SDK."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent import Agent
from agent.prefilter.options import PrefilterOptions
from agent.testing import FakeMessagesAPI
from tests.agent.conftest import Project
from tests.agent.prefilter_support import catalog

ROOT = Path(__file__).resolve().parents[2]
TASK = "render a chart image of the pipeline"


def tooltree(
    project: Project, *args: str, key: bool, api: FakeMessagesAPI | None = None
) -> subprocess.CompletedProcess:
    """``tooltree agent TASK --dry-run --json ARGS`` in a subprocess, its API key and base URL as given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    if key:
        env["ANTHROPIC_API_KEY"] = "sk-fake"
    if api is not None:
        env["ANTHROPIC_BASE_URL"] = api.base_url
    argv = ["agent", TASK, "--config", str(project.config_path), "--tree", str(project.tree), "--dry-run", "--json"]
    return subprocess.run(
        [sys.executable, "-m", "tooltree_cli.main", *argv, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


def test_a_dry_run_with_the_claude_prefilter_sends_nothing_and_writes_no_state(
    project: Project, tmp_path: Path
) -> None:
    # Before: one request to the classifier model, and the state file created with what it admitted.
    state = tmp_path / "profile.json"
    with FakeMessagesAPI() as api:
        done = tooltree(project, "--mode", "filtered", "--prefilter", "claude", "--prefilter-state", str(state),
                        key=True, api=api)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert api.requests == []
    assert not state.exists()
    (filtered,) = json.loads(done.stdout)["modes"]
    assert filtered["mode"] == "filtered" and filtered["tools"] == 1  # batch_tool only: not the whole catalog


def test_a_dry_run_with_the_claude_prefilter_and_no_key_does_not_claim_the_whole_catalog(project: Project) -> None:
    # Before: the classifier failed open for want of a key, silently, and the table showed every tool as "filtered".
    done = tooltree(project, "--mode", "filtered", "--prefilter", "claude", key=False)
    assert done.returncode == 0, done.stderr
    (filtered,) = json.loads(done.stdout)["modes"]
    assert filtered["tools"] < len(catalog(project.tree))
    assert filtered["note"].startswith("not decided in a dry run: the claude classifier would send a request")


def test_a_dry_run_with_the_local_prefilter_decides_but_writes_no_state(project: Project, tmp_path: Path) -> None:
    # Before: the state file was created with the dry run's decision (grow-only: the profile widened for good).
    state = tmp_path / "profile.json"
    state.write_text('{"format":"tooltree-prefilter-state","version":1,"admitted":["crm.get_record"]}\n')
    before = state.read_bytes()
    done = tooltree(project, "--mode", "filtered", "--prefilter-state", str(state), key=False)
    assert done.returncode == 0, done.stderr
    assert state.read_bytes() == before
    (filtered,) = json.loads(done.stdout)["modes"]
    assert 2 < filtered["tools"] < len(catalog(project.tree))  # the saved tool, and what the local filter chose


def test_first_request_says_when_the_prefilter_was_not_asked(project: Project, tmp_path: Path) -> None:
    state = tmp_path / "profile.json"
    with FakeMessagesAPI() as api:
        agent = Agent(project.config, tree=project.tree, mode="filtered", client=api.client(), prefilter="claude",
                      pinned=["crm.list_leads"], prefilter_options=PrefilterOptions(state=state))  # fmt: skip
        request = agent.first_request(TASK)
        assert api.requests == []
    assert [t["name"] for t in request["tools"]] == ["batch_tool", "crm__list_leads"]
    assert agent.first_request_note.startswith("not decided in a dry run: the claude classifier would send a request")
    assert not state.exists()
    local = Agent(project.config, tree=project.tree, mode="filtered", prefilter="local")
    assert len(local.first_request(TASK)["tools"]) > 1 and local.first_request_note == ""


def test_a_dry_run_given_a_transcript_says_it_writes_none(project: Project, tmp_path: Path) -> None:
    # Before: --transcript was taken, no file was written, and nothing said so.
    transcript = tmp_path / "run.jsonl"
    done = tooltree(project, "--transcript", str(transcript), key=False)
    assert done.returncode == 0, done.stderr
    assert f"tooltree: warning: --transcript {transcript}: a dry run writes no transcript\n" in done.stderr
    assert not transcript.exists() and json.loads(done.stdout)["modes"]


def test_a_setting_whose_variable_is_unset_is_needed_only_when_no_option_replaces_it(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: --model m (or Agent(model="m")) was refused all the same: "agent.model: environment variable ${MODEL}
    # is not set", for a setting the option replaces.
    from tool_tree.config import ConfigError, load_config

    monkeypatch.delenv("MODEL", raising=False)
    config_path = tmp_path / "tooltree.yaml"
    text = project.config_path.read_text(encoding="utf-8") + 'agent:\n  model: "${MODEL}"\n'
    config_path.write_text(text, encoding="utf-8")
    line = text.count("\n")
    other = Project(config_path, load_config(config_path), project.tree)
    assert Agent(other.config, tree=other.tree, model="m", mode="direct").model == "m"
    with pytest.raises(ConfigError, match=rf":{line}: agent.model: environment variable \$\{{MODEL\}} is not set$"):
        Agent(other.config, tree=other.tree, mode="direct")
    done = tooltree(other, "--model", "m", key=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["modes"]
    refused = tooltree(other, key=False)
    assert refused.returncode == 2
    assert (
        refused.stderr
        == f"tooltree: error: {config_path}:{line}: agent.model: environment variable ${{MODEL}} is not set\n"
    )


def test_a_dry_run_whose_first_request_offers_no_tool_says_none(project: Project) -> None:
    # Before: the request had "tools": [] (now no tools key), and before that change reached here: KeyError, exit 70.
    done = tooltree(project, "--mode", "filtered", "--no-batch", "--prefilter-threshold", "1", key=False)
    assert done.returncode == 0, done.stderr
    (filtered,) = json.loads(done.stdout)["modes"]
    assert (filtered["tools"], filtered["tools_tokens"]) == (0, 0)
