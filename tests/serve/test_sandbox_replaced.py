"""`tooltree serve` over stdio with the SDK client: a client session whose sandbox was killed (``docker kill``, the
whole gVisor sandbox past its memory limit, an engine restart) gets a new one at its next call, told once in that
call's result; before, every later call of the session failed until the client restarted."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from tests.serve.conftest import Serve, containers
from tests.support import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

WAIT = 90.0


async def test_a_killed_sandbox_is_replaced_at_the_sessions_next_call_which_says_so(
    make_serve: Callable[..., Serve],
) -> None:
    import mcp

    serve = make_serve(serve={"warm": 0})
    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as client:
        first = await client.call_tool("execute_python", {"code": "kept = 41\nprint('set')"})
        assert not first.is_error
        (old,) = containers(serve.owner)
        subprocess.run(["docker", "kill", old], check=True, capture_output=True, timeout=60)
        wait_until(lambda: containers(serve.owner) == [], "the killed container to be removed", WAIT)

        again = await client.call_tool("execute_python", {"code": "print('kept' in dir(), 6 * 7)"})
        text = again.content[0].text  # type: ignore[union-attr]
        assert not again.is_error, text
        assert text.startswith("[a new sandbox was started: the previous one ended (") and "status 137" in text
        assert text.endswith("\n\nFalse 42")
        (new,) = containers(serve.owner)
        assert new != old

        last = await client.call_tool("execute_python", {"code": "print('said once')"})
        assert last.content[0].text == "said once"  # type: ignore[union-attr]
