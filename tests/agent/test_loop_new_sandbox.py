"""A conversation over several runs of an agent given no runtime: each run makes its own sandbox, and the model is
told so. The real SDK against the fake API, real sandboxes, the real sample servers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent import Agent
from agent.conversation import NEW_SANDBOX, NEW_SANDBOX_WITH_WORKSPACE
from agent.testing import FakeMessagesAPI, reply, tool_use
from sandbox import SandboxConfig
from tests.agent.conftest import Project
from tests.agent.test_loop import tool_results
from tests.support import TEST_OWNER

SAVE = "x = 41\nopen('/workspace/kept.txt', 'w').write('kept')\nprint('saved')"
SHOW = "import os\nprint(os.path.exists('/workspace/kept.txt'))\nprint(x + 1)"


def texts(request: dict[str, Any]) -> list[str]:
    return ["".join(b["text"] for b in r["content"] if b["type"] == "text") for r in tool_results(request)]


@pytest.mark.docker
@pytest.mark.parametrize("workspace", [False, True])
def test_a_run_going_on_from_history_in_a_new_sandbox_says_so_before_its_first_script_result(
    project: Project, docker_engine: object, tmp_path: Path, workspace: bool
) -> None:
    # Before: the next run's script met a NameError and nothing told the model its variables and files were gone.
    folder = tmp_path / "ws" if workspace else None
    script = [
        reply(tool_use("execute_python", {"code": SAVE})),
        reply("Saved x."),
        reply(tool_use("execute_python", {"code": SHOW})),
        reply(tool_use("execute_python", {"code": "print('again')"})),
        reply("x is gone."),
    ]
    with FakeMessagesAPI(script) as api:
        settings = SandboxConfig(owner=TEST_OWNER, timeout=20.0)
        agent = Agent(project.config, tree=project.tree, mode="code", client=api.client(), sandbox_config=settings,
                      workspace=folder)  # fmt: skip
        first = agent.run("Keep x = 41")
        second = agent.run("Print x + 1", history=first.messages)
    assert first.completed and second.completed
    assert texts(api.requests[1]) == ["saved"]  # the first run's script: no note
    (shown,) = texts(api.requests[3])
    note = NEW_SANDBOX_WITH_WORKSPACE if workspace else NEW_SANDBOX
    assert shown.startswith(f"[{note}]\n\n{workspace}") and "NameError" in shown
    assert texts(api.requests[4]) == ["again"]  # said once
