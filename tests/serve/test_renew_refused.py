"""`tooltree serve --workspace` renews a session whose sandbox started before a `tooltree generate-tree` regenerated its
tree once the bridge refused one of its calls as the regeneration's (a tool the regeneration changed), as it does after
a script's failed import of a tool the regeneration added (tests/serve/test_follow.py): the refused call's result says
so once, and the next call runs on the regenerated tree with the saved files.

Before, every call of a changed tool, from a script or as a passthrough tool, was refused saying to reconnect the
client, until the client did (Claude Code's user, not its model, can): the session was renewed only after an import
from ``servers`` failed.

Real parts: `tooltree serve` over stdio driven by the official SDK client in the handshake era, as Claude Code
connects, in front of tests/servers/evolving_server.py, whose tree `generate-tree` regenerates from release 1 to
release 2 while serve runs (``update_record``'s ``status`` becomes required, ``note`` is removed).
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
import pytest
from mcp.client.stdio import stdio_client

from tests.serve.conftest import result_text
from tests.support import REPO
from tooltree_cli.main import main

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

EVOLVING = REPO / "tests" / "servers" / "evolving_server.py"
WAIT = 120.0
REFUSED = "the tree was regenerated since this session began"
OLD = "from servers.evo import update_record\nprint(update_record(record_id='r1', note='n'))"
NEW = "from servers.evo import update_record\nprint(update_record(record_id='r1', status='s'), open('kept.txt').read())"


def generate(config: Path, tree: Path) -> None:
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0


@asynccontextmanager
async def serving(folder: Path, owner: str) -> AsyncIterator[tuple[mcp.Client, Path, Path]]:
    """`tooltree serve --workspace` of the evolving server's tree at release 1 (``evo.update_record`` passed through
    too), and an SDK client of it: the client, the file that says the release, and the workspace folder. Once the
    client's first script has run (its sandbox on release 1, a file saved), `regenerate` moves the tree to release 2."""
    version, config, tree, workspace = folder / "version", folder / "tooltree.yaml", folder / "tree", folder / "ws"
    version.write_text("1", encoding="utf-8")
    workspace.mkdir()
    config.write_text(
        f"servers:\n  evo:\n    command: {json.dumps(sys.executable)}\n"
        f"    args: [{json.dumps(str(EVOLVING))}, {json.dumps(str(version))}]\n    timeout: 30\n",
        encoding="utf-8",
    )
    await anyio.to_thread.run_sync(generate, config, tree)
    argv = ["-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree), "--no-regenerate",
            "--warm", "0", "--workspace", str(workspace), "--passthrough", "evo.update_record"]  # fmt: skip
    env = {**os.environ, "TOOLTREE_SANDBOX_OWNER": owner}
    params = mcp.StdioServerParameters(command=sys.executable, args=argv, cwd=str(REPO), env=env)
    async with mcp.Client(stdio_client(params), read_timeout_seconds=WAIT, mode="legacy") as client:
        first = await client.call_tool("execute_python", {"code": "open('kept.txt', 'w').write('kept')\nx = 1"})
        assert first.is_error is not True, first.content
        version.write_text("2", encoding="utf-8")
        await anyio.to_thread.run_sync(generate, config, tree)  # generate-tree runs an event loop of its own
        yield client, tree, workspace


async def test_a_script_refused_a_tool_the_regeneration_changed_renews_the_session_for_the_next_call(
    tmp_path: Path, owner: str
) -> None:
    from agent.serve.renewal import RENEWED, RENEWING_CHANGED, RENEWS, STALE_TREE, restored

    async with serving(tmp_path, owner) as (client, _, workspace):
        refused = result_text(await client.call_tool("execute_python", {"code": OLD}))
        again = await client.call_tool("execute_python", {"code": NEW + "\nprint(globals().get('x'))"})
        later = await client.call_tool("execute_python", {"code": NEW})
    assert refused.startswith(f"[{STALE_TREE.format(restored=f'the files saved into {workspace} restored')}]"), refused
    assert REFUSED in refused and RENEWS in refused and "reconnect the client" not in refused, refused
    assert refused.count(RENEWING_CHANGED.format(restored=restored(workspace))) == 1, refused
    said = result_text(again)
    assert again.is_error is not True, said
    assert "update_record ran in release 2 (record_id, status) kept\nNone" in said, said
    assert said.startswith(f"[{RENEWED.format(files=f'files saved into {workspace} remain')}]"), said
    assert "instructions this client got when it connected are of the tree before" in said
    assert later.is_error is not True and "a new sandbox session" not in result_text(later), result_text(later)


async def test_a_passthrough_call_refused_for_its_changed_tool_renews_the_session_and_names_its_stub(
    tmp_path: Path, owner: str
) -> None:
    from agent.serve.renewal import RENEWED, RENEWING_PASSTHROUGH, RENEWS, restored

    async with serving(tmp_path, owner) as (client, tree, workspace):
        refused = await client.call_tool("evo__update_record", {"record_id": "r1", "note": "n"})
        called = await client.call_tool("evo__update_record", {"record_id": "r1", "status": "s"})
        ran = await client.call_tool("execute_python", {"code": NEW})
    said = result_text(refused)
    assert refused.is_error is True and REFUSED in said and RENEWS in said, said
    assert "reconnect the client" not in said
    stub = "servers/evo/update_record.py"
    assert (tree / stub).is_file()
    assert said.endswith(RENEWING_PASSTHROUGH.format(restored=restored(workspace), stub=stub)), said
    assert called.is_error is not True and result_text(called) == "update_record ran in release 2 (record_id, status)"
    text = result_text(ran)
    assert ran.is_error is not True and text.startswith(
        f"[{RENEWED.format(files=f'files saved into {workspace} remain')}]"
    ), text
    assert "update_record ran in release 2 (record_id, status) kept" in text
