"""A `tooltree serve` session whose runtime moved to a regenerated tree as its sandbox started (`Runtime._follow_tree`:
a `generate-tree` that landed after the session's call was let in, `SessionRegistry.use`) keeps the session's refusals:
a call refused as a later regeneration's says that serve renews the session, and the session is renewed.

Before, the runtime's new bridge had refusals of its own, worded for a run ("start a new run to use the regenerated
tree"), which `ClientSession` neither set the advice of nor counted until its next opening: a passthrough call made
meanwhile was told to start a new run, and the session was not renewed.

Real parts: a `Runtime` of a tree `generate-tree` makes and regenerates from tests/servers/raw_server.py (no sandbox:
the steps a sandbox's start takes are taken here, in the order a parallel ``execute_python`` would take them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import raw_server_tree
from tooltree_cli.main import main


def tools(release: str) -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {"x": {"type": "string", "description": f"release {release}"}}}
    return [{"name": "t0", "description": "a tool", "inputSchema": schema}]


def regenerate(folder: Path, tree: Path, release: str) -> None:
    (folder / "raw.json").write_text(json.dumps({"pages": [tools(release)]}), encoding="utf-8")
    assert main(["generate-tree", "--config", str(folder / "tooltree.yaml"), "--out", str(tree)]) == 0


def test_a_session_whose_runtime_followed_the_tree_is_renewed_after_a_later_regenerations_refusal(
    tmp_path: Path,
) -> None:
    from agent.serve.client_session import ClientSession
    from agent.serve.renewal import RENEWS
    from sandbox.host import Runtime
    from sandbox.tool_changes import StaleSessionRefused
    from tool_tree.config import load_config
    from tool_tree.tree import tree_lock

    tree, _ = raw_server_tree(tmp_path, tools("1"))
    session = ClientSession("s", Runtime(load_config(tmp_path / "tooltree.yaml"), tree))
    try:
        runtime = session.opened()  # a passthrough call's opening (`agent.serve.server`), then its count
        refused = session.stale_refused()
        regenerate(tmp_path, tree, "2")
        with tree_lock(tree, shared=True):  # as a parallel execute_python's sandbox starts on the regenerated tree
            runtime._follow_tree()
        regenerate(tmp_path, tree, "3")
        with pytest.raises(StaleSessionRefused) as info:
            runtime.call_tool("raw", "t0", {"x": "a"})
        assert info.value.message.endswith(RENEWS)  # before: "start a new run to use the regenerated tree"
        renews = session.renews_after_passthrough(refused, "servers/raw/t0.py")
        assert renews is not None and session.renew  # before: None, and the session went on refusing it
    finally:
        session.close()
