"""Which protocol era a request to `tooltree serve` may use: the middlewares of its `Server` (`agent.serve.server`)
that refuse a 2026-07-28 request, saying why, where serve speaks only the handshake protocol (over HTTP, and over stdio
when a server may ask the client during a call).
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS


async def handshake_for_asks(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Over stdio, when a server may ask the client during a call: refuse a request of the 2026-07-28 protocol (its
    envelope's version) saying why, rather than the SDK's bare "Invalid request parameters"; ``server/discover`` is
    left to the handshake loop's "method not found", on which clients fall back to ``initialize``."""
    meta = ctx.params.get("_meta") if isinstance(ctx.params, dict) else None
    version = meta.get(types.PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
    if ctx.request_id is not None and version in MODERN_PROTOCOL_VERSIONS and ctx.method != "server/discover":
        raise MCPError(
            code=types.UNSUPPORTED_PROTOCOL_VERSION,
            message="a server of this tooltree serve may ask the client during a call (`client_capabilities`), for "
            "which the 2026-07-28 protocol over stdio has no channel: connect with the initialize handshake "
            f"({', '.join(HANDSHAKE_PROTOCOL_VERSIONS)})",
            data={"supported": list(HANDSHAKE_PROTOCOL_VERSIONS)},
        )
    return await call_next(ctx)


async def handshake_only(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Refuse 2026-07-28 requests over HTTP (they carry no session); ``server/discover`` says what is served."""
    modern = ctx.request_id is not None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
    if modern and ctx.method != "server/discover":
        raise MCPError(
            code=types.UNSUPPORTED_PROTOCOL_VERSION,
            message="tooltree serve keeps a sandbox session per client, which over HTTP needs the initialize "
            f"handshake ({', '.join(HANDSHAKE_PROTOCOL_VERSIONS)}); the 2026-07-28 protocol has no sessions",
            data={"supported": list(HANDSHAKE_PROTOCOL_VERSIONS)},
        )
    return await call_next(ctx)
