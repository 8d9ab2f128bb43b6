"""`tooltree serve`: a `generate-tree` that ends between a call's look at the tree (serve still serves the tree of its
start) and the opening of the client's session, whose runtime then reads the regenerated manifest while the warm
sandboxes were started on the tree before. The session's script runs the regenerated stubs, which its calls are
checked against, and its next result says that the instructions of the client's handshake are of the tree before.

Before, its sandbox (a warm one) mounted the copy of the tree before while its bridge checked calls against the
regenerated manifest: the tool the regeneration added could not be imported, a changed tool called as its stub read
was refused by the check of its new parameters, and the next result said the session kept the tree it started with.

Real parts: the tool server in process, the official SDK's client in memory, the evolving test server and a Docker
engine; the gate is `ClientSession.opened`, which runs `generate-tree` before the session's first opening.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp
import pytest

from agent.serve.client_session import ClientSession
from agent.serve.renewal import INSTRUCTIONS_BEFORE
from agent.serve.server import ToolServer
from agent.serve.settings import ServeSettings
from sandbox.config import SandboxConfig
from tests.serve.conftest import result_text
from tool_tree.config import load_config
from tooltree_cli.main import main

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

EVOLVING = Path(__file__).resolve().parents[1] / "servers" / "evolving_server.py"
AS_STUBS_SAY = """\
import inspect
from servers.evo import export_records, update_record
print(sorted(inspect.signature(update_record).parameters))
print(update_record(record_id="r1", status="done").text)
print(export_records().text)
"""


def _generate(config: Path, tree: Path) -> None:
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0


async def test_a_session_opened_on_a_tree_regenerated_after_serve_looked_runs_the_regenerated_tree(
    docker_engine: object, test_config: SandboxConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    version, config, tree = tmp_path / "version", tmp_path / "tooltree.yaml", tmp_path / "tree"
    version.write_text("1", encoding="utf-8")
    config.write_text(
        f"servers:\n  evo:\n    command: {json.dumps(sys.executable)}\n"
        f"    args: [{json.dumps(str(EVOLVING))}, {json.dumps(str(version))}]\n    timeout: 30\n"
        "serve:\n  warm: 1\n",
        encoding="utf-8",
    )
    await anyio.to_thread.run_sync(_generate, config, tree)  # generate-tree runs a loop of its own
    opened = ClientSession.opened
    regenerated: list[Path] = []

    def regenerated_first(session: ClientSession) -> Any:
        if not regenerated:  # the session's first opening: generate-tree has just ended
            version.write_text("2", encoding="utf-8")
            _generate(config, tree)
            regenerated.append(tree)
        return opened(session)

    monkeypatch.setattr(ClientSession, "opened", regenerated_first)
    loaded = load_config(config)
    server = ToolServer(loaded, tree, settings=ServeSettings.from_config(loaded), sandbox_config=test_config)
    async with server, mcp.Client(server.mcp_server(), read_timeout_seconds=120) as client:
        assert server.sandbox_pool is not None
        await anyio.to_thread.run_sync(server.sandbox_pool.wait_ready)  # on the tree of serve's start
        ran = await client.call_tool("execute_python", {"code": AS_STUBS_SAY})
        told = await client.call_tool("execute_python", {"code": "print('next')"})
        last = await client.call_tool("execute_python", {"code": "print('said once')"})
    assert regenerated
    assert not ran.is_error, result_text(ran)
    assert result_text(ran).splitlines()[:3] == [
        "['limit', 'mode', 'record_id', 'status', 'tags']",
        "update_record ran in release 2 (record_id, status)",
        "export_records ran in release 2 ()",
    ]
    assert result_text(told) == f"[{INSTRUCTIONS_BEFORE}]\n\nnext", result_text(told)
    assert result_text(last) == "said once"
