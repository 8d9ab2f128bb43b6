"""The servers' prompts and resources through `tooltree serve` (`agent.serve.upstream_extras`): listed under names
that say their server, as the tree's snapshots record them (a list starts no server; a refresh that changes them
changes what is listed, and tells the client), got and read from the right server, bounded and cleaned like
passthrough results, failures said like a passthrough call's, and ``serve: prompts / resources: false`` turning
each off.

`tooltree serve` runs as a real subprocess over stdio, driven by the official SDK client (no sandbox is started:
``warm: 0`` and no script runs), in front of tests/servers/prompts_server.py (three instances: ``alpha``, ``beta``
and ``gamma``, whose resource list never ends) and of the third-party ``@modelcontextprotocol/server-everything``.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp
import mcp_types as types
import pytest

from agent.serve.upstream_extras import UpstreamExtras
from agent.serve.upstream_offer import template_pattern
from sandbox.config import SandboxConfig
from tests.generator.test_snapshot_prompts import as_an_older_release_wrote_it
from tests.serve.raw_stdio import RawStdio
from tests.support import REPO, TEST_OWNER, raw_server_tree, require_install
from tool_tree.config import ConfigError
from tool_tree.snapshot_lists import MAX_ITEMS, MAX_PAGES
from tooltree_cli.common import load
from tooltree_cli.main import main as cli

pytestmark = pytest.mark.anyio

PROMPTS_SERVER = REPO / "tests" / "servers" / "prompts_server.py"
REAL = Path(os.environ.get("TOOLTREE_REAL_SERVERS") or REPO / ".real-servers").resolve()
EVERYTHING = REAL / "node" / "node_modules" / ".bin" / "mcp-server-everything"
INSPECTOR = REAL / "clients" / "node_modules" / ".bin" / "mcp-inspector"
WAIT = 90.0
CAP = SandboxConfig().output_chars


def server_entry(name: str, *args: str, env: dict[str, str] | None = None) -> str:
    argv = ", ".join(json.dumps(a) for a in (str(PROMPTS_SERVER), *args))
    entry = f"  {name}:\n    command: {json.dumps(sys.executable)}\n    args: [{argv}]\n"
    return entry + (f"    env: {json.dumps(env)}\n" if env else "")


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


def serve_argv(config: Path, tree: Path, *, regenerate: bool = False) -> list[str]:
    return [sys.executable, "-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree),
            *(() if regenerate else ("--no-regenerate",))]  # fmt: skip


@asynccontextmanager
async def serve(
    tree: Path,
    folder: Path,
    servers: str = SERVERS,
    settings: str = "",
    *,
    regenerate: bool = False,
    on_message: Any = None,
    mode: Any = "auto",
) -> AsyncIterator[mcp.Client]:
    """An SDK client of `tooltree serve` (over stdio) for ``servers``, with more ``serve:`` ``settings``
    (``regenerate``: without ``--no-regenerate``; ``on_message``: the client's message handler; ``mode``: its
    protocol era)."""
    folder.mkdir(parents=True, exist_ok=True)
    argv = serve_argv(write_config(folder, servers, settings), tree, regenerate=regenerate)
    params = mcp.StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(REPO))
    async with mcp.Client(params, read_timeout_seconds=WAIT, message_handler=on_message, mode=mode) as client:
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


async def test_a_list_starts_no_server_and_a_get_starts_its_own(tree: Path, tmp_path: Path) -> None:
    mark = tmp_path / "started.txt"
    servers = "".join(
        server_entry(name, name, *extra, env={"PROMPTS_SERVER_MARK": str(mark)})
        for name, extra in (("alpha", ()), ("beta", ()), ("gamma", ("endless",)))
    )
    async with serve(tree, tmp_path / "serve", servers) as client:  # with --no-regenerate
        prompts = (await client.list_prompts()).prompts
        resources = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
        assert len(prompts) == 18 and resources and templates  # from the tree's snapshots
        assert not mark.exists()  # before, the first list started every server
        await client.get_prompt("beta__greet", {"name": "Di"})
        assert mark.read_text(encoding="utf-8").split() == ["beta"]


def test_what_the_tree_records_is_declared_and_offered(tree: Path, tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    tool = {"name": "t", "inputSchema": {"type": "object"}}
    tools_only, _ = raw_server_tree(tmp_path / "raw", [tool])
    for config, folder, expected in (
        (load(tmp_path / "raw" / "tooltree.yaml"), tools_only, False),
        (load(write_config(tmp_path, server_entry("alpha", "alpha"))), tree, True),
    ):
        declared = UpstreamExtras(config, folder, prompts=True, resources=True).capabilities(types.ServerCapabilities())
        assert (declared.prompts is not None, declared.resources is not None) == (expected, expected)


async def test_with_a_passthrough_tool_resources_are_declared_though_no_server_lists_one(tmp_path: Path) -> None:
    # MCP calls a resource link one the server can read; a client that checks the capability (Claude Code) reads
    # none from a server that does not declare resources. Before, serve declared none: no server listed one.
    server = json.dumps(str(REPO / "tests" / "servers" / "structured_server.py"))
    servers = f"  charts:\n    command: {json.dumps(sys.executable)}\n    args: [{server}]\n"
    tree = await anyio.to_thread.run_sync(generate, tmp_path, servers)
    async with serve(tree, tmp_path / "tools", servers) as client:
        alone = client.server_capabilities
    async with serve(tree, tmp_path / "passthrough", servers, '  passthrough: ["charts.chart"]\n') as client:
        declared = client.server_capabilities
        assert declared is not None and declared.resources is not None and declared.prompts is None
        assert (await client.list_resources()).resources == []
        assert (await client.list_resource_templates()).resource_templates == []
        made = await client.call_tool("charts__chart", {"title": "March"})
        (link,) = [b for b in made.content if isinstance(b, types.ResourceLink)]
        with pytest.raises(mcp.MCPError, match=r"^charts: reading 'file:///charts/data\.csv' failed"):
            await client.read_resource(link.uri)  # to the server that linked to it, which has no such file
    assert alone is not None and alone.resources is None  # with no passthrough tool, nothing links to one


@pytest.mark.real_servers
async def test_claude_code_reads_a_link_a_passthrough_tool_returned_though_no_server_lists_a_resource(
    tmp_path: Path,
) -> None:
    # Claude Code offers its model ReadMcpResourceTool only when a server declares resources (before: 'No such tool
    # available: ReadMcpResourceTool', and the link a passthrough tool returned could not be read).
    from agent.testing import reply, tool_use
    from tests.serve.test_real_clients import claude_headless

    clients = REAL / "clients"
    require_install(clients / ".stamp", "the MCP clients", "run `make real-servers`")
    server = json.dumps(str(REPO / "tests" / "servers" / "structured_server.py"))
    servers = f"  charts:\n    command: {json.dumps(sys.executable)}\n    args: [{server}]\n"
    tree = await anyio.to_thread.run_sync(generate, tmp_path, servers)
    argv = serve_argv(write_config(tmp_path, servers, '  passthrough: ["charts.chart"]\n'), tree)
    steps = [
        ("ToolSearch", {"query": "select:mcp__tooltree__charts__chart,ReadMcpResourceTool"}),
        ("mcp__tooltree__charts__chart", {"title": "March"}),
        ("ReadMcpResourceTool", {"server": "tooltree", "uri": "file:///charts/data.csv"}),
    ]

    def model(body: dict[str, Any]) -> dict[str, Any]:
        if not body.get("tools"):
            return reply("ok")
        done = sum(1 for m in body["messages"] if isinstance(m["content"], list)
                   for b in m["content"] if b.get("type") == "tool_result")  # fmt: skip
        return reply(tool_use(*steps[done])) if done < len(steps) else reply("done")

    entry = {"command": argv[0], "args": argv[1:], "env": {"PYTHONPATH": str(REPO)}}
    run, requests = await claude_headless(clients, tmp_path, entry, ["charts__chart"], "chart it", model, 10)
    assert run.returncode == 0, run.stderr[-3000:]
    last = json.dumps(requests[-1]["messages"][-1])
    assert "charts: reading 'file:///charts/data.csv' failed" in last, last[-2000:]  # the server that linked to it


def test_a_snapshot_without_the_lists_or_with_malformed_ones_offers_none_of_them(tree: Path, tmp_path: Path) -> None:
    copy = tmp_path / "tree"
    shutil.copytree(tree, copy)
    older = json.loads((copy / "snapshots" / "alpha.json").read_text(encoding="utf-8"))
    for key in ("prompts", "resources", "resourceTemplates"):
        del older[key]  # as a tree of an earlier release has it
    (copy / "snapshots" / "alpha.json").write_text(json.dumps(older), encoding="utf-8")
    hostile = json.loads((copy / "snapshots" / "beta.json").read_text(encoding="utf-8"))
    hostile["prompts"] = [7, "x", None, *({"name": f"p{i}"} for i in range(MAX_ITEMS + 50))]
    hostile["resources"], hostile["resourceTemplates"] = {"uri": "beta://x"}, None
    (copy / "snapshots" / "beta.json").write_text(json.dumps(hostile), encoding="utf-8")
    config = load(write_config(tmp_path, SERVERS))
    extras = UpstreamExtras(config, copy, prompts=True, resources=True)
    names = [p.name for p in extras.offer.prompts]
    assert not any(n.startswith("alpha__") for n in names)
    assert len([n for n in names if n.startswith("beta__")]) == MAX_ITEMS - 3  # the first MAX_ITEMS, objects only
    assert {r.uri for r in extras.offer.resources} == {f"gamma://pages/{i}" for i in range(MAX_PAGES)}
    assert {t.uri_template for t in extras.offer.templates} == {"gamma://items/{id}", "shared://items/{id}"}


async def test_a_refresh_that_changes_a_servers_prompts_changes_what_is_listed_and_tells_the_client(
    tmp_path: Path,
) -> None:
    tree = await anyio.to_thread.run_sync(generate, tmp_path, server_entry("alpha", "alpha"))
    more, gate = tmp_path / "more.txt", tmp_path / "gate"
    more.write_text("fresh\n", encoding="utf-8")  # the server's prompts now, which the tree does not have yet
    env = {"PROMPTS_SERVER_MORE": str(more), "PROMPTS_SERVER_GATE": str(gate)}
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if getattr(message, "method", None) == "notifications/prompts/list_changed":
            changed.set()

    servers = server_entry("alpha", "alpha", env=env)
    # In the handshake era, as Claude Code connects (the 2026-07-28 one has no standing channel to notify on).
    async with serve(
        tree, tmp_path / "serve", servers, regenerate=True, on_message=on_message, mode="legacy"
    ) as client:
        before = [p.name for p in (await client.list_prompts()).prompts]
        gate.touch()  # the refresh's listing of alpha goes on
        with anyio.fail_after(WAIT):
            await changed.wait()
        after = [p.name for p in (await client.list_prompts()).prompts]
    assert "alpha__greet" in before and "alpha__fresh" not in before
    assert "alpha__fresh" in after and "alpha__greet" in after


OLDER = "was generated by a tooltree release that did not record the servers' prompts and resources"


def serve_stderr(argv: list[str], until: str = "") -> str:
    """What `tooltree serve` (``argv``) writes to stderr from its start to its end: a client shakes hands, waits for
    a line holding ``until`` (when given), and leaves."""
    raw = RawStdio(argv, {**os.environ, "TOOLTREE_SANDBOX_OWNER": TEST_OWNER})
    try:
        raw.initialize()
        if until:
            raw.wait_for_stderr(until)
        assert raw.close_stdin() == 0
    finally:
        raw.close()
    return "".join(raw.stderr)


def test_a_tree_of_a_release_that_did_not_record_prompts_served_as_it_is_says_so_once(
    tree: Path, tmp_path: Path
) -> None:
    # Before: it offered no prompt or resource, and serve said nothing.
    older = tmp_path / "older"
    shutil.copytree(tree, older)
    as_an_older_release_wrote_it(older)
    config = write_config(tmp_path, SERVERS)
    log = serve_stderr(serve_argv(config, older))
    assert log.count(OLDER) == 1, log
    assert (
        f"{older} {OLDER}, and serve offers none of those of alpha, beta, gamma; regenerate the tree with "
        f"`tooltree generate-tree --config {config} --out {older}`, or serve without --no-regenerate\n"
    ) in log
    assert OLDER not in serve_stderr(serve_argv(config, tree))  # a tree of this release


def test_a_tree_of_servers_without_prompts_says_nothing_unless_an_older_release_wrote_it(tmp_path: Path) -> None:
    # Its snapshots are the same whichever release wrote them: only the manifest tells.
    tools_only, _ = raw_server_tree(tmp_path, [{"name": "t", "inputSchema": {"type": "object"}}])
    config = tmp_path / "tooltree.yaml"
    config.write_text(config.read_text(encoding="utf-8") + "serve:\n  warm: 0\n", encoding="utf-8")
    argv = serve_argv(config, tools_only)
    assert OLDER not in serve_stderr(argv)
    as_an_older_release_wrote_it(tools_only)
    assert "and serve offers none of those of raw;" in serve_stderr(argv)


async def test_the_refresh_of_an_older_releases_tree_records_them_and_serve_warns_only_when_it_fails(
    tree: Path, tmp_path: Path
) -> None:
    older = tmp_path / "older"
    shutil.copytree(tree, older)
    as_an_older_release_wrote_it(older)
    argv = serve_argv(write_config(tmp_path, SERVERS), older, regenerate=True)
    log = await anyio.to_thread.run_sync(serve_stderr, argv, "sessions from now on get the refreshed tree's")
    assert OLDER not in log, log
    async with serve(older, tmp_path / "serve") as client:  # --no-regenerate: the refreshed tree offers them
        assert "alpha__greet" in [p.name for p in (await client.list_prompts()).prompts]

    as_an_older_release_wrote_it(older)
    fails = "".join(f"  {n}:\n    command: {json.dumps(sys.executable)}\n    args: [-c, 'raise SystemExit(3)']\n"
                    for n in ("alpha", "beta", "gamma"))  # fmt: skip
    argv = serve_argv(write_config(tmp_path, fails), older, regenerate=True)
    log = await anyio.to_thread.run_sync(serve_stderr, argv, "every server failed (see above); it is served as it was")
    assert log.count(OLDER) == 1, log
    assert f"{OLDER}, and regenerating it did not record those of alpha, beta, gamma (see above)" in log


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
async def test_a_resource_a_passthrough_tool_linked_to_is_read_from_its_server(tmp_path: Path) -> None:
    """server-everything's gzip-file-as-resource makes a resource of its session, listed nowhere, and returns a link
    to it: the client's read of the link goes to that server (before: refused, as no server listed it)."""
    require_install(REAL / ".stamp", "third-party MCP servers", "run `make real-servers`")
    servers = f"  everything:\n    command: {json.dumps(str(EVERYTHING))}\n    args: [stdio]\n    timeout: 60\n"
    tree = await anyio.to_thread.run_sync(generate, tmp_path, servers)
    passthrough = "  passthrough: [everything.gzip-file-as-resource]\n"
    data = "data:text/plain;base64," + base64.b64encode(b"hello through a link").decode()
    async with serve(tree, tmp_path / "serve", servers, passthrough) as client:
        made = await client.call_tool("everything__gzip-file-as-resource", {"name": "note.gz", "data": data})
        (link,) = made.content
        assert isinstance(link, types.ResourceLink) and link.uri == "demo://resource/session/note.gz"
        read = await client.read_resource(link.uri)
        with pytest.raises(mcp.MCPError, match=r"no server lists the resource 'demo://resource/session/other\.gz'"):
            await client.read_resource("demo://resource/session/other.gz")  # linked by no result
    (contents,) = read.contents
    assert isinstance(contents, types.BlobResourceContents) and contents.uri == link.uri
    assert gzip.decompress(base64.b64decode(contents.blob)) == b"hello through a link"


@pytest.mark.real_servers
def test_the_inspector_cli_lists_the_prompts_through_tooltree(tree: Path, tmp_path: Path) -> None:
    require_install(REAL / "clients" / ".stamp", "the MCP clients", "run `make real-servers`")
    argv = serve_argv(write_config(tmp_path, SERVERS), tree)
    listed = subprocess.run([str(INSPECTOR), "--cli", "--method", "prompts/list", "--", *argv], cwd=REPO,
                            capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert listed.returncode == 0, listed.stderr[-2000:]
    names = [p["name"] for p in json.loads(listed.stdout)["prompts"]]
    assert "alpha__greet" in names and "beta__greet" in names
