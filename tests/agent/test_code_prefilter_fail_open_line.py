"""`tooltree agent --mode code --prefilter`: a pre-filter that fails open says what code mode does then (real CLI, fake
API, real sandbox)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.testing import FakeMessagesAPI, reply
from tests.agent.conftest import Project
from tests.support import TEST_OWNER
from tooltree_cli.main import main


@pytest.mark.docker
def test_a_failed_open_prefilter_in_code_mode_is_not_said_to_send_every_tool(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, docker_engine: object,
) -> None:  # fmt: skip
    # Before: "pre-filter failed open (every tool sent)", though code mode then inlines no signature at all (the first
    # request's prompt is plain code mode's; every tool stays in the tree, a stub read away).
    monkeypatch.setenv("TOOLTREE_SANDBOX_OWNER", TEST_OWNER)
    state = tmp_path / "state.json"
    state.write_text('{"format": "tooltree-prefilter-state", "version": 1, "admitted": [', encoding="utf-8")
    api.add(reply("Done."))
    args = ["agent", "Read the Northwind deal", "--config", str(project.config_path), "--tree", str(project.tree),
            "--mode", "code", "--prefilter", "local", "--prefilter-state", str(state)]  # fmt: skip
    assert main(args) == 0
    err = capsys.readouterr().err
    assert (
        f"\ntooltree: pre-filter failed open (no signatures inlined, every tool in the tree): corrupt_state: {state}"
        in err
    )
    assert "every tool sent" not in err
    assert "Tools picked for this task" not in str(api.requests[0]["system"])
    assert state.read_text(encoding="utf-8").endswith('"admitted": [')  # kept as it was
