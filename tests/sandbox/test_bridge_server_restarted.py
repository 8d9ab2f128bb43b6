"""A server that the pool started again (it crashed; an HTTP server's new session) is checked again, at a tool's next
call, for a tool changed since the tree was generated, as at the tool's first call (a rug pull across a restart).
Before: a tool's live definition was compared with the manifest once per session, so a server that came back listing
another definition of it (a new release, or a tampered one) had its calls go out, their arguments checked against the
definition the tree was generated from.

Real parts: `generate-tree` and the raw test server (tests/servers/raw_server.py), which reads its tools at start.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandbox.bridge import ToolCallRefused
from sandbox.host import Runtime
from tests.support import raw_server_tree
from tool_tree.config import load_config

ECHO = {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}
CRASH = {"name": "crash", "inputSchema": {"type": "object"}}


def test_a_tool_a_restarted_server_lists_anew_is_refused_as_changed_since_generation(tmp_path: Path) -> None:
    tree, _ = raw_server_tree(tmp_path, [ECHO, CRASH])
    with Runtime(load_config(tmp_path / "tooltree.yaml"), tree) as runtime:
        first = runtime.call_tool("raw", "echo", {"text": "a"})
        changed = {**ECHO, "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}
        (tmp_path / "raw.json").write_text(json.dumps({"pages": [[changed, CRASH]]}), encoding="utf-8")
        with pytest.raises(ToolCallRefused) as crashed:
            runtime.call_tool("raw", "crash", {})  # the server exits; the next call starts it again
        with pytest.raises(ToolCallRefused) as refused:
            runtime.call_tool("raw", "echo", {"text": "a"})
    assert not first.get("isError"), first
    assert crashed.value.code != "tool_changed", crashed.value.message
    assert refused.value.code == "tool_changed", refused.value.message
    assert "raw.echo changed since the tree was generated: its parameters" in refused.value.message
