"""An MCP server (stdio) for serve tests: its one tool, ``hold``, tells the test it arrived and returns when
the test lets it go.

Each call connects to the unix socket named by ``HELD_SOCKET``, sends its tag and a newline, and waits for
the test to answer; the test counts the calls in progress and releases them when it chooses.
"""

from __future__ import annotations

import os

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("held", instructions="A tool whose calls wait until the test releases them.")


@server.tool(structured_output=False)
async def hold(tag: str) -> str:
    """Wait until the test releases this call, then return its tag."""
    async with await anyio.connect_unix(os.environ["HELD_SOCKET"]) as stream:
        await stream.send(tag.encode() + b"\n")
        await stream.receive()
    return tag


if __name__ == "__main__":
    server.run()
