"""A started `SandboxPool` dropped without being closed warns (`ResourceWarning`) when it is garbage-collected, and its
warm containers are destroyed then; a `Runtime` dropped open warns once, naming the `Runtime` (not its inner pool and
session), and its sandbox and servers are stopped then. One closed (or never started) warns of nothing.

Before: a dropped pool was never collected (its filling thread held it) and its containers ran until the process
exited, said nowhere; a dropped runtime warned of an unclosed ``BackgroundPool`` and an unclosed ``Sandbox``, objects
its user never made.
"""

from __future__ import annotations

import gc
import threading
import warnings
from pathlib import Path

import pytest

from sandbox import SandboxConfig, SandboxPool
from sandbox.host import Runtime
from tests.docker_cli import EngineWithCLI
from tests.support import in_a_fork, raw_server_tree, wait_until
from tests.tool_tree.test_unclosed_warnings import dropped, unclosed_warnings
from tool_tree.config import load_config

pytestmark = pytest.mark.docker

TOOLS = [{"name": "echo", "inputSchema": {"type": "object"}}]


def server_pool_threads() -> int:
    return sum(t.name == "tooltree-server-pool" for t in threading.enumerate())


def test_a_started_pool_dropped_unclosed_warns_and_its_containers_are_destroyed(
    docker_engine: EngineWithCLI, owner: str
) -> None:
    threads: list[threading.Thread] = []

    def started() -> SandboxPool:
        pool = SandboxPool(config=SandboxConfig(owner=owner), size=2).start()
        pool.wait_ready()
        assert len(docker_engine.owned(owner)) == 2
        assert pool._thread is not None
        threads.append(pool._thread)
        return pool

    with unclosed_warnings() as said:
        gone = dropped(started)
    assert gone() is None, "the dropped pool was not collected"
    assert said == [
        "unclosed SandboxPool (size 2, 2 warm) dropped while started: its warm containers are destroyed now; use it "
        "as `with SandboxPool(...) as pool:`, or call pool.close()"
    ]
    wait_until(lambda: docker_engine.owned(owner) == [], "the dropped pool's containers to go", timeout=30)
    threads[0].join(30)
    assert not threads[0].is_alive(), "the dropped pool's filling thread still ran"


@pytest.mark.parametrize("how", ["with", "close", "never started"])
def test_a_closed_or_never_started_pool_warns_of_nothing(docker_engine: EngineWithCLI, owner: str, how: str) -> None:
    def made() -> SandboxPool:
        pool = SandboxPool(config=SandboxConfig(owner=owner), size=1)
        if how == "with":
            with pool:
                pool.wait_ready()
        elif how == "close":
            pool.start().wait_ready()
            pool.close()
            pool.close()  # a second close is a no-op
        return pool

    with unclosed_warnings() as said:
        assert dropped(made)() is None
    assert said == []
    assert docker_engine.owned(owner) == []


def test_a_started_pool_dropped_in_a_forked_child_warns_of_nothing_and_leaves_the_parents_containers(
    docker_engine: EngineWithCLI, owner: str
) -> None:
    with SandboxPool(config=SandboxConfig(owner=owner), size=1) as pool:
        pool.wait_ready()
        held = [pool]
        del pool

        def child() -> str:
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                held.clear()
                gc.collect()
            return repr([str(w.message) for w in seen if issubclass(w.category, ResourceWarning)])

        assert in_a_fork(child) == "[]"
        assert len(docker_engine.owned(owner)) == 1
        with held[0].acquire() as sandbox:  # the parent's warm container is whole
            assert sandbox.execute("print(6 * 7)").stdout == "42\n"


@pytest.mark.parametrize("sandbox", [True, False], ids=["with its sandbox", "servers only"])
def test_a_runtime_dropped_open_warns_once_naming_the_runtime(
    docker_engine: EngineWithCLI, owner: str, tmp_path: Path, sandbox: bool
) -> None:
    tree, _ = raw_server_tree(tmp_path, TOOLS)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    before = server_pool_threads()
    names: list[str] = []

    def opened() -> Runtime:
        config = load_config(tmp_path / "tooltree.yaml")
        runtime = Runtime(config, tree, sandbox_config=SandboxConfig(owner=owner), workspace=workspace).open()
        assert runtime.call_tool("raw", "echo", {})["content"]
        if sandbox:
            assert runtime.sandbox.execute("print(6 * 7)").stdout == "42\n"
            names.append(runtime.sandbox.name)
        return runtime

    with unclosed_warnings() as said:
        gone = dropped(opened)
    assert gone() is None, "the dropped runtime was not collected"
    stopped = "its servers are stopped now"
    if sandbox:
        stopped += f" and its sandbox's container {names[0]} destroyed, without saving its workspace {workspace}"
    assert said == [
        f"unclosed Runtime (tree {tree}) dropped while open: {stopped}; use it as `with Runtime(config, tree) as rt:`, "
        "or call rt.close()"
    ]
    wait_until(lambda: docker_engine.owned(owner) == [], "the dropped runtime's container to go", timeout=30)
    wait_until(lambda: server_pool_threads() == before, "the dropped runtime's servers to stop", timeout=30)


@pytest.mark.parametrize("how", ["with", "close", "never opened"])
def test_a_closed_or_never_opened_runtime_warns_of_nothing(
    docker_engine: EngineWithCLI, owner: str, tmp_path: Path, how: str
) -> None:
    tree, _ = raw_server_tree(tmp_path, TOOLS)

    def made() -> Runtime:
        runtime = Runtime(load_config(tmp_path / "tooltree.yaml"), tree, sandbox_config=SandboxConfig(owner=owner))
        if how == "with":
            with runtime:
                assert runtime.sandbox.execute("print(1)").stdout == "1\n"
        elif how == "close":
            runtime.open()
            assert runtime.sandbox.execute("print(1)").stdout == "1\n"
            runtime.close()
        return runtime

    with unclosed_warnings() as said:
        assert dropped(made)() is None
    assert said == []
    assert docker_engine.owned(owner) == []
