"""Tool-call arguments cannot make the host hold or compute without bound (SECURITY.md, "Host resources").

Each script runs in a real container and calls a real MCP server (tests/servers/raw_server.py, which
counts the calls it receives) through the real bridge and server pool. An argument that would inflate
on the host — 8 MiB of ``[{}, {}, …]`` parses to 2.8 million objects — is refused before validation
and before the server sees it; many large calls at once are bounded per session; the schema, not the
host, decides whether unknown properties are allowed; and ``uniqueItems`` is checked in linear time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import Sandbox, SandboxConfig
from sandbox.call_limits import DEFAULT_LIMITS
from sandbox.mcp_bridge import McpBridge
from tests.docker_cli import EngineWithCLI
from tests.security.probes import host_peak_growth
from tests.support import raw_server_tree
from tool_tree.pool import BackgroundPool

pytestmark = pytest.mark.docker

TOOLS = [
    {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {
        "name": "closed",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "additionalProperties": False},
    },
    {
        "name": "tags",
        "inputSchema": {"type": "object", "properties": {"items": {"type": "array", "uniqueItems": True}}},
    },
    {"name": "sleep", "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}}},
    {"name": "count", "inputSchema": {"type": "object"}},
]


@pytest.fixture(scope="module")
def counted(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: EngineWithCLI
) -> Iterator[tuple[Path, BackgroundPool]]:
    """A tree of the raw server's tools and a live pool running it."""
    tree, server = raw_server_tree(tmp_path_factory.mktemp("arguments"), TOOLS)
    with BackgroundPool([server]) as pool:
        yield tree, pool


@pytest.fixture
def session(counted: tuple[Path, BackgroundPool], test_config: SandboxConfig) -> Iterator[Sandbox]:
    tree, pool = counted
    with Sandbox(config=test_config, tree=tree, tools=McpBridge(tree, pool.pool), tool_loop=pool.loop) as sb:
        yield sb


def calls_received(pool: BackgroundPool) -> int:
    """How many calls the server has received, not counting this one."""
    text = pool.call("raw", "count", {})["content"][0]["text"]
    return int(text) - 1


TRY = """\
from tool_tree.runtime import call_tool, ToolCallError
def attempt(tool, arguments):
    try:
        return 'ok: ' + call_tool('raw', tool, arguments).text[:60]
    except ToolCallError as e:
        return f'{e.code}: {e.message}'
"""


def test_an_argument_that_inflates_on_parsing_is_refused_before_it_reaches_the_server(
    session: Sandbox, counted: tuple[Path, BackgroundPool]
) -> None:
    before = calls_received(counted[1])
    script = TRY + "print(attempt('echo', {'text': 'x', 'pad': [{}] * ((8 * 1024 * 1024 - 100) // 3)}))\n"
    result = session.execute(script)
    assert result.error is None, result.traceback
    assert result.stdout.startswith("arguments_too_large: the arguments hold more than 100,000 values")
    assert calls_received(counted[1]) == before + 1  # only the count call itself: the inflated one never arrived
    assert session.execute(TRY + "print(attempt('echo', {'text': 'still here'}))").stdout == (
        'ok: {"text": "still here"}\n'
    )


def test_a_call_that_fills_a_frame_with_tiny_values_is_refused_in_the_sandbox_and_the_host_stays_small(
    session: Sandbox, counted: tuple[Path, BackgroundPool]
) -> None:
    # Before: the supervisor parsed the 16 MiB frame past the container's memory (exit 137, session lost);
    # a supervisor that relays it anyway is refused unparsed on the host (tests/security/test_bridge_input.py).
    before = calls_received(counted[1])
    script = TRY + (
        "pad = [{}] * ((16 * 1024 * 1024 - 200) // 3)\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "print(attempt('echo', {'text': 'x', 'pad': pad}))\n"
        "with ThreadPoolExecutor(16) as ex:\n"
        "    print(set(ex.map(lambda i: attempt('echo', {'i': i, 'pad': pad[: len(pad) // 4]}), range(16))))\n"
    )
    result, growth = host_peak_growth(lambda: session.execute(script, timeout=60))
    assert result.error is None, result.traceback
    one, many = result.stdout.splitlines()
    assert one.startswith("arguments_too_large: the arguments hold more than 100,000 values")
    assert many.startswith("{'arguments_too_large: the arguments hold more than 100,000 values") and "', '" not in many
    assert growth < 64 << 20, f"host peak RSS rose {growth >> 20} MiB"
    assert calls_received(counted[1]) == before + 1  # only the count call itself
    assert session.execute(TRY + "print(attempt('echo', {'text': 'still here'}))").stdout == (
        'ok: {"text": "still here"}\n'
    )


def test_many_large_calls_at_once_are_bounded_per_session_and_the_rest_refused(
    session: Sandbox, counted: tuple[Path, BackgroundPool]
) -> None:
    before = calls_received(counted[1])
    per_call = 4 * 1024 * 1024
    script = TRY + (
        "from concurrent.futures import ThreadPoolExecutor\n"
        f"blob = 'x' * {per_call}\n"
        "with ThreadPoolExecutor(16) as ex:\n"
        "    outcomes = list(ex.map(lambda i: attempt('sleep', {'seconds': 1, 'blob': blob}), range(16)))\n"
        "for o in outcomes:\n"
        "    print(o[:70])\n"
    )
    result = session.execute(script, timeout=60)
    assert result.error is None, result.traceback
    lines = result.stdout.splitlines()
    served = [line for line in lines if line.startswith("ok: ")]
    refused = [line for line in lines if line.startswith("too_much_in_flight: ")]
    assert len(served) + len(refused) == 16
    assert 1 <= len(served) < 16 and refused
    arrived = len(json.dumps({"seconds": 1, "blob": "x" * per_call}))  # what the server says it got
    assert served == [f"ok: {arrived}"] * len(served)
    assert DEFAULT_LIMITS.in_flight_bytes // per_call < 16
    assert calls_received(counted[1]) == before + len(served) + 1


def test_unknown_properties_are_refused_only_where_the_schema_says_so(
    session: Sandbox, counted: tuple[Path, BackgroundPool]
) -> None:
    before = calls_received(counted[1])
    script = (
        TRY + "print(attempt('echo', {'text': 'a', 'extra': 1}))\nprint(attempt('closed', {'text': 'a', 'extra': 1}))\n"
    )
    result = session.execute(script)
    assert result.error is None, result.traceback
    opened, closed = result.stdout.splitlines()
    assert opened == 'ok: {"text": "a", "extra": 1}'
    assert closed.startswith("invalid_arguments: invalid arguments: arguments: Additional properties are not allowed")
    assert calls_received(counted[1]) == before + 2  # the open call and the count: the closed one never arrived


def test_unique_items_over_a_large_array_is_checked_in_linear_time(
    session: Sandbox, counted: tuple[Path, BackgroundPool]
) -> None:
    # jsonschema compares items pairwise: 20,000 objects kept the host busy for minutes, past the timeout.
    script = TRY + (
        "items = [{'id': i} for i in range(20000)]\n"
        "print(attempt('tags', {'items': items})[:20])\n"
        "print(attempt('tags', {'items': items + [{'id': 7.0}]}))\n"
    )
    result = session.execute(script, timeout=20)
    assert result.error is None, result.traceback
    distinct, repeated = result.stdout.splitlines()
    assert distinct.startswith("ok: ")
    assert (
        repeated
        == "invalid_arguments: invalid arguments: items: has non-unique elements (item 20000 repeats an earlier one)"
    )
