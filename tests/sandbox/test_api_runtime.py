"""`sandbox.host.Runtime` misused as the Python API allows: closed, or given the wrong arguments."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from sandbox.errors import SandboxError
from sandbox.host import Runtime
from tests.support import in_a_fork, raw_server_tree
from tool_tree.config import Config, load_config


def pool_threads() -> int:
    return sum(t.name == "tooltree-server-pool" for t in threading.enumerate())


def test_a_closed_runtime_refuses_calls_rather_than_opening_again_unclosed(tmp_path: Path) -> None:
    # Before: call_tool (or .bridge) after close() opened a new server pool that nothing closed.
    tree, _ = raw_server_tree(tmp_path, [{"name": "echo", "inputSchema": {"type": "object"}}])
    before = pool_threads()
    runtime = Runtime(load_config(tmp_path / "tooltree.yaml"), tree)
    with runtime:
        assert runtime.call_tool("raw", "echo", {})["content"] and pool_threads() == before + 1
    assert pool_threads() == before
    with pytest.raises(SandboxError, match="the runtime is closed"):
        runtime.call_tool("raw", "echo", {})
    with pytest.raises(SandboxError, match="the runtime is closed"):
        _ = runtime.bridge
    with pytest.raises(
        SandboxError, match=r"the runtime is closed: open\(\) it again .* to call its tools or run scripts"
    ):
        _ = runtime.sandbox  # no container started, and said what to do as the others say it
    assert pool_threads() == before
    with runtime.open():  # opened again on purpose: it runs
        assert runtime.bridge is not None
    runtime.close()
    assert pool_threads() == before


@pytest.mark.parametrize("config", [None, "tooltree.yaml", {"servers": {}}])
def test_a_runtime_given_something_other_than_a_config_is_a_type_error(config: object, tmp_path: Path) -> None:
    # Before: an AttributeError on enter.
    with pytest.raises(TypeError, match="config: expected a Config"):
        Runtime(config, tmp_path)  # type: ignore[arg-type]


def test_an_empty_workspace_path_is_refused_not_taken_as_the_working_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="workspace is an empty path"):
        Runtime(Config(servers=()), tmp_path, workspace="")


def test_an_empty_audit_path_is_refused_when_the_runtime_is_made(tmp_path: Path) -> None:
    # Before: taken as the working folder, refused only when the runtime opened ("audit log .: a folder").
    with pytest.raises(ValueError, match=r"^audit is an empty path; name a file or pass None$"):
        Runtime(Config(servers=()), tmp_path, audit="")


def test_a_forked_child_is_told_to_make_its_own_runtime_not_that_the_runtime_is_closed(tmp_path: Path) -> None:
    # Before: "the runtime is closed: open() it again", and open() returned at once (the parent's pool was set), so
    # nothing the child did helped; `bridge` handed the child the parent's bridge, bound to a loop it has no thread of.
    tree, _ = raw_server_tree(tmp_path, [{"name": "echo", "inputSchema": {"type": "object"}}])
    with Runtime(load_config(tmp_path / "tooltree.yaml"), tree) as runtime:
        assert runtime.call_tool("raw", "echo", {})["content"]

        def child() -> str:
            said = []
            for use in (lambda: runtime.call_tool("raw", "echo", {}), runtime.open, lambda: runtime.bridge):
                try:
                    use()
                    said.append("taken")
                except SandboxError as e:
                    said.append(str(e))
            try:
                _ = runtime.sandbox
            except SandboxError as e:
                said.append(str(e))
            return "\n".join(said)

        said = in_a_fork(child).splitlines()
        assert runtime.call_tool("raw", "echo", {})["content"]  # the parent's runtime is left working
    fork = (
        f"this Runtime was opened in process {os.getpid()}, not in this one (a fork of it has no copy of its server "
        "pool's thread): make a new Runtime(config, tree) in the forked process"
    )
    assert said == [fork] * 4


def test_a_call_on_the_server_pools_own_thread_is_refused_rather_than_waiting_for_itself(tmp_path: Path) -> None:
    # Before: the call was handed to the loop whose thread then waited for it: it never ran, and no other call of the
    # pool did either (an on_tools_changed listener calling a tool hung the runtime).
    tree, _ = raw_server_tree(tmp_path, [{"name": "echo", "inputSchema": {"type": "object"}}])
    with Runtime(load_config(tmp_path / "tooltree.yaml"), tree) as runtime:
        assert runtime.call_tool("raw", "echo", {})["content"]
        loop = runtime._running_loop()  # the loop an on_tools_changed listener runs on

        async def on_the_pools_loop() -> str:
            try:
                runtime.call_tool("raw", "echo", {})
            except SandboxError as e:
                return str(e)
            return "called"

        said = asyncio.run_coroutine_threadsafe(on_the_pools_loop(), loop).result(timeout=30)
        assert "called on its server pool's own thread" in said and "asyncio.to_thread(runtime.call_tool" in said

        async def from_a_worker_thread() -> dict[str, Any]:
            return await asyncio.to_thread(runtime.call_tool, "raw", "echo", {})

        assert asyncio.run_coroutine_threadsafe(from_a_worker_thread(), loop).result(timeout=30)["content"]
        assert runtime.call_tool("raw", "echo", {})["content"]  # the pool goes on serving
