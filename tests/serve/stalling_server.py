"""An MCP server (stdio) for serve tests: its one tool, ``stall``, never returns, and once it has been called
the process outlives its stdin (as a Node server with a timer pending does): only a signal ends it.

Each call appends ``called`` to the file named by ``STALL_FLAG``. With ``STALL_IGNORE_TERM=1`` the server
ignores SIGTERM (appending ``SIGTERM`` to that file instead): only SIGKILL ends it.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("stalling", instructions="A tool whose calls never end.")


def _note(word: str) -> None:
    with open(os.environ["STALL_FLAG"], "a", encoding="utf-8") as f:
        f.write(word + "\n")


@server.tool(structured_output=False)
async def stall() -> str:
    """Never return."""
    # Not a daemon: the interpreter waits for it, so the process lives on when its stdin closes.
    threading.Thread(target=threading.Event().wait, name="outlives-stdin").start()
    _note("called")
    await anyio.sleep_forever()
    return "never"


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    _note("SIGTERM")


if __name__ == "__main__":
    if os.environ.get("STALL_IGNORE_TERM") == "1":
        signal.signal(signal.SIGTERM, _on_sigterm)
    server.run()
