"""The sandbox of a client session kept for the resources its client follows is stopped once the session has been idle
for ``idle_timeout`` seconds (`agent.serve.sessions.SessionRegistry._rest`): its workspace is saved into the host
folder first, the session and its servers stay (the client is still told of changes), and the next script starts a new
sandbox, its result saying once what is gone. A sandbox whose workspace cannot be saved is kept, its files not lost.
Before, such a session held its container, up to its memory limit, for as long as its client followed a resource.

`tooltree serve` runs as a real subprocess over stdio (and once over ``--http``) with ``idle_timeout: 1`` (the check
runs every quarter of it) and ``--workspace``, driven by the official SDK client in the handshake era, in front of
tests/servers/subscribing_server.py (``live``); scripts run in a real sandbox. Every wait is bounded.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp
import pytest
from mcp.client.stdio import stdio_client

from agent.serve.sessions import RESTED
from tests.serve.conftest import TOKEN, containers, http_client, processes_with, result_text
from tests.serve.test_resource_subscriptions import (
    LOG,
    PASSTHROUGH,
    Updates,
    generate,
    live_entry,
    serve_argv,
    subscribe,
    touch,
    write_config,
)
from tests.serve.test_save_after_failure import SPARSE
from tests.serve.test_subscriptions_regenerated import Stderr
from tests.support import REPO, ServeProcess, wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

WAIT = 120.0
"""Seconds a test waits at most for what it expects (a sandbox's start included)."""
MARK = "SUBSCRIBING_SERVER_MARK"
KEPT = "its idle sandbox is kept: its workspace could not be saved"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(tmp_path_factory.mktemp("follower-sandbox"), live_entry())


@asynccontextmanager
async def serving(
    tree: Path, folder: Path, owner: str, sandbox: str = ""
) -> AsyncIterator[tuple[mcp.Client, Updates, Stderr, Path, Path]]:
    """An SDK client of `tooltree serve` with ``idle_timeout: 1`` and a workspace folder (``sandbox``: lines of its
    ``sandbox:`` section), its updates, its stderr, the workspace folder and the ``live`` server's start marks."""
    mark, workspace = folder / "starts", folder / "ws"
    workspace.mkdir(parents=True)
    config = write_config(folder, live_entry(mark), f"{PASSTHROUGH}  idle_timeout: 1\n{sandbox}")
    argv = [*serve_argv(config, tree), "--workspace", str(workspace)]
    env = {**os.environ, "TOOLTREE_SANDBOX_OWNER": owner}
    params = mcp.StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(REPO), env=env)
    updates, stderr = Updates(), Stderr()
    try:
        transport = stdio_client(params, errlog=stderr.file)
        async with mcp.Client(transport, read_timeout_seconds=WAIT, message_handler=updates, mode="legacy") as client:
            yield client, updates, stderr, workspace, mark
    finally:
        stderr.close()


async def until(condition: object, what: str) -> None:
    await anyio.to_thread.run_sync(wait_until, condition, what, WAIT)


async def test_an_idle_followers_sandbox_is_stopped_its_files_saved_and_its_next_script_told_once(
    tree: Path, tmp_path: Path, owner: str
) -> None:
    async with serving(tree, tmp_path, owner) as (client, updates, _, workspace, mark):
        await subscribe(client, LOG)
        code = "x = 41\nopen('kept.txt', 'w').write('kept')\nprint('ran')"
        first = result_text(await client.call_tool("execute_python", {"code": code}))
        assert first.startswith("ran"), first
        # Idle from now on: the sandbox stops (before: it ran for as long as the client followed LOG).
        await until(lambda: containers(owner, running=True) == [], "the idle sandbox to stop")
        assert (workspace / "kept.txt").read_text(encoding="utf-8") == "kept"
        assert processes_with(MARK, str(mark)) != []  # the session and its server stayed
        await touch(client, LOG)
        await updates.until(LOG)  # and the client is still told
        assert mark.read_text(encoding="utf-8").splitlines() == ["started"]

        code = "print(open('kept.txt').read(), 'x' in globals())"
        second = result_text(await client.call_tool("execute_python", {"code": code}))
        said = RESTED.format(idle="1", files=f"files saved into {workspace} remain")
        assert said in second, second
        assert "kept False" in second  # the file restored, the variable gone
        third = result_text(await client.call_tool("execute_python", {"code": "print(2)"}))
        assert third.startswith("2") and said not in third  # said once


async def test_an_idle_followers_sandbox_whose_workspace_cannot_be_saved_is_kept(
    tree: Path, tmp_path: Path, owner: str
) -> None:
    # A save takes 4 MiB plus 4 KiB per entry: the sparse file fits the sandbox and not a save.
    async with serving(tree, tmp_path, owner, sandbox="sandbox:\n  workspace_size: 4m\n") as (client, *_rest):
        _, stderr, workspace, _ = _rest
        await subscribe(client, LOG)
        made = result_text(await client.call_tool("execute_python", {"code": SPARSE + "\nx = 1"}))
        assert made.startswith("made\n[workspace: could not save the workspace ("), made
        await anyio.to_thread.run_sync(stderr.until, KEPT)
        assert len(containers(owner, running=True)) == 1  # kept, its files with it
        kept = result_text(await client.call_tool("execute_python", {"code": "print(x)"}))
        assert kept.startswith("1"), kept  # the same sandbox: nothing was said, nothing was lost

        fixed = result_text(await client.call_tool("execute_python", {"code": "import os\nos.remove('sparse.bin')"}))
        assert "the save works again" in fixed, fixed
        await until(lambda: containers(owner, running=True) == [], "the idle sandbox to stop once its workspace saves")
        assert not (workspace / "sparse.bin").exists()


async def test_over_http_an_idle_followers_sandbox_is_stopped_while_its_get_stream_is_open(
    tree: Path, tmp_path: Path, owner: str
) -> None:
    # The client follows LOG with its GET stream open (the SDK client keeps one): the session stays, its sandbox goes.
    mark, workspace = tmp_path / "starts", tmp_path / "ws"
    workspace.mkdir()
    config = write_config(tmp_path, live_entry(mark), f"{PASSTHROUGH}  idle_timeout: 1\n")
    argv = [*serve_argv(config, tree), "--workspace", str(workspace), "--http", "--port", "0"]
    process = ServeProcess(argv, {**os.environ, "TOOLTREE_SANDBOX_OWNER": owner, "TOOLTREE_SERVE_TOKEN": TOKEN})
    updates = Updates()
    try:
        async with http_client(process.url, read_timeout_seconds=WAIT, message_handler=updates) as client:
            await subscribe(client, LOG)
            code = "open('kept.txt', 'w').write('kept')\nprint('ran')"
            assert result_text(await client.call_tool("execute_python", {"code": code})).startswith("ran")
            await until(lambda: containers(owner, running=True) == [], "the idle sandbox to stop")
            assert (workspace / "kept.txt").read_text(encoding="utf-8") == "kept"
            await touch(client, LOG)
            await updates.until(LOG)  # the session stayed, and its client is told on its GET stream
            again = result_text(await client.call_tool("execute_python", {"code": "print(open('kept.txt').read())"}))
            assert "this session's sandbox was stopped after 1 s without a call" in again and "kept" in again
            assert mark.read_text(encoding="utf-8").splitlines() == ["started"]  # its server never restarted
    finally:
        process.stop()
