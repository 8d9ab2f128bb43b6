"""The six third-party MCP servers in tests/real_servers.yaml start offline, list their tools, and answer.

They are installed by `make real-servers` into $TOOLTREE_REAL_SERVERS (default <repo>/.real-servers).
Without that folder these tests skip, unless REQUIRE_REAL_SERVERS=1 makes the absence a failure.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, ListToolsRequest, TextContent
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter

from tool_tree.config import load_config

pytestmark = pytest.mark.real_servers

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "tests" / "real_servers.yaml"
INSTALL_HINT = "run `make real-servers` (scripts/install-real-servers.sh) to install the third-party MCP servers"
_RAW_RESULT = TypeAdapter(dict[str, Any])

Probe = Callable[[Client, Path], Awaitable[None]]


def _text(result: CallToolResult) -> str:
    assert not result.is_error, result
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


async def _echo(client: Client, _root: Path) -> None:
    assert _text(await client.call_tool("echo", {"message": "hello tree"})) == "Echo: hello tree"


async def _read_fixture_file(client: Client, root: Path) -> None:
    path = root / "fixtures" / "files" / "hello.txt"
    assert _text(await client.call_tool("read_text_file", {"path": str(path)})) == "hello from tooltree\n"


async def _read_graph(client: Client, _root: Path) -> None:
    result = await client.call_tool("read_graph", {})
    assert isinstance(result.structured_content, dict)
    assert set(result.structured_content) == {"entities", "relations"}


async def _git_status(client: Client, root: Path) -> None:
    text = await client.call_tool("git_status", {"repo_path": str(root / "fixtures" / "git-repo")})
    assert "On branch main" in _text(text)


async def _utc_now(client: Client, _root: Path) -> None:
    result = await client.call_tool("get_current_time", {"timezone": "UTC"})
    assert not result.is_error, result
    assert result.structured_content is not None
    assert result.structured_content["timezone"] == "UTC"
    assert result.structured_content["datetime"].endswith("+00:00")


@dataclass(frozen=True)
class Expected:
    """What one configured server must show: a tool it lists, its protocol era, and a safe call to make."""

    tool: str
    era: str  # "handshake" (initialize, <= 2025-11-25) or "modern" (server/discover, >= 2026-07-28)
    probe: Probe | None


# fetch gets no call: every call reaches out to the URL it is given.
EXPECTED: dict[str, Expected] = {
    "everything": Expected("echo", "handshake", _echo),
    "filesystem": Expected("read_text_file", "handshake", _read_fixture_file),
    "memory": Expected("create_entities", "handshake", _read_graph),
    "git": Expected("git_status", "modern", _git_status),
    "time": Expected("get_current_time", "modern", _utc_now),
    "fetch": Expected("fetch", "modern", None),
}


def _server_params(name: str, root: Path) -> tuple[StdioServerParameters, float]:
    """The stdio parameters and timeout of server `name`, read from tests/real_servers.yaml by the config loader."""
    server = load_config(CONFIG, environ={**os.environ, "TOOLTREE_REAL_SERVERS": str(root)}).server(name)
    assert server.command is not None
    params = StdioServerParameters(
        command=server.command, args=list(server.args), env=dict(server.env) or None, cwd=server.cwd
    )
    return params, server.timeout


def test_config_names_the_six_servers_all_under_the_install_folder() -> None:
    config = load_config(CONFIG, environ={"TOOLTREE_REAL_SERVERS": "/install"})
    assert [server.name for server in config.servers] == list(EXPECTED)
    for server in config.servers:
        assert server.command is not None
        assert server.command.startswith("/install/"), server.name
        assert server.timeout == 60


@pytest.mark.parametrize("name", list(EXPECTED))
def test_real_server_starts_lists_its_tools_and_answers_a_call(name: str, real_servers_root: Path) -> None:
    params, timeout = _server_params(name, real_servers_root)
    expected = EXPECTED[name]

    async def run() -> None:
        with anyio.fail_after(timeout):
            async with Client(params, mode="auto", read_timeout_seconds=timeout) as client:
                era = "modern" if client.protocol_version in MODERN_PROTOCOL_VERSIONS else "handshake"
                assert client.protocol_version in (*MODERN_PROTOCOL_VERSIONS, *HANDSHAKE_PROTOCOL_VERSIONS)
                assert era == expected.era, client.protocol_version

                listed = await client.list_tools()
                names = [tool.name for tool in listed.tools]
                assert expected.tool in names
                assert listed.next_cursor is None

                # The raw wire JSON keeps every field, including those the typed model drops.
                # TypeAdapter works at run time; the SDK's TypeVar is bound to BaseModel, hence the ignore.
                raw = await client.session.send_request(ListToolsRequest(), _RAW_RESULT)  # type: ignore[type-var]
                assert [tool["name"] for tool in raw["tools"]] == names
                for tool in raw["tools"]:
                    assert tool["inputSchema"]["type"] == "object", tool["name"]

                if expected.probe is not None:
                    await expected.probe(client, real_servers_root)

    anyio.run(run)
