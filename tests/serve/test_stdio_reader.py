"""The stdin reader of ``tooltree serve``: lines cut in linear time wherever the chunks end, one message capped
at what HTTP accepts, a longer line skipped (its request answered with an error) and the next one read."""

from __future__ import annotations

import json
import os
import threading

import anyio
import pytest
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

from agent.serve.stdio import MAX_MESSAGE_BYTES, LineSplitter, Overlong, StdinLines

WAIT = 30.0


def split_every_way(stream: bytes, limit: int) -> list[list[str | Overlong]]:
    """What the splitter makes of ``stream`` cut into two chunks at every offset, and fed a byte at a time."""
    outcomes = []
    for cut in range(len(stream) + 1):
        splitter = LineSplitter(limit)
        outcomes.append(splitter.feed(stream[:cut]) + splitter.feed(stream[cut:]) + splitter.end())
    splitter = LineSplitter(limit)
    outcomes.append([line for i in range(len(stream)) for line in splitter.feed(stream[i : i + 1])] + splitter.end())
    return outcomes


def test_lines_are_cut_at_each_newline_wherever_the_chunks_end() -> None:
    stream = "première\n\n{ü€😀}\r\nlast".encode() + b" \xff\n" + b"unfinished"
    expected = ["première", "", "{ü€😀}\r", "last \ufffd", "unfinished"]
    assert all(lines == expected for lines in split_every_way(stream, 100))


def test_a_line_over_the_cap_is_skipped_wherever_the_chunks_end_and_the_next_line_is_read() -> None:
    long = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"code":"' + b"x" * 3000 + b'"}}'
    stream = b"first\n" + long + b"\nnext\n" + b"a" * 64 + b"\n"
    skipped = Overlong(len(long), long[:1024], long[-1024:])
    assert all(lines == ["first", skipped, "next", "a" * 64] for lines in split_every_way(stream, 64))
    assert skipped.request_id() == 7


def test_a_line_of_exactly_the_cap_passes_and_one_byte_more_is_skipped() -> None:
    assert all(lines == ["a" * 10] for lines in split_every_way(b"a" * 10 + b"\n", 10))
    assert all(lines == [Overlong(11, b"b" * 11, b"b" * 11)] for lines in split_every_way(b"b" * 11 + b"\n", 10))
    splitter = LineSplitter(10)
    assert splitter.feed(b"c" * 11) == [] and splitter.end() == [Overlong(11, b"c" * 11, b"c" * 11)]


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"pad": "x" * 5000}}, 7),  # Python SDK order
        ({"method": "tools/call", "params": {"pad": "x" * 5000}, "jsonrpc": "2.0", "id": 'a"b'}, 'a"b'),  # TS SDK
        ({"jsonrpc": "2.0", "method": "tools/call", "params": {"pad": "x" * 5000, "id": 5}}, None),  # nested, last
        ({"params": {"id": 5, "pad": "x" * 5000}, "jsonrpc": "2.0", "method": "tools/call"}, None),  # nested, first
        ({"jsonrpc": "2.0", "method": "notifications/message", "params": {"pad": "x" * 5000}}, None),
    ],
)
def test_the_id_of_an_overlong_request_is_read_from_its_first_or_last_member_only(line: object, found: object) -> None:
    data = json.dumps(line).encode()
    (over,) = LineSplitter(100).feed(data + b"\n")
    assert isinstance(over, Overlong) and over.size == len(data)
    assert over.request_id() == found


def test_stdio_takes_as_long_a_message_as_http() -> None:
    assert MAX_MESSAGE_BYTES == DEFAULT_MAX_REQUEST_BODY_SIZE == 4 * 1024 * 1024


@pytest.mark.anyio
async def test_stdin_lines_answer_an_overlong_request_and_read_the_next_line_whole() -> None:
    read, write = os.pipe()
    big = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"code": "x" * (5 << 20)}})
    after = json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"code": "y" * (3 << 20)}})

    def feed() -> None:
        with os.fdopen(write, "wb") as f:
            f.write(f"{big}\n{after}\n".encode())

    threading.Thread(target=feed, daemon=True).start()
    lines = StdinLines(read)
    try:
        with anyio.fail_after(WAIT):
            got = [line async for line in lines]
            (refusal,) = [error async for error in lines.refused]
    finally:
        lines.close()
        os.close(read)
    assert got == [after]
    assert refusal.id == 3 and refusal.error.code == -32600
    assert f"{len(big):,} bytes" in refusal.error.message and "4,194,304" in refusal.error.message
