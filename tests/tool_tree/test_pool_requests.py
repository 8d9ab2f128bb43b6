"""`ServerPool.request`: a prompt's get or a resource's read that fails is said of the request, not of a tool."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tool_tree.config import ServerConfig
from tool_tree.pool import CallFailure, ServerPool

pytestmark = pytest.mark.anyio
SERVER = Path(__file__).resolve().parents[1] / "servers" / "prompts_server.py"


def prompts_server() -> ServerConfig:
    return ServerConfig(name="alpha", command=sys.executable, args=(str(SERVER), "alpha"), timeout=10)


async def test_a_request_the_server_refuses_is_said_of_the_request_not_of_a_tool() -> None:
    async with ServerPool([prompts_server()]) as pool:
        refused = await pool.request("alpha", "prompts/get", {"name": "refuse"})
        got = await pool.request("alpha", "prompts/get", {"name": "greet", "arguments": {"name": "Ann"}})
    assert isinstance(refused, CallFailure) and refused.code == "server_error"
    assert refused.message.startswith("server error -32602: refused")
    assert refused.message.endswith("; the server answered the request with an error")
    assert "tool" not in refused.message  # before: "… an error of the protocol, not a result of the tool"
    assert not isinstance(got, CallFailure) and "Ann" in str(got["messages"])
