"""Claude Code headless (``claude -p``) connected to `tooltree serve --http` (``"type": "http"`` with the bearer
token in its MCP config), against the project's fake Messages API: a script's image comes back to the model as an
image, a script that raises as an error result, a missing file as an error. Skips without the installed clients
(``REQUIRE_REAL_SERVERS=1`` fails instead), as tests/serve/test_real_clients.py does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.serve.conftest import TOKEN, Serve, clean_up, new_serve
from tests.serve.test_real_clients import claude_headless, clients

pytestmark = [pytest.mark.docker, pytest.mark.real_servers, pytest.mark.anyio]

__all__ = ["clients"]  # the fixture, imported for the tests here

TOOLS = ("execute_python", "read_file")
STEPS = [
    ("ToolSearch", {"query": "select:" + ",".join(f"mcp__tooltree__{n}" for n in TOOLS)}),
    ("mcp__tooltree__execute_python", {"code": "from servers.media import render_chart\n"
                                       "show_image(render_chart(title='t', values=[1, 2]).images[0])\nprint('drawn')"}),
    ("mcp__tooltree__execute_python", {"code": "1 / 0"}),
    ("mcp__tooltree__read_file", {"path": "servers/nosuch.py"}),
]  # fmt: skip


@pytest.fixture
def served(serve_tree: Path, tmp_path: Path, docker_engine: Any) -> Iterator[Serve]:
    serve = new_serve(tmp_path, serve_tree)
    serve.start_http()
    yield serve
    clean_up(serve, docker_engine)


def scripted_model(body: dict[str, Any]) -> dict[str, Any]:
    from agent.testing import reply, tool_use

    if not body.get("tools"):
        return reply("ok")
    done = sum(1 for b in _blocks(body) if b.get("type") == "tool_result")
    return reply(tool_use(*STEPS[done])) if done < len(STEPS) else reply("done")


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]


async def test_claude_code_over_http_gets_images_as_images_and_errors_as_errors(
    clients: Path, served: Serve, tmp_path: Path
) -> None:

    entry = {"type": "http", "url": served.url, "headers": {"Authorization": f"Bearer {TOKEN}"}}
    run, requests = await claude_headless(clients, tmp_path, entry, TOOLS, "draw it", scripted_model, 20)
    assert run.returncode == 0, run.stderr[-3000:]
    results = [b for b in _blocks(requests[-1]) if b.get("type") == "tool_result"][1:]  # after ToolSearch's
    drawn, raised, missing = results
    kinds = [c["type"] for c in drawn["content"]]
    assert kinds[:2] == ["text", "image"] and not drawn.get("is_error"), drawn
    assert drawn["content"][0]["text"].startswith("drawn")
    assert drawn["content"][1]["source"]["media_type"] == "image/png"
    assert raised.get("is_error") is True and "ZeroDivisionError: division by zero" in json.dumps(raised["content"])
    assert missing.get("is_error") is True and "servers/nosuch.py: no such file" in json.dumps(missing["content"])


async def test_claude_code_opens_a_new_session_when_serve_ended_its_own_mid_conversation(
    clients: Path, serve_tree: Path, tmp_path: Path, docker_engine: Any
) -> None:
    # A session serve ended to make room for another client: Claude Code's next call gets 404 and it opens a new
    # session, where the call runs (serve answers -32001 there, as the TypeScript SDK's servers do; Claude Code
    # initializes again on the SDK's -32600 too). Restarting serve while Claude Code is connected is another
    # matter: it reconnects at once when its stream drops and gives up while serve is down (README).
    import time

    import httpx2

    from agent.testing import reply, tool_use

    serve = new_serve(tmp_path, serve_tree, serve={"max_sessions": 2})
    serve.start_http()
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {TOKEN}"}
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
             "capabilities": {}, "clientInfo": {"name": "other", "version": "0"}}}  # fmt: skip

    def two_clients_come_and_go() -> None:
        """Two clients that initialize, the second ending Claude Code's session (the one without a request in flight
        for longest: the first is new), then leave (DELETE)."""
        with httpx2.Client(timeout=30) as http:
            opened = []
            for _ in range(2):
                deadline = time.monotonic() + 30
                while (answer := http.post(serve.url, json=hello, headers=headers)).status_code == 503:
                    assert time.monotonic() < deadline, answer.text
                assert answer.status_code == 200, answer.text
                opened.append(answer.headers["mcp-session-id"])
            for key in opened:
                assert http.delete(serve.url, headers={**headers, "Mcp-Session-Id": key}).status_code == 200

    steps = [
        ("ToolSearch", {"query": "select:mcp__tooltree__execute_python"}),
        ("mcp__tooltree__execute_python", {"code": "print('in the first session')"}),
        ("mcp__tooltree__execute_python", {"code": "print('in a new session')"}),
    ]

    def model(body: dict[str, Any]) -> dict[str, Any]:
        if not body.get("tools"):
            return reply("ok")
        done = sum(1 for b in _blocks(body) if b.get("type") == "tool_result")
        if done == 2:  # the first script ran: its session is ended before the second is called
            two_clients_come_and_go()
        return reply(tool_use(*steps[done])) if done < len(steps) else reply("done")

    try:
        entry = {"type": "http", "url": serve.url, "headers": {"Authorization": f"Bearer {TOKEN}"}}
        run, requests = await claude_headless(clients, tmp_path, entry, ["execute_python"], "run it", model, 10)
    finally:
        clean_up(serve, docker_engine)
    assert run.returncode == 0, run.stderr[-3000:]
    first, again = [b for b in _blocks(requests[-1]) if b.get("type") == "tool_result"][1:]
    assert not first.get("is_error") and not again.get("is_error"), again
    assert "in a new session" in json.dumps(again["content"])
