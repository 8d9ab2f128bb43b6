"""The runtime that generated stubs import. Standard library only: it runs inside the sandbox.

A stub turns keyword arguments into a wire-format ``arguments`` dict and calls
:func:`call_tool`, which leaves out every argument that is :data:`NOT_GIVEN` (the default of
every optional parameter); ``None`` is sent as JSON ``null``. Where the call goes is decided
by the installed *transport*: inside the sandbox the supervisor installs one that relays the
call to the host bridge; on the host, a program (or a test) can install one that calls a live
MCP session directly.

A stub of a tool without an output schema returns a `ToolResult`; one of a tool that declares an output schema, the
structured content as a `StructuredResult`: a dict typed by the schema that also carries the result's ``.images``,
``.resource_links``, ``.resources``, ``.text`` and ``.content`` (``tool_result`` the whole `ToolResult`), since a
server may send images or links beside its structured content and only there.

Stubs are synchronous: a call blocks its thread until the result is back. Calls from several threads
(`parallel`, or ``asyncio.to_thread`` under top-level ``await``) are in flight at once; inside the
sandbox, past 64 at a time a call waits for a turn.

Exceptions::

    ToolError            the tool ran and reported an error (``isError: true``); the script may retry
    ToolCallError        the call failed outside the tool (``code``): refused before it was sent
                         (invalid arguments, unknown tool, budget exhausted), or without a usable answer
                         (``timeout``, ``server_unavailable``, ``server_error``, ``result_too_large``: its
                         message says whether the tool may have run)
    NoTransportError     no transport is installed (the stub was called outside ``tooltree exec``)
"""

from __future__ import annotations

from tool_tree.runtime._call import (
    NoTransportError,
    ToolCallError,
    ToolError,
    Transport,
    call_tool,
    get_transport,
    set_transport,
    structured,
)
from tool_tree.runtime._concurrency import parallel
from tool_tree.runtime._not_given import NOT_GIVEN, NotGiven
from tool_tree.runtime._result import Image, Resource, ResourceLink, ToolResult
from tool_tree.runtime._structured import StructuredResult
from tool_tree.runtime._typing import NotRequired

__all__ = [
    "NOT_GIVEN",
    "Image",
    "NoTransportError",
    "NotGiven",
    "NotRequired",
    "Resource",
    "ResourceLink",
    "StructuredResult",
    "ToolCallError",
    "ToolError",
    "ToolResult",
    "Transport",
    "call_tool",
    "get_transport",
    "parallel",
    "set_transport",
    "structured",
]
