"""The servers' prompts and resources through `tooltree serve` (`agent.serve.upstream_extras`): listed under names
that say their server, got and read from the right server, bounded and cleaned like passthrough results, failures
said like a passthrough call's, and ``serve: prompts / resources: false`` turning each off.

`tooltree serve` runs as a real subprocess over stdio, driven by the official SDK client (no sandbox is started:
``warm: 0`` and no script runs), in front of tests/servers/prompts_server.py (three instances: ``alpha``, ``beta``
and ``gamma``, whose resource list never ends) and of the third-party ``@modelcontextprotocol/server-everything``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp
import mcp_types as types
import pytest

from agent.serve.upstream_extras import UpstreamExtras
from agent.serve.upstream_lists import MAX_PAGES
from agent.serve.upstream_offer import template_pattern
from sandbox.config import SandboxConfig
from tests.support import REPO, raw_server_tree, require_install
from tool_tree.config import ConfigError
from tooltree_cli.common import load
from tooltree_cli.main import main as cli

pytestmark = pytest.mark.anyio

PROMPTS_SERVER = REPO / "tests" / "servers" / "prompts_server.py"
REAL = Path(os.environ.get("TOOLTREE_REAL_SERVERS") or REPO / ".real-servers").resolve()
EVERYTHING = REAL / "node" / "node_modules" / ".bin" / "mcp-server-everything"
INSPECTOR = REAL / "clients" / "node_modules" / ".bin" / "mcp-inspector"
WAIT = 90.0
CAP = SandboxConfig().output_chars


def server_entry(name: str, *args: str) -> str:
    argv = ", ".join(json.dumps(a) for a in (str(PROMPTS_SERVER), *args))
    return f"  {name}:\n    command: {json.dumps(sys.executable)}\n    args: [{argv}]\n"


def write_config(folder: Path, servers: str, serve: str = "") -> Path:
    path = folder / "tooltree.yaml"
    path.write_text(f"servers:\n{servers}serve:\n  warm: 0\n{serve}", encoding="utf-8")
    return path


def generate(folder: Path, servers: str) -> Path:
    tree = folder / "tree"
    assert cli(["generate-tree", "--config", str(write_config(folder, servers)), "--out", str(tree)]) == 0
    return tree


SERVERS = server_entry("alpha", "alpha") + server_entry("beta", "beta") + server_entry("gamma", "gamma", "endless")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(tmp_path_factory.mktemp("prompts"), SERVERS)


def serve_argv(config: Path, tree: Path) -> list[str]:
    return [sys.executable, "-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree),
            "--no-regenerate"]  # fmt: skip


@asynccontextmanager
async def serve(tree: Path, folder: Path, servers: str = SERVERS, settings: str = "") -> AsyncIterator[mcp.Client]:
    """An SDK client of `tooltree serve` (over stdio) for ``servers``, with more ``serve:`` ``settings``."""
    folder.mkdir(parents=True, exist_ok=True)
    argv = serve_argv(write_config(folder, servers, settings), tree)
    params = mcp.StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(REPO))
    async with mcp.Client(params, read_timeout_seconds=WAIT) as client:
        yield client


def texts(result: types.GetPromptResult) -> list[str]:
    return [m.content.text for m in result.messages if isinstance(m.content, types.TextContent)]


async def test_prompts_of_every_server_are_listed_under_names_that_say_their_server(tree: Path, tmp_path: Path) -> None:
    async with serve(tree, tmp_path) as client:
        declared = client.server_capabilities
        assert declared is not None and declared.prompts is not None and declared.resources is not None
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    for server in ("alpha", "beta", "gamma"):
        for name in ("greet", "echo_args", "report", "huge", "crash", "refuse"):
            assert f"{server}__{name}" in prompts
    assert len(prompts) == 18  # the prompt named with escapes and the one of 5,000 characters are left out
    greet = prompts["alpha__greet"]
    assert greet.description == "Greets someone."
    assert [(a.name, a.description, a.required) for a in greet.arguments or []] == [
        ("name", "Who to greet", True),
        ("style", "How", None),
    ]
    report = prompts["alpha__report"]
    for text in (report.title, report.description):  # cleaned as passthrough descriptions are: no ESC, BEL, bidi
        assert text is not None and not any(c in text for c in "\x1b\x07\u202e")
    assert report.description == "Writes a report.]52;c;ZWNobyBwd25lZAo=[2J[31mREDevil"
    (argument,) = prompts["alpha__echo_args"].arguments or []
    assert argument.name.isascii() and argument.name.isprintable() and argument.name.startswith("tone_")


async def test_a_prompt_is_got_from_its_own_server_with_its_arguments(tree: Path, tmp_path: Path) -> None:
    async with serve(tree, tmp_path) as client:
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        alpha = await client.get_prompt("alpha__greet", {"name": "Ann", "style": "warmly"})
        beta = await client.get_prompt("beta__greet", {"name": "Bo"})
        (argument,) = prompts["alpha__echo_args"].arguments or []
        echoed = await client.get_prompt("alpha__echo_args", {argument.name: "calm"})
        with pytest.raises(mcp.MCPError, match="unknown prompt 'nobody__greet'"):
            await client.get_prompt("nobody__greet", {})
    assert texts(alpha) == ["Greet Ann warmly.", "Hello from alpha!"]
    assert [m.role for m in alpha.messages] == ["user", "assistant"] and alpha.description == "greeting from alpha"
    assert texts(beta) == ["Greet Bo plainly.", "Hello from beta!"]
    # the argument offered under a clean name reaches the server under its own
    assert json.loads(texts(echoed)[0]) == {"tone\x1b]52;c;ZWNobyBwd25lZAo=\x07\x1b[2J\x1b[31mRED\u202eevil": "calm"}


async def test_a_prompts_messages_are_cleaned_and_capped_like_a_passthrough_result(tree: Path, tmp_path: Path) -> None:
    async with serve(tree, tmp_path) as client:
        report = await client.get_prompt("alpha__report", {})
        huge = await client.get_prompt("alpha__huge", {})
    first, image, embedded = (m.content for m in report.messages)
    assert isinstance(first, types.TextContent) and first.text == "ReportREDevil"  # whole escapes gone
    assert isinstance(image, types.ImageContent) and image.mime_type == "image/png"
    assert isinstance(embedded, types.EmbeddedResource)
    assert getattr(embedded.resource, "text", None) == "docREDevil"
    text, note = texts(huge)
    assert text == "h" * CAP
    assert f"{1_000_000 - CAP:,} of 1,000,000 characters of text cut" in note and f"{CAP:,} characters" in note


async def test_a_failing_server_is_reported_like_a_failing_passthrough_call(tree: Path, tmp_path: Path) -> None:
    async with serve(tree, tmp_path) as client:
        with pytest.raises(mcp.MCPError) as refused:
            await client.get_prompt("alpha__refuse", {})
        with pytest.raises(mcp.MCPError) as crashed:
            await client.get_prompt("alpha__crash", {})
        again = await client.get_prompt("alpha__greet", {"name": "Cy"})  # the server is started again
    said = str(refused.value)
    assert said.startswith("alpha.refuse failed (server_error): server error -32602: refused")
    assert "\x1b" not in said and "\u202e" not in said
    assert str(crashed.value).startswith("alpha.crash failed (server_unavailable): server 'alpha' is unavailable")
    assert texts(again) == ["Greet Cy plainly.", "Hello from alpha!"]


async def test_resources_and_templates_of_every_server_are_listed_and_each_read_goes_to_its_owner(
    tree: Path, tmp_path: Path
) -> None:
    async with serve(tree, tmp_path) as client:
        resources = (await client.list_resources()).resources
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        readme = await client.read_resource("beta://readme")
        item = await client.read_resource("alpha://items/7")
        refusals = {}
        for uri in ("shared://readme", "shared://items/1", "nowhere://x"):
            with pytest.raises(mcp.MCPError) as caught:
                await client.read_resource(uri)
            refusals[uri] = str(caught.value)
    uris = [r.uri for r in resources]
    assert {"alpha://readme", "alpha://big", "alpha://logo.png", "alpha://hostile", "beta://readme"} <= set(uris)
    assert not any("bad" in u for u in uris)  # its URI carries escapes: it could not be read back exactly
    assert len([u for u in uris if u.startswith("gamma://pages/")]) == MAX_PAGES  # its list never ends
    hostile = next(r for r in resources if r.uri == "alpha://hostile")
    assert hostile.name == "alpha__hostile]52;c;ZWNobyBwd25lZAo=[2J[31mREDevil"
    assert hostile.description is not None and len(hostile.description) == 4_000 and "\x1b" not in hostile.description
    assert {"alpha://items/{id}", "beta://items/{id}", "shared://items/{id}"} <= set(templates)
    assert [getattr(c, "text", None) for c in readme.contents] == ["read beta://readme from beta"]
    assert [getattr(c, "text", None) for c in item.contents] == ["item 7 of alpha"]
    assert "listed by more than one server (alpha, beta)" in refusals["shared://readme"]
    assert "matches resource templates of more than one server (alpha, beta, gamma)" in refusals["shared://items/1"]
    assert "no server lists the resource 'nowhere://x'" in refusals["nowhere://x"]


async def test_a_resource_read_is_bounded_and_cleaned(tree: Path, tmp_path: Path) -> None:
    async with serve(tree, tmp_path) as client:
        big = await client.read_resource("alpha://big")
        logo = await client.read_resource("alpha://logo.png")
        hostile = await client.read_resource("alpha://hostile")
    text, note = (getattr(c, "text", None) for c in big.contents)
    assert text is not None and CAP - 100 < len(text) < CAP and text == "b" * len(text)  # its URI counts too
    assert note is not None and f"{1_000_000 - len(text):,} of 1,000,000 characters of text cut" in note
    (blob,) = logo.contents
    assert isinstance(blob, types.BlobResourceContents) and blob.mime_type == "image/png" and blob.blob
    assert [getattr(c, "text", None) for c in hostile.contents] == ["textREDevil"]


async def test_each_can_be_turned_off_in_the_serve_section(tree: Path, tmp_path: Path) -> None:
    async with serve(tree, tmp_path / "a", settings="  prompts: false\n") as client:
        declared = client.server_capabilities
        assert declared is not None and declared.prompts is None and declared.resources is not None
        assert (await client.list_resources()).resources
        with pytest.raises(mcp.MCPError):
            await client.list_prompts()
    async with serve(tree, tmp_path / "b", settings="  resources: false\n") as client:
        declared = client.server_capabilities
        assert declared is not None and declared.resources is None and declared.prompts is not None
        assert (await client.list_prompts()).prompts


def test_a_switch_that_is_not_true_or_false_names_file_line_and_key(tmp_path: Path) -> None:
    path = write_config(tmp_path, server_entry("alpha", "alpha"), "  prompts: sometimes\n")
    with pytest.raises(ConfigError) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}:7: serve.prompts: expected ")


async def test_after_the_listing_only_what_a_server_offers_is_declared(tree: Path, tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    tool = {"name": "t", "inputSchema": {"type": "object"}}
    tools_only, _ = await anyio.to_thread.run_sync(raw_server_tree, tmp_path / "raw", [tool])
    for config, folder, expected in (
        (load(tmp_path / "raw" / "tooltree.yaml"), tools_only, False),
        (load(write_config(tmp_path, server_entry("alpha", "alpha"))), tree, True),
    ):
        extras = UpstreamExtras(config, folder, prompts=True, resources=True)
        before = extras.capabilities(types.ServerCapabilities())
        assert before.prompts is not None and before.resources is not None  # not listed yet: they may be offered
        async with anyio.create_task_group() as tg:
            assert await extras.ready(tg)
        after = extras.capabilities(types.ServerCapabilities())
        assert (after.prompts is not None, after.resources is not None) == (expected, expected)


def test_a_uri_template_matches_what_it_expands_to() -> None:
    simple = template_pattern("notes://items/{id}")
    assert simple is not None and simple.fullmatch("notes://items/7") and not simple.fullmatch("notes://items/7/x")
    wide = template_pattern("file:///{+path}{?q}")
    assert wide is not None and wide.fullmatch("file:///a/b/c?q=1")
    assert template_pattern("x://" + "{a}/" * 11) is None


@pytest.mark.real_servers
async def test_the_real_everything_servers_prompts_and_resources_come_through(tmp_path: Path) -> None:
    require_install(REAL / ".stamp", "third-party MCP servers", "run `make real-servers`")
    servers = f"  everything:\n    command: {json.dumps(str(EVERYTHING))}\n    args: [stdio]\n    timeout: 60\n"
    tree = await anyio.to_thread.run_sync(generate, tmp_path, servers)
    async with serve(tree, tmp_path / "serve", servers) as client:
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        got = await client.get_prompt("everything__args-prompt", {"city": "Lyon", "state": "Rhone"})
        resources = [r.uri for r in (await client.list_resources()).resources]
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        document = await client.read_resource("demo://resource/static/document/architecture.md")
        dynamic = await client.read_resource("demo://resource/dynamic/text/3")
        blob = await client.read_resource("demo://resource/dynamic/blob/3")
    assert {"everything__simple-prompt", "everything__args-prompt"} <= set(prompts)
    assert [a.name for a in prompts["everything__args-prompt"].arguments or []] == ["city", "state"]
    assert any("Lyon" in t for t in texts(got))
    assert "demo://resource/static/document/architecture.md" in resources
    assert "demo://resource/dynamic/text/{resourceId}" in templates
    assert "Architecture" in str(getattr(document.contents[0], "text", ""))
    assert getattr(dynamic.contents[0], "text", None)
    assert isinstance(blob.contents[0], types.BlobResourceContents)


@pytest.mark.real_servers
def test_the_inspector_cli_lists_the_prompts_through_tooltree(tree: Path, tmp_path: Path) -> None:
    require_install(REAL / "clients" / ".stamp", "the MCP clients", "run `make real-servers`")
    argv = serve_argv(write_config(tmp_path, SERVERS), tree)
    listed = subprocess.run([str(INSPECTOR), "--cli", "--method", "prompts/list", "--", *argv], cwd=REPO,
                            capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert listed.returncode == 0, listed.stderr[-2000:]
    names = [p["name"] for p in json.loads(listed.stdout)["prompts"]]
    assert "alpha__greet" in names and "beta__greet" in names
