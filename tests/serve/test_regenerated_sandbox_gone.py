"""`tooltree serve`: a client session opened before a `generate-tree` whose sandbox then ends (``docker kill``) is
replaced at its next call by a session on the regenerated tree, whose first result says so: the script sees the
regenerated stubs and its calls are checked against the regenerated manifest, as `tools/list` shows the passthrough
tools. Whether the sandbox ended before the regeneration or after serve had told the session it keeps its tree.

Before, the session started its next sandbox itself: the shared backend's (or the warm pool's), which mounted the
regenerated tree, while its bridge checked the calls against the manifest of the tree before: a call of the changed
tool as its new stub reads was refused as "cannot be called in this session: the regenerated tree holds another
definition of it", one of the tool the regeneration added as "not in this tree's manifest", and the passthrough tool
`tools/list` showed as regenerated was refused the same way.

A session opened before the regeneration that had started no sandbox is replaced too (as before), and its first
result now says that the instructions of the client's handshake are of the tree before: they named a tool the
regeneration removed, whose import then failed with no word of why.

Real parts: `tooltree serve` as a subprocess in front of tests/servers/evolving_server.py, the official SDK client
over stdio, a Docker engine; `generate-tree` moves the tree from release 1 to release 2 while serve runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import anyio
import mcp
import pytest

from tests.serve.conftest import containers, result_text
from tests.support import REPO, run_owner, wait_until
from tooltree_cli.main import main

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

EVOLVING = REPO / "tests" / "servers" / "evolving_server.py"
WAIT = 120.0
PROBE = """
import inspect, os
from servers import evo
print(inspect.signature(evo.update_record))
print(sorted(n[:-3] for n in os.listdir("/workspace/servers/evo") if n.endswith(("_record.py", "_records.py"))))
print(evo.update_record(record_id="r1", status="open"))
print(evo.export_records())
"""
"""What a script of release 2's stubs runs: `update_record` needs `status` (and has no `note`), `export_records` is new,
`delete_record` is gone."""


def _generate(config: Path, version: Path, tree: Path, release: str) -> None:
    version.write_text(release, encoding="utf-8")
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0


async def _served(folder: Path, warm: int) -> tuple[Path, Path, Path, str, mcp.StdioServerParameters]:
    """A tree of the evolving server at release 1 and how to serve it (``update_record`` passed through): its config,
    version file, tree, sandbox owner and the client's parameters."""
    version, config, tree = folder / "version", folder / "tooltree.yaml", folder / "tree"
    config.write_text(
        f"servers:\n  evo:\n    command: {json.dumps(sys.executable)}\n"
        f"    args: [{json.dumps(str(EVOLVING))}, {json.dumps(str(version))}]\n"
        f'serve:\n  warm: {warm}\n  passthrough: ["evo.update_record"]\n',
        encoding="utf-8",
    )
    await anyio.to_thread.run_sync(_generate, config, version, tree, "1")  # generate-tree runs a loop of its own
    owner = run_owner(f"gone-{uuid.uuid4().hex[:8]}")
    argv = ["-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree), "--no-regenerate"]
    env = {**os.environ, "TOOLTREE_SANDBOX_OWNER": owner}
    return (
        config,
        version,
        tree,
        owner,
        mcp.StdioServerParameters(command=sys.executable, args=argv, cwd=str(REPO), env=env),
    )


@pytest.mark.parametrize(("killed", "warm"), [("before", 0), ("after", 1)])
async def test_a_session_whose_sandbox_ended_is_replaced_by_one_on_the_regenerated_tree(
    docker_engine: object, tmp_path: Path, killed: str, warm: int
) -> None:
    config, version, tree, owner, params = await _served(tmp_path, warm)

    def kill() -> None:  # the sandbox of the session
        ids = containers(owner, running=True)  # the session's, and the warm one (the pool starts another)
        subprocess.run(["docker", "kill", *ids], check=True, capture_output=True, timeout=60)
        wait_until(lambda: not set(ids) & set(containers(owner)), "the killed containers to be removed", WAIT)

    async with mcp.Client(params, read_timeout_seconds=WAIT) as client:
        set_up = "from servers import evo\nkept = 41\nprint(evo.update_record(record_id='r1', note='n'))"
        first = await client.call_tool("execute_python", {"code": set_up})
        assert result_text(first).startswith("update_record ran in release 1 (note, record_id)"), result_text(first)
        if killed == "before":
            await anyio.to_thread.run_sync(kill)
            await anyio.to_thread.run_sync(_generate, config, version, tree, "2")
        else:
            await anyio.to_thread.run_sync(_generate, config, version, tree, "2")
            told = await client.call_tool("execute_python", {"code": "print(kept + 1)"})
            assert result_text(told).startswith("[the tree was regenerated from the servers since this session's")
            await anyio.to_thread.run_sync(kill)

        ran = await client.call_tool("execute_python", {"code": PROBE})
        text = result_text(ran)
        signature = "]\n\n(*, record_id: 'str', status: 'str', limit: 'Literal[10, 20] | NotGiven' = NOT_GIVEN, "
        assert signature in text and "['archive_record', 'export_records', 'get_record', 'update_record']" in text
        assert "update_record ran in release 2 (record_id, status)\nexport_records ran in release 2 ()" in text, text
        assert not ran.is_error, text
        assert text.startswith("[a new sandbox session on the regenerated tree: this session's sandbox ended (")
        assert "status 137" in text and "the instructions this client got when it connected are of the tree" in text

        passed = await client.call_tool("evo__update_record", {"record_id": "r1", "status": "open"})
        assert not passed.is_error and result_text(passed) == "update_record ran in release 2 (record_id, status)"
        refused = await client.call_tool("execute_python", {"code": "evo.delete_record(id='x')"})
        assert refused.is_error and "module 'servers.evo' has no attribute 'delete_record'" in result_text(refused)
        last = await client.call_tool("execute_python", {"code": "print('said once')"})
        assert result_text(last) == "said once"


async def test_a_session_without_a_sandbox_replaced_after_the_regeneration_says_the_instructions_are_of_the_tree_before(
    docker_engine: object, tmp_path: Path
) -> None:
    config, version, tree, _, params = await _served(tmp_path, 0)
    async with mcp.Client(params, read_timeout_seconds=WAIT, mode="legacy") as client:  # the handshake, as Claude Code
        instructions = str(client.session.initialize_result.instructions)
        found = await client.call_tool("search_tools", {"query": "delete a record", "detail": "name"})  # opens it
        assert "evo.delete_record" in result_text(found)
        await anyio.to_thread.run_sync(_generate, config, version, tree, "2")  # delete_record removed
        ran = await client.call_tool("execute_python", {"code": "from servers.evo import delete_record"})
        again = await client.call_tool("execute_python", {"code": "from servers.evo import export_records"})
    assert "archive_record, delete_record, get_record, update_record" in instructions
    text = result_text(ran)
    assert ran.is_error and "cannot import name 'delete_record' from 'servers.evo'" in text
    assert text.startswith(
        "[this session runs on the tree as regenerated since this client connected: the index and signatures of the "
        "instructions it got when it connected are of the tree before (a tool they name may be gone or take other "
        "parameters): read servers/INDEX.md and a tool's stub for what is there now]\n\n"
    ), text
    assert not again.is_error and "[" not in result_text(again)  # said once
