"""``tooltree serve``: the tree, tool search and the sandbox as one MCP server for any MCP client.

::

    from agent.serve import ServeSettings, ToolServer, serve_stdio

    app = ToolServer(config, "tree", settings=ServeSettings(), sandbox_config=SandboxConfig())
    anyio.run(serve_stdio, app)

Modules: `settings` (the ``serve:`` section), `server` (`ToolServer`, the MCP handlers), `sessions`
(one sandbox session per client session), `content` (results as MCP content), `passthrough`,
`bounded_result` (a server's result bounded and cleaned), `upstream_extras` (the servers' prompts and resources),
`stdio` and `http` (the transports). Names are imported on first use: ``import agent.serve`` does not import the
MCP SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tool_tree.lazy import lazy_exports

if TYPE_CHECKING:
    from agent.serve.http import serve_http
    from agent.serve.server import ToolServer
    from agent.serve.settings import SETTINGS, ServeSettings
    from agent.serve.stdio import serve_stdio

_EXPORTS = {
    "SETTINGS": "agent.serve.settings",
    "ServeSettings": "agent.serve.settings",
    "ToolServer": "agent.serve.server",
    "serve_http": "agent.serve.http",
    "serve_stdio": "agent.serve.stdio",
}

__all__ = ["SETTINGS", "ServeSettings", "ToolServer", "serve_http", "serve_stdio"]

if not TYPE_CHECKING:  # a type checker sees the imports above, and refuses a name that is not one (`serve.Nope`)
    __getattr__, __dir__ = lazy_exports("agent.serve", _EXPORTS, globals(), __all__)
