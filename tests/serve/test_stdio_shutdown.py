"""`tooltree serve` over stdio leaves nothing behind when its client goes away during a call that never ends:
an upstream server that outlives its stdin, and one that ignores SIGTERM too, are ended, and the containers
removed, before serve exits; also when a signal comes while it closes (the SDK's client sends SIGTERM 2 s after
it closes stdin, and SIGKILL 2 s after that)."""

from __future__ import annotations

import json
import signal
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.serve.conftest import MARK_ENV, Serve, clean_up, containers, marked_processes
from tests.serve.raw_stdio import RawStdio
from tests.support import REPO, run_owner, wait_until

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

WAIT = 90.0
SERVER = REPO / "tests" / "serve" / "stalling_server.py"
STALL = "from servers.stalling import stall\nstall()"


def _config(folder: Path, name: str, env: dict[str, str]) -> Path:
    lines = ["servers:", "  stalling:", f"    command: {json.dumps(sys.executable)}",
             f"    args: [{json.dumps(str(SERVER))}]", f"    env: {json.dumps(env)}",
             "sandbox:", "  timeout: 600", "serve:", "  warm: 1", "  progress_interval: 0.2"]  # fmt: skip
    path = folder / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def stalling_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tree of the stalling server, generated once."""
    from generator.generate import generate
    from tooltree_cli.common import load

    folder = tmp_path_factory.mktemp("stalling-tree")
    config = _config(folder, "generate", {"STALL_FLAG": str(folder / "generate.flag")})
    result = generate(load(config), folder / "tree", embeddings="off")
    assert not result.failed, [s.error for s in result.failed]
    return folder / "tree"


@pytest.fixture
def stalling_serve(stalling_tree: Path, tmp_path: Path, docker_engine: Any) -> Iterator[Callable[[bool], Serve]]:
    """``stalling_serve(ignore_term)``: a serve setup of the stalling server (its flag file is ``serve.flag``)."""
    made: list[Serve] = []

    def make(ignore_term: bool) -> Serve:
        mark = uuid.uuid4().hex[:12]
        flag = tmp_path / f"{mark}.flag"
        flag.touch()
        env = {MARK_ENV: mark, "STALL_FLAG": str(flag), "STALL_IGNORE_TERM": "1" if ignore_term else "0"}
        serve = Serve(_config(tmp_path, mark, env), stalling_tree, run_owner(f"serve-{mark}"), mark)
        serve.flag = flag  # type: ignore[attr-defined]
        made.append(serve)
        return serve

    yield make
    for serve in made:
        clean_up(serve, docker_engine)


def _noted(serve: Serve, word: str) -> bool:
    flag: Path = serve.flag  # type: ignore[attr-defined]
    return word in flag.read_text(encoding="utf-8").split()


@pytest.mark.parametrize("ignore_term", [False, True], ids=["outlives-stdin", "ignores-sigterm"])
async def test_the_sdk_client_leaving_during_a_call_that_never_ends_leaves_no_server_nor_container(
    stalling_serve: Callable[[bool], Serve], ignore_term: bool
) -> None:
    import mcp
    from mcp.shared.exceptions import MCPError

    serve = stalling_serve(ignore_term)

    async def call(client: Any) -> None:
        # The connection closes under the pending call when the client leaves.
        with pytest.raises((MCPError, anyio.ClosedResourceError, anyio.BrokenResourceError)):
            await client.call_tool("execute_python", {"code": STALL})

    # The client is left before the call ends: it closes serve's stdin, waits 2 s, then sends SIGTERM (and SIGKILL
    # 2 s later); when it has left, serve is gone.
    async with (
        anyio.create_task_group() as tg,
        mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as client,
    ):
        tg.start_soon(call, client)
        await anyio.to_thread.run_sync(wait_until, lambda: _noted(serve, "called"), "the call to reach the server")
        assert marked_processes(serve.mark) and containers(serve.owner)
    assert marked_processes(serve.mark) == []
    assert containers(serve.owner) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["sigterm", "sighup"])
def test_a_signal_while_serve_closes_ends_a_server_that_ignores_sigterm_and_removes_the_containers(
    stalling_serve: Callable[[bool], Serve], signum: signal.Signals
) -> None:
    serve = stalling_serve(True)
    raw = RawStdio(serve.argv(), serve.env(), STALL)
    try:
        raw.start_long_execution()
        wait_until(lambda: _noted(serve, "called"), "the call to reach the server")
        assert raw.proc.stdin is not None
        raw.proc.stdin.close()
        # Closing: serve has told the server to stop, which it ignores; the client's signal comes now.
        wait_until(lambda: _noted(serve, "SIGTERM"), "serve to send the server SIGTERM")
        assert raw.proc.poll() is None
        raw.proc.send_signal(signum)
        assert raw.proc.wait(timeout=WAIT) == 0
    finally:
        raw.close()
    assert not any(m.get("id") == 2 and "result" in m for m in raw.messages)
    assert marked_processes(serve.mark) == []
    assert containers(serve.owner) == []
