"""``execute_python`` whose sandbox ended under the script (its container killed: ``docker kill``, the whole gVisor
sandbox past its memory limit) says which tool calls the script had made, as a finished script's result does: their
side effects happened; and what it had printed. Before: only "the sandbox session failed: …", so the model could not
tell and made them again (``tooltree serve``'s ``execute_python`` gives the same outcome).

Real parts: the sample servers, a real sandbox container, the container killed through the engine.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.toolsets.code import NEXT_IS_NEW, CodeToolset
from sandbox import SandboxConfig
from sandbox.host import Runtime
from tests.agent.conftest import Project
from tests.docker_cli import EngineWithCLI
from tests.support import TEST_OWNER, wait_until

pytestmark = pytest.mark.docker

WAIT = 60.0
SCRIPT = (
    "from servers.docs import list_documents\n"
    "print('listing the documents twice')\n"
    "first = list_documents()\n"
    "second = list_documents()\n"
    "import threading\n"
    "threading.Event().wait()  # until its container is killed\n"
)


@pytest.fixture
def runtime(project: Project, docker_engine: EngineWithCLI, tmp_path: Path) -> Iterator[Runtime]:
    settings = SandboxConfig(owner=TEST_OWNER, timeout=60.0)
    with Runtime(project.config, project.tree, sandbox_config=settings, audit=tmp_path / "audit.jsonl") as rt:
        yield rt


def test_a_sandbox_killed_during_a_script_reports_the_calls_the_script_made(
    project: Project, runtime: Runtime, docker_engine: EngineWithCLI, tmp_path: Path
) -> None:
    toolset = CodeToolset(project.tree)
    name = runtime.sandbox.name
    audit = tmp_path / "audit.jsonl"

    def calls() -> list[dict[str, object]]:
        lines = audit.read_text(encoding="utf-8").splitlines() if audit.exists() else []
        return [json.loads(line) for line in lines if line.strip()]

    def kill_once_the_script_made_both_calls() -> None:
        # The second call is sent only once the first was answered: the first is in the ledger by then.
        wait_until(lambda: len(calls()) >= 2, "the script's two calls", WAIT)
        docker_engine.text(["kill", name])

    killer = threading.Thread(target=kill_once_the_script_made_both_calls)
    killer.start()
    try:
        outcome = toolset.call("execute_python", {"code": SCRIPT}, runtime)
    finally:
        killer.join(WAIT)
    assert [c["tool"] for c in calls()] == ["list_documents", "list_documents"]
    error, printed, ledger = (str(block["text"]) for block in outcome.content)
    assert outcome.is_error and error.startswith("the sandbox session failed: ") and "status 137" in error
    assert error.endswith(NEXT_IS_NEW)
    # What it printed came before its first call (the sandbox sends output as it comes): before, lost with it.
    assert printed == (
        "[what the script printed before the sandbox ended; its last moment may be missing]\n\n"
        "listing the documents twice"
    )
    assert ledger.startswith("tool calls from the script: 2, ")
    assert ledger.splitlines()[1].startswith("  docs.list_documents ok (")
    assert [(c.server, c.tool) for c in outcome.script_calls] == [("docs", "list_documents")] * 2
    assert outcome.script_calls[0].ok and outcome.script_calls[0].response_bytes > 0
