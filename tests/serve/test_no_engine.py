"""`tooltree serve` started where no Docker engine answers (not installed, not started, ``DOCKER_HOST`` wrong): it
serves the tree and search, each ``execute_python`` answers with the engine's error and how to start it, and a script
runs once an engine answers, with no restart."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.serve.conftest import Serve
from tests.serve.raw_stdio import RawStdio

pytestmark = pytest.mark.docker


@pytest.fixture
def short_folder() -> Iterator[Path]:
    """A folder with a short path, for a unix socket (its path must stay under 108 bytes)."""
    with tempfile.TemporaryDirectory(prefix="serve-", dir="/tmp") as folder:
        yield Path(folder)


def call(stdio: RawStdio, request: int, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    """A ``tools/call`` of ``name``: whether it is an error, and its text."""
    stdio.send({"id": request, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
    result = stdio.wait_for(lambda m: m.get("id") == request, f"the result of {name}")["result"]
    return bool(result.get("isError")), "\n".join(block["text"] for block in result["content"])


def test_serve_without_an_engine_serves_the_tree_and_runs_a_script_once_the_engine_answers(
    make_serve: Callable[..., Serve], short_folder: Path
) -> None:
    # Before: serve exited 4 at start ("the sandbox cannot run: no Docker engine answers …"), and the client showed
    # only "Connection closed".
    from sandbox._docker import engine_address

    engine = engine_address()
    if not engine.startswith("unix://"):
        pytest.skip(f"the engine is reached here through a local socket; it is at {engine}")
    socket = short_folder / "engine.sock"  # nothing there yet: no engine answers
    serve = make_serve(env={"DOCKER_HOST": f"unix://{socket}"})  # one warm sandbox, as by default
    with RawStdio(serve.argv(), serve.env()) as stdio:
        stdio.initialize()
        stdio.wait_for_stderr(f"no Docker engine answers at unix://{socket}")
        workspace = call(stdio, 6, "list_files", {})  # /workspace, in the sandbox
        listed = call(stdio, 2, "list_files", {"path": "servers"})
        found = call(stdio, 3, "search_tools", {"query": "get a record"})
        refused = call(stdio, 4, "execute_python", {"code": "print(6 * 7)"})
        socket.symlink_to(engine.removeprefix("unix://"))  # the user starts Docker
        ran = call(stdio, 5, "execute_python", {"code": "print(6 * 7)"})
    assert workspace[0] is True
    assert workspace[1].startswith("list_files failed: /workspace is in the sandbox, which could not start: no Docker "
                                   "engine answers at ")  # fmt: skip
    assert workspace[1].endswith("; the tree needs none: list_files servers, read_file servers/<server>/<tool>.py and "
                                 "search_tools work")  # fmt: skip
    assert listed[0] is False and "crm/" in listed[1]
    assert found[0] is False and "crm.get_record" in found[1]
    assert refused[0] is True
    assert refused[1].startswith(f"execute_python failed: the sandbox could not start: no Docker engine answers at "
                                 f"unix://{socket}")  # fmt: skip
    assert "Start Docker" in refused[1] and "the next execute_python tries the engine again" in refused[1]
    assert ran == (False, "42")


@pytest.mark.anyio
async def test_serve_over_http_without_an_engine_answers_each_client_and_gives_each_its_own_sandbox_once_it_answers(
    make_serve: Callable[..., Serve], short_folder: Path, docker_engine: Any
) -> None:
    # The stdio test's path over Streamable HTTP, with two clients at once: each session is told what works without
    # the engine, and once it answers, each runs in a sandbox of its own (a variable of one is not the other's).
    from sandbox._docker import engine_address
    from tests.serve.conftest import containers, http_client, result_text

    engine = engine_address()
    if not engine.startswith("unix://"):
        pytest.skip(f"the engine is reached here through a local socket; it is at {engine}")
    socket = short_folder / "engine.sock"  # nothing there yet: no engine answers
    serve = make_serve(env={"DOCKER_HOST": f"unix://{socket}"})
    serve.start_http()
    assert serve.process is not None
    assert any(f"no Docker engine answers at unix://{socket}" in line for line in serve.process.stderr_lines)
    async with http_client(serve.url) as first, http_client(serve.url) as second:
        listed = await first.call_tool("list_files", {"path": "servers"})
        found = await second.call_tool("search_tools", {"query": "get a record"})
        refused = [await c.call_tool("execute_python", {"code": "print(6 * 7)"}) for c in (first, second)]
        socket.symlink_to(engine.removeprefix("unix://"))  # the user starts Docker
        await first.call_tool("execute_python", {"code": "who = 'first'"})
        await second.call_tool("execute_python", {"code": "who = 'second'"})
        ran = [await c.call_tool("execute_python", {"code": "print(who)"}) for c in (first, second)]
        assert len(containers(serve.owner, running=True)) >= 2  # one sandbox each
    assert not listed.is_error and "crm/" in result_text(listed)
    assert not found.is_error and "crm.get_record" in result_text(found)
    for result in refused:
        assert result.is_error
        assert result_text(result).startswith(
            f"execute_python failed: the sandbox could not start: no Docker engine answers at unix://{socket}"
        )
        assert "the next execute_python tries the engine again" in result_text(result)
    assert [(r.is_error, result_text(r)) for r in ran] == [(False, "first"), (False, "second")]
    assert serve.stop() == 0
    assert containers(serve.owner) == []  # every sandbox removed as serve stopped
