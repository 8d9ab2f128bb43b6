"""A session asks its server for the tools once as it starts, and its calls are checked as before.

Before, each session listed the server's tools twice: once for tooltree (the tree's listing, the output schemas its
results are checked against) and once more for the SDK alone, which used it for nothing a stdio session needs. For a
server of 20,000 tools that second listing was half of the first call's host CPU (`bench/first_call_catalog.py`).

A 2026 session over Streamable HTTP listed twice still: the SDK mirrors a call's arguments into the ``Mcp-Param-*``
headers its own listing declares (``x-mcp-header``), and it was let list whatever the tools declared. It now lists only
when a tool declares one.

Real server processes: `tests/servers/raw_server.py` (the 2025 handshake), an SDK server written here (the 2026
protocol over stdio), `tests/servers/growing_server.py` (tools added while connected, said by a notice); and an SDK
server over Streamable HTTP in this process (uvicorn on a real socket), whose requests are recorded as they arrive.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.server.lowlevel import Server
from starlette.types import Receive, Scope, Send

from tests.support import asgi_over_http
from tool_tree.config import ServerConfig
from tool_tree.pool import BackgroundPool, CallFailure, ServerPool

pytestmark = pytest.mark.anyio
SERVERS = Path(__file__).resolve().parents[1] / "servers"

SDK_SERVER = """
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

listed = 0
OUT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
TOOLS = [
    types.Tool(name="answer", input_schema={"type": "object"}, output_schema=OUT),
    types.Tool(name="listings", input_schema={"type": "object"}),
]


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    global listed
    listed += 1
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "listings":
        return types.CallToolResult(content=[types.TextContent(text=str(listed))])
    value = (params.arguments or {}).get("value")
    return types.CallToolResult(content=[types.TextContent(text="see structuredContent")], structured_content=value)


server = Server("modern", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def run() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(run)
"""


def text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


async def test_a_session_asks_a_server_of_the_2025_handshake_for_its_tools_once(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    spec = {"pages": [[{"name": "echo", "inputSchema": {"type": "object"}}]], "log_file": str(log)}
    (tmp_path / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    raw = ServerConfig(name="raw", command=sys.executable, args=(str(SERVERS / "raw_server.py"),
                       str(tmp_path / "spec.json")), timeout=30)  # fmt: skip
    async with ServerPool([raw]) as pool:
        assert json.loads(text(await pool.call("raw", "echo", {"a": 1}))) == {"a": 1}
        await pool.call("raw", "echo", {})
    events = [line.split()[0] for line in log.read_text(encoding="utf-8").splitlines()]
    assert events == ["start", "listed", "called:echo", "called:echo"]  # before: listed twice


async def test_a_2026_session_over_stdio_is_listed_once_and_its_results_are_still_checked(tmp_path: Path) -> None:
    (tmp_path / "modern.py").write_text(SDK_SERVER, encoding="utf-8")
    modern = ServerConfig(name="modern", command=sys.executable, args=(str(tmp_path / "modern.py"),), timeout=30)
    async with ServerPool([modern]) as pool:
        assert (await pool.call("modern", "answer", {"value": {"n": 3}}))["structuredContent"] == {"n": 3}
        refused = await pool.call("modern", "answer", {"value": {"n": "three"}})
        missing = await pool.call("modern", "answer", {})
        assert text(await pool.call("modern", "listings", {})) == "1"  # before: 2
    assert isinstance(refused, CallFailure) and refused.code == "invalid_result"
    assert refused.message == (
        "invalid result from the server: structured content that tool answer's output schema refuses: "
        "n: 'three' is not of type 'integer'; the tool ran"
    )
    assert isinstance(missing, CallFailure) and missing.code == "invalid_result"
    assert "has an output schema but returned no structured content" in missing.message


def test_a_tool_added_after_the_listing_is_called_and_the_change_is_told(tmp_path: Path) -> None:
    growing = ServerConfig(name="growing", command=sys.executable, args=(str(SERVERS / "growing_server.py"),
                           str(tmp_path / "added.json")), timeout=30)  # fmt: skip
    heard = threading.Event()
    told: list[str] = []

    def changed(server: str) -> None:
        told.append(server)
        heard.set()

    with BackgroundPool([growing], on_tools_changed=changed) as pool:
        assert text(pool.call("growing", "add_tool", {"name": "fresh"})) == "added fresh"
        assert heard.wait(10)
        assert text(pool.call("growing", "fresh", {})) == "fresh ran"
    assert told == ["growing"]


@asynccontextmanager
async def http_server(tool: types.Tool, seen: list[tuple[str, dict[str, str]]]) -> AsyncIterator[str]:
    """An SDK server of the one ``tool`` over Streamable HTTP; each request's ``Mcp-Method`` header is appended to
    ``seen`` with its ``Mcp-Param-*`` headers. Yields its URL."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(params.arguments))])

    # The schema given here, so that the server's own check of a call's headers does not run its listing.
    server = Server("routed", on_list_tools=list_tools, on_call_tool=call_tool,
                    get_tool_input_schema=lambda name: tool.input_schema if name == tool.name else None)  # fmt: skip
    app = server.streamable_http_app()

    async def recorded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            if "mcp-method" in headers:
                seen.append((headers["mcp-method"], {k: v for k, v in headers.items() if k.startswith("mcp-param-")}))
        await app(scope, receive, send)

    async with asgi_over_http(recorded, lifespan="on") as url:
        yield url


async def called_over_http(tool: types.Tool, arguments: dict[str, Any]) -> list[tuple[str, dict[str, str]]]:
    """The tools requests a pool's session of a 2026 server over HTTP sent, calling ``tool`` once with ``arguments``."""
    seen: list[tuple[str, dict[str, str]]] = []
    async with http_server(tool, seen) as url, ServerPool([ServerConfig(name="routed", url=url, timeout=30)]) as pool:
        assert json.loads(text(await pool.call("routed", tool.name, arguments))) == arguments
    return [(method, params) for method, params in seen if method.startswith("tools/")]


async def test_a_2026_session_over_http_lists_once_when_no_tool_declares_a_header() -> None:
    plain = types.Tool(name="find", input_schema={"type": "object", "properties": {"region": {"type": "string"}}})
    assert await called_over_http(plain, {"region": "eu"}) == [("tools/list", {}), ("tools/call", {})]  # before: two


async def test_a_tool_that_declares_a_header_has_its_call_send_it_from_the_first_call() -> None:
    schema = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}
    routed = types.Tool(name="find", input_schema=schema)
    # The SDK lists too, to know the header: the call is sent once, with it (not refused by the server, then again).
    assert await called_over_http(routed, {"region": "eu"}) == [
        ("tools/list", {}), ("tools/list", {}), ("tools/call", {"mcp-param-region": "eu"}),
    ]  # fmt: skip
