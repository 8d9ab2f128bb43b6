"""`tooltree serve --workspace DIR` names the folders a killed save left beside DIR once, in the notes of the first
script's result, not again after the next script. Before: no result mentioned them.

End to end: a real serve process and the SDK client over stdio, a real sandbox, the sample servers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.sandbox.test_workspace_leftovers_named import workspace_with_a_killed_merge
from tests.serve.conftest import Serve, make_serve, result_text, serve_tree

__all__ = ["make_serve", "serve_tree"]  # fixtures

WAIT = 120.0


@pytest.mark.docker
@pytest.mark.anyio
async def test_the_first_result_names_a_killed_saves_folders_and_the_next_does_not(
    make_serve: Callable[..., Serve], tmp_path: Path
) -> None:
    import mcp

    workspace, unmerged, old = workspace_with_a_killed_merge(tmp_path)
    serve = make_serve(extra=["--workspace", str(workspace)])
    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as client:
        first = result_text(await client.call_tool("execute_python", {"code": "open('x.txt', 'w').write('1')"}))
        second = result_text(await client.call_tool("execute_python", {"code": "open('x.txt', 'w').write('2')"}))
    (said,) = [line for line in first.splitlines() if "kept by earlier saves" in line]
    assert said.startswith(f"[workspace: 2 folder(s) kept by earlier saves into {workspace} ")
    assert f": {old} (files of the folder a save took out); {unmerged} (files of the script not merged in)." in said
    assert "kept by earlier saves" not in second
    assert (workspace / "x.txt").read_text(encoding="utf-8") == "2"
