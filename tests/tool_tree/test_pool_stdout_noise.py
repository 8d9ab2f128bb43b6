"""A call that times out after its server wrote lines to stdout that are not JSON-RPC says so (`StderrLog.noise_since`).

Before, such lines (a server that prints its log, or its answer, otherwise than one JSON-RPC message a line) were
kept with the server's stderr, shown only when a start failed: the call said "the call timed out after 2 s" alone.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from mcp_types import ErrorData

from tests.tool_tree.test_pool import raw, text
from tool_tree.config import ServerConfig
from tool_tree.ledgers import Outstanding
from tool_tree.pool import ServerPool
from tool_tree.pool_errors import ServerUnavailable
from tool_tree.stderr_log import StderrLog
from tool_tree.stdio_lines import MAX_NOISE_FIRST, End, Lines

pytestmark = pytest.mark.anyio


async def test_a_call_timing_out_after_stdout_lines_that_are_not_json_rpc_says_how_many_and_the_last(
    tmp_path: Path,
) -> None:
    server = replace(raw(tmp_path), timeout=2)
    async with ServerPool([server]) as pool:
        result = await pool.call("raw", "garbage", {})  # writes lines that are not JSON-RPC, and never answers
        assert result.get("isError")
        assert text(result) == (
            "the call timed out after 2 s (servers.raw.timeout, default 30); meanwhile the server wrote 3 lines to "
            "stdout that are not JSON-RPC, the last '\\x00ÿ{]': MCP over stdio carries one JSON-RPC message a "
            "line, and logs belong on stderr"
        )
        # A later call that times out without such lines says nothing of those before it.
        assert (
            text(await pool.call("raw", "hang", {})) == "the call timed out after 2 s (servers.raw.timeout, default 30)"
        )


def test_the_line_told_is_redacted_of_the_servers_secrets() -> None:
    log = StderrLog(ServerConfig(name="s", command="x", env={"API_TOKEN": "s3cr3t-value-123"}))
    assert log.noise_since(0) is None
    log.stdout_noise("banner")
    before = log.noise_count
    log.stdout_noise("using token s3cr3t-value-123")
    said = log.noise_since(before)
    assert said is not None and "s3cr3t" not in said
    assert said.startswith("meanwhile the server wrote a line to stdout that is not JSON-RPC, the last 'using token [")


async def test_a_call_timing_out_after_an_error_of_id_null_quotes_the_servers_error(tmp_path: Path) -> None:
    # Before: the server's answer to a request it could not read (an error of id null) was dropped as one to no
    # request, the call saying "the call timed out after 2 s" alone (a log line gave its code). It is not taken as
    # the call's failure: the error may answer a notification or an answer tooltree wrote, the call still running.
    server = replace(raw(tmp_path), timeout=2, env={"API_TOKEN": "s3cr3t-value-123"})
    async with ServerPool([server]) as pool:
        result = await pool.call("raw", "unreadable", {"message": "Parse error near s3cr3t-value-123"})
        assert result.get("isError")
        said = text(result)
        assert said.startswith(
            "the call timed out after 2 s (servers.raw.timeout, default 30); meanwhile the server sent an error not "
            "tied to a request (id null, its answer to a message it could not read): error -32700: 'Parse error near "
        )
        assert "s3cr3t" not in said
        # A later call that times out without one says nothing of that before it.
        assert (
            text(await pool.call("raw", "hang", {})) == "the call timed out after 2 s (servers.raw.timeout, default 30)"
        )


def test_a_failed_starts_tail_names_the_errors_of_id_null_redacted() -> None:
    # A start that times out (`generate-tree`) shows the log's tail: the server's error of id null is in it.
    log = StderrLog(ServerConfig(name="s", command="x", env={"API_TOKEN": "s3cr3t-value-123"}))
    assert log.tail() == ""
    log.unaddressed(ErrorData(code=-32700, message="Parse error"))
    log.unaddressed(ErrorData(code=-32600, message="bad s3cr3t-value-123"))
    tail = log.tail()
    assert tail.startswith("[tooltree] the server sent an error not tied to a request (id null) (2, the last): error ")
    assert "-32600" in tail and "s3cr3t" not in tail


async def test_a_start_timing_out_after_stdout_lines_that_are_not_json_rpc_quotes_the_first(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A program that is no MCP server (or one writing a banner where its messages go) and stays running. Before: the
    # error said "timed out after 2 s while starting (…)" alone, the lines shown under the heading of its stderr.
    server = replace(raw(tmp_path, behavior="garbage"), timeout=2)
    async with ServerPool([server]) as pool:
        with pytest.raises(ServerUnavailable) as caught:
            await pool.call("raw", "pid", {})
    reason = caught.value.reason
    assert reason.startswith("timed out after 2 s while starting (its own start-up, not the wait for its turn; ")
    assert "); it wrote to stdout 2 lines that are not JSON-RPC, the first 'this is not json': an MCP server over " in (
        reason
    )
    assert reason.endswith("(logs belong on stderr); is the command an MCP server?")
    # The warning of its unanswered protocol probe says the likely cause first (before: its timeout and `protocol:
    # legacy` alone, of a program that printed a banner and waited).
    assert (
        "server 'raw' had not answered `server/discover` (the protocol's first question) when its start was stopped, "
        "and wrote to stdout lines that are not JSON-RPC: check that the command starts an MCP server over stdio that "
        "logs to stderr; if it does, raise its timeout (servers.raw.timeout) or try `protocol: legacy` (servers.raw)"
    ) in caplog.messages


async def test_a_start_that_writes_a_thousand_lines_and_no_json_rpc_fails_at_once_saying_so(tmp_path: Path) -> None:
    # Before: the start waited out its whole timeout ("timed out after 30 s while starting …"), however many lines a
    # program that is no MCP server wrote.
    server = replace(raw(tmp_path, banner=MAX_NOISE_FIRST, behavior="garbage"), timeout=30)
    async with ServerPool([server]) as pool:
        with pytest.raises(ServerUnavailable) as caught:
            await pool.call("raw", "pid", {})
    assert caught.value.reason.startswith(
        "server 'raw' wrote 1,000 lines to stdout that are not JSON-RPC and not one JSON-RPC message: an MCP server "
        "over stdio writes only JSON-RPC messages there, one a line (logs belong on stderr); is the command an MCP "
        "server?"
    )
    assert "'banner 1'" in (caught.value.stderr_tail or "")


async def test_a_server_that_writes_a_long_banner_to_stdout_before_json_rpc_is_served(tmp_path: Path) -> None:
    # A server that logs its start to stdout, then speaks JSON-RPC, works as it did.
    server = replace(raw(tmp_path, banner=MAX_NOISE_FIRST - 1), timeout=30)
    async with ServerPool([server]) as pool:
        assert text(await pool.call("raw", "pid", {})).isdigit()


async def test_a_command_that_echoes_its_input_fails_its_start_saying_so_not_method_not_found() -> None:
    # Before: `command: cat` failed its start as "MCPError: Method not found": tooltree's own opening request came
    # back as a request of the server's, the SDK answered it so, and that answer came back as the opening's.
    server = ServerConfig(name="echoer", command="cat", timeout=30)
    async with ServerPool([server]) as pool:
        with anyio.fail_after(20), pytest.raises(ServerUnavailable) as caught:
            await pool.call("echoer", "anything", {})
    assert caught.value.reason.startswith(
        "server 'echoer' sent back tooltree's own server/discover request: the command echoes its input (as `cat` "
        "does) and is no MCP server; is the command an MCP server?"
    )


@pytest.mark.parametrize("method", ["server/discover", "initialize"])
def test_an_opening_request_as_a_servers_first_message_ends_it_and_later_or_other_requests_do_not(method: str) -> None:
    request = b'{"jsonrpc": "2.0", "id": 1, "method": "%s", "params": {}}'
    lines = Lines("s", 100_000, "strict", Outstanding("s"))
    ended = lines.judge(request % method.encode())
    assert isinstance(ended, End) and ended.reason.startswith(f"server 's' sent back tooltree's own {method} request")
    lines = Lines("s", 100_000, "strict", Outstanding("s"))
    assert not isinstance(lines.judge(request % b"roots/list"), End)
    assert not isinstance(lines.judge(request % method.encode()), End)  # a server that spoke is not judged an echo
