"""A running ``execute_python``'s progress notifications name the last line its script printed so far, so a user
watching a long script in their client sees where it is ("running for 3 s; last printed: step 2 of 3"). Before: the
seconds only. The line comes from the output the sandbox streams while the script runs (`sandbox.streamed`).

Real parts: `tooltree serve --http`, a real sandbox, the `mcp` SDK client asking for progress.
"""

from __future__ import annotations

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
