"""An MCP server built with the official SDK (``MCPServer``) whose tools have a title but no description.

    python titled_server.py

MCP 2025-06-18 lets a tool carry a display ``title``, at the top level or in its annotations; servers
often give one instead of a description. Each tool answers its own name, so a test can tell which ran.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("titled", log_level="WARNING")


@server.tool(name="ping_hosts", title="Ping every host on the network")
def ping_hosts(timeout: int = 5) -> str:
    return "ping_hosts"


@server.tool(name="flush_cache", annotations=ToolAnnotations(title="Flush the cache", idempotent_hint=True))
def flush_cache() -> str:
    return "flush_cache"


if __name__ == "__main__":
    server.run()
