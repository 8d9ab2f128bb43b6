"""Client sessions of `tooltree serve --http` against each other and against their own scripts, with real SDK
clients: one client's blocked calls hold up no other client, a workspace read never waits behind a running
script, and a cancel that arrives while the sandbox is still starting keeps the script from ever running."""

from __future__ import annotations

import json
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from agent.serve.sessions import CALL_THREADS
from tests.serve.conftest import MARK_ENV, Serve, clean_up, http_client, marked_processes
from tests.serve.engine_gate import EngineGate
from tests.support import run_owner

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

WAIT = 90.0
HELD_SERVER = Path(__file__).with_name("held_server.py")
OLD_SHARED_THREADS = 40
"""anyio's default worker threads, which every session's calls used to share."""


@pytest.fixture
def short_folder() -> Iterator[Path]:
    """A folder with a short path, for unix sockets (their paths must stay under 108 bytes)."""
    with tempfile.TemporaryDirectory(prefix="serve-", dir="/tmp") as folder:
        yield Path(folder)


@dataclass
class Held:
    """A serve process whose one upstream server is `held_server.py` (``held__hold`` is a passthrough tool)."""

    serve: Serve
    socket: Path


@pytest.fixture
def held(tmp_path: Path, short_folder: Path, docker_engine: Any) -> Iterator[Held]:
    from generator.generate import generate
    from tooltree_cli.common import load

    mark = uuid.uuid4().hex[:12]
    socket = short_folder / "held.sock"
    env = json.dumps({"HELD_SOCKET": str(socket), MARK_ENV: mark})
    lines = [
        "servers:",
        "  held:",
        f"    command: {json.dumps(sys.executable)}",
        f"    args: [{json.dumps(str(HELD_SERVER))}]",
        f"    env: {env}",
        "sandbox:",
        "  timeout: 60",
        "serve:",
        '  passthrough: ["held.hold"]',
        "  warm: 1",
        "  progress_interval: 0.2",
    ]
    config = tmp_path / "tooltree.yaml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tree = tmp_path / "tree"
    result = generate(load(config), tree, embeddings="off")
    assert not result.failed, [s.error for s in result.failed]
    serve = Serve(config, tree, run_owner(f"serve-{mark}"), mark)
    serve.start_http()
    yield Held(serve, socket)
    clean_up(serve, docker_engine)


async def test_one_clients_blocked_calls_hold_up_no_other_client(held: Held) -> None:
    calls = OLD_SHARED_THREADS + 5  # more than every session's calls used to share
    arrived: list[str] = []
    answered: list[str] = []
    enough, release = anyio.Event(), anyio.Event()

    async def at_the_server(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            arrived.append((await stream.receive()).decode().strip())
            if len(arrived) >= CALL_THREADS:
                enough.set()
            await release.wait()
            await stream.send(b"go\n")

    async def blocked_call(client: Any, n: int) -> None:
        result = await client.call_tool("held__hold", {"tag": str(n)})
        answered.append(result.content[0].text)

    url = held.serve.url
    listener = await anyio.create_unix_listener(held.socket)
    async with listener, anyio.create_task_group() as upstream:
        upstream.start_soon(listener.serve, at_the_server)
        async with http_client(url, read_timeout_seconds=WAIT) as a, anyio.create_task_group() as calls_of_a:
            for n in range(calls):
                calls_of_a.start_soon(blocked_call, a, n)
            with anyio.fail_after(WAIT):
                await enough.wait()
                async with http_client(url, read_timeout_seconds=WAIT) as b:
                    found = await b.call_tool("search_tools", {"query": "hold", "detail": "name"})
                    listed = await b.call_tool("list_files", {"path": "servers/held"})
                    ran = await b.call_tool("execute_python", {"code": "print(6 * 7)"})
                # Leaving, b sent DELETE, which answers once its session has ended: ending one waits for no client.
            assert not answered, "a call of the first client came back before it was released"
            assert len(arrived) == CALL_THREADS  # the rest of its calls wait for its own threads
            release.set()
        upstream.cancel_scope.cancel()
    assert "held.hold" in found.content[0].text
    assert "hold.py" in listed.content[0].text
    assert not ran.is_error and ran.content[0].text == "42"
    assert sorted(answered, key=int) == [str(n) for n in range(calls)]  # every queued call was served in the end
    assert len(arrived) == calls


async def test_a_workspace_read_while_the_script_runs_is_answered_at_once(make_serve: Callable[..., Serve]) -> None:
    serve = make_serve()
    serve.start_http()
    running = anyio.Event()

    async def progress(done: float, total: float | None, message: str | None) -> None:
        running.set()

    async def long_script(client: Any) -> None:
        await client.call_tool("execute_python", {"code": "import time\ntime.sleep(600)"}, progress_callback=progress)

    async with http_client(serve.url, read_timeout_seconds=WAIT) as c:
        await c.call_tool("execute_python", {"code": "open('notes.txt', 'w').write('kept')"})
        async with anyio.create_task_group() as tg:
            tg.start_soon(long_script, c)
            with anyio.fail_after(WAIT):
                await running.wait()
                reads = [
                    await c.call_tool("list_files", {"path": "/workspace"}),
                    await c.call_tool("read_file", {"path": "notes.txt"}),
                    await c.call_tool("list_files", {}),
                ]
                stub = await c.call_tool("read_file", {"path": "servers/crm/get_record.py"})
            tg.cancel_scope.cancel()
        await c.call_tool("execute_python", {"code": "pass"})  # runs once the cancelled script has ended
        listed = await c.call_tool("list_files", {"path": "/workspace"})
    for read in reads:
        assert read.is_error and "busy, a script of this session is running" in read.content[0].text
    assert not stub.is_error and "def get_record(" in stub.content[0].text
    assert not listed.is_error and "notes.txt" in listed.content[0].text


async def test_a_cancel_while_the_sandbox_starts_keeps_the_script_from_running(
    make_serve: Callable[..., Serve], short_folder: Path
) -> None:
    from sandbox._docker import engine_address

    engine = engine_address()
    if not engine.startswith("unix://"):
        pytest.skip(f"the engine gate relays a local socket; the engine is at {engine}")
    script = "from servers.docs import list_documents\nlist_documents()\nopen('ran.txt', 'w').write('yes')"
    with EngineGate(short_folder, engine.removeprefix("unix://")) as gate:
        serve = make_serve(extra=["--warm", "0"], env={"DOCKER_HOST": gate.address})
        serve.start_http()
        try:
            async with http_client(serve.url, read_timeout_seconds=WAIT) as c:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(c.call_tool, "execute_python", {"code": script})
                    # The sandbox is starting (the wait's own bound: False when it never did, and the test fails).
                    assert await anyio.to_thread.run_sync(gate.creating.wait, WAIT)
                    tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled
                with anyio.fail_after(WAIT):
                    # Answered after the cancel reached the server, while the sandbox still waits to be created.
                    busy = await c.call_tool("list_files", {"path": "/workspace"})
                    gate.release()
                    after = await c.call_tool("execute_python", {"code": "import os\nprint(os.path.exists('ran.txt'))"})
                servers = marked_processes(serve.mark)  # the session's upstream servers, started on first call
        finally:
            serve.stop()
    assert busy.is_error and "busy" in busy.content[0].text
    assert not after.is_error and after.content[0].text == "False"  # the script never wrote its file
    assert not servers  # nor called its tool: the docs server never started


async def test_a_sessions_executions_waiting_behind_its_running_one_are_bounded(
    make_serve: Callable[..., Serve],
) -> None:
    # Before: every execute_python call waited with its script however many there were (150 of 3.9 MB took
    # serve from 83 to 662 MiB). Now QUEUED_EXECUTIONS wait; the others are refused at once.
    from agent.serve.sessions import QUEUED_EXECUTIONS

    serve = make_serve()
    serve.start_http()
    running, refused_all = anyio.Event(), anyio.Event()
    results: list[Any] = []
    extra = 3

    async def progress(done: float, total: float | None, message: str | None) -> None:
        running.set()

    async def long_script(client: Any) -> None:
        await client.call_tool("execute_python", {"code": "import time\ntime.sleep(600)"}, progress_callback=progress)

    async def one(client: Any, n: int) -> None:
        results.append(await client.call_tool("execute_python", {"code": f"print({n})"}))
        if sum(r.is_error for r in results) >= extra:
            refused_all.set()

    async with (
        http_client(serve.url, read_timeout_seconds=WAIT) as c,
        anyio.create_task_group() as waiting,  # ends after the long script's group: its calls then run
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(long_script, c)
        with anyio.fail_after(WAIT):
            await running.wait()
        for n in range(QUEUED_EXECUTIONS + extra):
            waiting.start_soon(one, c, n)
        with anyio.fail_after(WAIT):  # those past the bound are answered while the script still runs
            await refused_all.wait()
        refused = list(results)
        tg.cancel_scope.cancel()  # stops the long script; the waiting ones then run
    assert len(refused) == extra
    for r in refused:
        assert r.is_error and f"busy, {QUEUED_EXECUTIONS} executions of this session are already waiting" in (
            r.content[0].text
        )
    ran = sorted(r.content[0].text for r in results if not r.is_error)
    assert len(ran) == QUEUED_EXECUTIONS and len(results) == QUEUED_EXECUTIONS + extra
