"""In real containers: Ctrl-C while the engine creates a container leaves none behind; a refused
``timeout`` leaves the session as it was; a call after the tool loop closed is refused and ledgered."""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable
from typing import Any

import pytest

from sandbox import DockerBackend, Sandbox
from sandbox.bridge import LOOP_CLOSED
from sandbox.docker_backend import run_with_input
from sandbox.errors import EngineError
from sandbox.hardening import OWNER_LABEL
from tests.docker_cli import EngineWithCLI
from tests.sandbox.test_calls import AsyncTools
from tests.support import TEST_OWNER

pytestmark = pytest.mark.docker


def containers_named(docker_engine: EngineWithCLI, name: str) -> str:
    """What ``docker ps --all`` lists of the container of that name (all its states), as the user would see it."""
    return docker_engine.text(["ps", "--all", "--filter", f"name={name}", "--format", "{{.Names}} {{.Status}}"])


def create_then_ctrl_c(engine: EngineWithCLI, names: list[str]) -> Callable[..., Any]:
    """docker-py's create, which makes the container, notes its name in ``names``, then is interrupted
    before its reply reaches tooltree (as a Ctrl-C at that moment would)."""
    create = engine.api.create_container

    def interrupted(**spec: Any) -> Any:
        create(**spec)
        names.append(spec["name"])
        raise KeyboardInterrupt

    return interrupted


@pytest.mark.parametrize("where", ["before_the_reply", "after_the_reply"])
def test_ctrl_c_just_after_the_engine_created_the_container_leaves_none_behind(
    docker_engine: EngineWithCLI, backend: DockerBackend, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """``before_the_reply``: the engine made it but its id never reached tooltree (removed by name);
    ``after_the_reply``: the id came back, and the interrupt lands before the create's caller gets it."""
    names: list[str] = []
    if where == "before_the_reply":
        monkeypatch.setattr(docker_engine.api, "create_container", create_then_ctrl_c(docker_engine, names))
    else:
        engine_create = docker_engine.create_container

        def engine_create_then_ctrl_c(spec: Any) -> str:
            engine_create(spec)
            names.append(spec["name"])
            raise KeyboardInterrupt

        monkeypatch.setattr(docker_engine, "create_container", engine_create_then_ctrl_c)
    try:
        with pytest.raises(KeyboardInterrupt), Sandbox(backend):
            pytest.fail("the sandbox started")
        assert len(names) == 1 and names[0].startswith("tooltree-")
        assert containers_named(docker_engine, names[0]) == ""  # was "tooltree-… Created"
    finally:
        for name in names:
            with contextlib.suppress(EngineError):
                docker_engine.remove_container(name)


def test_ctrl_c_while_a_throwaway_container_is_created_leaves_none_behind(
    docker_engine: EngineWithCLI, backend: DockerBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As when a tree volume is filled: the container gets a name, so it can be removed without its id.
    names: list[str] = []
    monkeypatch.setattr(docker_engine.api, "create_container", create_then_ctrl_c(docker_engine, names))
    spec = {"image": backend.image, "command": ["true"], "labels": {OWNER_LABEL: TEST_OWNER}}
    try:
        with pytest.raises(KeyboardInterrupt):
            run_with_input(docker_engine, spec, b"", timeout=30)
        assert len(names) == 1 and names[0].startswith("tooltree-run-")
        assert containers_named(docker_engine, names[0]) == ""
    finally:
        for name in names:
            with contextlib.suppress(EngineError):
                docker_engine.remove_container(name)


def test_a_refused_timeout_leaves_the_sessions_state_and_the_next_execution_runs(backend: DockerBackend) -> None:
    with Sandbox(backend) as sb:
        assert sb.execute("keep = 'important state'").error is None
        # Before: 0 and -1 "timed out" at once and lost the state; nan and inf failed to encode; 1e10 and
        # 10**12 raised OverflowError, after which the session said an execution was already running.
        for timeout in (0, -1, math.nan, math.inf, 1e10, 10**12):
            with pytest.raises(ValueError, match=r"^timeout must be more than 0 and at most 604800 seconds"):
                sb.execute("print('ran')", timeout=timeout)
        with pytest.raises(TypeError, match=r"^timeout must be a number of seconds"):
            sb.execute("print('ran')", timeout="5")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"^code must be a str"):
            sb.execute(None)  # type: ignore[arg-type]
        result = sb.execute("print(keep)", timeout=5)
        assert (result.stdout, result.error, result.state_reset) == ("important state\n", None, False)


def test_a_call_after_the_tool_loop_closed_is_refused_saying_so_and_ledgered(backend: DockerBackend) -> None:
    loop = asyncio.new_event_loop()
    loop.close()  # as a BackgroundPool's loop is once its `with` block is left
    code = (
        "from tool_tree.runtime import ToolCallError, call_tool\n"
        "try:\n    call_tool('crm', 'list_leads', {})\nexcept ToolCallError as e:\n    print(e)\n"
    )
    with Sandbox(backend, tools=AsyncTools(), tool_loop=loop) as sb:
        result = sb.execute(code)
    assert result.error is None
    assert "event loop is closed" in result.stdout and "session is closing" not in result.stdout
    assert [(r.server, r.tool, r.ok, r.error) for r in result.tool_calls] == [("crm", "list_leads", False, LOOP_CLOSED)]
