"""What Claude Code makes of `tooltree serve` at its own limits: the part of a server's instructions it reads, and
what it shows when a ``--http`` serve is added without the token. Skips without the installed clients
(``REQUIRE_REAL_SERVERS=1`` fails instead), as tests/serve/test_real_clients.py does."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.serve.server import INSTRUCTIONS_CHARS
from tests.serve.conftest import Serve, clean_up, new_serve
from tests.serve.test_real_clients import RUN_WAIT, claude, claude_env, claude_headless, clients
from tests.support import SAMPLE_SERVERS

pytestmark = [pytest.mark.docker, pytest.mark.real_servers]

__all__ = ["clients"]  # the fixture, imported for the tests here

COPIES = 18
"""Copies of the docs sample server: an ``INDEX.md`` of about 3,600 characters, short enough to be inlined whole."""
PINNED = "docs9.get_document"
"""The last server of the index, whose one tool is pinned: its signature ends the instructions."""


@pytest.fixture(scope="module")
def wide_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tree of `COPIES` docs servers (``docs0`` … ``docs17``)."""
    from generator.generate import generate
    from tooltree_cli.common import load

    folder = tmp_path_factory.mktemp("wide-tree")
    lines = ["servers:"]
    for n in range(COPIES):
        script = json.dumps(str(SAMPLE_SERVERS / "docs.py"))
        lines += [f"  docs{n}:", f"    command: {json.dumps(sys.executable)}", f"    args: [{script}]"]
    config = folder / "tooltree.yaml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = generate(load(config), folder / "tree", embeddings="off")
    assert not result.failed, [s.error for s in result.failed]
    return folder / "tree"


def instructions_read(requests: list[dict[str, Any]]) -> str:
    """The text Claude Code put in the model's context under tooltree's instructions heading."""
    for request in requests:
        for message in request["messages"]:
            content = message["content"]
            for block in content if isinstance(content, list) else [{"text": content}]:
                text = block.get("text") or ""
                if (start := text.find("## tooltree\n")) >= 0:
                    return text[start:].split("\n\n\nThe following", 1)[0]
    raise AssertionError("no request carried tooltree's instructions")


@pytest.mark.anyio
async def test_claude_code_reads_the_index_and_pinned_signature_of_a_tree_of_many_servers_whole(
    clients: Path, wide_tree: Path, tmp_path: Path, docker_engine: Any
) -> None:
    # Before: the instructions were 4,754 characters (the tree's INDEX.md inlined whole, then the pinned signature)
    # and Claude Code cut them at 4,096 to "… [truncated]": the last servers and the signature were lost.
    from agent.testing import reply

    serve = new_serve(tmp_path, wide_tree)
    serve.config.write_text(
        serve.config.read_text(encoding="utf-8") + f"agent:\n  pinned: [{PINNED}]\n", encoding="utf-8"
    )
    try:
        argv = serve.argv()
        entry = {"command": argv[0], "args": argv[1:], "env": {"TOOLTREE_SANDBOX_OWNER": serve.owner}}
        run, requests = await claude_headless(clients, tmp_path, entry, (), "hello", lambda _: reply("hi"), 10)
    finally:
        clean_up(serve, docker_engine)
    assert run.returncode == 0, run.stderr[-3000:]
    read = instructions_read(requests)
    assert "[truncated]" not in read
    assert len(read.removeprefix("## tooltree\n")) <= INSTRUCTIONS_CHARS
    assert f"{COPIES} servers" in read and "- docs9 (4)" in read  # every server named, the last one too
    assert "def get_document(" in read and "servers/docs9/get_document.py" in read  # the pinned signature


def test_claude_code_adding_an_http_serve_without_the_token_is_told_the_header_to_send(
    clients: Path, make_serve: Callable[..., Serve], tmp_path: Path
) -> None:
    # Before: "Dynamic Client Registration rejected (HTTP 404): … the MCP endpoint is [redacted]" (Claude Code looks
    # for OAuth after the 401, registers, and shows why that failed).
    serve = make_serve()
    serve.start_http()
    env = claude_env(tmp_path / "home", ANTHROPIC_API_KEY="sk-fake")
    cwd = tmp_path

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([claude(clients), "mcp", *args], capture_output=True, text=True, env=env, cwd=cwd,
                              timeout=RUN_WAIT, check=False)  # fmt: skip

    added = run("add", "--transport", "http", "tooltree", serve.url)
    assert added.returncode == 0, added.stderr
    got = run("get", "tooltree")
    assert "Failed to connect" in got.stdout, got.stdout
    assert "takes no OAuth: send the header Authorization: Bearer <token>" in got.stdout, got.stdout
    assert "TOOLTREE_SERVE_TOKEN" in got.stdout


def test_pinned_signatures_past_what_claude_code_reads_are_warned_of_naming_the_setting(
    make_serve: Callable[..., Serve],
) -> None:
    # Before: nothing said that Claude Code would cut the signatures of the last pinned tools.
    serve = make_serve(serve={"warm": 0})
    tools = [f"crm.{t}" for t in ("create_task", "get_record", "list_leads", "log_activity", "search_records")]
    tools += [f"docs.{t}" for t in ("get_document", "get_document_metadata", "list_documents", "search_documents")]
    tools += ["crm.update_record", "media.render_chart", "media.thumbnail"]
    text = serve.config.read_text(encoding="utf-8")
    serve.config.write_text(text + f"agent:\n  pinned: [{', '.join(tools)}]\n", encoding="utf-8")
    line = len(text.splitlines()) + 2
    run = subprocess.run(serve.argv(), stdin=subprocess.DEVNULL, capture_output=True, text=True, env=serve.env(),
                         timeout=RUN_WAIT, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr
    warned = [x for x in run.stderr.splitlines() if "agent.pinned" in x]
    assert len(warned) == 1, run.stderr
    assert warned[0].startswith(f"warning: {serve.config}:{line}: agent.pinned: ")
    assert f"past the {INSTRUCTIONS_CHARS:,} Claude Code reads" in warned[0] and "pin fewer" in warned[0]
