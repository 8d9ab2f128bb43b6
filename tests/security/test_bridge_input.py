"""Bridge input: what a hostile container sends the host, byte by byte, without a container.

A `PipeSupervisor` stands in for the supervisor on a pair of real pipes and drives a real
`Sandbox` session (its channel, request routing, tool relay and ledger). Each hostile input ends
in a precise error — a protocol violation that kills that container, or an error answer to that
one call — and another session running beside it is unaffected.

Covered elsewhere: NaN/Infinity, duplicate keys, deep nesting, 50,000-digit integers, invalid UTF-8,
non-object frames and truncation in the frame parser (tests/sandbox/test_framing.py); oversized
frames, replies to unknown requests, stray notifications, non-string request ids and a silent peer
(tests/sandbox/test_channel.py); tools outside the manifest (incl. ``../x``, case and unicode
look-alikes, NUL), schema-invalid arguments, call budgets and a changed tool definition
(tests/sandbox/test_mcp_bridge.py).
"""

from __future__ import annotations

import gc
import json
import os
import struct
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import IO, Any

import pytest

from sandbox import Sandbox, SandboxConfig, SessionError
from sandbox._supervisor.wire import FrameReader as PeerReader
from sandbox._supervisor.wire import encode_frame
from sandbox.backend import SandboxBackend
from sandbox.bridge import FunctionBridge
from sandbox.calls import MAX_CALLS_IN_FLIGHT, MAX_RESULT_BYTES
from tests.security.probes import host_peak_growth
from tests.support import TEST_OWNER

CONFIG = SandboxConfig(owner=TEST_OWNER, timeout=10.0)
EMPTY_RESULT = {"exit_status": 0, "error": None, "traceback": None, "stdout": {"head": "done\n", "truncated": False}}


class PipeSupervisor:
    """A `Connection` whose far end — the supervisor's side — this test drives."""

    def __init__(self) -> None:
        host_to_peer_r, host_to_peer_w = os.pipe()
        peer_to_host_r, self.peer_out = os.pipe()
        self.name = "pipe-supervisor"
        self.stdin: IO[bytes] = os.fdopen(host_to_peer_w, "wb", buffering=0)
        self.stdout: IO[bytes] = os.fdopen(peer_to_host_r, "rb")
        self.stderr: IO[bytes] | None = None
        self.reader = PeerReader(host_to_peer_r)
        self.killed = threading.Event()
        self._out_lock = threading.Lock()

    # the host's view (Connection)
    def close(self, timeout: float = 5.0) -> None:
        self.stdin.close()
        self._close_out()

    def kill(self) -> None:
        self.killed.set()
        self._close_out()

    def _close_out(self) -> None:
        with self._out_lock:
            if self.peer_out >= 0:
                os.close(self.peer_out)
                self.peer_out = -1

    # the peer's side
    def send_raw(self, data: bytes) -> None:
        with self._out_lock:
            os.write(self.peer_out, data)

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(encode_frame(message))

    def read(self) -> dict[str, Any]:
        message = self.reader.read()
        assert message is not None, "the host closed the channel"
        return message

    def read_until(self, call_id: str) -> dict[str, Any]:
        """Host frames up to the answer to ``call_id`` (others are dropped)."""
        while (message := self.read()).get("id") != call_id:
            pass
        return message


class PipeBackend(SandboxBackend):
    def __init__(self, peer: PipeSupervisor) -> None:
        self.config = CONFIG
        self.peer = peer

    def prepare(self) -> None:
        pass

    def launch(self, session_id: str) -> PipeSupervisor:
        self.peer.send({"method": "ready", "params": {"uid": 10001, "pid": 1}})
        return self.peer

    def verify_ready(self, connection: Any, status: Mapping[str, Any]) -> None:
        pass


class Recorder:
    """A bridge handler that records its calls and returns what ``reply`` makes of them."""

    def __init__(self, reply: Callable[[str, str, dict[str, Any]], Any] | None = None) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.reply = reply or (lambda s, t, a: {"content": [{"type": "text", "text": f"{s}.{t}"}]})
        self._lock = threading.Lock()

    def __call__(self, server: str, tool: str, arguments: dict[str, Any]) -> Any:
        with self._lock:
            self.calls.append((server, tool, arguments))
        return self.reply(server, tool, arguments)


def session(handler: Recorder | None = None) -> tuple[Sandbox, PipeSupervisor]:
    peer = PipeSupervisor()
    sb = Sandbox(PipeBackend(peer), tools=FunctionBridge(handler or Recorder()))
    sb.start()
    return sb, peer


def execute_with(sb: Sandbox, peer: PipeSupervisor, script: Callable[[dict[str, Any]], Any]) -> Any:
    """Run ``sb.execute`` while ``script(execute_request)`` plays the supervisor; returns (result, script's value)."""
    box: list[Any] = []
    failures: list[BaseException] = []

    def play() -> None:
        try:
            request = peer.read()
            assert request["method"] == "execute"
            box.append(script(request))
        except BaseException as e:  # surfaced in the test thread below
            failures.append(e)

    player = threading.Thread(target=play)
    player.start()
    try:
        result = sb.execute("print('done')")
    finally:
        player.join(30)
    if failures:
        raise failures[0]
    return result, box[0] if box else None


def finish(peer: PipeSupervisor, request: dict[str, Any]) -> None:
    peer.send({"id": request["id"], "result": EMPTY_RESULT})


@pytest.fixture
def bystander() -> Iterator[tuple[Sandbox, PipeSupervisor, Recorder]]:
    """Another session, alive beside the one under attack; checked to still work afterwards."""
    handler = Recorder()
    sb, peer = session(handler)
    yield sb, peer, handler
    assert not peer.killed.is_set()

    def call_and_finish(request: dict[str, Any]) -> dict[str, Any]:
        peer.send({"id": "b1", "method": "tool_call", "params": {"server": "crm", "tool": "ok", "arguments": {}}})
        answer = peer.read_until("b1")
        finish(peer, request)
        return answer

    result, answer = execute_with(sb, peer, call_and_finish)
    assert result.stdout == "done\n" and answer == {
        "id": "b1",
        "result": {"content": [{"type": "text", "text": "crm.ok"}]},
    }
    sb.close()


def violation(raw: bytes) -> tuple[SessionError, PipeSupervisor, Sandbox]:
    """Send ``raw`` as the supervisor while an execution waits; the execution's error."""
    sb, peer = session()
    with pytest.raises(SessionError) as info:
        execute_with(sb, peer, lambda request: peer.send_raw(raw))
    assert peer.killed.wait(10), "the container was not killed"
    return info.value, peer, sb


def body(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return struct.pack(">I", len(data)) + data


HOSTILE_FRAMES = {
    # name: (raw bytes, the precise reason in the error)
    "garbage_bytes": (b"\x00\x00\x00\x05\xde\xad\xbe\xef\x00", "not valid UTF-8"),
    "garbage_text": (body("GET / HTTP/1.1"), "frame is not valid JSON"),
    "half_closed_inside_a_header": (b"\x00\x00", "stream ended inside a frame header"),
    "half_closed_inside_a_body": (struct.pack(">I", 100) + b'{"id": 1, ', "stream ended inside a frame"),
    "a_50_mb_string": (struct.pack(">I", 50 << 20) + b'{"id": "c1", "method": "tool_call", "params": {"s": "aaaa',
                       f"frame of {50 << 20} bytes exceeds the {16 << 20}-byte cap"),
    "a_5000_digit_integer": (body('{"id": "c1", "method": "tool_call", "params": {"n": ' + "7" * 5000 + "}}"),
                             "Exceeds the limit (4300 digits) for integer string conversion"),
    "nan_in_arguments": (body('{"id": "c1", "method": "tool_call", "params": {"arguments": {"x": NaN}}}'),
                         "non-finite number NaN"),
    "duplicate_id": (body('{"id": "c1", "id": "c2", "method": "tool_call", "params": {}}'), "duplicate key 'id'"),
    "deep_nesting": (body('{"params": ' + "[" * 40 + "]" * 40 + "}"), "nested deeper than 32 levels"),
    "method_not_a_string": (body('{"id": "c1", "method": 7, "params": {}}'), "method is not a string"),
    "params_not_an_object": (body('{"id": "c1", "method": "tool_call", "params": [1]}'), "params is not an object"),
    "overlong_request_id": (body(json.dumps({"id": "c" * 65, "method": "tool_call", "params": {}})),
                            "a request from the sandbox must have a short string id"),
    "boolean_reply_id": (body('{"id": true, "result": {}}'), "a reply must carry the integer id of a request"),
    "a_second_ready": (body('{"method": "ready", "params": {"uid": 0}}'), "a second ready notification"),
    "stray_notification": (body('{"method": "workspace.file", "params": {"path": "x"}}'),
                           "unexpected notification 'workspace.file'"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(HOSTILE_FRAMES))
def test_a_hostile_frame_is_a_precise_protocol_violation_that_leaves_other_sessions_alone(
    bystander: tuple[Sandbox, PipeSupervisor, Recorder], name: str
) -> None:
    raw, reason = HOSTILE_FRAMES[name]
    if name.startswith("half_closed"):
        sb, peer = session()

        def half_close(request: dict[str, Any]) -> None:
            peer.send_raw(raw)
            peer._close_out()

        with pytest.raises(SessionError) as info:
            execute_with(sb, peer, half_close)
        error = info.value
    else:
        error, peer, sb = violation(raw)
    assert reason in str(error)
    with pytest.raises(SessionError, match="unusable"):
        sb.execute("print(1)")
    assert bystander[2].calls == []


def test_a_replayed_reply_id_is_a_violation_after_the_first_answer(
    bystander: tuple[Sandbox, PipeSupervisor, Recorder],
) -> None:
    sb, peer = session()
    result, _ = execute_with(sb, peer, lambda request: finish(peer, request))
    assert result.stdout == "done\n"
    peer.send({"id": 1, "result": EMPTY_RESULT})  # the same answer again
    assert peer.killed.wait(10)
    assert (
        sb._channel is not None
        and sb._channel.broken == "protocol violation from the sandbox: a reply to unknown request 1"
    )


def test_a_replayed_call_id_is_just_another_call_counted_in_the_ledger() -> None:
    handler = Recorder()
    sb, peer = session(handler)

    def replay(request: dict[str, Any]) -> list[dict[str, Any]]:
        call = {"id": "c1", "method": "tool_call", "params": {"server": "crm", "tool": "t", "arguments": {}}}
        peer.send(call)
        peer.send(call)
        answers = [peer.read_until("c1"), peer.read_until("c1")]
        finish(peer, request)
        return answers

    result, answers = execute_with(sb, peer, replay)
    assert answers == [{"id": "c1", "result": {"content": [{"type": "text", "text": "crm.t"}]}}] * 2
    assert len(handler.calls) == 2 and len(result.tool_calls) == 2
    sb.close()


def test_a_byte_at_a_time_peer_is_understood() -> None:
    handler = Recorder()
    sb, peer = session(handler)

    def dribble(request: dict[str, Any]) -> dict[str, Any]:
        call = encode_frame(
            {"id": "c1", "method": "tool_call", "params": {"server": "crm", "tool": "t", "arguments": {"a": "é"}}}
        )
        for i in range(len(call)):
            peer.send_raw(call[i : i + 1])
        answer = peer.read_until("c1")
        reply = encode_frame({"id": request["id"], "result": EMPTY_RESULT})
        for i in range(len(reply)):
            peer.send_raw(reply[i : i + 1])
        return answer

    result, answer = execute_with(sb, peer, dribble)
    assert result.stdout == "done\n" and answer["result"]["content"][0]["text"] == "crm.t"
    assert handler.calls == [("crm", "t", {"a": "é"})]
    sb.close()


def tiny_values_call(call_id: str, frame_bytes: int) -> bytes:
    """A tool-call frame of ``frame_bytes`` bytes whose arguments are ``{"pad": [{}, {}, …]}``."""
    head = b'{"id":"%s","method":"tool_call",' % call_id.encode()
    head += b'"params":{"server":"crm","tool":"t","arguments":{"pad":['
    count = (frame_bytes - len(head) - 4 + 1) // 3
    return body(head + b",".join([b"{}"] * count) + b"]}}}")


@pytest.mark.parametrize(("calls", "frame_mib"), [(1, 16), (16, 4)], ids=["one_16_mib_frame", "16_frames_of_4_mib"])
def test_frames_full_of_tiny_values_are_refused_unparsed_and_the_host_stays_small(
    bystander: tuple[Sandbox, PipeSupervisor, Recorder], calls: int, frame_mib: int
) -> None:
    # Parsed, one 16 MiB frame of [{}, {}, …] took the host 819 MiB and 6 s of CPU before its call was refused.
    handler = Recorder()
    sb, peer = session(handler)
    frames = [tiny_values_call(f"c{i}", frame_mib << 20) for i in range(calls)]
    assert len(frames[0]) == (frame_mib << 20) + 4

    def flood(request: dict[str, Any]) -> list[dict[str, Any]]:
        for frame in frames:
            peer.send_raw(frame)
        answers = [peer.read() for _ in frames]
        peer.send({"id": "ok", "method": "tool_call", "params": {"server": "crm", "tool": "t", "arguments": {}}})
        answers.append(peer.read_until("ok"))
        finish(peer, request)
        return answers

    (result, answers), growth = host_peak_growth(lambda: execute_with(sb, peer, flood))
    assert [a["error"]["code"] for a in answers[:-1]] == ["arguments_too_large"] * calls
    assert answers[0]["error"]["message"].startswith("the arguments hold more than 100,000 values")
    assert answers[-1] == {"id": "ok", "result": {"content": [{"type": "text", "text": "crm.t"}]}}
    assert handler.calls == [("crm", "t", {})] and result.stdout == "done\n"
    assert growth < 64 << 20, f"host peak RSS rose {growth >> 20} MiB"
    sb.close()


def test_a_peer_stalling_inside_a_frame_times_out_without_blocking_another_session(
    bystander: tuple[Sandbox, PipeSupervisor, Recorder],
) -> None:
    from sandbox.channel import SessionTimeoutError

    sb, peer = session()
    assert sb._channel is not None
    peer.send_raw(struct.pack(">I", 1000) + b'{"id": 1')  # and then nothing
    with pytest.raises(SessionTimeoutError):
        sb._channel.request("ping", {}, timeout=0.5)
    sb.kill()


def test_a_flood_of_calls_is_held_to_the_in_flight_limit_and_the_rest_refused() -> None:
    release = threading.Event()
    handler = Recorder(lambda s, t, a: (release.wait(30), {"content": []})[1])
    sb, peer = session(handler)
    flood = 1000
    threads_before = threading.active_count()

    def flood_calls(request: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
        for i in range(flood):
            peer.send({"id": f"c{i}", "method": "tool_call", "params": {"server": "crm", "tool": "t", "arguments": {}}})
        refused = [peer.read() for _ in range(flood - MAX_CALLS_IN_FLIGHT)]
        threads = threading.active_count()
        release.set()
        served = [peer.read() for _ in range(MAX_CALLS_IN_FLIGHT)]
        finish(peer, request)
        return refused + served, threads

    _, (answers, threads_during) = execute_with(sb, peer, flood_calls)
    refused = [a for a in answers if "error" in a]
    assert len(refused) == flood - MAX_CALLS_IN_FLIGHT
    assert {a["error"]["code"] for a in refused} == {"too_many_calls"}
    assert refused[0]["error"]["message"] == f"more than {MAX_CALLS_IN_FLIGHT} tool calls in flight"
    assert len(handler.calls) == MAX_CALLS_IN_FLIGHT
    assert threads_during - threads_before <= 32 + 1  # the session's tool pool, whatever the flood
    sb.close()


def test_calls_outside_an_execution_and_unknown_methods_are_refused() -> None:
    handler = Recorder()
    sb, peer = session(handler)
    peer.send({"id": "c1", "method": "tool_call", "params": {"server": "crm", "tool": "t", "arguments": {}}})
    assert peer.read() == {"id": "c1", "error": {"code": "no_execution", "message": "no execution is running"}}

    def unknown(request: dict[str, Any]) -> dict[str, Any]:
        peer.send({"id": "c2", "method": "host.exec", "params": {"cmd": "id"}})
        answer = peer.read_until("c2")
        finish(peer, request)
        return answer

    _, answer = execute_with(sb, peer, unknown)
    assert answer == {"id": "c2", "error": {"code": "unknown_method", "message": "unknown request"}}
    assert handler.calls == []
    sb.close()


def test_a_sessions_calls_reach_only_its_own_bridge() -> None:
    mine, theirs = Recorder(), Recorder()
    sb_a, peer_a = session(mine)
    sb_b, peer_b = session(theirs)

    def call(request: dict[str, Any]) -> None:
        peer_a.send({"id": "c1", "method": "tool_call", "params": {"server": "crm", "tool": "t", "arguments": {}}})
        peer_a.read_until("c1")
        # Meanwhile B's container, idle, tries the same: refused, and A's bridge never sees it.
        peer_b.send({"id": "c1", "method": "tool_call", "params": {"server": "crm", "tool": "t", "arguments": {}}})
        assert peer_b.read()["error"]["code"] == "no_execution"
        finish(peer_a, request)

    execute_with(sb_a, peer_a, call)
    assert mine.calls == [("crm", "t", {})] and theirs.calls == []
    sb_a.close()
    sb_b.close()


MALFORMED_CALLS = {
    "arguments_not_an_object": ({"server": "crm", "tool": "t", "arguments": [1]}, "malformed tool call"),
    "server_missing": ({"tool": "t", "arguments": {}}, "malformed tool call"),
    "tool_name_too_long": ({"server": "crm", "tool": "t" * 257, "arguments": {}}, "server or tool name too long"),
    "lone_surrogate_in_arguments": (
        {"server": "crm", "tool": "t", "arguments": {"s": "\ud800"}},
        "the arguments cannot be encoded as UTF-8 JSON (a lone surrogate?)",
    ),
}


@pytest.mark.parametrize("name", list(MALFORMED_CALLS))
def test_a_malformed_call_gets_a_precise_error_and_never_reaches_the_bridge(name: str) -> None:
    params, message = MALFORMED_CALLS[name]
    handler = Recorder()
    sb, peer = session(handler)

    def call(request: dict[str, Any]) -> dict[str, Any]:
        # ensure_ascii keeps a lone surrogate as the \ud800 escape, as a hostile peer would send it.
        raw = json.dumps({"id": "c1", "method": "tool_call", "params": params}).encode()
        peer.send_raw(struct.pack(">I", len(raw)) + raw)
        answer = peer.read_until("c1")
        finish(peer, request)
        return answer

    result, answer = execute_with(sb, peer, call)
    assert answer == {"id": "c1", "error": {"code": "invalid_arguments", "message": message}}
    assert handler.calls == [] and result.stdout == "done\n"
    sb.close()


HOSTILE_RESULTS: dict[str, tuple[Callable[[str, str, dict[str, Any]], Any], str, str]] = {
    "larger_than_the_cap": (
        lambda s, t, a: {"content": [{"type": "text", "text": "x" * (MAX_RESULT_BYTES + 1)}]},
        "result_too_large",
        f"the result is {MAX_RESULT_BYTES + 44:,} bytes as JSON, over the {MAX_RESULT_BYTES:,} one tool result may "
        "take (its text and structured content count together); ask the tool for less at a time (a range, a page, a "
        "filter)",
    ),
    "lone_surrogate": (
        lambda s, t, a: {"content": [{"type": "text", "text": "\udcff"}]},
        "invalid_result",
        "the tool result cannot be sent as UTF-8 JSON (a non-finite number, a lone surrogate or too deep nesting)",
    ),
    "nan": (
        lambda s, t, a: {"structuredContent": {"x": float("nan")}, "content": []},
        "invalid_result",
        "the tool result cannot be sent as UTF-8 JSON (a non-finite number, a lone surrogate or too deep nesting)",
    ),
    "not_a_dict": (lambda s, t, a: ["not", "a", "result"], "internal", "the tool call failed on the host"),
    "a_bridge_that_raises": (lambda s, t, a: 1 / 0, "internal", "the tool call failed on the host"),
}


@pytest.mark.parametrize("name", list(HOSTILE_RESULTS))
def test_a_huge_or_hostile_tool_result_becomes_an_error_for_that_call(name: str) -> None:
    reply, code, message = HOSTILE_RESULTS[name]
    sb, peer = session(Recorder(reply))

    def call(request: dict[str, Any]) -> list[dict[str, Any]]:
        answers = []
        for call_id in ("c1", "c2"):  # the second call proves the session still serves calls
            peer.send({"id": call_id, "method": "tool_call", "params": {"server": "crm", "tool": "t", "arguments": {}}})
            answers.append(peer.read_until(call_id))
        finish(peer, request)
        return answers

    result, answers = execute_with(sb, peer, call)
    assert answers == [{"id": c, "error": {"code": code, "message": message}} for c in ("c1", "c2")]
    assert [r.ok for r in result.tool_calls] == [False, False]
    # Refused on the host: nothing of it stayed in the sandbox (`exec` used to count 8 MiB per call there).
    assert [r.response_bytes for r in result.tool_calls] == [0, 0]
    assert not peer.killed.is_set()
    sb.close()


def test_a_search_answer_that_cannot_be_encoded_becomes_an_error() -> None:
    peer = PipeSupervisor()
    bridge = FunctionBridge(lambda s, t, a: {}, search=lambda q, d, n: "crm.\ud800")
    sb = Sandbox(PipeBackend(peer), tools=bridge)
    sb.start()

    def search(request: dict[str, Any]) -> dict[str, Any]:
        peer.send({"id": "c1", "method": "search_tools", "params": {"query": "x"}})
        answer = peer.read_until("c1")
        finish(peer, request)
        return answer

    _, answer = execute_with(sb, peer, search)
    assert answer == {
        "id": "c1",
        "error": {"code": "invalid_result", "message": "the host's answer cannot be sent as UTF-8 JSON"},
    }
    sb.close()


def test_a_session_its_peer_broke_dropped_unclosed_warns_of_nothing() -> None:
    # Its container was killed when it broke: nothing runs on for a ResourceWarning to report (one did, and failed
    # whichever later test the collection happened in).
    error, peer, sb = violation(HOSTILE_FRAMES["garbage_text"][0])
    assert peer.killed.is_set()
    gone = weakref.ref(sb)
    del sb, error
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        gc.collect()
    assert gone() is None
    assert [str(w.message) for w in seen if issubclass(w.category, ResourceWarning)] == []


def test_counts_in_a_report_past_a_floats_range_are_dropped_not_raised() -> None:
    # Before: an execution report whose outputs budget was 10**400 raised OverflowError out of execute (its MiB as a
    # float), and a listing's size of 10**400 was handed on to callers that show it in MB (the agent's list_files).
    huge = 10**400
    path = "/workspace/.tooltree/outputs/1-0a1b2c-stdout.txt"
    stream = {"head": "a", "tail": "z", "truncated": True, "bytes": huge, "saved": huge, "path": path}
    report = {**EMPTY_RESULT, "stdout": stream, "outputs": {"budget": huge, "dropped": huge}}
    sb, peer = session()
    result, _ = execute_with(sb, peer, lambda request: peer.send({"id": request["id"], "result": report}))
    assert result.stdout == f"a\n\n[... stdout cut; the whole stdout is in {path} ...]\n\nz"

    def answer_listing() -> None:
        request = peer.read()
        entries = [{"name": "big", "type": "file", "size": huge}, {"name": "small", "type": "file", "size": 3}]
        peer.send({"id": request["id"], "result": {"entries": entries, "total": 2}})

    player = threading.Thread(target=answer_listing)
    player.start()
    listing = sb.list_folder("")
    player.join(10)
    assert listing.entries == [{"name": "small", "type": "file", "size": 3}]
    assert not peer.killed.is_set()
    sb.close()
