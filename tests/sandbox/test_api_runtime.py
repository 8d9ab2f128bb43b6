"""`sandbox.host.Runtime` misused as the Python API allows: closed, or given the wrong arguments."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sandbox.errors import SandboxError
from sandbox.host import Runtime
from tests.support import raw_server_tree
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
