"""An MCP server built with the official SDK (``MCPServer``, both protocol eras) whose tool ``change`` says its tools
changed before it answers, as a server of both eras does: on its session (the protocol with sessions) and on its
``subscriptions/listen`` streams (the session-less 2026-07-28 protocol, which drops the other).

    python listen_server.py [--no-listen | --refuse-first-listen]     # over stdio
    python listen_server.py --http FD                                  # Streamable HTTP on the listening socket FD

With ``--no-listen`` it serves no ``subscriptions/listen`` (refused as a method it does not have); with
``--refuse-first-listen`` it refuses the first (a limit reached, as the SDK words it) and serves the others. Its tool
``exit`` ends its process without an answer, ``end_listens`` ends its listen streams (each answered); its tool ``touch``
says the resource of a URI changed (``live://log`` and ``live://status`` are its resources), at 2026-07-28 on the listen
streams subscribed to that URI (the protocol has no ``resources/subscribe``). With ``--http`` it serves the SDK's app
under uvicorn as the SDK's ``run_streamable_http_async`` does (no graceful-shutdown timeout: told to stop, it waits for
its open responses), on a listening socket it inherits.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR

app = MCPServer("changing", subscriptions=False if "--no-listen" in sys.argv[1:] else None)


@app.tool()
async def change(ctx: Context) -> str:
    await ctx.session.send_tool_list_changed()
    await ctx.notify_tools_changed()
    return "changed"


@app.tool()
async def touch(uri: str, ctx: Context) -> str:
    await ctx.notify_resource_updated(uri)
    return "touched"


@app.resource("live://log")
def log() -> str:
    return "log"


@app.resource("live://status")
def status() -> str:
    return "status"


@app.tool()
def exit() -> str:
    os._exit(0)


@app.tool()
def end_listens() -> str:
    """End the listen streams, as a server does that closes them (gracefully: each answered)."""
    listens = app._lowlevel_server.get_request_handler("subscriptions/listen")
    if listens is not None:
        listens.handler.close()
    return "ended"


def _refuse_first_listen() -> None:
    entry = app._lowlevel_server.get_request_handler("subscriptions/listen")
    assert entry is not None
    listens = entry.handler
    refused = False

    async def listen(ctx: Any, params: Any) -> Any:
        nonlocal refused
        if not refused:
            refused = True
            raise MCPError(INTERNAL_ERROR, "Subscription limit reached")
        return await listens(ctx, params)

    app._lowlevel_server.add_request_handler("subscriptions/listen", entry.params_type, listen)


if "--refuse-first-listen" in sys.argv[1:]:
    _refuse_first_listen()

if __name__ == "__main__":
    if "--http" in sys.argv[1:]:
        import anyio
        import uvicorn

        sock = socket.socket(fileno=int(sys.argv[sys.argv.index("--http") + 1]))
        config = uvicorn.Config(app.streamable_http_app(), log_level="warning")
        anyio.run(uvicorn.Server(config).serve, [sock])
    else:
        app.run("stdio")
