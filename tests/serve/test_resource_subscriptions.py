"""Resource subscriptions through `tooltree serve` (`agent.serve.upstream_subscriptions`): a client of the handshake
era subscribes to a server's resource and is sent its ``notifications/resources/updated``; another client session
is sent none; an unsubscribe stops them; a server that does not declare subscriptions is refused, naming it; a
client session follows at most `MAX_SUBSCRIPTIONS` resources; the notices of one resource are coalesced; a server
restarted under a subscription is subscribed again and the client told once; a server of the session-less 2026-07-28
protocol (tests/servers/listen_server.py, no ``resources/subscribe``) has its updates followed on its listen stream.

`tooltree serve` runs as a real subprocess, over stdio and over ``--http``, driven by the official SDK client, in
front of tests/servers/subscribing_server.py (``live``: declares ``resources.subscribe``; its ``touch`` tool, offered
as a passthrough tool, makes it send ``updated``), tests/servers/prompts_server.py (``alpha``: declares no
subscriptions) and the third-party ``@modelcontextprotocol/server-everything``. No sandbox is started (``warm: 0``,
no script runs). Every wait is on an event, bounded.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp
import mcp_types as types
import pytest

from agent.serve.upstream_subscriptions import MAX_SUBSCRIPTIONS
from tests.serve.conftest import TOKEN, http_client
from tests.serve.test_upstream_prompts_resources import EVERYTHING, REAL, server_entry
from tests.support import REPO, ServeProcess, require_install
from tooltree_cli.main import main as cli

pytestmark = pytest.mark.anyio

SUBSCRIBING = REPO / "tests" / "servers" / "subscribing_server.py"
WAIT = 60.0
PASSTHROUGH = '  passthrough: ["live.touch", "live.subscribed", "live.crash"]\n'
LOG, STATUS = "live://log", "live://status"


def live_entry(mark: Path | None = None) -> str:
    entry = f"  live:\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(SUBSCRIBING))}]\n"
    return entry + (f"    env: {{SUBSCRIBING_SERVER_MARK: {json.dumps(str(mark))}}}\n" if mark is not None else "")


def write_config(folder: Path, servers: str, serve: str = PASSTHROUGH) -> Path:
    path = folder / "tooltree.yaml"
    path.write_text(f"servers:\n{servers}serve:\n  warm: 0\n{serve}", encoding="utf-8")
    return path


def generate(folder: Path, servers: str) -> Path:
    tree = folder / "tree"
    config = write_config(folder, servers, "")
    assert cli(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    return tree


SERVERS = live_entry() + server_entry("alpha", "alpha")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(tmp_path_factory.mktemp("subscriptions"), SERVERS)


def serve_argv(config: Path, tree: Path) -> list[str]:
    return [sys.executable, "-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree),
            "--no-regenerate"]  # fmt: skip


class Updates:
    """The URIs of the ``notifications/resources/updated`` a client was sent, in order (its message handler)."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._arrived = anyio.Event()

    async def __call__(self, message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
            self._arrived.set()

    async def until(self, uri: str, count: int = 1) -> None:
        """Wait (at most `WAIT` seconds) until ``count`` updates of ``uri`` have arrived."""
        with anyio.fail_after(WAIT):
            while self.uris.count(uri) < count:
                self._arrived = anyio.Event()
                await self._arrived.wait()


@asynccontextmanager
async def serve(tree: Path, folder: Path, servers: str = SERVERS) -> AsyncIterator[tuple[mcp.Client, Updates]]:
    """An SDK client of the handshake era (as Claude Code and the Inspector connect) of `tooltree serve` over stdio."""
    folder.mkdir(parents=True, exist_ok=True)
    argv = serve_argv(write_config(folder, servers), tree)
    params = mcp.StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(REPO))
    updates = Updates()
    async with mcp.Client(params, read_timeout_seconds=WAIT, message_handler=updates, mode="legacy") as client:
        yield client, updates


async def subscribe(client: mcp.Client, uri: str) -> None:
    # The SDK's own `subscribe_resource` warns that 2026-07-28 removed it: the request as the handshake era sends it.
    await client.session.send_request(types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)),
                                      types.EmptyResult)  # fmt: skip


async def unsubscribe(client: mcp.Client, uri: str) -> None:
    await client.session.send_request(types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri)),
                                      types.EmptyResult)  # fmt: skip


async def touch(client: mcp.Client, uri: str, times: int = 1, *, any: bool = False) -> None:
    """Have ``client``'s own ``live`` server say ``uri`` changed, ``times`` times (``any``: subscribed or not)."""
    result = await client.call_tool("live__touch", {"uri": uri, "times": times, "any": any})
    assert result.is_error is not True, result.content


async def test_serve_declares_subscriptions_only_when_a_server_it_offers_declares_them(
    tree: Path, tmp_path: Path
) -> None:
    live = json.loads((tree / "snapshots" / "live.json").read_text(encoding="utf-8"))
    alpha = json.loads((tree / "snapshots" / "alpha.json").read_text(encoding="utf-8"))
    assert live["info"]["capabilities"] == {"resources": {"subscribe": True}}  # recorded by generate-tree
    assert "capabilities" not in alpha["info"]
    async with serve(tree, tmp_path / "both") as (client, _):
        both = client.server_capabilities
    async with serve(tree, tmp_path / "alpha", server_entry("alpha", "alpha")) as (client, _):
        alone = client.server_capabilities
    assert both is not None and both.resources is not None and both.resources.subscribe is True
    assert alone is not None and alone.resources is not None and alone.resources.subscribe is False


async def test_a_subscribed_resources_update_reaches_the_client(tree: Path, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    folder = tmp_path / "serve"
    folder.mkdir()
    argv = [*serve_argv(write_config(folder, SERVERS), tree), "--audit", str(audit)]
    params = mcp.StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(REPO))
    updates = Updates()
    async with mcp.Client(params, read_timeout_seconds=WAIT, message_handler=updates, mode="legacy") as client:
        await subscribe(client, LOG)
        await subscribe(client, "live://items/7")  # a URI of a template is followed as one listed
        await touch(client, LOG)
        await updates.until(LOG)
        await touch(client, "live://items/7")
        await updates.until("live://items/7")
        await touch(client, STATUS, any=True)  # sent by the server though not subscribed: dropped
        await touch(client, LOG, any=True)  # sent after it, in the same order: its update comes after
        await updates.until(LOG, 2)
    assert STATUS not in updates.uris
    lines = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    subscribes = [line for line in lines if line.get("method") == "resources/subscribe"]
    assert [(line["server"], line["uri"], line["outcome"]) for line in subscribes] == [
        ("live", LOG, "ok"),
        ("live", "live://items/7", "ok"),
    ]


async def test_over_http_an_update_reaches_only_the_client_session_that_subscribed(tree: Path, tmp_path: Path) -> None:
    argv = serve_argv(write_config(tmp_path, SERVERS), tree)
    process = ServeProcess([*argv, "--http", "--port", "0"], {**os.environ, "TOOLTREE_SERVE_TOKEN": TOKEN})
    one, other = Updates(), Updates()
    try:
        async with (
            http_client(process.url, read_timeout_seconds=WAIT, message_handler=one) as first,
            http_client(process.url, read_timeout_seconds=WAIT, message_handler=other) as second,
        ):
            assert first.server_capabilities is not None and first.server_capabilities.resources is not None
            assert first.server_capabilities.resources.subscribe is True
            await subscribe(first, LOG)
            await subscribe(second, STATUS)
            await touch(first, LOG)
            await one.until(LOG)
            await touch(second, LOG, any=True)  # the other session's own server: it subscribed to no LOG
            await touch(second, STATUS)
            await other.until(STATUS)
            await touch(first, STATUS, any=True)
            await touch(first, LOG)
            await one.until(LOG, 2)
    finally:
        process.stop()
    assert one.uris == [LOG, LOG]
    assert other.uris == [STATUS]


async def test_an_unsubscribe_stops_the_updates_and_one_of_a_uri_not_followed_is_answered(
    tree: Path, tmp_path: Path
) -> None:
    async with serve(tree, tmp_path) as (client, updates):
        await subscribe(client, LOG)
        await subscribe(client, STATUS)
        await unsubscribe(client, LOG)
        subscribed = await client.call_tool("live__subscribed", {})
        await touch(client, LOG, any=True)  # the server says so again: serve follows it no more
        await touch(client, STATUS)
        await updates.until(STATUS)
        await unsubscribe(client, LOG)  # again: nothing followed, answered
        await unsubscribe(client, "nowhere://at-all")
    assert json.loads(subscribed.content[0].text) == [STATUS]  # type: ignore[union-attr]
    assert updates.uris == [STATUS]


async def test_a_server_that_declares_no_subscriptions_is_refused_naming_it(tree: Path, tmp_path: Path) -> None:
    async with serve(tree, tmp_path) as (client, _):
        with pytest.raises(mcp.MCPError, match=r"server 'alpha' does not declare resource subscriptions") as refused:
            await subscribe(client, "alpha://readme")
        with pytest.raises(mcp.MCPError, match="no server lists the resource 'nowhere://x'") as unknown:
            await subscribe(client, "nowhere://x")
        with pytest.raises(mcp.MCPError, match="cannot be followed: a URI followed is a clean string"):
            await subscribe(client, "live://items/a\x1b[2Jb")  # the template matches it; not sent back as it is
    assert refused.value.code == types.INVALID_PARAMS
    assert unknown.value.code == -32002  # as a read of it is refused


async def test_a_client_session_follows_at_most_the_bound_of_resources(tree: Path, tmp_path: Path) -> None:
    async with serve(tree, tmp_path) as (client, updates):
        for i in range(MAX_SUBSCRIPTIONS):
            await subscribe(client, f"live://items/{i}")
        await subscribe(client, "live://items/0")  # followed already: not one more
        with pytest.raises(mcp.MCPError, match=f"follows {MAX_SUBSCRIPTIONS} resources already"):
            await subscribe(client, LOG)
        await unsubscribe(client, "live://items/0")
        await subscribe(client, LOG)
        await touch(client, LOG)
        await updates.until(LOG)


async def test_the_updates_of_one_resource_are_coalesced_and_the_last_is_not_lost(tree: Path, tmp_path: Path) -> None:
    async with serve(tree, tmp_path) as (client, updates):
        await subscribe(client, LOG)
        await subscribe(client, STATUS)
        await touch(client, LOG)
        await updates.until(LOG)  # sent at once
        # Within the interval of that one (all 49 read before the call's answer): one send at the interval's end, for
        # all of them, so the last is not lost. A machine so slow that the interval ends while they come in sends one
        # more; 50 notices in one call would not tell the count, as the first send may go before or after the rest.
        await touch(client, LOG, times=49)
        await updates.until(LOG, 2)
        await touch(client, STATUS)
        await updates.until(STATUS)
    assert updates.uris[:2] == [LOG, LOG]
    assert updates.uris.count(LOG) <= 3, updates.uris  # not one each: 49 sends would come before the status's


async def test_a_server_restarted_under_a_subscription_is_subscribed_again_and_the_client_told(
    tree: Path, tmp_path: Path
) -> None:
    mark = tmp_path / "starts"
    async with serve(tree, tmp_path / "serve", live_entry(mark) + server_entry("alpha", "alpha")) as (client, updates):
        await subscribe(client, LOG)
        crashed = await client.call_tool("live__crash", {})
        assert crashed.is_error is True
        subscribed = await client.call_tool("live__subscribed", {})  # restarts it: a new session
        assert subscribed.is_error is not True, subscribed.content
        await updates.until(LOG)  # once it was subscribed again: a change may have been missed
        await touch(client, LOG)  # the new server process sends it: serve follows it there
        await updates.until(LOG, 2)
    assert mark.read_text(encoding="utf-8").splitlines() == ["started", "started"]


@pytest.mark.real_servers
async def test_the_real_everything_servers_resource_updates_come_through(tmp_path: Path) -> None:
    require_install(REAL / ".stamp", "third-party MCP servers", "run `make real-servers`")
    servers = f"  everything:\n    command: {json.dumps(str(EVERYTHING))}\n    args: [stdio]\n    timeout: 60\n"
    tree = await anyio.to_thread.run_sync(generate, tmp_path, servers)
    folder = tmp_path / "serve"
    folder.mkdir()
    config = write_config(folder, servers, '  passthrough: ["everything.toggle-subscriber-updates"]\n')
    argv = serve_argv(config, tree)
    params = mcp.StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(REPO))
    updates = Updates()
    uri = "demo://resource/static/document/architecture.md"
    async with mcp.Client(params, read_timeout_seconds=WAIT, message_handler=updates, mode="legacy") as client:
        assert client.server_capabilities is not None and client.server_capabilities.resources is not None
        assert client.server_capabilities.resources.subscribe is True
        await subscribe(client, uri)
        toggled = await client.call_tool("everything__toggle-subscriber-updates", {})  # sends one at once
        assert toggled.is_error is not True, toggled.content
        await updates.until(uri)
        await unsubscribe(client, uri)
        await client.call_tool("everything__toggle-subscriber-updates", {})  # stopped
    assert set(updates.uris) == {uri}


@pytest.mark.real_servers
async def test_a_resource_a_passthrough_tool_linked_to_is_followed_on_its_server(tmp_path: Path) -> None:
    # server-everything's gzip-file-as-resource makes a resource of its session, listed nowhere, and returns a link to
    # it: the client's subscribe of the link goes to that server, as its read does (before: refused, 'no server lists
    # the resource'); one no result of the session linked to is refused as its read is.
    require_install(REAL / ".stamp", "third-party MCP servers", "run `make real-servers`")
    servers = f"  everything:\n    command: {json.dumps(str(EVERYTHING))}\n    args: [stdio]\n    timeout: 60\n"
    tree = await anyio.to_thread.run_sync(generate, tmp_path, servers)
    folder = tmp_path / "serve"
    folder.mkdir()
    tools = '["everything.gzip-file-as-resource", "everything.toggle-subscriber-updates"]'
    argv = serve_argv(write_config(folder, servers, f"  passthrough: {tools}\n"), tree)
    params = mcp.StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(REPO))
    updates = Updates()
    data = "data:text/plain;base64,aGVsbG8="
    async with mcp.Client(params, read_timeout_seconds=WAIT, message_handler=updates, mode="legacy") as client:
        made = await client.call_tool("everything__gzip-file-as-resource", {"name": "note.gz", "data": data})
        (link,) = made.content
        assert isinstance(link, types.ResourceLink) and link.uri == "demo://resource/session/note.gz"
        with pytest.raises(mcp.MCPError, match=r"no server lists the resource 'demo://resource/session/other\.gz'"):
            await subscribe(client, "demo://resource/session/other.gz")  # linked by no result
        await subscribe(client, link.uri)
        toggled = await client.call_tool("everything__toggle-subscriber-updates", {})  # sends one at once
        assert toggled.is_error is not True, toggled.content
        await updates.until(link.uri)
        await unsubscribe(client, link.uri)
        await client.call_tool("everything__toggle-subscriber-updates", {})  # stopped
    assert set(updates.uris) == {link.uri}


LISTENING = REPO / "tests" / "servers" / "listen_server.py"
LISTENING_ENTRY = f"  listening:\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(LISTENING))}]\n"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_session_less_servers_updates_reach_the_client_that_subscribed(transport: str, tmp_path: Path) -> None:
    # A server of the 2026-07-28 protocol has no resources/subscribe: serve's pool follows the URI on the server's
    # subscriptions/listen stream. Before, the subscribe was refused (-32601) and no update came.
    tree = await anyio.to_thread.run_sync(generate, tmp_path, LISTENING_ENTRY)
    (tmp_path / "serve").mkdir()
    config = write_config(tmp_path / "serve", LISTENING_ENTRY, '  passthrough: ["listening.touch"]\n')
    argv = serve_argv(config, tree)
    updates = Updates()
    process = None
    try:
        if transport == "stdio":
            params = mcp.StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(REPO))
            client_of = mcp.Client(params, read_timeout_seconds=WAIT, message_handler=updates, mode="legacy")
        else:
            process = ServeProcess([*argv, "--http", "--port", "0"], {**os.environ, "TOOLTREE_SERVE_TOKEN": TOKEN})
            client_of = http_client(process.url, read_timeout_seconds=WAIT, message_handler=updates)
        async with client_of as client:
            await subscribe(client, LOG)
            for uri in (STATUS, LOG):  # STATUS is not subscribed to: the server sends it to no one
                touched = await client.call_tool("listening__touch", {"uri": uri})
                assert touched.is_error is not True, touched.content
            await updates.until(LOG)
            await unsubscribe(client, LOG)
            await subscribe(client, STATUS)
            for uri in (LOG, STATUS):  # LOG is unsubscribed: its update no longer comes
                await client.call_tool("listening__touch", {"uri": uri})
            await updates.until(STATUS)
    finally:
        if process is not None:
            process.stop()
    assert updates.uris == [LOG, STATUS]
