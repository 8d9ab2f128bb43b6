"""`McpBridge`'s arguments, as a developer gets them wrong: each refused by name when the bridge is made.

Before, ``McpBridge("tree", servers)`` (the `BackgroundPool` where the README passes ``servers.pool``) or an audit
given as a path was taken, and every call of the scripts of a sandbox on that bridge then failed as "the tool call
failed on the host", with an AttributeError's traceback in the log.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest

from sandbox import Sandbox
from sandbox.mcp_bridge import AuditLog, Budgets, McpBridge
from tests.sandbox.conftest import write_sample_tree
from tool_tree.config import parse_config
from tool_tree.pool import BackgroundPool, ServerPool
from tool_tree.tree import Manifest


def test_a_background_pool_given_as_the_pool_is_a_type_error_saying_to_pass_its_pool(tmp_path: Path) -> None:
    servers = BackgroundPool([])  # never entered: nothing starts
    with pytest.raises(TypeError, match=r"^pool: expected a ServerPool \(a BackgroundPool's is its \.pool: "):
        McpBridge(write_sample_tree(tmp_path), servers)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pool": None}, r"^pool: expected a ServerPool, got NoneType"),
        ({"pool": "pool"}, r"^pool: expected a ServerPool, got str"),
        ({"tree": 3}, r"^tree: expected the path \(str or os\.PathLike\) of a generated tree's folder, got int"),
        ({"tree": None}, r"^tree: expected the path .* got NoneType"),
        ({"audit": "audit.log"}, r"^audit: expected an AuditLog \(AuditLog\(path\) appends to a file, .*got str"),
        ({"audit": Path("audit.log")}, r"^audit: expected an AuditLog .*got PosixPath"),
        ({"budgets": {"calls": 3}}, r"^budgets: expected a Budgets or None, got dict"),
        ({"manifest": {"tools": []}}, r"^manifest: expected a Manifest or None, got dict"),
        ({"config": "tooltree.yaml"}, r"^config: expected a Config or None, got str"),
    ],
)
def test_an_argument_of_the_wrong_kind_is_a_type_error_naming_it(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    arguments: dict[str, Any] = {"tree": write_sample_tree(tmp_path), "pool": ServerPool([]), **kwargs}
    with pytest.raises(TypeError, match=message):
        McpBridge(**arguments)
    assert not (tmp_path / "audit.log").exists()


def test_arguments_of_the_documented_kinds_are_taken(tmp_path: Path) -> None:
    tree = write_sample_tree(tmp_path)
    bridge = McpBridge(
        str(tree),
        ServerPool([]),
        budgets=Budgets(calls=3),
        audit=AuditLog(io.StringIO()),
        manifest=Manifest.load(tree),
        config=parse_config("servers: {}\n"),
    )
    assert bridge.tree == tree and bridge.budgets.calls == 3


def test_a_sandbox_on_another_tree_than_its_bridges_is_a_value_error_naming_both(tmp_path: Path) -> None:
    # Before: taken; the scripts imported the sandbox's tree's stubs and each call was refused as "not in this
    # tree's manifest", the bridge's.
    mine = write_sample_tree(tmp_path / "tree")
    other = write_sample_tree(tmp_path / "other")
    bridge = McpBridge(mine, ServerPool([]))
    loop = asyncio.new_event_loop()
    try:
        said = rf"^tools: the bridge calls the tools of the tree {mine}, and the sandbox runs the tree {other}: "
        with pytest.raises(ValueError, match=said):
            Sandbox(tree=other, tools=bridge, tool_loop=loop)
        (tmp_path / "link").symlink_to(mine)
        assert Sandbox(tree=tmp_path / "link", tools=bridge, tool_loop=loop).bridge is bridge  # made, not started
    finally:
        loop.close()
