"""Opening an MCP client session to one configured server, stdio or Streamable HTTP.

The official SDK owns the protocol; this module maps a `ServerConfig` onto it and adds what a
long-running host needs around it: the end of the server's stderr kept (so a failure can show
its last lines), a raw ``tools/list`` that keeps every field the server sent, and, for stdio,
our own transport (`tool_tree.stdio`: the SDK's, but linear in what it reads and with a cap on
one message); for HTTP, a client that holds one message to the same cap (`tool_tree.http_client`).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, TextIO

import mcp
import mcp.types as mt
from pydantic import BaseModel, ConfigDict

from tool_tree.config import ServerConfig
from tool_tree.http_client import http_client
from tool_tree.redact import longest_secret, redact
from tool_tree.stdio import LINEAR, MAX_MESSAGE_BYTES, stdio_client

MAX_LIST_PAGES = 1000
MAX_LIST_TOOLS = 100_000
"""Tools one server may list, over all pages: five times what the generator renders for one server, so a
big server narrowed by ``include`` still lists (`MAX_LIST_BYTES` bounds the memory either way)."""
MAX_LIST_BYTES = 64 * 1024 * 1024
"""Bytes of tool definitions (as UTF-8 JSON) one server may list, over all pages: the stdio cap on one
message bounds a page, this the whole list (a server can page its way past the memory of the host)."""


class _RawResult(BaseModel):
    """A result model that keeps every field the server sent (the SDK's typed models drop unknown ones)."""

    model_config = ConfigDict(extra="allow")


class StderrLog:
    """The last `KEEP_BYTES` a stdio server wrote to stderr: what is needed to report a failure.

    `connect` feeds it from a pipe (`tool_tree.stdio`), so a server that writes without end costs the
    host no disk and at most twice `KEEP_BYTES` of memory. Its tail leaves with the secrets of
    ``server``'s configuration redacted (`tool_tree.redact`); `connect` gives a log made without a
    server the one it connects to. Thread-safe: fed on the pool's loop, read from any thread.
    """

    KEEP_BYTES = 64 * 1024

    def __init__(self, server: ServerConfig | None = None) -> None:
        self.server = server
        self._lock = threading.Lock()
        self._kept = bytearray()
        self._cut = False  # the start of what was written is gone
        self._file: TextIO | None = None

    def feed(self, chunk: bytes) -> None:
        with self._lock:
            self._kept += chunk
            if len(self._kept) > 2 * self.KEEP_BYTES:
                del self._kept[: -self.KEEP_BYTES]
                self._cut = True

    @property
    def file(self) -> TextIO:
        """A file for a transport that needs one (the SDK's, when tooltree's cannot be used): unbounded."""
        if self._file is None:
            # Closed by close(); it must outlive this call, so no `with`.
            self._file = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        return self._file

    def tail(self, lines: int = 20, max_chars: int = 4000) -> str:
        """The last lines the server wrote to stderr, its configured secrets replaced by markers."""
        with self._lock:
            data, cut = bytes(self._kept[-max_chars * 2 :]), self._cut or len(self._kept) > max_chars * 2
        text = data.decode("utf-8", errors="replace")
        if self._file is not None:
            try:
                self._file.flush()
                size = self._file.seek(0, os.SEEK_END)
                self._file.seek(max(0, size - max_chars * 2))
                text, cut = self._file.read(), size > max_chars * 2
            except (OSError, ValueError):
                return ""
        if self.server is not None:
            longest = longest_secret(self.server)
            if cut and longest:
                # The text begins inside what was written, maybe inside a secret, whose piece would not be
                # recognised: drop as much as a secret holds, and 3 more for the replacement characters of a
                # cut character.
                text = text[longest + 3 :]
            text = redact(text, self.server)
        return "\n".join(text.rstrip("\n").splitlines()[-lines:])[-max_chars:]

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


@dataclass
class Connection:
    """A live client session and what we learned while opening it."""

    client: mcp.Client
    server: ServerConfig
    stderr: StderrLog | None


@asynccontextmanager
async def connect(server: ServerConfig, *, stderr: StderrLog | None = None) -> AsyncIterator[Connection]:
    """Open a session to ``server``; the process (stdio) is stopped and reaped on exit.

    The caller bounds the time (``anyio.fail_after(server.timeout)``). For stdio servers the
    process runs in its own process group and the whole group is killed on exit; a message longer
    than `tool_tree.stdio.MAX_MESSAGE_BYTES` ends the server and fails the requests in flight. Over
    HTTP, a reply (or one event) past the same cap fails the request it answers.

    Raises:
        OSError: the command cannot be started.
        mcp.MCPError: the server refused the session.
    """
    if stderr is not None and stderr.server is None:
        stderr.server = server  # its tail is redacted with this server's secrets
    async with AsyncExitStack() as stack:
        target: Any
        if server.command is not None:
            params = mcp.StdioServerParameters(
                command=server.command,
                args=list(server.args),
                env=dict(server.env) or None,
                cwd=server.cwd,
                encoding_error_handler="replace",
            )
            if stderr is None:
                target = stdio_client(params, errlog=sys.stderr, name=server.name)
            elif LINEAR:
                target = stdio_client(params, name=server.name, stderr_sink=stderr.feed)
            else:  # the SDK's transport writes stderr to a file
                target = stdio_client(params, errlog=stderr.file, name=server.name)
        else:
            assert server.url is not None
            from mcp.client.streamable_http import streamable_http_client

            http = await stack.enter_async_context(http_client(server.headers))
            target = streamable_http_client(server.url, http_client=http, max_sse_event_size=MAX_MESSAGE_BYTES)
        client = await stack.enter_async_context(
            mcp.Client(target, read_timeout_seconds=server.timeout, client_info=_CLIENT_INFO)
        )
        yield Connection(client=client, server=server, stderr=stderr)


async def list_tools_raw(client: mcp.Client) -> list[dict[str, Any]]:
    """Every tool the server lists, as raw wire JSON (unknown fields kept), following pagination.

    Raises:
        mcp.MCPError: the server answered with an error.
        ValueError: the server's pagination does not end, its result is malformed, or it lists more than
            `MAX_LIST_TOOLS` tools or `MAX_LIST_BYTES` of them.
    """
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[str] = set()
    size = 0
    for _ in range(MAX_LIST_PAGES):
        params = mt.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = (await client.session.send_request(mt.ListToolsRequest(params=params), _RawResult)).model_dump()
        page_tools = page.get("tools")
        if not isinstance(page_tools, list):
            raise ValueError("tools/list result has no `tools` list")
        tools.extend(t for t in page_tools if isinstance(t, dict))
        if len(tools) > MAX_LIST_TOOLS:
            raise ValueError(f"tools/list holds more than {MAX_LIST_TOOLS:,} tools, the limit for one server")
        size += len(json.dumps(page_tools, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        if size > MAX_LIST_BYTES:
            raise ValueError(
                f"tools/list holds more than {MAX_LIST_BYTES // 2**20} MiB of tool definitions, the limit for "
                f"one server (reached on page {len(seen) + 1})"
            )
        next_cursor = page.get("nextCursor")
        if next_cursor is None:
            return tools
        if not isinstance(next_cursor, str) or next_cursor in seen:
            raise ValueError(f"tools/list pagination repeats or is malformed (cursor {next_cursor!r})")
        seen.add(next_cursor)
        cursor = next_cursor
    raise ValueError(f"tools/list did not finish after {MAX_LIST_PAGES} pages")


def server_info(client: mcp.Client) -> dict[str, Any]:
    """What the server said about itself: name, version, title, description, instructions."""
    info: dict[str, Any] = {}
    impl = client.server_info
    if impl is not None:
        info = impl.model_dump(mode="json", exclude_none=True, by_alias=True)
        info.pop("icons", None)
    if client.instructions:
        info["instructions"] = client.instructions
    return info


_CLIENT_INFO = mt.Implementation(name="tooltree", version="0.1.0")
