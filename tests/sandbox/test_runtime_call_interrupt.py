"""Ctrl-C during `Runtime.call_tool` cancels the call, as it does during `BackgroundPool.call`.

Before, the interrupt reached the caller but the call ran on to its end: the server's tool finished and the audit
line said ``ok`` seconds later. The server here is a real MCP server (the SDK's ``MCPServer``) whose tool marks in a
folder that it ran, that it was cancelled, or that it finished; the interrupt is a real SIGINT sent to the main thread
while it waits for the call.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path

import pytest

from sandbox.host import Runtime
from tests.support import wait_until
from tool_tree.config import load_config
from tooltree_cli.main import main

SERVER = '''\
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("marking", log_level="WARNING")
MARKS = Path(sys.argv[1])


@server.tool(structured_output=False)
async def wait(seconds: float) -> str:
    """Mark that the call runs, wait ``seconds``, and mark how the wait ended."""
    (MARKS / "ran").write_text("ran\\n", encoding="utf-8")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        (MARKS / "cancelled").write_text("cancelled\\n", encoding="utf-8")
        raise
    (MARKS / "done").write_text("done\\n", encoding="utf-8")
    return f"waited {seconds:g} s"


if __name__ == "__main__":
    server.run()
'''

WAIT = 10.0
"""How long the tool waits: long enough that a call not cancelled is seen to finish (a ``done`` mark, an ``ok`` audit
line) within the test's bounded wait, well inside the server's timeout."""


def test_ctrl_c_during_runtime_call_tool_cancels_the_call_on_the_server(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    server = tmp_path / "marking_server.py"
    server.write_text(SERVER, encoding="utf-8")
    config = tmp_path / "tooltree.yaml"
    config.write_text(
        f"servers:\n  marking:\n    command: {json.dumps(sys.executable)}\n"
        f"    args: [{json.dumps(str(server))}, {json.dumps(str(marks))}]\n    timeout: 60\n",
        encoding="utf-8",
    )
    tree = tmp_path / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    audit = tmp_path / "audit.jsonl"
    caller = threading.get_ident()
    ended = threading.Event()

    def interrupt_once_running() -> None:  # Ctrl-C as the terminal sends it, once the server runs the tool
        while not (marks / "ran").exists():
            if ended.wait(0.05):  # the call ended first: nothing to interrupt
                return
        signal.pthread_kill(caller, signal.SIGINT)

    with Runtime(load_config(config), tree, audit=audit) as runtime:
        threading.Thread(target=interrupt_once_running, daemon=True).start()
        try:
            with pytest.raises(KeyboardInterrupt):
                runtime.call_tool("marking", "wait", {"seconds": WAIT})
        finally:
            ended.set()
        wait_until(lambda: audit.is_file() and audit.read_text(encoding="utf-8").strip() != "", "the audit line", 30)
        line = json.loads(audit.read_text(encoding="utf-8").splitlines()[0])
        assert (line["tool"], line["outcome"]) == ("wait", "cancelled")  # before: "ok", WAIT seconds later
        wait_until(lambda: (marks / "cancelled").exists(), "the server to cancel the tool", 30)
        assert not (marks / "done").exists()
        # The runtime still works after the interrupt.
        assert runtime.call_tool("marking", "wait", {"seconds": 0})["content"][0]["text"] == "waited 0 s"
