"""The servers' prompts and resources through `tooltree serve`, as a demanding user meets them: each get and read
in the audit log as a passthrough call is (``--audit``); a refresh whose listing of them fails keeping what the
tree recorded; a required argument not given refused before the server is asked; a hostile resource template
matched in time linear in the URI; and Claude Code (headless, against the fake Messages API) running a prompt as a
slash command, over stdio and over ``--http`` with the bearer token.

The servers are tests/servers/prompts_server.py; `tooltree serve` runs as a subprocess (``warm: 0``: no sandbox).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp
import pytest

from agent.serve.upstream_extras import UpstreamExtras
from generator.generate import generate as generate_tree
from tests.serve.test_upstream_prompts_resources import (
    REAL,
    REPO,
    WAIT,
    generate,
    serve_argv,
    server_entry,
    texts,
    write_config,
)
from tests.support import ServeProcess, require_install
from tooltree_cli.common import load

pytestmark = pytest.mark.anyio

ALPHA = server_entry("alpha", "alpha")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(tmp_path_factory.mktemp("audit"), ALPHA)


@asynccontextmanager
async def serve_audited(tree: Path, folder: Path, audit: Path) -> AsyncIterator[mcp.Client]:
    folder.mkdir(parents=True, exist_ok=True)
    argv = [*serve_argv(write_config(folder, ALPHA), tree), "--audit", str(audit)]
    params = mcp.StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(REPO))
    async with mcp.Client(params, read_timeout_seconds=WAIT) as client:
        yield client


def audit_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# ---- the audit log -------------------------------------------------------------------------------------------------


async def test_each_get_and_read_is_in_the_audit_log_as_a_passthrough_call_is(tree: Path, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    async with serve_audited(tree, tmp_path / "serve", audit) as client:
        await client.get_prompt("alpha__greet", {"name": "Ann"})
        with pytest.raises(mcp.MCPError):
            await client.get_prompt("alpha__refuse", {})
        await client.read_resource("alpha://big")
        await client.read_resource("alpha://items/7")
        with pytest.raises(mcp.MCPError):
            await client.get_prompt("alpha__crash", {})
    greet, refused, big, item, crashed = lines = audit_lines(audit)  # before: none
    assert len({line["session"] for line in lines}) == 1 and all(line["server"] == "alpha" for line in lines)
    assert all(line["ms"] >= 0 and line["ts"] > 0 for line in lines)
    assert (greet["method"], greet["prompt"], greet["outcome"]) == ("prompts/get", "greet", "ok")
    assert len(greet["args_sha256"]) == 16 and greet["bytes"] > 0
    assert (refused["prompt"], refused["outcome"], refused["code"]) == ("refuse", "refused", "server_error")
    assert "\x1b" not in refused["error"] and refused["error"].startswith("server error -32602: refused")
    assert (big["method"], big["uri"], big["outcome"]) == ("resources/read", "alpha://big", "ok")
    assert big["bytes"] > 1_000_000  # what the server sent, as a passthrough call's bytes are counted
    assert (item["uri"], item["outcome"]) == ("alpha://items/7", "ok")
    assert (crashed["prompt"], crashed["outcome"], crashed["code"]) == ("crash", "refused", "server_unavailable")


# ---- a required argument -------------------------------------------------------------------------------------------


async def test_a_required_argument_not_given_is_refused_before_the_server_is_asked(tree: Path, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    async with serve_audited(tree, tmp_path / "serve", audit) as client:
        with pytest.raises(mcp.MCPError) as caught:  # before: the server was asked, and said "Greet None plainly."
            await client.get_prompt("alpha__greet", {"style": "warmly"})
        given = await client.get_prompt("alpha__greet", {"name": "Bo"})  # the optional one may be left out
    assert str(caught.value).startswith("alpha__greet: missing required argument 'name'")
    assert texts(given) == ["Greet Bo plainly.", "Hello from alpha!"]
    assert [line["prompt"] for line in audit_lines(audit)] == ["greet"]  # only the one that went to the server


# ---- a refresh whose listing of them fails -------------------------------------------------------------------------


def test_a_listing_that_fails_at_a_refresh_keeps_what_the_tree_recorded(tmp_path: Path) -> None:
    out = generate(tmp_path, ALPHA)
    before = json.loads((out / "snapshots" / "alpha.json").read_text(encoding="utf-8"))
    refusing = server_entry("alpha", "alpha", env={"PROMPTS_SERVER_REFUSE_LISTS": "1"})
    result = generate_tree(load(write_config(tmp_path, refusing)), out, embeddings="off")
    assert not result.failed
    after = json.loads((out / "snapshots" / "alpha.json").read_text(encoding="utf-8"))
    # before: prompts/list and resources/templates/list failed, and the tree lost the server's prompts and templates
    assert after["prompts"] == before["prompts"] and after["resourceTemplates"] == before["resourceTemplates"]
    assert after["resources"] == before["resources"]  # listed again
    assert list(after) == list(before)  # the snapshot's keys in their order
    assert any(w.startswith("alpha: prompts/list failed, so the tree keeps the ones it recorded before, if any: ")
               and "no prompts today" in w for w in result.warnings)  # fmt: skip
    config = load(write_config(tmp_path, ALPHA))
    names = [p.name for p in UpstreamExtras(config, out, prompts=True, resources=True).offer.prompts]
    assert "alpha__greet" in names


def test_a_listing_that_runs_out_of_time_at_a_refresh_keeps_what_the_tree_recorded(tmp_path: Path) -> None:
    out = generate(tmp_path, ALPHA)
    before = json.loads((out / "snapshots" / "alpha.json").read_text(encoding="utf-8"))
    hanging = server_entry("alpha", "alpha", env={"PROMPTS_SERVER_HANG_LISTS": "1"}) + "    timeout: 3\n"
    result = generate_tree(load(write_config(tmp_path, hanging)), out, embeddings="off")
    assert not result.failed
    after = json.loads((out / "snapshots" / "alpha.json").read_text(encoding="utf-8"))
    assert after == before  # before: the tree lost the server's prompts, resources and templates
    assert any("alpha: its prompts and resources were not listed within its timeout (3 s in all" in w
               and "the tree keeps the ones it recorded before" in w for w in result.warnings)  # fmt: skip


def test_a_listing_that_fails_on_a_first_generation_records_none(tmp_path: Path) -> None:
    refusing = server_entry("alpha", "alpha", env={"PROMPTS_SERVER_REFUSE_LISTS": "1"})
    out = generate(tmp_path, refusing)
    snapshot = json.loads((out / "snapshots" / "alpha.json").read_text(encoding="utf-8"))
    assert "prompts" not in snapshot and "resourceTemplates" not in snapshot and snapshot["resources"]


# ---- a hostile resource template -----------------------------------------------------------------------------------

MATCH_TEMPLATE = """
import time
from agent.serve.upstream_offer import template_pattern
template = "x://" + "x".join("{v%d}" % i for i in range(10))
pattern = template_pattern(template)
assert pattern is not None
assert pattern.fullmatch("x://1x2x3x4x5x6x7x8x9x10")
assert not pattern.fullmatch("x://" + "x" * 4_000 + "/")
print("matched")
"""


def test_a_hostile_template_is_matched_in_time_linear_in_the_uri() -> None:
    # Ten expressions between literals: the backtracking regex tried every way to split a URI of 4,000 characters
    # (hours), on serve's event loop, for one resources/read.
    done = subprocess.run([sys.executable, "-c", MATCH_TEMPLATE], cwd=REPO, capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "matched", done.stderr[-2000:]


# ---- Claude Code ---------------------------------------------------------------------------------------------------

TOKEN = "prompts-token-0123456789"


async def claude_runs_the_prompt(tmp_path: Path, entry: dict[str, Any]) -> list[dict[str, Any]]:
    """``claude -p "/mcp__tooltree__alpha__greet Ann warmly"`` with tooltree as its MCP server: the requests the
    model got."""
    from agent.testing import FakeMessagesAPI, reply
    from tests.serve.test_real_clients import claude, claude_env

    clients = REAL / "clients"
    mcp_config = tmp_path / "mcp.json"
    mcp_config.write_text(json.dumps({"mcpServers": {"tooltree": entry}}), encoding="utf-8")
    with FakeMessagesAPI([lambda body: reply("done")] * 5) as api:
        env = claude_env(tmp_path / "home", ANTHROPIC_BASE_URL=api.base_url, ANTHROPIC_API_KEY="sk-fake")
        argv = [claude(clients), "-p", "/mcp__tooltree__alpha__greet Ann warmly", "--mcp-config", str(mcp_config),
                "--strict-mcp-config"]  # fmt: skip

        def headless() -> subprocess.CompletedProcess[str]:
            return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False)

        run = await anyio.to_thread.run_sync(headless)
        assert run.returncode == 0, run.stderr[-3000:]
        return list(api.requests)


@pytest.mark.real_servers
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_claude_code_runs_a_servers_prompt_as_a_slash_command_and_it_is_audited(
    tree: Path, tmp_path: Path, transport: str
) -> None:
    require_install(REAL / "clients" / ".stamp", "the MCP clients", "run `make real-servers`")
    audit = tmp_path / "audit.jsonl"
    argv = [*serve_argv(write_config(tmp_path, ALPHA), tree), "--audit", str(audit)]
    process = None
    if transport == "http":
        process = ServeProcess([*argv, "--http", "--port", "0"], {**os.environ, "TOOLTREE_SERVE_TOKEN": TOKEN})
        entry: dict[str, Any] = {"type": "http", "url": process.url, "headers": {"Authorization": f"Bearer {TOKEN}"}}
    else:
        entry = {"command": argv[0], "args": argv[1:], "cwd": str(REPO)}
    try:
        requests = await claude_runs_the_prompt(tmp_path, entry)
    finally:
        if process is not None:
            process.stop()
    blocks = [b for m in requests[-1]["messages"] if isinstance(m["content"], list) for b in m["content"]]
    said = [b.get("text") for b in blocks if b.get("type") == "text"]
    # the prompt's messages, got with its arguments split as Claude Code splits them, reach the model
    assert "Greet Ann warmly." in said and "Hello from alpha!" in said
    (line,) = audit_lines(audit)
    assert (line["server"], line["prompt"], line["outcome"]) == ("alpha", "greet", "ok")


def test_prompts_of_one_name_are_named_in_work_linear_in_their_number(monkeypatch: pytest.MonkeyPatch) -> None:
    # A tree from elsewhere may hold 1,000 prompts of one name on each of many servers whose names share their first
    # 64 characters: each new name tried every suffix from _2 again (20 such servers: minutes at serve's start).
    import agent.serve.upstream_offer as upstream_offer

    tried = 0
    fit = upstream_offer._fit

    def counted(base: str, suffix: str = "") -> str:
        nonlocal tried
        tried += 1
        return fit(base, suffix)

    monkeypatch.setattr(upstream_offer, "_fit", counted)
    servers = {"s" * 70 + str(i): upstream_offer.Found(prompts=[{"name": "p"}] * 300) for i in range(4)}
    offer = upstream_offer.offered(servers, prompts=True, resources=False)
    assert len(offer.prompts) == 1_200 and len(set(offer.routes)) == 1_200
    assert tried <= 3 * 1_200  # before: 180,600
