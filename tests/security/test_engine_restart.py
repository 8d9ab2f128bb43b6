"""The engine restarted between two executions: a clear error for the old session, a working new one, and a runtime
that replaces its sandbox by itself.

Restarting the engine stops every container on it, so this test runs only where a command to do
that is given (``TOOLTREE_ENGINE_RESTART``; CI runs it last, on its own, with .ci/restart-dockerd.sh),
and carries the ``engine_restart`` marker that the normal test run leaves out.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from agent.toolsets.code import CodeToolset
from sandbox import DockerBackend, Sandbox, SandboxConfig, SessionError
from sandbox.errors import EngineUnavailableError
from sandbox.host import Runtime
from tests.docker_cli import EngineWithCLI
from tests.sandbox.conftest import write_sample_tree
from tests.support import TEST_OWNER
from tool_tree.config import Config

pytestmark = [pytest.mark.docker, pytest.mark.engine_restart]


def test_a_session_whose_engine_restarted_fails_clearly_and_a_new_one_works(
    docker_engine: EngineWithCLI, test_config: SandboxConfig, tmp_path: Path
) -> None:
    command = os.environ.get("TOOLTREE_ENGINE_RESTART")
    if not command:
        pytest.skip("set TOOLTREE_ENGINE_RESTART to a command that restarts the engine")
    backend = DockerBackend(test_config, docker=docker_engine)
    old = Sandbox(backend).start()
    toolset = CodeToolset(write_sample_tree(tmp_path / "tree"))
    runtime = Runtime(Config(servers=()), toolset.tree, sandbox_config=test_config).open()
    try:
        assert old.execute("kept = 41").ok
        assert not toolset.call("execute_python", {"code": "kept = 41"}, runtime).is_error
        subprocess.run(command, shell=True, check=True, timeout=180)
        deadline = time.monotonic() + 60
        while True:  # bounded wait until the engine answers again
            try:
                docker_engine.ping()
                break
            except EngineUnavailableError:
                assert time.monotonic() < deadline, "the engine did not come back"
                time.sleep(0.5)
        with pytest.raises(SessionError):
            old.execute("print(kept + 1)")
        # A runtime (an agent run, a `tooltree serve` client session) goes on in a new sandbox, and says so.
        replaced = toolset.call("execute_python", {"code": "print('kept' in dir())"}, runtime)
        text = str(replaced.content[0]["text"])
        assert not replaced.is_error and text.startswith("[a new sandbox was started: the previous one ended (")
        assert text.endswith("\n\nFalse") and runtime.sandbox_replacements == 1
    finally:
        old.close()
        runtime.close()
    with Sandbox(DockerBackend(test_config, docker=docker_engine)) as new:
        assert new.execute("print(6 * 7)").stdout == "42\n"
    left = docker_engine.text(["ps", "--all", "--quiet", "--filter", f"label=tooltree.owner={TEST_OWNER}"])
    assert left.split() == []
