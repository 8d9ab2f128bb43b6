"""`McpBridge`'s audit line of a call whose server answered a huge JSON-RPC error full of escape sequences: the
error field is cleaned and cut as the ledger's is. Against a real hostile server (tests/servers/hostile_text_server.py)
in a real `BackgroundPool`."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.bridge import ToolCallRefused
from sandbox.mcp_bridge import AuditLog, McpBridge
from sandbox.results import LEDGER_ERROR_CHARS
from tool_tree.config import ServerConfig
from tool_tree.pool import BackgroundPool
from tooltree_cli.main import main

HOSTILE = Path(__file__).resolve().parents[1] / "servers" / "hostile_text_server.py"
EMOJI = 200_000


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bridge-errors")
    config = folder / "tooltree.yaml"
    config.write_text(
        f"servers:\n  hostile:\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(HOSTILE))}]\n",
        encoding="utf-8",
    )
    assert main(["generate-tree", "--config", str(config), "--out", str(folder / "tree"), "--embeddings", "off"]) == 0
    return folder / "tree"


@pytest.fixture(scope="module")
def pool() -> Iterator[BackgroundPool]:
    with BackgroundPool([ServerConfig(name="hostile", command=sys.executable, args=(str(HOSTILE),))]) as bg:
        yield bg


def test_an_audit_line_holds_a_servers_huge_error_cleaned_and_cut_as_the_ledger_does(
    tree: Path, pool: BackgroundPool
) -> None:
    # Before: the error went in whole: 200,000 emoji made a line of 2.4 MB (12 bytes each as ASCII JSON), with the
    # server's escape sequences in it (2,000,000 emoji: 24 MB a line, 480 MB of audit log in 10 s).
    stream = io.StringIO()
    bridge = McpBridge(tree, pool.pool, audit=AuditLog(stream), session="s1")
    with pytest.raises(ToolCallRefused) as info:
        call = bridge.call_tool("hostile", "fail", {"n": EMOJI})
        asyncio.run_coroutine_threadsafe(call, pool.loop).result(timeout=60)
    assert info.value.code == "server_error"
    (line,) = stream.getvalue().splitlines()
    assert len(line) < 30_000  # at most 2,000 characters, each at most 12 bytes of ASCII JSON
    error = json.loads(line)["error"]
    assert error.startswith("server error -32000: REDevil\n    forged\n    😀😀")  # the escapes gone; lines indented
    assert error.endswith("…") and len(error) == LEDGER_ERROR_CHARS
    assert all(c.isprintable() for c in error.replace("\n", ""))
