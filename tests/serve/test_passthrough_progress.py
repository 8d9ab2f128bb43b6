"""A passthrough call's upstream progress reaches the client: the server is given a progress token, and what it
reports is said in serve's own heartbeat, whose number (the seconds run) only grows; at most one notification per
``progress_interval`` however many the server sends, its message cleaned and cut. Before: the server was given no
token and sent nothing, and the client heard only "running for N s".

`tooltree serve` runs as a real subprocess over stdio (``warm: 0``: no sandbox is started), driven by the official
SDK client, in front of tests/servers/progress_server.py (whose tool waits, once it has sent its progress, until the
test writes to a FIFO), of the sample media server (whose ``long_task`` messages say their step) and of the
third-party ``@modelcontextprotocol/server-everything``.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp
import pytest

from tests.support import REPO, SAMPLE_SERVERS, require_install
from tooltree_cli.main import main as cli

pytestmark = pytest.mark.anyio

PROGRESS_SERVER = REPO / "tests" / "servers" / "progress_server.py"
REAL = Path(os.environ.get("TOOLTREE_REAL_SERVERS") or REPO / ".real-servers").resolve()
EVERYTHING = REAL / "node" / "node_modules" / ".bin" / "mcp-server-everything"
WAIT = 90.0
INTERVAL = 0.2
SERVERS = f"  progress:\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(PROGRESS_SERVER))}]\n"
SAID = "; the server says: "
HEAD = re.compile(r"running for \d+ s")

Seen = list[tuple[float, float | None, str | None]]


def write_config(folder: Path, servers: str, tool: str) -> Path:
    path = folder / "tooltree.yaml"
    settings = f"serve:\n  warm: 0\n  progress_interval: {INTERVAL}\n  passthrough: [{tool}]\n"
    path.write_text(f"servers:\n{servers}{settings}", encoding="utf-8")
    return path


def generate(folder: Path, servers: str, tool: str) -> Path:
    tree = folder / "tree"
    assert cli(["generate-tree", "--config", str(write_config(folder, servers, tool)), "--out", str(tree)]) == 0
    return tree


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(tmp_path_factory.mktemp("progress"), SERVERS, "progress.steps")


@asynccontextmanager
async def serve(tree: Path, folder: Path, servers: str = SERVERS, tool: str = "progress.steps") -> AsyncIterator[Any]:
    """An SDK client of `tooltree serve` over stdio, offering ``tool`` as a passthrough tool."""
    folder.mkdir(parents=True, exist_ok=True)
    config = write_config(folder, servers, tool)
    argv = ["-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree), "--no-regenerate"]
    params = mcp.StdioServerParameters(command=sys.executable, args=argv, cwd=str(REPO))
    async with mcp.Client(params, read_timeout_seconds=WAIT) as client:
        yield client


async def steps(client: Any, folder: Path, until: str, **arguments: Any) -> tuple[str, Seen]:
    """Call ``progress__steps`` with ``arguments`` and a progress callback; once a notification's message holds
    ``until``, let the server answer. Returns the answer's text and the notifications the client got."""
    fifo = folder / "release"
    os.mkfifo(fifo)
    seen: Seen = []
    told = anyio.Event()
    answer: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))
        if until in (message or ""):
            told.set()

    async def call() -> None:
        result = await client.call_tool(
            "progress__steps", {**arguments, "release": str(fifo)}, progress_callback=progress
        )
        assert not result.is_error, result
        answer.append(result.content[0].text)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        with anyio.fail_after(WAIT):
            await told.wait()  # before: never (no upstream progress came)
            await anyio.to_thread.run_sync(lambda: fifo.write_text("go", encoding="utf-8"), abandon_on_cancel=True)
    return answer[0], seen


def check_heartbeats(seen: Seen) -> list[str]:
    """Each notification is serve's heartbeat (its number, the seconds run, growing); the servers' part of each."""
    numbers = [done for done, _, _ in seen]
    assert all(a < b for a, b in itertools.pairwise(numbers)), numbers
    said = []
    for _, total, message in seen:
        assert total is None and message is not None and HEAD.match(message), message
        said.append(message.partition(SAID)[2])
    return said


async def test_the_servers_progress_reaches_the_client_in_serves_heartbeat(tree: Path, tmp_path: Path) -> None:
    async with serve(tree, tmp_path / "serve") as client:
        unasked = await client.call_tool("progress__steps", {"n": 3})  # the client asks for no progress: nor does serve
        answer, seen = await steps(client, tmp_path, "step 3 of 3", n=3, message="loading part")
    assert unasked.content[0].text == "sent 0"  # type: ignore[union-attr]
    assert answer == "sent 3"  # the server was given a progress token (before: "sent 0")
    said = check_heartbeats(seen)
    assert "step 3 of 3: loading part 3" in said
    assert all(s == "" or re.fullmatch(r"step [123] of 3: loading part [123]", s) for s in said), said


async def test_a_flood_of_progress_reaches_the_client_one_notification_per_interval(tree: Path, tmp_path: Path) -> None:
    async with serve(tree, tmp_path / "serve") as client:
        started = time.monotonic()
        answer, seen = await steps(client, tmp_path, "step ", n=10_000, message="flood")
        took = time.monotonic() - started
    assert answer == "sent 10000"
    said = check_heartbeats(seen)
    assert any(re.fullmatch(r"step \d+ of 10000: flood \d+", s) for s in said), said
    # Serve's own heartbeat, not one notification per upstream one (10,000; 2,000 of them pass the pool's budget).
    assert len(seen) <= took / INTERVAL + 2, (len(seen), took)


async def test_a_progress_message_of_a_megabyte_with_escapes_comes_cleaned_on_one_line_and_cut(
    tree: Path, tmp_path: Path
) -> None:
    async with serve(tree, tmp_path / "serve") as client:
        answer, seen = await steps(client, tmp_path, "step 1 of 1", n=1, message="part", hostile=True, pad=1_000_000)
    assert answer == "sent 1"
    said = [s for s in check_heartbeats(seen) if s]
    assert said
    for text in said:
        assert text.startswith("step 1 of 1: REDevil forged part 1 xxx") and text.endswith("x…"), text[:100]
        assert len(text) == len("step 1 of 1: ") + 200 and text.isprintable()


async def test_a_progress_number_no_float_holds_is_dropped_and_the_call_answers(tree: Path, tmp_path: Path) -> None:
    # Before the SDK was given a progress callback this was ignored; with one, the SDK's float() of it ended the
    # connection (the call failed: "the server died during the call").
    async with serve(tree, tmp_path / "serve") as client:
        result = await client.call_tool("progress__steps", {"n": 2, "huge": True}, progress_callback=_ignore)
    assert not result.is_error and result.content[0].text == "sent 2"  # type: ignore[union-attr]


async def _ignore(done: float, total: float | None, message: str | None) -> None:
    return None


async def test_a_progress_message_that_states_its_step_is_said_once(tmp_path: Path) -> None:
    # The sample media server's long_task sends "step i of n" as the message of progress i of n.
    media = SAMPLE_SERVERS / "media.py"
    servers = f"  media:\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(media))}]\n"
    tree = await anyio.to_thread.run_sync(generate, tmp_path, servers, "media.long_task")
    seen: Seen = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    async with serve(tree, tmp_path / "serve", servers, "media.long_task") as client:
        result = await client.call_tool(
            "media__long_task", {"steps": 3, "step_seconds": 4 * INTERVAL}, progress_callback=progress
        )
    assert not result.is_error, result
    said = [s for s in check_heartbeats(seen) if s]
    assert said and all(re.fullmatch(r"step [123] of 3", s) for s in said), said  # before: "step 1 of 3: step 1 of 3"


@pytest.mark.real_servers
async def test_the_real_everything_servers_progress_reaches_the_client(tmp_path: Path) -> None:
    require_install(REAL / ".stamp", "third-party MCP servers", "run `make real-servers`")
    servers = f"  everything:\n    command: {json.dumps(str(EVERYTHING))}\n    args: [stdio]\n    timeout: 60\n"
    tool = "everything.trigger-long-running-operation"
    tree = await anyio.to_thread.run_sync(generate, tmp_path, servers, tool)
    seen: Seen = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    async with serve(tree, tmp_path / "serve", servers, tool) as client:
        result = await client.call_tool(
            "everything__trigger-long-running-operation", {"duration": 3, "steps": 6}, progress_callback=progress
        )
    assert not result.is_error and "Steps: 6" in result.content[0].text  # type: ignore[union-attr]
    steps_said = [int(m.group(1)) for s in check_heartbeats(seen) if (m := re.fullmatch(r"step (\d) of 6", s))]
    assert steps_said and steps_said == sorted(steps_said), check_heartbeats(seen)
