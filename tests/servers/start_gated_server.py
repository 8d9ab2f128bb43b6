"""An MCP server (stdio) whose start-up waits for the test: with ``START_SOCKET`` set, it connects to that unix
socket before it answers anything, sends its pid and a newline, and goes on once the test answers. A test holding
the starts counts how many servers are starting at once.

``ping`` answers ``pong``.
"""

from __future__ import annotations

import os
import socket

if path := os.environ.get("START_SOCKET"):
    with socket.socket(socket.AF_UNIX) as held:
        held.connect(path)
        held.sendall(f"{os.getpid()}\n".encode())
        held.recv(1)  # the test lets the start go on

from mcp.server.mcpserver import MCPServer

server = MCPServer("gated", log_level="WARNING")


@server.tool(structured_output=False)
def ping() -> str:
    """Answer pong."""
    return "pong"


if __name__ == "__main__":
    server.run()
