"""A script of a `tooltree serve` session that closes its stdout or stderr, driven by the official SDK client: the
session's next scripts print again (`sandbox._supervisor.flushing.reinstate`). Before, every later `execute_python`
of the session failed at its first ``print`` with "ValueError: I/O operation on closed file", ``sys.stdout =
sys.__stdout__`` too, until the interpreter was restarted."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.serve.conftest import Serve, result_text

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

WAIT = 120.0
CLOSERS = [
    "import sys\nsys.stdout.close()\nsys.stderr.close()\n",
    "import sys\nwith open('/workspace/log.txt', 'w') as sys.stdout:\n    print('into the log')\n",
]


async def test_the_scripts_after_one_that_closed_stdout_and_stderr_print_again(
    make_serve: Callable[..., Serve],
) -> None:
    import mcp

    serve = make_serve()
    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as client:
        for closer in CLOSERS:
            assert not (await client.call_tool("execute_python", {"code": f"kept = 7\n{closer}"})).is_error
            after = await client.call_tool(
                "execute_python", {"code": "import sys\nprint('printed', kept)\nsys.stderr.write('warned\\n')"}
            )
            assert not after.is_error, result_text(after)
            assert result_text(after) == "printed 7\n\n[stderr]\nwarned", result_text(after)  # variables kept
        logged = await client.call_tool("read_file", {"path": "/workspace/log.txt"})
        assert result_text(logged).startswith("into the log"), result_text(logged)
