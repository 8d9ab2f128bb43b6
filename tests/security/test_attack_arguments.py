"""Tool-call arguments cannot make the host hold or compute without bound (SECURITY.md, "Host resources").

Each script runs in a real container and calls a real MCP server (tests/servers/raw_server.py, which
counts the calls it receives) through the real bridge and server pool. An argument that would inflate
on the host — 8 MiB of ``[{}, {}, …]`` parses to 2.8 million objects — is refused before validation
and before the server sees it; many large calls at once are bounded per session; the schema, not the
host, decides whether unknown properties are allowed; ``uniqueItems`` is checked in linear time; and
schema patterns are matched with RE2, never with Python's backtracking ``re``.
"""

from __future__ import annotations

import http.server
import json
import threading
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

WORDS = r"^(\w+\s?)*$"
HEADER = r"^x-(\w+\s?)*$"
TWICE = r"^(\w+\s?)*\1$"  # a backreference: RE2 cannot run it
LONG = r"(\w+\s?){1000}z"  # linear in RE2, but 8,005 instructions a byte at worst: 0.4 ms a letter

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
    # Patterns: ordinary-looking, but ^(\w+\s?)*$ backtracks exponentially in Python's re on "aaa…a!".
    {"name": "named", "inputSchema": {"type": "object", "properties": {"name": {"type": "string", "pattern": WORDS}}}},
    {
        "name": "headers",
        "inputSchema": {
            "type": "object",
            "patternProperties": {HEADER: {"type": "integer"}},
            "additionalProperties": False,
        },
    },
    {"name": "twice", "inputSchema": {"type": "object", "properties": {"text": {"type": "string", "pattern": TWICE}}}},
    {"name": "long", "inputSchema": {"type": "object", "properties": {"text": {"type": "string", "pattern": LONG}}}},
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
    # 120 s, which the test is not about: 17 calls of 4 to 16 MiB of arguments took 10 s on a loaded machine.
    result, growth = host_peak_growth(lambda: session.execute(script, timeout=120))
    assert result.error is None, result.traceback
    one, many = result.stdout.splitlines()
    assert one.startswith("arguments_too_large: the arguments hold more than 100,000 values")
    assert many.startswith("{'arguments_too_large: the arguments hold more than 100,000 values") and "', '" not in many
    assert growth < 64 << 20, f"host peak RSS rose {growth >> 20} MiB"
    assert calls_received(counted[1]) == before + 1  # only the count call itself
    assert session.execute(TRY + "print(attempt('echo', {'text': 'still here'}))").stdout == (
        'ok: {"text": "still here"}\n'
    )


@pytest.mark.parametrize("levels", [50, 5_000])
def test_arguments_nested_past_what_a_frame_holds_are_refused_in_the_sandbox_and_the_interpreter_lives_on(
    levels: int, session: Sandbox, counted: tuple[Path, BackgroundPool]
) -> None:
    # Before: the worker sent the call, its supervisor refused the frame (nested deeper than 32 levels) and restarted
    # the interpreter: "killed by signal 9", the script's variables lost, the call never answered.
    before = calls_received(counted[1])
    assert session.execute("kept = 'state'").ok
    script = TRY + (
        f"deep = []\nfor _ in range({levels}):\n    deep = [deep]\n"
        "print(attempt('echo', {'text': 'x', 'deep': deep}))\n"
        "nested = 1\nfor _ in range(40):\n    nested = (nested,)\n"  # tuples, which JSON sends as arrays
        "print(attempt('echo', {'text': 'x', 'deep': nested}))\n"
    )
    result = session.execute(script)
    assert result.error is None and not result.state_reset, result.traceback
    refused = f"arguments_too_large: the arguments nest deeper than {DEFAULT_LIMITS.depth} levels: argument 'deep'"
    where = "[0]" * (DEFAULT_LIMITS.depth - 1)  # the arguments object is the first level, 'deep' the second
    assert result.stdout == f"{refused} (at deep{where})\n{refused} (at deep{where})\n"
    assert calls_received(counted[1]) == before + 1  # only the count call itself
    assert session.execute("print(kept)").stdout == "state\n"


@pytest.mark.parametrize("levels", [DEFAULT_LIMITS.depth + 5, 50])
def test_arguments_nested_too_deep_or_holding_a_float_json_cannot_carry_are_refused_naming_the_argument(
    levels: int, session: Sandbox, counted: tuple[Path, BackgroundPool]
) -> None:
    # Before: "the arguments nest deeper than 20 levels" (said on the host at 25 levels, in the container at 50) and
    # "the arguments cannot be sent as JSON: Out of range float values are not JSON compliant", whichever argument did.
    before = calls_received(counted[1])
    script = TRY + (
        f"deep = 1\nfor _ in range({levels}):\n    deep = [deep]\n"
        "print(attempt('echo', {'text': 'x', 'rows': [deep]}))\n"
        "print(attempt('echo', {'text': 'x', 'rows': [1, {'v': float('nan')}]}))\n"
        "print(attempt('echo', {'text': 'x', 'limit': float('inf')}))\n"
    )
    result = session.execute(script)
    assert result.error is None and not result.state_reset, result.traceback
    where = "[0]" * (DEFAULT_LIMITS.depth - 1)  # the arguments object is the first level, 'rows' the second
    assert result.stdout.splitlines() == [
        f"arguments_too_large: the arguments nest deeper than {DEFAULT_LIMITS.depth} levels: argument 'rows' "
        f"(at rows{where})",
        "invalid_arguments: argument 'rows' (at rows[1]['v']) holds nan, which JSON cannot carry; send it as a "
        "string or None",
        "invalid_arguments: argument 'limit' holds inf, which JSON cannot carry; send it as a string or None",
    ]
    assert calls_received(counted[1]) == before + 1  # only the count call itself


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
    # 120 s, which the test is not about: 16 calls of 4 MiB at once took 15 s on a loaded machine.
    result = session.execute(script, timeout=120)
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
    # jsonschema compares items pairwise: 20,000 objects kept the host busy for minutes, past the timeout. 60 s, not
    # 20: the two calls of 20,000 items took 5 s of them on a loaded machine, and minutes is still past it.
    script = TRY + (
        "items = [{'id': i} for i in range(20000)]\n"
        "print(attempt('tags', {'items': items})[:20])\n"
        "print(attempt('tags', {'items': items + [{'id': 7.0}]}))\n"
    )
    result = session.execute(script, timeout=60)
    assert result.error is None, result.traceback
    distinct, repeated = result.stdout.splitlines()
    assert distinct.startswith("ok: ")
    assert (
        repeated
        == "invalid_arguments: invalid arguments: items: has non-unique elements (item 20000 repeats an earlier one)"
    )


@pytest.fixture
def no_re(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """jsonschema's own matching, each call to it recorded and refused: the host must not use ``re`` on a value."""
    import types

    import jsonschema._keywords
    import jsonschema._legacy_keywords
    import jsonschema._utils

    used: list[str] = []

    def search(pattern: str, string: str, flags: int = 0) -> None:
        used.append(pattern)
        raise AssertionError(f"jsonschema matched {pattern!r} with re")

    for module in (jsonschema._keywords, jsonschema._legacy_keywords, jsonschema._utils):
        monkeypatch.setattr(module, "re", types.SimpleNamespace(search=search))
    return used


def test_a_pattern_that_backtracks_for_hours_in_re_is_answered_at_once(session: Sandbox, no_re: list[str]) -> None:
    # Before: jsonschema matched ^(\w+\s?)*$ with re, holding the GIL on the event loop every session's calls
    # share; "a" * 40 + "!" burned 43 s of host CPU past a 5 s timeout, and another session's print(1) hung.
    # Answered at all (with re, the first would take about a day) and without re (the fixture refuses it).
    script = TRY + (
        "for name in ('a' * 40 + '!', 'a' * 5000 + '!', 'ab ' * 20000 + '!'):\n"
        "    print(attempt('named', {'name': name}).split(\" '\")[0])\n"
        "print(attempt('headers', {'x-' + 'a' * 5000 + '!': 1}).split(\" '\")[0])\n"
    )
    result = session.execute(script, timeout=20)
    assert result.error is None, result.traceback
    refused = "invalid_arguments: invalid arguments: name:"  # the message up to the value
    assert result.stdout.splitlines() == [refused] * 3 + ["invalid_arguments: invalid arguments: arguments:"]
    assert session.execute("print(1)").stdout == "1\n"
    assert no_re == []


def test_pattern_refuses_what_does_not_match_and_passes_what_does(
    session: Sandbox, counted: tuple[Path, BackgroundPool], no_re: list[str]
) -> None:
    before = calls_received(counted[1])
    script = TRY + ("print(attempt('named', {'name': 'Ada Lovelace'}))\nprint(attempt('named', {'name': 'Ada!'}))\n")
    result = session.execute(script)
    assert result.error is None, result.traceback
    assert result.stdout.splitlines() == [
        'ok: {"name": "Ada Lovelace"}',
        f"invalid_arguments: invalid arguments: name: 'Ada!' does not match {WORDS!r}",
    ]
    assert calls_received(counted[1]) == before + 2  # the two that passed and the count
    assert no_re == []


def test_pattern_properties_apply_their_schema_and_close_the_object(session: Sandbox, no_re: list[str]) -> None:
    script = TRY + (
        "print(attempt('headers', {'x-trace': 1, 'x-span id': 2}))\n"
        "print(attempt('headers', {'x-trace': 'one'}))\n"
        "print(attempt('headers', {'x-trace': 1, 'trace': 1}))\n"
    )
    result = session.execute(script)
    assert result.error is None, result.traceback
    assert result.stdout.splitlines() == [
        'ok: {"x-trace": 1, "x-span id": 2}',
        "invalid_arguments: invalid arguments: x-trace: 'one' is not of type 'integer'",
        f"invalid_arguments: invalid arguments: arguments: 'trace' does not match any of the regexes: {HEADER!r}",
    ]
    assert no_re == []


def test_a_pattern_re2_cannot_run_is_left_to_the_server_and_logged_once(
    session: Sandbox, counted: tuple[Path, BackgroundPool], no_re: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    before = calls_received(counted[1])
    script = TRY + (
        "print(attempt('twice', {'text': 'ab'}))\n"  # the pattern refuses it; only the server can say so now
        "print(attempt('twice', {'text': 'a' * 5000 + '!'})[:20])\n"  # and re would backtrack for ever on this
    )
    result = session.execute(script, timeout=20)
    assert result.error is None, result.traceback
    assert result.stdout.splitlines() == ['ok: {"text": "ab"}', 'ok: {"text": "aaaaaa']
    assert calls_received(counted[1]) == before + 3
    assert no_re == []
    (warning,) = [r.getMessage() for r in caplog.records if "not checking" in r.getMessage()]
    assert warning.startswith(f"not checking pattern {TWICE!r} of raw.twice on the host: RE2 refuses it (")


def test_a_pattern_too_costly_for_a_value_is_left_to_the_server(
    session: Sandbox, counted: tuple[Path, BackgroundPool], no_re: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    # RE2 is linear, but its worst case is bytes x program size: LONG over 8 MiB took 260 s of host CPU.
    before = calls_received(counted[1])
    script = TRY + (
        "print(attempt('long', {'text': 'ab ' * 10}))\n"
        "print(attempt('long', {'text': '!? ' + 'a ' * 1000 + 'z !?'})[:12])\n"  # found inside, as re.search would
        "print(attempt('long', {'text': 'ab ' * 60000})[:20])\n"  # past the tool's RE2 budget: left to the server
    )
    result = session.execute(script, timeout=20)
    assert result.error is None, result.traceback
    assert result.stdout.splitlines() == [
        f"invalid_arguments: invalid arguments: text: 'ab ab ab ab ab ab ab ab ab ab ' does not match {LONG!r}",
        'ok: {"text":',
        'ok: {"text": "ab ab ',
    ]
    assert calls_received(counted[1]) == before + 3
    assert no_re == []
    assert "not checking some patterns of raw.long on the host: past its budget of RE2 work" in caplog.text


def test_a_remote_ref_in_a_schema_is_never_fetched_by_the_host(
    tmp_path: Path, docker_engine: EngineWithCLI, test_config: SandboxConfig, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: jsonschema's default registry fetched the URL while validating, on the event loop every
    # session's calls share: the server chose an address for the host to send requests to.
    fetched = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetched.set()
            body = b'{"type": "integer"}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler) as web:
        threading.Thread(target=web.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{web.server_port}/schema.json"
        tools = [
            {"name": "remote", "inputSchema": {"type": "object", "properties": {"x": {"$ref": url}}}},
            {
                "name": "local",
                "inputSchema": {
                    "type": "object",
                    "$defs": {"n": {"type": "integer"}},
                    "properties": {"x": {"$ref": "#/$defs/n"}},
                },
            },
        ]
        tree, server = raw_server_tree(tmp_path, tools)
        with BackgroundPool([server]) as pool:
            bridge = McpBridge(tree, pool.pool)
            with Sandbox(config=test_config, tree=tree, tools=bridge, tool_loop=pool.loop) as sb:
                script = TRY + "print(attempt('remote', {'x': 'text'}))\nprint(attempt('local', {'x': 'text'}))\n"
                result = sb.execute(script)
        web.shutdown()
    assert result.error is None, result.traceback
    assert result.stdout.splitlines() == [
        'ok: {"x": "text"}',  # left to the server, which does not check it
        "invalid_arguments: invalid arguments: x: 'text' is not of type 'integer'",
    ]
    assert not fetched.is_set()
    assert f"not validating raw.remote on the host: Unresolvable: {url}" in caplog.text
