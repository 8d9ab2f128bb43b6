"""The notes of one workspace save that `tooltree serve` adds to a script's result are bounded: the first ones and a
count of the rest. Before: every note, whole, so a script deleting a folder of read-only files the user keeps in the
workspace (a ``.git/objects``: git makes them 0444) put one line per file into the model's context (3,000 files:
218 KB; at the entry cap, megabytes).

End to end: a real serve process and the SDK client over stdio, a real sandbox, the sample servers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.serve.conftest import Serve, make_serve, result_text, serve_tree

__all__ = ["make_serve", "serve_tree"]  # fixtures

WAIT = 120.0
FILES = 300
NOTES_SHOWN = 20  # `agent.serve.client_session.NOTES_SHOWN`


@pytest.mark.docker
@pytest.mark.anyio
async def test_a_save_with_hundreds_of_notes_tells_the_first_ones_and_counts_the_rest(
    make_serve: Callable[..., Serve], tmp_path: Path
) -> None:
    import mcp

    workspace = tmp_path / "ws"
    objects = workspace / "repo" / "objects"
    objects.mkdir(parents=True)
    for n in range(FILES):
        (objects / f"{n:04}").write_text("blob", encoding="utf-8")
        (objects / f"{n:04}").chmod(0o444)
    serve = make_serve(extra=["--workspace", str(workspace)])
    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as client:
        code = "import shutil\nshutil.rmtree('repo')\nprint('deleted')"
        said = result_text(await client.call_tool("execute_python", {"code": code}))
    lines = said.splitlines()
    notes = [line for line in lines if line.startswith("[workspace: repo/objects/")]
    assert notes == [
        f"[workspace: repo/objects/{n:04}: read-only on the host, so it is kept (the sandbox deleted it)]"
        for n in range(NOTES_SHOWN)
    ]
    more = FILES - NOTES_SHOWN
    assert f"[workspace: … and {more:,} more notes of this save (tooltree serve's log has them)]" in lines
    assert len(said) < 5_000
    assert sorted(p.name for p in objects.iterdir()) == [f"{n:04}" for n in range(FILES)]  # every one kept
