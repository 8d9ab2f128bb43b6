"""A running ``execute_python``'s progress notifications name the last line its script printed so far, so a user
watching a long script in their client sees where it is ("running for 3 s; last printed: step 2 of 3"). Before: the
seconds only. The line comes from the output the sandbox streams while the script runs (`sandbox.streamed`). They
name the tool calls it waits on too (`sandbox.calls.CallServer.waiting`), which the seconds alone left unsaid.

Real parts: `tooltree serve --http`, a real sandbox, the `mcp` SDK client asking for progress.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.serve.conftest import Serve, http_client

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

WAIT = 90.0


async def test_progress_names_the_last_line_the_script_printed(make_serve: Callable[..., Serve]) -> None:
    serve = make_serve(serve={"progress_interval": 0.2})
    serve.start_http()
    messages: list[str | None] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        messages.append(message)

    # The script runs long enough for several notifications after its lines went out (it has nothing to wait on).
    # Nothing printed after the sleep: a notification sent as the script ended could name that line.
    code = "import time\nprint('step 1')\nprint('step 2 of 3\\x1b[31m')\nprint('   ')\ntime.sleep(2)"
    async with http_client(serve.url, read_timeout_seconds=WAIT) as c:
        result: Any = await c.call_tool("execute_python", {"code": code}, progress_callback=progress)
    assert result.content[0].text == "step 1\nstep 2 of 3\n   "
    named = [m for m in messages if m and "last printed" in m]
    assert named, messages
    assert all(m.startswith("running for ") for m in named)
    # Output goes out at once, then at most every quarter second: "step 1" alone may have come first. The last is
    # the last line with more than white space, cleaned of the escape sequence the script printed.
    assert {m.split("; last printed: ")[1] for m in named} <= {"step 1", "step 2 of 3"}
    assert named[-1].endswith("; last printed: step 2 of 3"), named


async def test_progress_names_the_tool_calls_the_script_waits_on_and_for_how_long(
    make_serve: Callable[..., Serve],
) -> None:
    """A script waiting on a slow server: the progress names the call and its wait, beside the last line printed
    ("running for 3 s; waiting on media.slow_echo for 2 s; last printed: fetching"); calls made with ``parallel``
    are counted ("3 calls in flight, the longest media.slow_echo for 2 s"). Before: "running for 3 s; last printed:
    fetching", nothing of what the script waited on."""
    serve = make_serve(serve={"progress_interval": 0.2})
    serve.start_http()
    messages: list[str | None] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        messages.append(message)

    one = "from servers.media import slow_echo\nprint('fetching')\nprint(slow_echo(text='one', seconds=2.5))"
    three = (
        "from servers.media import slow_echo\nfrom tool_tree.runtime import parallel\n"
        "print([r.text for r in parallel(*[lambda: slow_echo(text='x', seconds=2.5)] * 3)])"
    )
    async with http_client(serve.url, read_timeout_seconds=WAIT) as c:
        first: Any = await c.call_tool("execute_python", {"code": one}, progress_callback=progress)
        said_one = list(messages)
        messages.clear()
        second: Any = await c.call_tool("execute_python", {"code": three}, progress_callback=progress)
    assert first.content[0].text.startswith("fetching\none\n")  # then the ledger of its calls
    assert second.content[0].text.startswith("['x', 'x', 'x']\n")
    waits = [m for m in said_one if m and "waiting on" in m]
    assert waits, said_one
    assert all(re.fullmatch(r"running for \d+ s; waiting on media\.slow_echo for \d+ s; last printed: fetching", m)
               for m in waits), waits  # fmt: skip
    assert int(waits[-1].split(" for ")[2].split()[0]) >= 1, waits  # its wait grows: 2.5 s in all
    several = [m for m in messages if m and "calls in flight" in m]
    assert several, messages
    # The three calls leave the sandbox at once (a beat may come between two of them, or between two answers).
    assert any(m.split("; ")[1].startswith("3 calls in flight") for m in several), several
    assert all(re.fullmatch(r"running for \d+ s; [23] calls in flight, the longest media\.slow_echo for \d+ s", m)
               for m in several), several  # fmt: skip
