"""A call a server refuses until the user opens a URL (``-32042``, ``UrlElicitationRequiredError``) fails saying which
URL and the server's message (`tool_tree.server_asks.url_required`), so that the model can tell its user; before, only
the error's message came back ("This request requires browser-based authorization."), and the URL, which only the
error's ``data`` holds, was lost. Real process: the third-party ``server-everything`` through `ServerPool`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support import REPO, require_install
from tool_tree.config import ServerConfig
from tool_tree.pool import CallFailure, ServerPool
from tool_tree.server_asks import url_required

pytestmark = pytest.mark.anyio

REAL = Path(os.environ.get("TOOLTREE_REAL_SERVERS") or REPO / ".real-servers").resolve()


@pytest.mark.real_servers
async def test_a_call_the_server_refuses_until_a_url_is_opened_says_the_url_and_the_servers_message() -> None:
    require_install(REAL / ".stamp", "third-party MCP servers", "run `make real-servers`")
    everything = ServerConfig(
        name="everything",
        command=str(REAL / "node" / "node_modules" / ".bin" / "mcp-server-everything"),
        args=("stdio",),
        timeout=60,
        client_capabilities=("elicitation",),  # it lists trigger-url-elicitation only to a client that declares it
    )
    async with ServerPool([everything]) as pool:
        with anyio.fail_after(60):
            arguments = {"url": "https://example.com/sign-in", "errorPath": True}
            result = await pool.call("everything", "trigger-url-elicitation", arguments)
    assert isinstance(result, CallFailure) and result.code == "server_error"
    assert "This request requires browser-based authorization." in result.message
    assert (
        "the user must first open https://modelcontextprotocol.io ('Open this link to satisfy the prerequisite, then "
        "retry the request.'), then the call may be made again" in result.message
    )


def test_each_url_is_said_with_its_message_cleaned_and_on_one_line() -> None:
    data = {
        "elicitations": [
            {"mode": "url", "url": "https://a.example/x?y=1", "message": "Sign in\x1b[2J\nthere", "elicitationId": "1"},
            {"mode": "url", "url": "http://localhost:8080/pay"},
        ]
    }
    assert url_required(data) == (
        "the user must first open https://a.example/x?y=1 ('Sign in[2J there') and http://localhost:8080/pay, then the "
        "call may be made again"
    )


@pytest.mark.parametrize(
    "data",
    [
        None,
        "https://a.example",
        {"elicitations": "https://a.example"},
        {"elicitations": [{"url": "javascript:alert(1)"}, {"url": "https://a.example/\x1b]8;;evil"}, {"url": 7}]},
        {"elicitations": [{"url": "https://a.example/" + "a" * 2_000}, {"url": "https://a b.example"}]},
    ],
)
def test_data_without_an_http_url_to_open_says_so(data: Any) -> None:
    assert (
        url_required(data) == "it names no URL to open (its data.elicitations holds none that is an http or https URL)"
    )


def test_at_most_three_urls_are_said() -> None:
    data = {"elicitations": [{"url": f"https://{n}.example"} for n in range(5)]}
    assert url_required(data).count("https://") == 3
