"""An MCP server built with the official SDK (``MCPServer``) whose calls take time or fail in the ways a call can.

    python slow_server.py MARK_FOLDER

``wait`` first writes ``MARK_FOLDER/<mark>`` (when given a mark), so a test knows the tool ran (or is running),
then waits; ``protocol_error`` answers with a JSON-RPC error instead of a result; ``fail`` is the tool's own error.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError

server = MCPServer("slow", log_level="WARNING")
MARKS = Path(sys.argv[1]) if len(sys.argv) > 1 else None


@server.tool(structured_output=False)
async def wait(seconds: float, mark: str = "") -> str:
    """Mark that the call runs, wait ``seconds``, then answer."""
    if mark and MARKS is not None:
        (MARKS / mark).write_text("ran\n", encoding="utf-8")
    await anyio.sleep(seconds)
    return f"waited {seconds:g} s"


@server.tool(structured_output=False)
async def protocol_error(message: str) -> str:
    """Answer with a JSON-RPC error, not a result."""
    raise MCPError(code=-32000, message=message)


@server.tool(structured_output=False)
async def fail(message: str) -> str:
    """The tool's own error: a result with isError."""
    raise ToolError(message)


if __name__ == "__main__":
    server.run()
