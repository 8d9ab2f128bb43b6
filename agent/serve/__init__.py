"""``tooltree serve``: the tree, tool search and the sandbox as one MCP server for any MCP client.

::

    from agent.serve import ServeSettings, ToolServer, serve_stdio

    app = ToolServer(config, "tree", settings=ServeSettings(), sandbox_config=SandboxConfig())
    anyio.run(serve_stdio, app)

Modules: `settings` (the ``serve:`` section), `server` (`ToolServer`, the MCP handlers), `sessions`
(one sandbox session per client session), `content` (results as MCP content), `passthrough`,
`stdio` and `http` (the transports). Names are imported on first use: ``import agent.serve`` does
not import the MCP SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agent.serve' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
