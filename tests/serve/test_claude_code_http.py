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
