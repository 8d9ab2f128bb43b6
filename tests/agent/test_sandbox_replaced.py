"""A runtime whose sandbox ended on its own (its container killed: ``docker kill``, the whole gVisor sandbox past its
memory limit, an engine restart) starts a new one at the next use and says so once; before, every later
``execute_python`` of the run (of a ``tooltree serve`` client session: until the client restarted) failed with the
first one's error.

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
NEW = "[a new sandbox was started: the previous one ended ("


@pytest.fixture
def runtime(project: Project, docker_engine: EngineWithCLI, tmp_path: Path) -> Iterator[Runtime]:
    settings = SandboxConfig(owner=TEST_OWNER, timeout=60.0)
    with Runtime(project.config, project.tree, sandbox_config=settings, audit=tmp_path / "audit.jsonl") as rt:
        yield rt


def execute(toolset: CodeToolset, runtime: Runtime, code: str) -> tuple[bool, str]:
    outcome = toolset.call("execute_python", {"code": code}, runtime)
    return outcome.is_error, str(outcome.content[0]["text"])


def running(docker: EngineWithCLI, name: str) -> bool:
    return name in docker.text(["ps", "--all", "--format", "{{.Names}}"]).split()


def test_a_sandbox_killed_between_executions_is_replaced_at_the_next_one_which_says_so_once(
    project: Project, runtime: Runtime, docker_engine: EngineWithCLI
) -> None:
    toolset = CodeToolset(project.tree)
    assert execute(toolset, runtime, "kept = 41\nprint('set')") == (False, "set")
    old = runtime.sandbox.name
    docker_engine.text(["kill", old])
    wait_until(lambda: runtime.running_sandbox is None, "the session to see its container end", WAIT)
    assert runtime.sandbox_replacements == 0  # nothing is started until it is used (a cancel uses none)

    failed, text = execute(toolset, runtime, "print('kept' in dir())\nprint(6 * 7)")
    assert not failed
    note, output = text.split("\n\n", 1)
    assert note.startswith(NEW) and "status 137" in note and "variables, imports and workspace files are gone" in note
    assert output == "False\n42"
    assert runtime.sandbox.name != old and runtime.sandbox_replacements == 1
    assert not running(docker_engine, old)  # the ended one is removed, not left behind

    assert execute(toolset, runtime, "print('again')") == (False, "again")  # said once


def test_a_sandbox_killed_during_an_execution_says_the_next_one_is_new_and_it_is(
    project: Project, runtime: Runtime, docker_engine: EngineWithCLI, tmp_path: Path
) -> None:
    toolset = CodeToolset(project.tree)
    assert execute(toolset, runtime, "kept = 1") == (False, "(the script printed nothing)")
    old = runtime.sandbox.name
    audit = tmp_path / "audit.jsonl"

    def kill_once_the_script_called_its_tool() -> None:
        wait_until(lambda: audit.exists() and audit.read_text(encoding="utf-8").strip() != "", "the call", WAIT)
        docker_engine.text(["kill", old])

    killer = threading.Thread(target=kill_once_the_script_called_its_tool)
    killer.start()
    try:
        failed, text = execute(toolset, runtime, RUNNING_SCRIPT)
    finally:
        killer.join(WAIT)
    assert json.loads(audit.read_text(encoding="utf-8").splitlines()[0])["tool"] == "list_documents"
    assert failed and text.startswith("the sandbox session failed: ") and "status 137" in text
    assert text.endswith(NEXT_IS_NEW)

    failed, text = execute(toolset, runtime, "print('kept' in dir())")
    assert not failed and text.startswith(NEW) and text.endswith("\n\nFalse")
    assert runtime.sandbox_replacements == 1


def test_a_workspace_read_after_the_sandbox_ended_is_answered_by_the_new_one_with_the_note(
    project: Project, runtime: Runtime, docker_engine: EngineWithCLI
) -> None:
    toolset = CodeToolset(project.tree)
    execute(toolset, runtime, "open('made.txt', 'w').write('x')")
    docker_engine.text(["kill", runtime.sandbox.name])
    wait_until(lambda: runtime.running_sandbox is None, "the session to see its container end", WAIT)
    listing = toolset.call("list_files", {"path": "/workspace"}, runtime)
    text = str(listing.content[0]["text"])
    assert not listing.is_error and text.startswith(NEW) and "made.txt" not in text


RUNNING_SCRIPT = "from servers.docs import list_documents\ndocs = list_documents()\nimport time\ntime.sleep(600)\n"
