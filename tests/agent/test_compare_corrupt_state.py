"""`tooltree agent --compare` with a ``--prefilter-state`` file that cannot be read: the filtered mode's pre-filter
fails open and says so naming the user's file, in the table too (real CLI, fake API, direct and filtered modes: no
container). Before: the reason named the temporary copy each mode is given
(``/tmp/tooltree-compare-state-…/filtered.json: … fix or delete the file``), deleted at exit, and the table (without
``--json``) never said the pre-filter had failed open.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.testing import FakeMessagesAPI, reply
from tests.agent.conftest import Project
from tooltree_cli.main import main

CORRUPT = '{"format": "tooltree-prefilter-state", "version": 1, "admitted": ['


def compare(project: Project, state: Path, *extra: str) -> list[str]:
    base = ["agent", "Read the Northwind deal", "--config", str(project.config_path), "--tree", str(project.tree)]
    return [*base, "--compare", "direct,filtered", "--prefilter", "local", "--prefilter-state", str(state), *extra]


def test_the_table_says_the_prefilter_failed_open_naming_the_users_file(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    state = tmp_path / "admitted.json"
    state.write_text(CORRUPT, encoding="utf-8")
    api.add(reply("Negotiation (direct)."), reply("Negotiation (filtered)."))
    assert main(compare(project, state)) == 0
    out, err = capsys.readouterr()
    said = f"pre-filter failed open in filtered (every tool sent): corrupt_state: {state}: corrupt pre-filter state ("
    assert f"\n\n{said}" in out
    assert out.count("pre-filter failed open") == 1  # the direct mode has no pre-filter
    assert f"tooltree: pre-filter failed open (every tool sent): corrupt_state: {state}: corrupt " in err
    assert "tooltree-compare-state" not in out + err
    assert state.read_text(encoding="utf-8") == CORRUPT  # kept as it was


def test_the_json_names_the_users_file(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    state = tmp_path / "admitted.json"
    state.write_text(CORRUPT, encoding="utf-8")
    api.add(reply("A."), reply("B."))
    assert main(compare(project, state, "--json", "--quiet")) == 0
    direct, filtered = json.loads(capsys.readouterr().out)["runs"]
    assert direct["prefilter"] is None
    (reason,) = filtered["prefilter"]["fail_open"]
    assert reason.startswith(f"corrupt_state: {state}: corrupt pre-filter state (")
    assert reason.endswith("fix or delete the file; until then every tool is offered")
    assert len(api.requests[1]["tools"]) == len(api.requests[0]["tools"])  # every tool offered
    assert state.read_text(encoding="utf-8") == CORRUPT


def test_a_readable_state_file_is_still_copied_for_each_mode(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    state = tmp_path / "admitted.json"
    state.write_text(json.dumps({"format": "tooltree-prefilter-state", "version": 1, "admitted": []}), "utf-8")
    before = state.read_bytes()
    api.add(reply("A."), reply("B."))
    assert main(compare(project, state, "--quiet")) == 0
    assert "pre-filter failed open" not in capsys.readouterr().out
    assert state.read_bytes() == before
