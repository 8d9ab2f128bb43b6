"""`tooltree serve` follows a server that says its prompts or resources changed, as it follows one whose tools did
(`tooltree_cli.serve_follow`): it regenerates that server's part of the tree, and a client that listed them is told
and lists what was added.

Before, a server's ``notifications/prompts/list_changed`` and ``.../resources/list_changed`` were dropped: a prompt or
resource it added was offered only once something else regenerated the tree.

A client of the 2026-07-28 protocol is told on the ``subscriptions/listen`` stream it opened, the only way that
protocol says a list changed. Before, serve served no such stream: over stdio, where it speaks that protocol, its
clients were told of no change (though serve declared ``listChanged``).

`tooltree serve` runs as a real subprocess over stdio in front of tests/servers/growing_server.py, driven by the
official SDK client in the handshake era (as Claude Code connects) or pinned to 2026-07-28. The server is asked to
add a prompt or resource through a passthrough tool; no sandbox is started.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import anyio
import mcp
import mcp_types as types
import pytest

from tests.support import REPO
from tooltree_cli.main import main as cli

pytestmark = pytest.mark.anyio

GROWING = REPO / "tests" / "servers" / "growing_server.py"
WAIT = 90.0
NOTICE = {"prompt": "notifications/prompts/list_changed", "resource": "notifications/resources/list_changed"}


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "tooltree.yaml"
    args = ", ".join(json.dumps(a) for a in (str(GROWING), str(tmp_path / "added.json")))
    config.write_text(
        f"servers:\n  growing:\n    command: {json.dumps(sys.executable)}\n    args: [{args}]\n"
        "serve:\n  warm: 0\n  passthrough: [growing.add_prompt, growing.add_resource]\n",
        encoding="utf-8",
    )
    return config


async def _names(client: mcp.Client, kind: str) -> list[str]:
    if kind == "prompt":
        return [p.name for p in (await client.list_prompts()).prompts]
    return [str(r.uri) for r in (await client.list_resources()).resources]


@pytest.mark.parametrize("kind", ["prompt", "resource"])
async def test_a_prompt_or_resource_the_server_adds_while_serving_is_told_to_the_client_and_listed(
    tmp_path: Path, kind: str
) -> None:
    config, tree = _config(tmp_path), tmp_path / "tree"
    generated = await anyio.to_thread.run_sync(
        cli, ["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]
    )
    assert generated == 0
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if getattr(message, "method", None) == NOTICE[kind]:
            changed.set()

    # The refresh serve starts with ends before the client is answered: only the server's notice can bring the change.
    argv = ["-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree), "--regenerate-first"]
    params = mcp.StdioServerParameters(command=sys.executable, args=argv, cwd=str(REPO))
    async with mcp.Client(params, read_timeout_seconds=WAIT, message_handler=on_message, mode="legacy") as client:
        before = await _names(client, kind)
        added = await client.call_tool(f"growing__add_{kind}", {"name": "fresh"})
        assert added.is_error is not True and "added fresh" in str(added.content)
        with anyio.fail_after(WAIT):
            await changed.wait()  # the server's notice made serve regenerate growing's part of the tree
        after = await _names(client, kind)
    fresh, start = ("growing__fresh", "growing__start") if kind == "prompt" else ("growing://fresh", "growing://start")
    assert start in before and fresh not in before
    assert fresh in after and start in after
    snapshot = json.loads((tree / "snapshots" / "growing.json").read_text(encoding="utf-8"))
    recorded = snapshot["prompts"] if kind == "prompt" else snapshot["resources"]
    assert any(item.get("name") == "fresh" for item in recorded)


def _serve_params(config: Path, tree: Path) -> mcp.StdioServerParameters:
    # The refresh serve starts with ends before the client is answered: only the server's notice can bring the change.
    argv = ["-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree), "--regenerate-first"]
    return mcp.StdioServerParameters(command=sys.executable, args=argv, cwd=str(REPO))


@pytest.mark.parametrize("kind", ["prompt", "resource"])
async def test_a_client_of_the_2026_protocol_is_told_on_its_listen_stream(tmp_path: Path, kind: str) -> None:
    config, tree = _config(tmp_path), tmp_path / "tree"
    generated = await anyio.to_thread.run_sync(
        cli, ["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]
    )
    assert generated == 0
    async with mcp.Client(_serve_params(config, tree), read_timeout_seconds=WAIT, mode="2026-07-28") as client:
        before = await _names(client, kind)  # answered after the first refresh: the SDK gives server/discover 10 s
        discovered = types.DiscoverResult.model_validate(await client.session.send_discover("2026-07-28"))
        declared = discovered.capabilities
        assert declared.prompts is not None and declared.resources is not None
        assert declared.prompts.list_changed and declared.resources.list_changed
        assert not declared.resources.subscribe  # its server declares no subscriptions
        assert declared.tools is not None and declared.tools.list_changed  # its passthrough tools follow the tree
        asked = {"prompts_list_changed": kind == "prompt", "resources_list_changed": kind == "resource"}
        async with client.listen(**asked, resource_subscriptions=["growing://start"]) as stream:
            assert stream.honored.resource_subscriptions is None
            added = await client.call_tool(f"growing__add_{kind}", {"name": "fresh"})
            assert added.is_error is not True and "added fresh" in str(added.content)
            with anyio.fail_after(WAIT):
                event = await anext(stream)  # the server's notice made serve regenerate growing's part of the tree
        after = await _names(client, kind)
    assert type(event).__name__ == ("PromptsListChanged" if kind == "prompt" else "ResourcesListChanged")
    fresh = "growing__fresh" if kind == "prompt" else "growing://fresh"
    assert fresh not in before and fresh in after


async def test_a_client_of_the_2026_protocol_holds_a_bounded_number_of_listen_streams(tmp_path: Path) -> None:
    from agent.serve.upstream_extras import MAX_LISTEN_STREAMS

    config, tree = _config(tmp_path), tmp_path / "tree"
    generated = await anyio.to_thread.run_sync(
        cli, ["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]
    )
    assert generated == 0
    async with (
        mcp.Client(_serve_params(config, tree), read_timeout_seconds=WAIT, mode="2026-07-28") as client,
        contextlib.AsyncExitStack() as streams,
    ):
        for _ in range(MAX_LISTEN_STREAMS):
            await streams.enter_async_context(client.listen(prompts_list_changed=True))
        with pytest.raises(mcp.MCPError, match="Subscription limit reached"):
            await streams.enter_async_context(client.listen(prompts_list_changed=True))
        assert (await _names(client, "prompt")) == ["growing__start"]  # serving goes on
