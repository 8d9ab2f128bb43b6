"""``pool.start_jobs`` bounds the upstream servers starting at once in a whole ``tooltree serve`` process: its client
sessions share it (each had its own, so 12 sessions over HTTP started 24 servers at once on 2 cores).

A real ``serve --http`` process and SDK clients; the upstream server (tests/servers/start_gated_server.py) holds
its start-up until the test lets it go, so the test sees every server starting and how many do at once.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.serve.conftest import Serve, clean_up, http_client
from tests.support import run_owner

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

GATED = Path(__file__).parents[1] / "servers" / "start_gated_server.py"
SESSIONS = 4
START_JOBS = 2
WAIT = 90.0
QUIET = 2.0
"""How long no further start is waited for while the bound is starting (the gate keeps one from coming at all)."""


def gated_config(path: Path, socket: Path | None) -> Path:
    env = f"    env: {{START_SOCKET: {json.dumps(str(socket))}}}\n" if socket is not None else ""
    path.write_text(
        f"servers:\n  gated:\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(GATED))}]\n{env}"
        f"pool:\n  start_jobs: {START_JOBS}\nserve:\n  warm: 0\n  passthrough: [gated.ping]\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def gated_tree(tmp_path: Path) -> Path:
    """The tree of the gated server, generated with no socket to hold its start."""
    from tooltree_cli.main import main

    tree = tmp_path / "tree"
    assert (
        main(["generate-tree", "--config", str(gated_config(tmp_path / "generate.yaml", None)), "--out", str(tree)])
        == 0
    )
    return tree


async def test_client_sessions_together_start_no_more_servers_at_once_than_start_jobs(
    tmp_path: Path, gated_tree: Path, docker_engine: Any
) -> None:
    socket = tmp_path / "starts.sock"
    serve = Serve(gated_config(tmp_path / "tooltree.yaml", socket), gated_tree, run_owner("serve-starts"), "starts")
    held: list[anyio.abc.SocketStream] = []
    arrived = anyio.Event()
    most = 0

    async def hold(stream: anyio.abc.SocketStream) -> None:
        nonlocal arrived, most
        await stream.receive()
        held.append(stream)
        most = max(most, len(held))
        arrived.set()

    async def call(answers: list[str]) -> None:
        async with http_client(serve.url, read_timeout_seconds=WAIT) as client:
            result = await client.call_tool("gated__ping", {})
            answers.append(result.content[0].text)

    listener = await anyio.create_unix_listener(socket)
    try:
        serve.start_http()
        answers: list[str] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, hold)
            async with anyio.create_task_group() as clients:
                for _ in range(SESSIONS):
                    clients.start_soon(call, answers)
                released = 0
                while released < SESSIONS:
                    with anyio.fail_after(WAIT):  # the bound starts (or the last ones)
                        while len(held) < min(START_JOBS, SESSIONS - released):
                            arrived = anyio.Event()
                            await arrived.wait()
                    with anyio.move_on_after(QUIET):  # and no more while they start
                        arrived = anyio.Event()
                        await arrived.wait()
                    assert most <= START_JOBS, f"{most} servers started at once, past pool.start_jobs {START_JOBS}"
                    for stream in held:
                        await stream.send(b"go")
                        await stream.aclose()
                    released += len(held)
                    held.clear()
            tg.cancel_scope.cancel()
        assert (answers, most) == (["pong"] * SESSIONS, START_JOBS)
    finally:
        await listener.aclose()
        clean_up(serve, docker_engine)
