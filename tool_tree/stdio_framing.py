"""A stdio server that writes a JSON-RPC message across several lines, told from its lines alone.

MCP over stdio carries one message a line, with no newline inside it. A server that pretty-prints its JSON
(``json.dumps(message, indent=2)``, ``JSON.stringify(message, null, 2)``: a common mistake of hand-written servers)
writes each message as ``{``, ``  "jsonrpc": "2.0",``, ``  "id": 1,`` … ``}``, none of them a message: every line was
dropped as one that is not JSON-RPC, and the start, and every call, waited out the whole timeout with no hint.

`across_lines` knows such a server by the line that holds the member ``"jsonrpc": "2.0"`` alone (after the object's
``{`` at most): no message written on one line is that line, and nothing but a message split over lines writes it.
`tool_tree.stdio_lines.Lines` then ends the server, failing the start or the call in flight saying why, at the
message's second line rather than at the timeout.

`in_utf16` knows a server that writes its messages in UTF-16 (a Windows program whose console encoding is UTF-16, as
PowerShell's ``Out-File`` or .NET's ``Encoding.Unicode`` writes): each character of ``"jsonrpc"`` followed (or
preceded) by a NUL byte. MCP over stdio is UTF-8: such lines were dropped as ones that are not JSON-RPC, the start
waiting out its whole timeout; the server is ended at its first message instead.
"""

from __future__ import annotations

import re

_MEMBER = re.compile(rb'\s*\{?\s*"jsonrpc"\s*:\s*"2\.0"\s*,?\s*')
"""A line of a JSON-RPC message written across several lines: its ``"jsonrpc"`` member alone (``{`` before it when
the object opens on the same line, a comma after it when more members follow)."""
_LONGEST = 64
"""Bytes past which a line is not looked at (the member, indented, fits many times over)."""


def across_lines(server: str, line: bytes) -> str | None:
    """Why ``server`` is ended when ``line`` (a stdout line, without its newline) is a piece of a JSON-RPC message
    written across several lines; None for any other line."""
    if len(line) > _LONGEST or _MEMBER.fullmatch(line) is None:
        return None
    return (
        f"server {server!r} writes JSON across several lines (its message is pretty-printed, as "
        "json.dumps(message, indent=2) writes it): MCP over stdio needs each message on one line, with no newline "
        "inside it; fix the server to write compact JSON"
    )


_UTF16 = ("jsonrpc".encode("utf-16-le"), "jsonrpc".encode("utf-16-be"))
"""The member name every JSON-RPC message holds, as UTF-16 writes it (either byte order)."""


def in_utf16(server: str, line: bytes) -> str | None:
    """Why ``server`` is ended when ``line`` (a stdout line, without its newline) is a JSON-RPC message written in
    UTF-16; None for any other line."""
    if b"\x00" not in line or not any(name in line for name in _UTF16):
        return None
    return (
        f"server {server!r} writes its messages in UTF-16 (a NUL byte beside each character): MCP over stdio needs "
        "UTF-8; set the server's output encoding to UTF-8"
    )
