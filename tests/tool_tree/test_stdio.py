"""`tool_tree.stdio`: the stdio transport reads in time linear in a message's length, caps one message's bytes
and values, and holds a server to its budgets of requests to the client and of notifications.

The budget tests run `tests/servers/flood_server.py`, a hostile server in plain Python. Before the budgets,
30 MB of empty objects in one message took the host to 3.4 GB and 8 s of CPU; 100,000 pings from a server
that stopped reading its stdin kept 1 GB; 200,000 notifications cost the host 22 s of CPU.
"""

from __future__ import annotations

import json
import logging
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import StdioServerParameters
from mcp.shared.message import SessionMessage

from tests.support import alive
from tool_tree.budget import (
    MAX_MESSAGE_VALUES,
    MAX_REQUEST_VALUES,
    MAX_SERVER_REQUESTS,
    NOTIFICATION_BURST,
    NOTIFICATION_RATE,
    NOTIFICATION_VALUES,
    STRAY_ANSWERS,
    ReaderBudget,
)
from tool_tree.config import ServerConfig
from tool_tree.ledgers import Outstanding
from tool_tree.pool import ServerPool, ServerUnavailable
from tool_tree.stdio import LINEAR, MAX_MESSAGE_BYTES, stdio_client
from tool_tree.stdio_lines import Lines, LineSplitter

REPO = Path(__file__).resolve().parents[2]
RAW = REPO / "tests" / "servers" / "raw_server.py"
FLOOD = REPO / "tests" / "servers" / "flood_server.py"


def flood(name: str) -> ServerConfig:
    return ServerConfig(name=name, command=sys.executable, args=(str(FLOOD),), timeout=30)


def peak_mib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


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


def split_every_way(stream: bytes, limit: int) -> list[list[bytes]]:
    """What the splitter makes of ``stream`` cut into two chunks at every offset (and whole)."""
    outcomes = []
    for cut in range(len(stream) + 1):
        splitter = LineSplitter(limit)
        outcomes.append(splitter.feed(stream[:cut]) + splitter.feed(stream[cut:]))
    return outcomes


def test_the_installed_sdk_has_the_helpers_the_linear_transport_reuses() -> None:
    # Without them tooltree falls back to the SDK's own reader (quadratic, uncapped): an SDK upgrade that
    # moves them fails here rather than in silence.
    assert LINEAR


def test_lines_are_cut_at_each_newline_wherever_the_chunks_end() -> None:
    stream = "première\n\n{ü€😀}\r\nlast".encode() + b" \xff\n" + b"unfinished"
    expected = ["première".encode(), b"", "{ü€😀}\r".encode(), b"last \xff"]
    assert all(lines == expected for lines in split_every_way(stream, 100))


def test_a_line_of_exactly_the_limit_passes_and_one_byte_more_raises_before_its_newline_arrives() -> None:
    assert split_every_way(b"a" * 10 + b"\n", 10) == [[b"a" * 10]] * 12
    splitter = LineSplitter(10)
    assert splitter.feed(b"b" * 10) == []
    with pytest.raises(OverflowError, match="longer than 10 bytes"):
        splitter.feed(b"b")  # no newline yet: the partial line alone is over the limit
    with pytest.raises(OverflowError):
        LineSplitter(10).feed(b"ok\n" + b"c" * 11 + b"\n")


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
        # tooltree ended it (before: "the server died during the call", though it had not)
        assert "tooltree ended the server during the call" in str(refused.value)
        assert "died" not in str(refused.value)
        assert not alive(flood_pid)
        assert text(await pool.call("steady", "pid", {})) == steady_pid
        assert pool.restarts("flood") == 1 and int(text(await pool.call("flood", "pid", {}))) != flood_pid


# --- the budgets: values in one message, requests to the client, notifications ---------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "n"),
    [
        ("values", 3_000_000),  # 9 MB of empty objects: before, the host grew by 1 GB and spent 2 s parsing it
        ("values", MAX_MESSAGE_VALUES),  # with its envelope, just over the cap
        ("blocks", MAX_MESSAGE_VALUES // 3 + 1),  # a block is three values: an object and two strings
        ("noise", MAX_MESSAGE_VALUES + 1),  # a stdout line that is not JSON-RPC is counted too
    ],
)
async def test_a_message_of_more_values_than_the_cap_ends_that_server_unparsed_and_the_others_keep_answering(
    tool: str, n: int
) -> None:
    async with ServerPool([flood("flood"), flood("steady")]) as pool:
        flood_pid, steady_pid = [int(text(await pool.call(name, "pid", {}))) for name in ("flood", "steady")]
        before = peak_mib()
        with pytest.raises(ServerUnavailable) as refused:
            await pool.call("flood", tool, {"n": n})
        grown = peak_mib() - before
        assert (
            f"server 'flood' sent a message of more than {MAX_MESSAGE_VALUES:,} JSON values, the limit for one "
            "message" in str(refused.value)
        )
        assert not alive(flood_pid)
        assert grown < 128  # the line and a copy of it, never its values
        assert int(text(await pool.call("steady", "pid", {}))) == steady_pid
        assert pool.restarts("flood") == 1 and int(text(await pool.call("flood", "pid", {}))) != flood_pid


@pytest.mark.anyio
async def test_a_message_just_within_the_value_cap_arrives_whole() -> None:
    async with ServerPool([flood("flood")]) as pool:
        result = await pool.call("flood", "values", {"n": MAX_MESSAGE_VALUES - 100})
    assert result["structuredContent"] == {"a": [{}] * (MAX_MESSAGE_VALUES - 100)}


PARSE_ONE = """
import json, sys
from tool_tree.stdio_lines import _parse
def peak():
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM")) >> 10
line = json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"structuredContent": {"a": [{}] * 999_990}}})
before = peak()
message = _parse(line)
print(len(message.message.result["structuredContent"]["a"]), peak() - before)
"""


def test_a_message_is_parsed_once_and_then_validated() -> None:
    # Before: validated whole as text (the SDK's `validate_json`), which parses it again for each kind of message it
    # tries: 325 MiB over the baseline and 0.34 s of CPU for this message, against 75 MiB and 0.08 s now (it is
    # measured in a process of its own: the parser's memory is not Python's, so tracemalloc does not see it).
    done = subprocess.run(
        [sys.executable, "-c", PARSE_ONE], capture_output=True, text=True, check=True, cwd=REPO, timeout=120
    )
    values, grown = map(int, done.stdout.split())
    assert values == 999_990
    assert grown < 160, f"{grown} MiB to parse a message of a million values"


@pytest.mark.anyio
async def test_a_server_sending_requests_without_reading_the_answers_is_ended_at_the_limit() -> None:
    # 10,000 pings answered into a stdin nobody reads: the pipe takes the first ~1,600 answers, then each
    # ping held a task of the SDK's until the call's answer (before: 100,000 kept 1 GB for good).
    async with ServerPool([flood("flood"), flood("steady")]) as pool:
        flood_pid, steady_pid = [int(text(await pool.call(name, "pid", {}))) for name in ("flood", "steady")]
        with pytest.raises(ServerUnavailable) as refused:
            await pool.call("flood", "pings", {"n": 10_000})
        assert (
            f"server 'flood' sent more than {MAX_SERVER_REQUESTS} requests to tooltree without taking their "
            "answers, the limit for one server" in str(refused.value)
        )
        assert not alive(flood_pid)
        assert int(text(await pool.call("steady", "pid", {}))) == steady_pid
        assert int(text(await pool.call("flood", "pid", {}))) != flood_pid  # restarted


@pytest.mark.anyio
@pytest.mark.parametrize("tool", ["pings", "cancelled"])
async def test_a_server_that_takes_its_answers_may_send_any_number_of_requests(tool: str) -> None:
    # Ten times the limit, one after the other: each answered before the next, or each cancelled by the
    # server as soon as sent (answered anyway, or settled without an answer: either way no longer counted).
    async with ServerPool([flood("polite")]) as pool:
        result = await pool.call("polite", tool, {"n": 10 * MAX_SERVER_REQUESTS, "wait": True})
        assert not result.get("isError")
        if tool == "pings":
            assert text(result) == str(10 * MAX_SERVER_REQUESTS)  # every answer was read by the server
        assert text(await pool.call("polite", "ok", {})) == "ok"


@pytest.mark.anyio
async def test_notifications_past_the_budget_are_dropped_responses_never(caplog: pytest.LogCaptureFixture) -> None:
    # 20,000 progress notifications, then the answer; half of them hold "id" and a backslash, so they are
    # parsed before they are charged; the rest are dropped unparsed.
    params = StdioServerParameters(command=sys.executable, args=[str(FLOOD)])
    call = types.JSONRPCRequest(
        jsonrpc="2.0", id=1, method="tools/call", params={"name": "notify", "arguments": {"n": 20_000}}
    )
    seen = {"done": 0, "escaped": 0}
    with caplog.at_level(logging.WARNING, logger="tool_tree.budget"):
        async with stdio_client(params, name="chatty") as (read, write):
            started = time.monotonic()
            await write.send(SessionMessage(call))
            with anyio.fail_after(60):
                while True:
                    item = await read.receive()
                    assert isinstance(item, SessionMessage)
                    if not isinstance(item.message, types.JSONRPCNotification):
                        break
                    assert item.message.params is not None
                    seen["done" if item.message.params["message"] == "done" else "escaped"] += 1
            elapsed = time.monotonic() - started
    assert isinstance(item.message, types.JSONRPCResponse) and item.message.id == 1
    assert NOTIFICATION_BURST <= sum(seen.values()) <= NOTIFICATION_BURST + NOTIFICATION_RATE * elapsed + 1
    assert seen["done"] and seen["escaped"]  # both ways in are charged to the one budget
    warnings = [r.getMessage() for r in caplog.records if "notifications" in r.getMessage()]
    assert warnings == [
        f"server 'chatty' sent more than {NOTIFICATION_BURST:,} notifications at once (then {NOTIFICATION_RATE:g} a "
        "second), the budget for one server: tooltree drops the rest unread (it uses none of them)"
    ]


@pytest.mark.anyio
async def test_with_the_sdks_own_transport_the_request_budget_still_ends_the_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The SDK's reader parses every message itself (no value count), but the budgets on what it parsed hold.
    monkeypatch.setattr("tool_tree.connect.LINEAR", False)
    monkeypatch.setattr("tool_tree.stdio.LINEAR", False)
    async with ServerPool([flood("flood")]) as pool:
        flood_pid = int(text(await pool.call("flood", "pid", {})))
        with pytest.raises(ServerUnavailable) as refused:
            await pool.call("flood", "pings", {"n": 10_000})
        assert f"server 'flood' sent more than {MAX_SERVER_REQUESTS} requests to tooltree" in str(refused.value)
        assert int(text(await pool.call("flood", "pid", {}))) != flood_pid
    assert not alive(flood_pid)


# --- answers to no request, sizes of requests and notifications, the reader's CPU, nesting ---------------------------


@pytest.mark.anyio
async def test_answers_to_no_request_in_flight_end_that_server_past_the_allowance_and_the_others_keep_answering() -> (
    None
):
    # Before: each was parsed whole on the loop every server shares and dropped by the SDK, forever (1,300 small
    # ones a second kept the loop at 93% of a core; one of a million values cost a second).
    async with ServerPool([flood("flood"), flood("steady")]) as pool:
        flood_pid, steady_pid = [int(text(await pool.call(name, "pid", {}))) for name in ("flood", "steady")]
        assert text(await pool.call("flood", "strays", {"n": STRAY_ANSWERS // 2})) == "strayed"  # a few: dropped
        with pytest.raises(ServerUnavailable) as refused:
            await pool.call("flood", "strays", {"n": 1000})
        assert (
            f"server 'flood' sent more than {STRAY_ANSWERS} answers to requests tooltree did not make or had answered"
            in str(refused.value)
        )
        assert not alive(flood_pid)
        assert int(text(await pool.call("steady", "pid", {}))) == steady_pid
        assert int(text(await pool.call("flood", "pid", {}))) != flood_pid  # restarted


def scripted(body: str) -> StdioServerParameters:
    """A stdio server running ``body`` with ``send(line)`` and ``requests(n)`` (the next n lines, parsed)."""
    prelude = (
        "import json, sys\n"
        "def send(line):\n    sys.stdout.write(line + '\\n'); sys.stdout.flush()\n"
        "def requests(n):\n    return [json.loads(sys.stdin.readline()) for _ in range(n)]\n"
    )
    return StdioServerParameters(command=sys.executable, args=["-c", prelude + body])


@pytest.mark.anyio
async def test_an_answer_to_no_request_that_opens_with_its_id_is_dropped_unparsed() -> None:
    # Its body is not JSON: parsed, it would reach the session as a line that is not JSON-RPC.
    server = scripted(
        'send(\'{"jsonrpc":"2.0","id":"nobody","result": this is never parsed\')\n'
        f"send({notification('after')!r})\n"
        "sys.stdin.read()\n"
    )
    async with stdio_client(server, name="stray") as (read, _write):
        with anyio.fail_after(20):
            item = await read.receive()
    assert isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCNotification)
    assert item.message.params is not None and item.message.params["data"] == "after"


@pytest.mark.anyio
async def test_late_answers_to_requests_given_up_on_are_dropped_without_a_count() -> None:
    # 40 requests, each cancelled by the client, then answered by the server: honest, however many.
    n = 40
    server = scripted(
        f"for r in requests({2 * n}):\n"
        "    if 'id' in r: send(json.dumps({'jsonrpc': '2.0', 'id': r['id'], 'result': {}}))\n"
        f"send({notification('alive')!r})\n"
        "last = requests(1)[0]\n"
        "send(json.dumps({'jsonrpc': '2.0', 'id': last['id'], 'result': {'last': True}}))\n"
        "sys.stdin.read()\n"
    )
    async with stdio_client(server, name="late") as (read, write):
        for i in range(n):
            await write.send(SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=i, method="tools/list")))
        for i in range(n):
            cancel = types.JSONRPCNotification(
                jsonrpc="2.0",
                method="notifications/cancelled",
                params={"requestId": str(i)},  # "7" cancels 7
            )
            await write.send(SessionMessage(cancel))
        with anyio.fail_after(20):
            alive_note = await read.receive()
            await write.send(SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=n, method="tools/list")))
            last = await read.receive()
    assert isinstance(alive_note, SessionMessage) and isinstance(alive_note.message, types.JSONRPCNotification)
    assert isinstance(last, SessionMessage) and isinstance(last.message, types.JSONRPCResponse)
    assert last.message.id == n and last.message.result == {"last": True}


@pytest.mark.anyio
async def test_notifications_are_charged_by_their_values() -> None:
    # 60 notifications of 100,000 values each, then the answer: each is charged 101 (before: 1, so all 60 were
    # parsed, and a flood of them at the budget's rate cost the host a second of CPU each).
    per = 1 + 100_000 // NOTIFICATION_VALUES
    call = types.JSONRPCRequest(
        jsonrpc="2.0", id=1, method="tools/call", params={"name": "notify", "arguments": {"n": 60, "values": 100_000}}
    )
    delivered = 0
    async with stdio_client(StdioServerParameters(command=sys.executable, args=[str(FLOOD)]), name="big") as streams:
        read, write = streams
        started = time.monotonic()
        await write.send(SessionMessage(call))
        with anyio.fail_after(60):
            while isinstance((item := await read.receive()), SessionMessage) and isinstance(
                item.message, types.JSONRPCNotification
            ):
                delivered += 1
        elapsed = time.monotonic() - started
    assert isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCResponse)
    assert NOTIFICATION_BURST // per <= delivered <= (NOTIFICATION_BURST + NOTIFICATION_RATE * elapsed) // per + 1


@pytest.mark.anyio
async def test_a_request_of_more_values_than_the_limit_is_answered_with_an_error_unread() -> None:
    async with ServerPool([flood("asker")]) as pool:
        large = json.loads(text(await pool.call("asker", "pings", {"n": 3, "wait": True, "values": 5000})))
        small = json.loads(text(await pool.call("asker", "pings", {"n": 3, "wait": True, "values": 10})))
    assert large["answers"] == 3 and len(large["errors"]) == 3
    assert all(
        f"tooltree refused a request of server 'asker': it holds more than {MAX_REQUEST_VALUES:,} JSON values" in error
        for error in large["errors"]
    )
    assert small == {"answers": 3, "errors": []}  # a ping with a little in it is answered as ever


class WaitClockBudget(ReaderBudget):
    """A reader budget whose clock moves only by the waits it asked for, as on a host infinitely fast but for them.

    On the wall clock, a reader slowed by a busy host is refilled while it is descheduled: under load (CPU burners,
    Docker churn, other tests; 4 runs in 20) it never fell behind the budget and never waited.
    """

    def __init__(self, server: str, *, burst: float, rate: float) -> None:
        self.waited = 0.0  # read by the clock from the first refill (ReaderBudget resets it, still at 0)
        super().__init__(server, burst=burst, rate=rate, clock=lambda: self.waited)


@pytest.mark.anyio
async def test_the_reader_waits_once_unasked_messages_spend_its_budget() -> None:
    # 20,000 progress notifications, half of them holding "id" (so parsed before they are dropped), then the
    # answer: what the reader spends on them is charged, and past a small budget it waits before reading on.
    cpu = WaitClockBudget("chatty", burst=0.01, rate=1.0)
    call = types.JSONRPCRequest(
        jsonrpc="2.0", id=1, method="tools/call", params={"name": "notify", "arguments": {"n": 20_000}}
    )
    async with stdio_client(StdioServerParameters(command=sys.executable, args=[str(FLOOD)]), cpu=cpu) as streams:
        read, write = streams
        await write.send(SessionMessage(call))
        with anyio.fail_after(60):
            while not isinstance((item := await read.receive()), SessionMessage) or not isinstance(
                item.message, types.JSONRPCResponse
            ):
                pass
    assert cpu.charged > cpu.burst and cpu.waited > 0


@pytest.mark.anyio
async def test_an_honest_8_mib_result_and_a_burst_of_progress_cost_the_reader_no_wait(tmp_path: Path) -> None:
    from sandbox.calls import MAX_RESULT_BYTES

    cpu = ReaderBudget("honest")
    params = StdioServerParameters(command=sys.executable, args=[str(FLOOD)])
    big = {"name": "values", "arguments": {"n": 700_000}}  # 8 MiB of rows holds about 700,000 values
    progress = {"name": "notify", "arguments": {"n": NOTIFICATION_BURST, "values": 10}}
    notes = 0
    async with stdio_client(params, cpu=cpu) as (read, write):
        await write.send(SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/call", params=big)))
        with anyio.fail_after(60):
            answer = await read.receive()
        assert isinstance(answer, SessionMessage) and isinstance(answer.message, types.JSONRPCResponse)
        assert len(answer.message.result["structuredContent"]["a"]) == 700_000
        assert cpu.charged == 0  # the answer to the session's request is never charged
        request = types.JSONRPCRequest(jsonrpc="2.0", id=2, method="tools/call", params=progress)
        await write.send(SessionMessage(request))
        with anyio.fail_after(60):
            while isinstance((item := await read.receive()), SessionMessage) and isinstance(
                item.message, types.JSONRPCNotification
            ):
                notes += 1
    assert MAX_RESULT_BYTES >= 2 * 700_000 + 100  # the result above fits the bridge's cap
    assert notes == NOTIFICATION_BURST and 0 < cpu.charged < cpu.burst and cpu.waited == 0


@pytest.mark.anyio
@pytest.mark.parametrize("last", [False, True], ids=["id_first", "id_last"])
async def test_an_answer_nested_deeper_than_the_parser_takes_fails_its_call_at_once_naming_the_limit(
    last: bool,
) -> None:
    # Before: dropped as a stdout line that is not JSON-RPC, the call waited out its timeout.
    config = ServerConfig(name="deep", command=sys.executable, args=(str(FLOOD),), timeout=10)
    async with ServerPool([config]) as pool:
        result = await pool.call("deep", "deep", {"n": 250, "last": last})
        assert result.get("isError")
        assert "server 'deep' sent an answer nested more than 200 levels deep, the limit of the JSON parser" in text(
            result
        )
        assert "\n" not in text(result)
        assert text(await pool.call("deep", "ok", {})) == "ok"  # the server goes on
        assert pool.restarts("deep") == 0


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("n", "why"),
    [
        (0, "Invalid JSON: lone leading surrogate in hex escape"),
        (1, "Invalid JSON: expected ident"),
        (2, "valid JSON, not a JSON-RPC message"),
    ],
    ids=["lone_surrogate", "not_json", "json_rpc_1"],
)
async def test_an_answer_that_cannot_be_read_fails_its_call_at_once_saying_why(n: int, why: str) -> None:
    # Before: dropped as a stdout line that is not JSON-RPC, the call (or generate-tree's listing) waited out
    # its whole timeout.
    config = ServerConfig(name="odd", command=sys.executable, args=(str(FLOOD),), timeout=30)
    async with ServerPool([config]) as pool:
        with anyio.fail_after(10):
            result = await pool.call("odd", "unreadable", {"n": n})
        assert result.get("isError")
        message = text(result)
        assert message.startswith("server error -32700: server 'odd' sent an answer that could not be read (")
        assert why in message and message.endswith("); it was not used") and "\n" not in message
        assert text(await pool.call("odd", "ok", {})) == "ok"  # the server goes on
        assert pool.restarts("odd") == 0


@pytest.mark.anyio
async def test_an_answer_after_a_byte_order_mark_is_read() -> None:
    # Before: a line starting with a UTF-8 byte order mark was not JSON to the parser, and its id was not read from
    # its first bytes either: it was dropped as noise, the call waiting out its whole timeout.
    config = ServerConfig(name="bom", command=sys.executable, args=(str(FLOOD),), timeout=30)
    async with ServerPool([config]) as pool:
        with anyio.fail_after(10):
            result = await pool.call("bom", "bom", {})
        assert not result.get("isError") and text(result) == "ok"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("notes", "junk"), [(0, False), (2, False), (2, True)], ids=["answer_alone", "with_progress", "beside_no_message"]
)
async def test_an_answer_in_a_json_rpc_batch_is_read_with_the_messages_beside_it(notes: int, junk: bool) -> None:
    # Before: a line holding a JSON array was dropped as a stdout line that is not JSON-RPC, the call waiting out its
    # whole timeout (JSON-RPC 2.0 lets a server send a batch, and MCP's 2025-03-26 protocol); so was one holding an
    # item that is no message (``1``) beside them.
    config = ServerConfig(name="batch", command=sys.executable, args=(str(FLOOD),), timeout=30)
    told: list[float] = []
    async with ServerPool([config]) as pool:
        with anyio.fail_after(10):
            result = await pool.call(
                "batch", "batch", {"n": notes, "last": junk}, progress=lambda done, total, message: told.append(done)
            )
        assert not result.get("isError") and text(result) == "batched"
        assert text(await pool.call("batch", "ok", {})) == "ok"
        assert pool.restarts("batch") == 0
    assert told == list(range(1, notes + 1))


@pytest.mark.anyio
async def test_an_answer_whose_id_is_written_as_a_float_is_read() -> None:
    # Before: ``"id": 7.0`` (the number 7 in JSON, as a server whose numbers are all doubles writes it) was not an id
    # to the SDK's model: the line was dropped as one that is not JSON-RPC, the call waiting out its whole timeout.
    config = ServerConfig(name="float", command=sys.executable, args=(str(FLOOD),), timeout=30)
    async with ServerPool([config]) as pool:
        with anyio.fail_after(10):
            result = await pool.call("float", "float_id", {})
        assert not result.get("isError") and text(result) == "ok"


def test_a_batch_of_notifications_alone_past_their_budget_is_dropped_unread_as_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A batch is read as its messages, each judged as a line; one holding no id (notifications alone) is first held to
    # the budget whole, so past it the line is dropped unparsed, as any other line of notifications.
    lines = Lines("batch", MAX_MESSAGE_VALUES, "strict", Outstanding("batch"))
    batch = ("[" + ",".join([notification("x")] * 3) + "]").encode()
    assert lines.messages(batch) == [notification("x").encode()] * 3
    while lines.notifications.take(NOTIFICATION_VALUES):
        pass
    parsed: list[str] = []
    monkeypatch.setattr("tool_tree.stdio_lines.from_json", lambda text: parsed.append(text))
    assert lines.messages(batch) == [batch]
    assert lines.judge(batch) is None and not parsed


@pytest.mark.anyio
async def test_an_error_of_id_null_is_said_once_naming_the_server(caplog: pytest.LogCaptureFixture) -> None:
    # Before: dropped as an answer to no request without a word, so a call whose request the server could not read
    # waited out its timeout with nothing to say why.
    caplog.set_level(logging.WARNING, logger="tool_tree.stdio_lines")
    config = ServerConfig(name="nulls", command=sys.executable, args=(str(FLOOD),), timeout=30)
    async with ServerPool([config]) as pool:
        assert text(await pool.call("nulls", "null_error", {"n": 3})) == "ok"
        assert pool.restarts("nulls") == 0
    said = [r.getMessage() for r in caplog.records if r.name == "tool_tree.stdio_lines"]
    assert said == [
        "server 'nulls' answered a message it could not read with an error of id null (code -32700): which request it "
        "was is not said, and that call waits for its timeout"
    ]
