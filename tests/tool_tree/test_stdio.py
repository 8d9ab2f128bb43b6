"""`tool_tree.stdio`: the stdio transport reads in time linear in a message's length and caps one message."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import StdioServerParameters
from mcp.shared.message import SessionMessage

from tests.support import alive
from tool_tree.config import ServerConfig
from tool_tree.pool import ServerPool, ServerUnavailable
from tool_tree.stdio import LINEAR, MAX_MESSAGE_BYTES, _LineSplitter, stdio_client

REPO = Path(__file__).resolve().parents[2]
RAW = REPO / "tests" / "servers" / "raw_server.py"


def raw(tmp_path: Path, name: str) -> ServerConfig:
    path = tmp_path / f"{name}.json"
    tools = [{"name": n, "inputSchema": {"type": "object"}} for n in ("pid", "big")]
    path.write_text(json.dumps({"pages": [tools]}), encoding="utf-8")
    return ServerConfig(name=name, command=sys.executable, args=(str(RAW), str(path)), timeout=30)


def text(result: dict[str, Any]) -> str:
    return "".join(b["text"] for b in result["content"] if b["type"] == "text")


def notification(data: str) -> str:
    message = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": data}}
    return json.dumps(message, separators=(",", ":"))


def split_every_way(stream: bytes, limit: int) -> list[list[str]]:
    """What the splitter makes of ``stream`` cut into two chunks at every offset (and whole)."""
    outcomes = []
    for cut in range(len(stream) + 1):
        splitter = _LineSplitter(limit, "replace")
        outcomes.append(splitter.feed(stream[:cut]) + splitter.feed(stream[cut:]))
    return outcomes


def test_the_installed_sdk_has_the_helpers_the_linear_transport_reuses() -> None:
    # Without them tooltree falls back to the SDK's own reader (quadratic, uncapped): an SDK upgrade that
    # moves them fails here rather than in silence.
    assert LINEAR


def test_lines_are_cut_at_each_newline_wherever_the_chunks_end() -> None:
    stream = "première\n\n{ü€😀}\r\nlast".encode() + b" \xff\n" + b"unfinished"
    expected = ["première", "", "{ü€😀}\r", "last \ufffd"]
    assert all(lines == expected for lines in split_every_way(stream, 100))


def test_a_line_of_exactly_the_limit_passes_and_one_byte_more_raises_before_its_newline_arrives() -> None:
    assert split_every_way(b"a" * 10 + b"\n", 10) == [["a" * 10]] * 12
    splitter = _LineSplitter(10, "replace")
    assert splitter.feed(b"b" * 10) == []
    with pytest.raises(OverflowError, match="longer than 10 bytes"):
        splitter.feed(b"b")  # no newline yet: the partial line alone is over the limit
    with pytest.raises(OverflowError):
        _LineSplitter(10, "replace").feed(b"ok\n" + b"c" * 11 + b"\n")


def test_the_message_cap_leaves_room_for_any_result_the_bridge_accepts() -> None:
    from sandbox.calls import MAX_RESULT_BYTES

    # The bridge measures a result as UTF-8 JSON; a server escaping all non-ASCII spends up to 3× that.
    assert MAX_MESSAGE_BYTES >= 3 * MAX_RESULT_BYTES + 4 * 1024 * 1024


@pytest.mark.anyio
async def test_only_utf8_is_read() -> None:
    with pytest.raises(ValueError, match="UTF-8 only"):
        async with stdio_client(StdioServerParameters(command=sys.executable, encoding="utf-16")):
            pass


@pytest.mark.anyio
async def test_a_30_mib_message_arrives_intact() -> None:
    """Its cost against the SDK's reader (quadratic in a line's length) is measured by
    ``bench/stdio_read.py``, not here."""
    size = 30 * 1024 * 1024
    head, tail = notification("").split('""')
    write = f"sys.stdout.write({head!r} + '\"' + 'x' * {size} + '\"' + {tail!r} + '\\n')"
    server = f"import sys; {write}; sys.stdout.flush(); sys.stdin.read()"
    params = StdioServerParameters(command=sys.executable, args=["-c", server])
    async with stdio_client(params) as (read, _write):
        with anyio.fail_after(60):
            item = await read.receive()
    assert isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCNotification)
    assert item.message.params is not None and item.message.params["data"] == "x" * size


@pytest.mark.anyio
async def test_a_message_over_the_limit_fails_the_request_in_flight_and_ends_the_server() -> None:
    # Announces its pid, answers the first request with a line of 1,001 bytes, then waits forever.
    server = (
        "import json, os, sys, time\n"
        f"print({notification('')!r}.replace('\"\"', json.dumps(str(os.getpid()))), flush=True)\n"
        "request = json.loads(sys.stdin.readline())\n"
        "head = json.dumps({'jsonrpc': '2.0', 'id': request['id'], 'result': {'pad': ''}})\n"
        "print(head.replace('\"\"', '\"' + 'x' * (1001 - len(head)) + '\"'), flush=True)\n"
        "time.sleep(3600)\n"
    )
    params = StdioServerParameters(command=sys.executable, args=["-c", server])
    async with stdio_client(params, name="flood", max_message_bytes=1000) as (read, write):
        with anyio.fail_after(20):
            hello = await read.receive()
            assert isinstance(hello, SessionMessage) and isinstance(hello.message, types.JSONRPCNotification)
            assert hello.message.params is not None
            pid = int(hello.message.params["data"])
            await write.send(SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=7, method="tools/list")))
            refused = await read.receive()
            assert isinstance(refused, SessionMessage) and isinstance(refused.message, types.JSONRPCError)
            assert refused.message.id == 7
            assert "server 'flood' sent a message longer than 1,000 bytes" in refused.message.error.message
            assert not alive(pid)
            with pytest.raises(anyio.EndOfStream):
                await read.receive()


@pytest.mark.anyio
async def test_a_result_just_under_the_message_cap_arrives_intact(tmp_path: Path) -> None:
    chars = MAX_MESSAGE_BYTES - 200  # the rest of the answer's line is under 100 bytes
    async with ServerPool([raw(tmp_path, "big")]) as pool:
        result = await pool.call("big", "big", {"chars": chars})
        assert not result.get("isError") and text(result) == "x" * chars


@pytest.mark.anyio
async def test_a_message_over_the_cap_ends_that_server_with_a_clear_error_and_the_others_keep_answering(
    tmp_path: Path,
) -> None:
    async with ServerPool([raw(tmp_path, "flood"), raw(tmp_path, "steady")]) as pool:
        flood_pid, steady_pid = (
            int(text(await pool.call("flood", "pid", {}))),
            text(await pool.call("steady", "pid", {})),
        )
        with pytest.raises(ServerUnavailable) as refused:
            await pool.call("flood", "big", {"chars": MAX_MESSAGE_BYTES})
        assert f"server 'flood' sent a message longer than {MAX_MESSAGE_BYTES:,} bytes" in str(refused.value)
        assert not alive(flood_pid)
        assert text(await pool.call("steady", "pid", {})) == steady_pid
        assert pool.restarts("flood") == 1 and int(text(await pool.call("flood", "pid", {}))) != flood_pid
