"""The resources a client follows outlive the replacement of its session after serve regenerated its tree
(`agent.serve.upstream_subscriptions.carry`, called by `agent.serve.sessions.SessionRegistry.use`).

A client session without a sandbox yet is replaced at its client's next call once the tree was regenerated (here: the
followed server says its resources changed, and serve regenerates its part of the tree), and its servers stop. Before,
every subscription its client held ended with them, unsaid: the client was sent no more
``notifications/resources/updated``. Now that call subscribes the new session's servers again to each URI still
offered by the same server, which still declares subscriptions, and the client is sent one ``updated`` of each (a
change may have been missed meanwhile); a URI no longer offered, or on a server that no longer declares
subscriptions, is dropped and said on serve's stderr, naming it and why.

A session renewed for a tool the regenerated tree added (serve with ``--workspace``: a script of a session whose
sandbox predates the tool failed to import it, so its next call renews it: `agent.serve.sessions.RENEWING`) carries
them over the same way (``docker``).

`tooltree serve` runs as a real subprocess over stdio, and in one test over ``--http`` with two clients
(``--regenerate-first``: only the server's notice can bring a change afterwards), driven by the official SDK client in
the handshake era, in front of tests/servers/subscribing_server.py (``live``), whose ``relist`` changes what it offers
in every process of it and says ``notifications/resources/list_changed``; its ``subscribed`` answers what the
session's own ``live`` process was subscribed to. No sandbox is started (``warm: 0``) unless a script runs. Every wait
is bounded, and on an event but for the HTTP test's wait for a line of serve's stderr (`ServeProcess` keeps a list).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
import mcp
import mcp_types as types
import pytest
from mcp.client.stdio import stdio_client

from tests.serve.conftest import TOKEN, http_client
from tests.serve.test_resource_subscriptions import LOG, STATUS, WAIT, Updates, generate, subscribe, touch, write_config
from tests.support import REPO, ServeProcess, wait_until

pytestmark = pytest.mark.anyio

ITEM = "live://items/7"
"""A URI of ``live``'s template, followed as one it lists."""
PASSTHROUGH = '  passthrough: ["live.touch", "live.subscribed", "live.relist", "live.link"]\n'
REGENERATED = "tooltree serve: sessions from now on get the tools, prompts and resources of live as they are now"
"""Said once serve serves the regenerated tree (after which a client's call replaces its session)."""
DROPPED = "follows the resource {uri} no more, after the tree was regenerated: its server 'live' {why}"


class Stderr:
    """Serve's stderr (``file``, given to the SDK's `stdio_client`), read line by line as it comes."""

    def __init__(self) -> None:
        read, write = os.pipe()
        self.file: TextIO = os.fdopen(write, "w", encoding="utf-8")
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, args=(os.fdopen(read, encoding="utf-8"),), daemon=True)
        self._reader.start()

    def _read(self, stream: TextIO) -> None:
        with stream:
            for line in stream:
                with self._changed:
                    self.lines.append(line)
                    self._changed.notify_all()

    def until(self, text: str) -> None:
        """Wait (at most `WAIT` seconds, from a worker thread) until a line contains ``text``."""
        with self._changed:
            if not self._changed.wait_for(lambda: any(text in line for line in self.lines), WAIT):
                pytest.fail(f"no {text!r} on tooltree serve's stderr; got:\n{''.join(self.lines)}")

    def close(self) -> None:
        """Close this end of the pipe: its reader ends once serve's has exited too."""
        self.file.close()
        self._reader.join(WAIT)


def live(folder: Path) -> str:
    """The ``live`` entry, its state in ``folder``."""
    return (
        f"  live:\n    command: {json.dumps(sys.executable)}\n"
        f"    args: [{json.dumps(str(REPO / 'tests' / 'servers' / 'subscribing_server.py'))}]\n"
        f"    env: {{SUBSCRIBING_SERVER_STATE: {json.dumps(str(folder / 'state.json'))}}}\n"
    )


@asynccontextmanager
async def serving(
    folder: Path, *more: str, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[mcp.Client, Updates, Stderr]]:
    """`tooltree serve` (with ``more`` arguments, in ``env``) of a tree generated from ``live`` (its state in
    ``folder``), and an SDK client of it in the handshake era, as Claude Code connects."""
    entry = live(folder)
    tree = await anyio.to_thread.run_sync(generate, folder, entry)
    config = write_config(folder, entry, PASSTHROUGH)
    argv = ["-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree), "--regenerate-first",
            *more]  # fmt: skip
    params = mcp.StdioServerParameters(command=sys.executable, args=argv, cwd=str(REPO), env=env)
    updates, stderr = Updates(), Stderr()
    try:
        transport = stdio_client(params, errlog=stderr.file)
        async with mcp.Client(transport, read_timeout_seconds=WAIT, message_handler=updates, mode="legacy") as client:
            yield client, updates, stderr
    finally:
        stderr.close()


async def regenerate(client: mcp.Client, stderr: Stderr, **relist: Any) -> None:
    """Have ``live`` change what it offers (``relist``) and say so; wait until serve serves the regenerated tree."""
    result = await client.call_tool("live__relist", relist)
    assert result.is_error is not True, result.content
    await anyio.to_thread.run_sync(stderr.until, REGENERATED)


async def subscribed(client: mcp.Client) -> list[str]:
    """What the client session's own ``live`` process was subscribed to (a call: it replaces a session that was
    opened before the tree was regenerated)."""
    result = await client.call_tool("live__subscribed", {})
    assert result.is_error is not True, result.content
    return list(json.loads(result.content[0].text))  # type: ignore[union-attr]


async def test_a_followed_resource_is_followed_on_the_session_that_replaces_its_own_after_a_regeneration(
    tmp_path: Path,
) -> None:
    audit = tmp_path / "audit.jsonl"
    async with serving(tmp_path, "--audit", str(audit)) as (client, updates, stderr):
        await subscribe(client, LOG)
        await subscribe(client, ITEM)
        await regenerate(client, stderr, hide=STATUS)  # a resource not followed: the tree changes all the same
        carried = await subscribed(client)  # the session replaced at this call: a new live process, subscribed
        await updates.until(LOG)  # one of each once subscribed again: a change may have been missed meanwhile
        await updates.until(ITEM)
        await touch(client, LOG)  # the new live process says it changed: it reaches the same client
        await updates.until(LOG, 2)
    assert carried == [ITEM, LOG]
    assert sorted(updates.uris) == [ITEM, LOG, LOG]
    assert "no more, after the tree was regenerated" not in "".join(stderr.lines)
    lines = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    subscribes = [(line["uri"], line["outcome"]) for line in lines if line.get("method") == "resources/subscribe"]
    assert subscribes == [(LOG, "ok"), (ITEM, "ok"), (ITEM, "ok"), (LOG, "ok")]  # the client's, then the carry's


async def test_over_http_a_followed_resource_is_followed_on_the_session_that_replaces_its_own(tmp_path: Path) -> None:
    """The same over ``--http``: the updates of the new session's ``live`` reach the client's ``GET`` stream of the same
    MCP session, and another client session's subscriptions are its own. Before, the carry-over was tested over stdio
    only."""
    entry, audit = live(tmp_path), tmp_path / "audit.jsonl"
    tree = await anyio.to_thread.run_sync(generate, tmp_path, entry)
    config = write_config(tmp_path, entry, PASSTHROUGH)
    argv = [sys.executable, "-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree),
            "--regenerate-first", "--audit", str(audit), "--http", "--port", "0"]  # fmt: skip
    process = ServeProcess(argv, {**os.environ, "TOOLTREE_SERVE_TOKEN": TOKEN})
    one, other = Updates(), Updates()
    try:
        async with (
            http_client(process.url, read_timeout_seconds=WAIT, message_handler=one, mode="legacy") as first,
            http_client(process.url, read_timeout_seconds=WAIT, message_handler=other, mode="legacy") as second,
        ):
            await subscribe(first, LOG)
            await subscribe(first, ITEM)
            await subscribe(second, STATUS)
            relisted = await first.call_tool("live__relist", {"tool": "fresh"})
            assert relisted.is_error is not True, relisted.content
            await anyio.to_thread.run_sync(
                wait_until, lambda: any(REGENERATED in line for line in process.stderr_lines), "the regeneration", WAIT
            )
            carried, kept = await subscribed(first), await subscribed(second)  # each session replaced at its call
            await one.until(LOG)  # one of each once subscribed again
            await one.until(ITEM)
            await other.until(STATUS)
            await touch(first, LOG)  # the new live process of the first session: it reaches the first client only
            await one.until(LOG, 2)
            await touch(second, STATUS)
            await other.until(STATUS, 2)
    finally:
        process.stop()
    assert (carried, kept) == ([ITEM, LOG], [STATUS])
    assert (sorted(one.uris), other.uris) == ([ITEM, LOG, LOG], [STATUS, STATUS])
    assert "no more, after the tree was regenerated" not in "".join(process.stderr_lines)
    lines = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    subscribes = sorted(line["uri"] for line in lines if line.get("method") == "resources/subscribe")
    assert subscribes == sorted([LOG, ITEM, STATUS] * 2)  # the clients', then the carries'


async def test_a_followed_resource_the_regenerated_tree_no_longer_offers_is_dropped_and_said(tmp_path: Path) -> None:
    async with serving(tmp_path) as (client, updates, stderr):
        await subscribe(client, LOG)
        await subscribe(client, STATUS)
        await regenerate(client, stderr, hide=STATUS)
        carried = await subscribed(client)
        await anyio.to_thread.run_sync(
            stderr.until,
            DROPPED.format(uri=repr(STATUS), why="no longer lists it or a resource template that matches it"),
        )
        await updates.until(LOG)
        await touch(client, STATUS, any=True)  # the server says so all the same: not followed
        await touch(client, LOG)  # sent after it, in the same order: its update comes after
        await updates.until(LOG, 2)
    assert carried == [LOG]
    assert updates.uris == [LOG, LOG]


async def test_a_followed_resource_a_passthrough_result_linked_to_is_dropped_and_said_why(tmp_path: Path) -> None:
    # Followed on the server that linked to it (no server lists it): the session that replaces the client's has
    # servers started again, which returned no link to it (its read is refused there), so it is dropped, saying so
    # (before the link was followable, a subscribe of it was refused).
    made = "live://made/1"
    async with serving(tmp_path) as (client, _, stderr):
        linked = await client.call_tool("live__link", {"uri": made})
        assert linked.is_error is not True, linked.content
        await subscribe(client, made)
        await subscribe(client, LOG)
        assert await subscribed(client) == sorted([LOG, made])
        await regenerate(client, stderr, hide=STATUS)
        carried = await subscribed(client)
        said = "its server 'live' no longer lists it"
        await anyio.to_thread.run_sync(
            stderr.until,
            f"follows the resource {made!r} no more, after the tree was regenerated: it is a resource a passthrough "
            "result of its server 'live' linked to, which no server lists: a link is followed, and read, only in the "
            "client session whose servers returned it",
        )
        with pytest.raises(mcp.MCPError, match="no server lists the resource 'live://made/1'"):
            await client.read_resource(made)  # as its read is refused in the new session
    assert carried == [LOG]
    assert not any(said in line for line in stderr.lines)


async def test_the_resources_of_a_server_that_no_longer_declares_subscriptions_are_dropped_and_said(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as (client, _, stderr):
        await subscribe(client, LOG)
        await regenerate(client, stderr, subscriptions=False)  # its processes from now on declare none
        carried = await subscribed(client)
        await anyio.to_thread.run_sync(
            stderr.until, DROPPED.format(uri=repr(LOG), why="no longer declares resource subscriptions")
        )
    assert carried == []


@pytest.mark.docker
async def test_a_session_renewed_for_a_tool_the_regenerated_tree_added_carries_its_subscriptions_over(
    tmp_path: Path, owner: str
) -> None:
    from agent.serve.renewal import RENEWING, restored

    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {**os.environ, "TOOLTREE_SANDBOX_OWNER": owner}
    async with serving(tmp_path, "--workspace", str(workspace), env=env) as (client, updates, stderr):
        await subscribe(client, LOG)
        first = await client.call_tool("execute_python", {"code": "x = 1"})  # its sandbox starts: the session stays
        assert first.is_error is not True, first.content
        await regenerate(client, stderr, tool="fresh")
        stale = await client.call_tool("execute_python", {"code": "from servers.live import fresh"})
        said = "".join(block.text for block in stale.content if isinstance(block, types.TextContent))
        assert RENEWING.format(restored=restored(workspace)) in said, said  # the next call renews the session
        carried = await subscribed(client)  # renews the session: a new live process, subscribed
        await updates.until(LOG)
        await touch(client, LOG)
        await updates.until(LOG, 2)
    assert carried == [LOG]
    assert updates.uris == [LOG, LOG]
