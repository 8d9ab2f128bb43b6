"""`tool_tree.stdio_framing`: a stdio server that writes its JSON across several lines (pretty-printed) fails its start
or its call at once, saying so and naming the server (real processes).

Before, each line of such a message was dropped as one that is not JSON-RPC: the start (``generate-tree``, the
pool) and every call waited out the whole timeout, said as a server slow to start or a call that hung.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import mcp
import pytest

from tool_tree.config import ServerConfig
from tool_tree.connect import connect, list_tools_raw
from tool_tree.pool import ServerPool, ServerUnavailable
from tool_tree.stderr_log import StderrLog
from tool_tree.stdio_framing import across_lines, in_utf16

pytestmark = pytest.mark.anyio

# A stdio MCP server in plain Python that writes its answers with ``json.dumps(indent=INDENT)``: all of them
# (PRETTY=all) or those of tools/call alone (PRETTY=calls); ID_FIRST puts the id before the jsonrpc member; ENCODING
# is the one it writes in (UTF-8 unless set).
SERVER = r"""
import json, os, sys
indent = json.loads(os.environ["INDENT"])
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "p", "version": "1"}}
    elif msg["method"] == "tools/list":
        result = {"tools": [{"name": "hi", "inputSchema": {"type": "object"}}]}
    elif msg["method"] == "tools/call":
        result = {"content": [{"type": "text", "text": "hello"}]}
    else:
        result = None
    answer = {"jsonrpc": "2.0", "id": msg["id"]}
    if os.environ.get("ID_FIRST"):
        answer = {"id": msg["id"], "jsonrpc": "2.0"}
    if result is None:
        answer["error"] = {"code": -32601, "message": "method not found"}
    else:
        answer["result"] = result
    pretty = os.environ["PRETTY"] == "all" or msg["method"] == "tools/call"
    text = json.dumps(answer, indent=indent if pretty else None) + "\n"
    sys.stdout.buffer.write(text.encode(os.environ.get("ENCODING", "utf-8")))
    sys.stdout.buffer.flush()
"""

SAID = (
    "server 'pretty' writes JSON across several lines (its message is pretty-printed, as json.dumps(message, indent=2) "
    "writes it): MCP over stdio needs each message on one line"
)


def pretty_server(
    tmp_path: Path, pretty: str, *, indent: int | str = 2, id_first: bool = False, encoding: str = "utf-8"
) -> ServerConfig:
    script = tmp_path / "pretty.py"
    script.write_text(SERVER, encoding="utf-8")
    env = {"PRETTY": pretty, "INDENT": json.dumps(indent), "ENCODING": encoding}
    env |= {"ID_FIRST": "1"} if id_first else {}
    # A timeout far longer than the test's bound: the failure must come from the first message, not the timeout.
    return ServerConfig(name="pretty", command=sys.executable, args=(str(script),), env=env, timeout=120)


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        {"id": "a", "jsonrpc": "2.0", "method": "tools/list"},
        {"result": {"tools": []}, "jsonrpc": "2.0", "id": 7},
    ],
)
@pytest.mark.parametrize("indent", [0, 2, 4, "\t"])
def test_a_line_of_a_json_rpc_message_written_across_lines_is_told(message: dict[str, object], indent: object) -> None:
    lines = json.dumps(message, indent=indent).encode().split(b"\n")  # type: ignore[arg-type]
    told = [line for line in lines if across_lines("s", line) is not None]
    assert len(told) == 1 and b'"jsonrpc"' in told[0]


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc": "2.0", "id": 1, "result": {}}',  # a message on one line
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}',
        b"Starting my server v1.0 ...",
        b'  "name": "jsonrpc",',
        b'  "jsonrpc": "1.0",',
        b"",
        b"{",
        b'"jsonrpc": "2.0", ' + b" " * 100,  # too long to be looked at
    ],
)
def test_a_message_on_one_line_or_a_line_of_text_is_not_told(line: bytes) -> None:
    assert across_lines("s", line) is None


@pytest.mark.parametrize(("indent", "id_first"), [(2, False), ("\t", False), (2, True)], ids=["two", "tab", "id_first"])
async def test_a_server_that_pretty_prints_fails_its_start_at_once_saying_so(
    tmp_path: Path, indent: int | str, id_first: bool
) -> None:
    # Before: its start waited out the whole timeout ("timed out after 120 s starting up").
    stderr = StderrLog()
    with anyio.fail_after(30), pytest.raises(mcp.MCPError) as failed:
        async with connect(pretty_server(tmp_path, "all", indent=indent, id_first=id_first), stderr=stderr) as conn:
            await list_tools_raw(conn.client)
    assert failed.value.message.startswith(SAID)
    assert "fix the server to write compact JSON" in failed.value.message


async def test_the_pool_says_why_a_pretty_printing_server_did_not_start(tmp_path: Path) -> None:
    # Before: "timed out after 120 s while starting"; with the reason in hand alone, "the server exited during
    # start-up".
    async with ServerPool([pretty_server(tmp_path, "all")]) as pool:
        with anyio.fail_after(30), pytest.raises(ServerUnavailable) as failed:
            await pool.call("pretty", "hi", {})
    assert str(failed.value).startswith(f"server 'pretty' is unavailable: {SAID}")


async def test_a_call_answered_across_several_lines_fails_at_once_saying_so(tmp_path: Path) -> None:
    # Before: the call waited out its whole timeout, said to have timed out.
    async with ServerPool([pretty_server(tmp_path, "calls")]) as pool:
        with anyio.fail_after(30), pytest.raises(ServerUnavailable) as failed:
            await pool.call("pretty", "hi", {})
    assert f"tooltree ended the server during the call ({SAID}" in str(failed.value)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
async def test_a_server_that_writes_utf16_fails_its_start_at_once_saying_so(tmp_path: Path, encoding: str) -> None:
    # Before: its messages were dropped as lines that are not JSON-RPC, and its start waited out the whole timeout
    # ("timed out after 120 s while starting").
    async with ServerPool([pretty_server(tmp_path, "none", encoding=encoding)]) as pool:
        with anyio.fail_after(30), pytest.raises(ServerUnavailable) as failed:
            await pool.call("pretty", "hi", {})
    assert str(failed.value).startswith(
        "server 'pretty' is unavailable: server 'pretty' writes its messages in UTF-16 (a NUL byte beside each "
        "character): MCP over stdio needs UTF-8; set the server's output encoding to UTF-8"
    )


@pytest.mark.parametrize(
    "line", [b'{"jsonrpc": "2.0", "id": 1, "result": {}}', b"log\x00line", "jsonrpc".encode("utf-16-le")[:-1]]
)
def test_a_line_in_utf8_or_with_a_nul_alone_is_not_taken_for_utf16(line: bytes) -> None:
    assert in_utf16("s", line) is None
