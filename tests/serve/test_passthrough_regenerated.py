"""`tooltree serve`'s passthrough tools follow a regeneration of the tree while it serves: the client is told
(``notifications/tools/list_changed``, declared as ``tools.listChanged``), ``tools/list`` shows each tool as the tree
has it now, a tool the tree no longer has is withdrawn and its call refused saying why, one it has again is offered
again; a tool the regeneration left as it was is offered in the same bytes (clients cache the tools block).

Before, the definitions of serve's start were offered until serve ended and no client was told: a tool the
regeneration removed was still listed, and its call refused as "not in this tree's manifest (only generated tools can
be called)"; a changed tool was listed with its old parameters while its calls were checked against the new ones.

Real parts: `tooltree serve` as a subprocess in front of tests/servers/evolving_server.py, driven by the official SDK
client over stdio in the handshake era (as Claude Code connects) and pinned to 2026-07-28, and over HTTP;
`generate-tree` moves the tree from one release of the server to another while serve runs. No sandbox is started
(passthrough calls only).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp
import mcp_types as types
import pytest

from tests.serve.conftest import TOKEN, http_client, result_text
from tests.support import REPO, ServeProcess
from tooltree_cli.main import main

pytestmark = pytest.mark.anyio

EVOLVING = REPO / "tests" / "servers" / "evolving_server.py"
WAIT = 90.0
OFFERED = ["evo.update_record", "evo.delete_record", "evo.get_record", "evo.archive_record"]


TOOLS_CHANGED = "notifications/tools/list_changed"


@dataclass
class Notices:
    """The notifications a client got, and whether the tools changed."""

    said: list[str] = field(default_factory=list)
    tools_changed: anyio.Event = field(default_factory=anyio.Event)


@dataclass
class Evolving:
    """A tree of the evolving server at release 1, served with `OFFERED` passed through."""

    folder: Path
    version: Path = field(init=False)
    config: Path = field(init=False)
    tree: Path = field(init=False)

    def __post_init__(self) -> None:
        self.version, self.config, self.tree = (
            self.folder / "version",
            self.folder / "tooltree.yaml",
            self.folder / "tree",
        )
        self.version.write_text("1", encoding="utf-8")
        self.config.write_text(
            f"servers:\n  evo:\n    command: {json.dumps(sys.executable)}\n"
            f"    args: [{json.dumps(str(EVOLVING))}, {json.dumps(str(self.version))}]\n"
            f"serve:\n  warm: 0\n  passthrough: {json.dumps(OFFERED)}\n",
            encoding="utf-8",
        )

    async def generate(self, release: str) -> None:
        """Regenerate the tree from the server at ``release`` (generate-tree runs an event loop of its own)."""
        self.version.write_text(release, encoding="utf-8")
        argv = ["generate-tree", "--config", str(self.config), "--out", str(self.tree), "--embeddings", "off"]
        assert await anyio.to_thread.run_sync(main, argv) == 0

    @asynccontextmanager
    async def client(self, mode: str, notices: Notices | None = None) -> AsyncIterator[mcp.Client]:
        async def on_message(message: object) -> None:
            if notices is not None and isinstance(method := getattr(message, "method", None), str):
                notices.said.append(method)
                if method == TOOLS_CHANGED:
                    notices.tools_changed.set()

        argv = ["-m", "tooltree_cli.main", "serve", "--config", str(self.config), "--tree", str(self.tree),
                "--no-regenerate"]  # fmt: skip
        params = mcp.StdioServerParameters(command=sys.executable, args=argv, cwd=str(REPO))
        async with mcp.Client(params, read_timeout_seconds=WAIT, message_handler=on_message, mode=mode) as client:
            yield client


async def raw_tools(client: mcp.Client) -> dict[str, dict[str, Any]]:
    """The passthrough tools of ``client``'s ``tools/list`` as serve wrote them (the SDK drops unknown fields)."""
    from pydantic import TypeAdapter

    listed = await client.session.send_request(types.ListToolsRequest(), TypeAdapter(dict[str, Any]))
    return {t["name"]: t for t in listed["tools"] if "__" in t["name"]}


async def test_the_client_is_told_and_lists_the_changed_tools_as_regenerated_and_the_unchanged_ones_as_they_were(
    tmp_path: Path,
) -> None:
    evolving, notices = Evolving(tmp_path), Notices()
    await evolving.generate("1")
    async with evolving.client("legacy", notices) as client:
        declared = client.server_capabilities.tools
        before = await raw_tools(client)
        await evolving.generate("3")  # only adds: update_record's `tags`, mode "c"; get_record says more of itself
        called = await client.call_tool("evo__update_record", {"record_id": "r1", "tags": ["a"]})
        with anyio.fail_after(WAIT):
            await notices.tools_changed.wait()  # sent from serve's task group once the call found the tree regenerated
        after = await raw_tools(client)
    assert declared is not None and declared.list_changed is True
    assert called.is_error is not True and result_text(called) == "update_record ran in release 3 (record_id, tags)"
    assert sorted(before) == sorted(after) == ["evo__archive_record", "evo__delete_record", "evo__get_record",
                                               "evo__update_record"]  # fmt: skip
    assert "tags" not in before["evo__update_record"]["inputSchema"]["properties"]
    update = after["evo__update_record"]["inputSchema"]
    assert update["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}
    assert update["properties"]["mode"] == {"enum": ["a", "b", "c"]}
    assert after["evo__get_record"]["description"] == "Read one record, with all of its fields."
    for unchanged in ("evo__archive_record", "evo__delete_record"):
        assert json.dumps(after[unchanged]) == json.dumps(before[unchanged])
    assert notices.said.count(TOOLS_CHANGED) == 1


async def test_a_tool_the_regeneration_removed_is_withdrawn_its_call_refused_saying_why_and_offered_again_once_back(
    tmp_path: Path,
) -> None:
    evolving = Evolving(tmp_path)
    await evolving.generate("1")
    async with evolving.client("legacy") as client:
        await evolving.generate("2")  # delete_record removed; update_record's `status` required, `note` removed
        listed = await raw_tools(client)
        refused = await client.call_tool("evo__delete_record", {"id": "x"})
        old = await client.call_tool("evo__update_record", {"record_id": "r1", "note": "n"})
        new = await client.call_tool("evo__update_record", {"record_id": "r1", "status": "s"})
        await evolving.generate("3")  # delete_record is back
        again = await raw_tools(client)
        deleted = await client.call_tool("evo__delete_record", {"id": "x"})
    assert "evo__delete_record" not in listed
    assert listed["evo__update_record"]["inputSchema"]["required"] == ["record_id", "status"]
    assert "note" not in listed["evo__update_record"]["inputSchema"]["properties"]
    from agent.serve.passthrough import WITHDRAWN

    said = result_text(refused)
    why = "evo.delete_record is not in it (its server no longer lists it)"
    assert refused.is_error is True and said.startswith(WITHDRAWN.format(name="evo__delete_record", why=why)), said
    assert "not in this tree's manifest" not in said
    assert old.is_error is True and "'status' is a required property" in result_text(old)
    assert new.is_error is not True and result_text(new) == "update_record ran in release 2 (record_id, status)"
    assert "evo__delete_record" in again
    assert deleted.is_error is not True and result_text(deleted) == "delete_record ran in release 3 (id)"


async def test_a_client_of_the_2026_protocol_is_told_on_its_listen_stream(tmp_path: Path) -> None:
    evolving = Evolving(tmp_path)
    await evolving.generate("1")
    async with evolving.client("2026-07-28") as client:
        await client.list_tools()  # serve is up: the SDK gives server/discover 10 s
        discovered = types.DiscoverResult.model_validate(await client.session.send_discover("2026-07-28"))
        async with client.listen(tools_list_changed=True) as stream:
            await evolving.generate("2")
            called = await client.call_tool("evo__get_record", {"record_id": "r1"})
            with anyio.fail_after(WAIT):
                event = await anext(stream)
        names = [t.name for t in (await client.list_tools()).tools]
    assert discovered.capabilities.tools is not None and discovered.capabilities.tools.list_changed is True
    assert called.is_error is not True and result_text(called) == "get_record ran in release 2 (record_id)"
    assert type(event).__name__ == "ToolsListChanged"
    assert "evo__delete_record" not in names and "evo__update_record" in names


async def test_over_http_each_client_session_that_listed_the_tools_is_told(tmp_path: Path) -> None:
    evolving, one, other = Evolving(tmp_path), Notices(), Notices()
    await evolving.generate("1")

    def on(notices: Notices) -> Callable[[object], Awaitable[None]]:
        async def on_message(message: object) -> None:
            if getattr(message, "method", None) == TOOLS_CHANGED:
                notices.tools_changed.set()

        return on_message

    argv = [sys.executable, "-m", "tooltree_cli.main", "serve", "--config", str(evolving.config), "--tree",
            str(evolving.tree), "--no-regenerate", "--http", "--port", "0"]  # fmt: skip
    process = ServeProcess(argv, {**os.environ, "TOOLTREE_SERVE_TOKEN": TOKEN})
    try:
        async with (
            http_client(process.url, read_timeout_seconds=WAIT, message_handler=on(one)) as first,
            http_client(process.url, read_timeout_seconds=WAIT, message_handler=on(other)) as second,
        ):
            assert first.server_capabilities.tools is not None and first.server_capabilities.tools.list_changed
            await first.list_tools()
            await second.list_tools()
            await evolving.generate("2")
            called = await first.call_tool("evo__get_record", {"record_id": "r1"})
            with anyio.fail_after(WAIT):
                await one.tools_changed.wait()
                await other.tools_changed.wait()
            names = [t.name for t in (await second.list_tools()).tools]
    finally:
        process.stop()
    assert called.is_error is not True and result_text(called) == "get_record ran in release 2 (record_id)"
    assert "evo__delete_record" not in names and "evo__archive_record" in names


async def test_a_tree_that_dropped_the_server_withdraws_its_tools_and_one_unchanged_changes_nothing(
    tmp_path: Path,
) -> None:
    import dataclasses

    from agent.serve.passthrough import WITHDRAWN, Passthrough
    from sandbox.stored_definitions import shared_manifest

    evolving = Evolving(tmp_path)
    await evolving.generate("1")
    passthrough = Passthrough(evolving.tree, ["evo.get_record"])
    manifest = shared_manifest(evolving.tree)
    offered = passthrough.definitions[0]
    assert passthrough.reload(manifest) is False and passthrough.definitions[0] is offered  # nothing to tell
    assert passthrough.reload(dataclasses.replace(manifest, servers=[], tools=[])) is True
    assert passthrough.definitions == [] and "evo__get_record" not in passthrough
    why = "evo.get_record is not in it (nor is its server)"
    assert passthrough.refusal("evo__get_record") == WITHDRAWN.format(name="evo__get_record", why=why)
    assert passthrough.reload(manifest) is True and passthrough.definitions == [offered]
    assert passthrough.refusal("evo__get_record") == "unknown tool 'evo__get_record'"  # offered again
