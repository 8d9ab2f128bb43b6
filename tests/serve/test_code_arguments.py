"""`tooltree serve`'s four tools, as a real subprocess driven by the official SDK client over stdio: their schemas
say they take no other argument, and a call with one is refused naming it, before anything runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agent.serve.content import NEW_SESSION_HINT
from tests.serve.conftest import Serve

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

WAIT = 90.0


def text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def test_a_call_with_an_argument_the_tool_does_not_have_is_refused_and_runs_nothing(
    make_serve: Callable[..., Serve],
) -> None:
    import mcp

    # Before: the unknown argument was ignored: the script ran (with the server's time limit, not the 600 s asked
    # for) and read_file read 2,000 lines, not 5.
    serve = make_serve()
    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as client:
        timed = await client.call_tool("execute_python", {"code": "open('ran.txt', 'w').write('x')", "timeout": 600})
        assert timed.is_error
        assert (
            text(timed) == "execute_python has no argument 'timeout'; its arguments are: code; the script was not run"
        )
        lines = await client.call_tool("read_file", {"path": "servers/INDEX.md", "lines": 5})
        assert lines.is_error
        assert text(lines) == "read_file has no argument 'lines'; its arguments are: path, offset, limit"
        typed = await client.call_tool("read_file", {"path": "servers/INDEX.md", "limit": "ten"})
        assert typed.is_error and text(typed) == "limit must be an integer, got str 'ten'"

        listing = await client.call_tool("list_files", {"path": "/workspace"})
        assert not listing.is_error and "servers/" in text(listing) and "ran.txt" not in text(listing)
        # The refused script was not the session's first either (before: it started the sandbox and was counted).
        ran = await client.call_tool("execute_python", {"code": "import os\nprint(os.path.exists('ran.txt'), kept)"})
        assert ran.is_error and "NameError: name 'kept' is not defined" in text(ran)
        assert any(getattr(block, "text", None) == NEW_SESSION_HINT for block in ran.content)


async def test_an_integer_argument_given_as_a_float_with_no_fraction_is_taken_and_one_with_a_fraction_refused(
    make_serve: Callable[..., Serve],
) -> None:
    import mcp

    # Before: "limit must be an integer, got float 2.0", though JSON Schema counts 2.0 as an integer.
    serve = make_serve()
    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as client:
        found = await client.call_tool("search_tools", {"query": "record", "detail": "name", "limit": 2.0})
        whole = await client.call_tool("search_tools", {"query": "record", "detail": "name", "limit": 2})
        assert not found.is_error and text(found) == text(whole)
        lines = await client.call_tool("read_file", {"path": "servers/INDEX.md", "offset": 2.0, "limit": 1.0})
        assert not lines.is_error
        assert text(lines).startswith(
            text(await client.call_tool("read_file", {"path": "servers/INDEX.md", "offset": 2, "limit": 1}))
        )
        half = await client.call_tool("search_tools", {"query": "record", "limit": 2.5})
        assert half.is_error and text(half) == "limit must be an integer, got float 2.5"
        offset = await client.call_tool("read_file", {"path": "servers/INDEX.md", "offset": 1.5})
        assert offset.is_error and text(offset) == "offset must be an integer, got float 1.5"
