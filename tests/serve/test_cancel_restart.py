"""`tooltree serve`: a cancelled script that ignores its interrupt has its interpreter restarted, and the session's
next result says so, once, over stdio and over HTTP (before: the result that said so was dropped with the cancel,
and the next script found its variables gone without a word)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from agent.content import execution_blocks
from agent.serve.sessions import CANCEL_RESTARTED, RESTARTED
from sandbox.results import ExecutionResult
from tests.serve.conftest import Serve, http_client, marked_processes
from tests.support import wait_until

WAIT = 90.0
STUBBORN = (
    "import signal, time\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "from servers.docs import list_documents\n"
    "list_documents()  # starts the docs server: the host's sign that SIGINT is ignored by now\n"
    "while True:\n"
    "    time.sleep(0.1)\n"
)


def test_the_note_quotes_the_words_an_execution_says_when_its_interpreter_was_restarted() -> None:
    (block,) = execution_blocks(ExecutionResult("", "", -9, 1.0, error="timed out after 1 s", state_reset=True))
    assert f"[{RESTARTED}]" in block["text"].split("\n\n")
    assert RESTARTED in CANCEL_RESTARTED


async def cancel_a_stubborn_script_then_read_a_variable(client: Any, serve: Serve) -> list[str]:
    """Set x, cancel a script that ignores SIGINT once it runs, then read x twice: the two texts."""
    first = await client.call_tool("execute_python", {"code": "x = 41"})
    assert not first.is_error

    async def call() -> None:
        await client.call_tool("execute_python", {"code": STUBBORN})

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await anyio.to_thread.run_sync(wait_until, lambda: bool(marked_processes(serve.mark)), "the docs server")
        tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled for the abandoned call
    texts = []
    for _ in range(2):
        result = await client.call_tool("execute_python", {"code": "print(globals().get('x'))"})
        assert not result.is_error
        texts.append(result.content[0].text)
    return texts


@pytest.mark.docker
@pytest.mark.anyio
async def test_over_stdio_the_next_result_says_once_that_a_cancel_restarted_the_interpreter(
    make_serve: Callable[..., Serve],
) -> None:
    import mcp

    serve = make_serve()
    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as client:
        texts = await cancel_a_stubborn_script_then_read_a_variable(client, serve)
    assert texts == [f"[{CANCEL_RESTARTED}]\n\nNone", "None"]


@pytest.mark.docker
@pytest.mark.anyio
async def test_over_http_the_next_result_says_once_that_a_cancel_restarted_the_interpreter(
    make_serve: Callable[..., Serve],
) -> None:
    serve = make_serve()
    serve.start_http()
    async with http_client(serve.url, read_timeout_seconds=WAIT) as client:
        texts = await cancel_a_stubborn_script_then_read_a_variable(client, serve)
    assert texts == [f"[{CANCEL_RESTARTED}]\n\nNone", "None"]
