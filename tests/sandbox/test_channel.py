"""The host's end of the channel survives hostile, silent and broken peers.

The peer here is an in-process stand-in for a supervisor on a pair of real pipes: the
boundary under test is the byte stream, not the container.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import struct
import threading
import time
from typing import IO, Any

import pytest

from sandbox._supervisor.wire import MAX_FRAME_VALUES, encode_frame
from sandbox._supervisor.wire import FrameReader as PeerReader
from sandbox.channel import SessionTimeoutError, SupervisorChannel
from sandbox.errors import SessionError
from sandbox.request_budget import DOWNSTREAM_SECONDS, REREAD_SHARE, RequestBudget


class PipePeer:
    """A `Connection` whose other end this test drives."""

    def __init__(self) -> None:
        host_to_peer_r, host_to_peer_w = os.pipe()
        peer_to_host_r, self.peer_out = os.pipe()
        self.name = "pipe-peer"
        self.stdin: IO[bytes] = os.fdopen(host_to_peer_w, "wb", buffering=0)
        self.stdout: IO[bytes] = os.fdopen(peer_to_host_r, "rb")
        self.stderr: IO[bytes] | None = None
        self.peer_in = PeerReader(host_to_peer_r)
        self.killed = threading.Event()

    def send_raw(self, data: bytes) -> None:
        os.write(self.peer_out, data)

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(encode_frame(message))

    def close(self, timeout: float = 5.0) -> None:
        self.stdin.close()

    def kill(self) -> None:
        if not self.killed.is_set():
            self.killed.set()
            with contextlib.suppress(OSError):  # the test may have closed it to end the stream
                os.close(self.peer_out)


def ready_channel(peer: PipePeer) -> SupervisorChannel:
    channel = SupervisorChannel(peer, "test")
    peer.send({"method": "ready", "params": {"uid": 10001}})
    assert channel.wait_ready(10) == {"uid": 10001}
    return channel


def test_a_request_gets_its_reply() -> None:
    peer = PipePeer()
    channel = ready_channel(peer)

    def answer() -> None:
        request = peer.peer_in.read()
        assert request is not None
        peer.send({"id": request["id"], "result": {"echo": request["params"]}})

    threading.Thread(target=answer).start()
    assert channel.request("ping", {"x": 1}, timeout=10) == {"echo": {"x": 1}}


def test_an_oversized_frame_kills_the_peer_and_fails_the_waiting_request() -> None:
    peer = PipePeer()
    channel = ready_channel(peer)
    threading.Thread(target=lambda: (peer.peer_in.read(), peer.send_raw(struct.pack(">I", 1 << 30)))).start()
    with pytest.raises(SessionError, match="exceeds"):
        channel.request("ping", {}, timeout=10)
    assert peer.killed.is_set()
    with pytest.raises(SessionError, match="unusable"):
        channel.request("ping", {}, timeout=10)


def test_a_reply_to_a_request_never_made_is_a_violation() -> None:
    peer = PipePeer()
    channel = ready_channel(peer)
    peer.send({"id": 999, "result": {}})
    assert peer.killed.wait(10)
    assert channel.broken is not None and "unknown request" in channel.broken


def test_a_notification_nobody_asked_for_is_a_violation() -> None:
    peer = PipePeer()
    channel = ready_channel(peer)
    peer.send({"method": "workspace.file", "params": {"path": "x", "data": ""}})
    assert peer.killed.wait(10)
    assert channel.broken is not None and "unexpected notification" in channel.broken


def test_a_request_with_a_non_string_id_is_a_violation() -> None:
    peer = PipePeer()
    channel = ready_channel(peer)
    peer.send({"id": {"nested": 1}, "method": "tool_call", "params": {}})
    assert peer.killed.wait(10)
    assert channel.broken is not None


def test_requests_from_the_peer_reach_the_handler_and_get_answers() -> None:
    peer = PipePeer()
    channel = ready_channel(peer)
    channel.on_request = lambda call_id, method, params: channel.respond(call_id, result={"got": method})
    peer.send({"id": "c1", "method": "tool_call", "params": {}})
    assert peer.peer_in.read() == {"id": "c1", "result": {"got": "tool_call"}}


def test_a_request_over_the_value_budget_reaches_the_handler_unparsed_and_the_channel_goes_on() -> None:
    peer = PipePeer()
    channel = ready_channel(peer)
    seen: list[tuple[str, str, Any]] = []

    def handler(call_id: str, method: str, params: Any) -> None:
        seen.append((call_id, method, params))
        channel.respond(call_id, error={"code": "arguments_too_large", "message": "no"})

    channel.on_request = handler
    pad = [0] * MAX_FRAME_VALUES
    peer.send({"id": "c7", "method": "tool_call", "params": {"server": "s", "tool": "t", "arguments": {"pad": pad}}})
    assert peer.peer_in.read() == {"id": "c7", "error": {"code": "arguments_too_large", "message": "no"}}
    assert seen == [("c7", "tool_call", None)]
    peer.send({"id": "c8", "method": "tool_call", "params": {}})
    assert peer.peer_in.read() == {"id": "c8", "error": {"code": "arguments_too_large", "message": "no"}}
    assert seen[-1] == ("c8", "tool_call", {}) and not peer.killed.is_set()


@pytest.mark.parametrize(
    "message",
    [
        {"id": 1, "result": {"pad": [0] * MAX_FRAME_VALUES}},
        {"method": "workspace.entries", "params": {"entries": [0] * MAX_FRAME_VALUES}},
        {"params": {"pad": [0] * MAX_FRAME_VALUES}, "id": "c1", "method": "tool_call"},
    ],
    ids=["reply", "notification", "request_in_another_order"],
)
def test_any_other_frame_over_the_value_budget_is_a_violation(message: dict[str, Any]) -> None:
    peer = PipePeer()
    channel = ready_channel(peer)
    channel.on_request = lambda call_id, method, params: channel.respond(call_id, result={})
    peer.send(message)
    assert peer.killed.wait(10)
    assert f"more than {MAX_FRAME_VALUES:,} values" in str(channel.broken)


class RecordingBudget(RequestBudget):
    def __init__(self) -> None:
        super().__init__(burst=0.0, rate=1e6)  # every request over the budget: the reader waits a few microseconds
        self.charges: list[float] = []
        self.waits: list[float] = []

    def charge(self, seconds: float) -> float:
        self.charges.append(seconds)
        self.waits.append(super().charge(seconds))
        return self.waits[-1]


def test_each_request_from_the_peer_is_charged_to_its_budget_and_past_it_the_reader_waits() -> None:
    peer = PipePeer()
    budget = RecordingBudget()
    channel = SupervisorChannel(peer, "test", budget=budget)
    peer.send({"method": "ready", "params": {"uid": 10001}})
    channel.wait_ready(10)
    channel.on_request = lambda call_id, method, params: channel.respond(call_id, result={})
    for n in range(3):
        peer.send({"id": f"c{n}", "method": "tool_call", "params": {"arguments": {"pad": [0] * 1000 * n}}})
        assert peer.peer_in.read() == {"id": f"c{n}", "result": {}}
    peer.send({"id": "big", "method": "tool_call", "params": {"pad": [0] * MAX_FRAME_VALUES}})  # refused unparsed
    assert peer.peer_in.read() == {"id": "big", "result": {}}
    assert len(budget.charges) == 4 and all(c >= DOWNSTREAM_SECONDS for c in budget.charges)
    assert all(w > 0 for w in budget.waits)

    def answer() -> None:
        request = peer.peer_in.read()
        assert request is not None
        peer.send({"id": request["id"], "result": {"ok": True}})

    threading.Thread(target=answer).start()
    assert channel.request("ping", {}, timeout=10) == {"ok": True}
    assert len(budget.charges) == 4  # a reply to the host's own request is not charged


class Waits(threading.Event):
    """A reader's stop event that records each wait on it and returns at once."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        return self.is_set()


def test_requests_a_script_left_in_the_stream_past_its_end_are_read_on_without_waiting_up_to_a_burst() -> None:
    """Before, each request behind a spent budget was waited on, also those the script left in the stream ahead of its
    result when it was stopped: 8 threads' calls of 49,000 objects each held the result past the host's deadline (45
    s), and the sandbox was destroyed with its workspace unsaved. Now they are read on, charged, while their charges
    past the script's end are within the budget's burst; past that the reader waits again."""
    peer = PipePeer()
    budget = RequestBudget(burst=1.0, rate=1e-6)
    budget.charge(2.0)  # spent: each request past it would be waited on for days
    channel = SupervisorChannel(peer, "test", budget=budget)
    channel._stopping = waits = Waits()
    peer.send({"method": "ready", "params": {"uid": 10001}})
    channel.wait_ready(10)
    channel.on_request = lambda call_id, method, params: channel.respond(call_id, result={})

    def stopped_script() -> None:  # the calls it left, then its result
        request = peer.peer_in.read()
        assert request is not None
        for n in range(3):
            peer.send({"id": f"c{n}", "method": "tool_call", "params": {"arguments": {"n": n}}})
        peer.send({"id": request["id"], "result": {"done": True}})

    channel.expect_script_end(time.monotonic() - 1)
    threading.Thread(target=stopped_script).start()
    assert channel.request("execute", {}, timeout=10) == {"done": True}
    assert [peer.peer_in.read() for _ in range(3)] == [{"id": f"c{n}", "result": {}} for n in range(3)]
    assert waits.waits == []  # not waited on
    channel.expect_script_end(None)  # the execution ended: what the stopped script left after its result is read on
    peer.send({"id": "c3", "method": "tool_call", "params": {"arguments": {}}})
    assert peer.peer_in.read() == {"id": "c3", "result": {}}
    assert waits.waits == []
    channel._stale_left = 0.0  # a burst of such charges spent (a hostile supervisor's flood)
    peer.send({"id": "c4", "method": "tool_call", "params": {"arguments": {}}})
    assert peer.peer_in.read() == {"id": "c4", "result": {}}
    assert len(waits.waits) == 1  # it is waited on again
    channel.expect_script_end(time.monotonic() + 60)  # the next execution, stopped by a cancel
    channel.script_stopped()
    peer.send({"id": "c5", "method": "tool_call", "params": {"arguments": {}}})
    assert peer.peer_in.read() == {"id": "c5", "result": {}}
    assert len(waits.waits) == 1  # not waited on: a burst more for the requests that script left


class TimedBudget(RecordingBudget):
    """Records, with each charge, the reader's thread time as it was charged and as the charge returned."""

    def __init__(self) -> None:
        super().__init__()
        self.entered: list[float] = []
        self.left: list[float] = []

    def charge(self, seconds: float) -> float:
        self.entered.append(time.thread_time())
        wait = super().charge(seconds)
        self.left.append(time.thread_time())
        return wait


def test_a_large_request_is_charged_its_readers_cpu_and_twice_as_much_again_for_its_arguments() -> None:
    """Before, a request was charged its reader's CPU and 0.5 ms, whatever its size, though the host encodes its
    arguments again (their digest, the call to the server): 94 calls of 7 MiB cost 8.8 CPU-s in 30 s, charged a
    flat 0.5 ms each. Now it is charged `REREAD_SHARE` of the reader's CPU for the frame on top."""
    peer = PipePeer()
    budget = TimedBudget()
    channel = SupervisorChannel(peer, "test", budget=budget)
    peer.send({"method": "ready", "params": {"uid": 10001}})
    channel.wait_ready(10)
    channel.on_request = lambda call_id, method, params: channel.respond(call_id, result={})
    sizes = {"small": 1, "large": 100_000}  # the large one: 7 MB of arguments, within the frame's value budget
    for name, count in sizes.items():
        peer.send({"id": name, "method": "tool_call", "params": {"arguments": {"rows": ["x" * 64] * count}}})
        assert peer.peer_in.read() == {"id": name, "result": {}}
    small, large = budget.charges
    assert large > small > DOWNSTREAM_SECONDS
    # The reader's CPU for the large request is at most its thread's CPU between the two charges (the frame, its
    # handler, the loop); the frame's reading and parsing is most of it, and is charged (1 + REREAD_SHARE) times.
    # Before, it was charged once: at most `reader`.
    reader = budget.entered[1] - budget.left[0]
    assert large - DOWNSTREAM_SECONDS >= 0.75 * (1 + REREAD_SHARE) * reader > 0.001, (large, reader)


def test_a_silent_peer_times_out_without_blocking_another_session() -> None:
    silent, lively = PipePeer(), PipePeer()
    silent_channel, lively_channel = ready_channel(silent), ready_channel(lively)
    outcome: list[BaseException] = []

    def wait_on_silent() -> None:
        try:
            silent_channel.request("execute", {}, timeout=0.5)
        except SessionTimeoutError as e:
            outcome.append(e)

    waiter = threading.Thread(target=wait_on_silent)
    waiter.start()

    def answer() -> None:
        request = lively.peer_in.read()
        assert request is not None
        lively.send({"id": request["id"], "result": {"ok": True}})

    threading.Thread(target=answer).start()
    assert lively_channel.request("ping", {}, timeout=10) == {"ok": True}
    waiter.join(10)
    assert len(outcome) == 1


def test_a_peer_that_dies_before_ready_fails_the_start() -> None:
    peer = PipePeer()
    channel = SupervisorChannel(peer, "test")
    os.close(peer.peer_out)
    with pytest.raises(SessionError, match="failed to start"):
        channel.wait_ready(10)
    assert peer.killed.is_set(), "a channel that ended must remove what is left of its container"


def test_a_request_that_meets_a_close_just_after_its_check_fails_at_once() -> None:
    # Before: a close (from another thread) between the request's check and its registration had already woken
    # every waiter, so this one waited out its whole timeout (120 s for a file operation; here 30 s).
    peer = PipePeer()
    channel = ready_channel(peer)
    check = channel._check_usable
    closed_once: list[bool] = []

    def check_then_close() -> None:
        check()
        if not closed_once:
            closed_once.append(True)
            closer = threading.Thread(target=channel.close)
            closer.start()
            closer.join(10)

    channel._check_usable = check_then_close  # type: ignore[method-assign]
    with pytest.raises(SessionError, match="closed") as caught:
        channel.request("workspace.list", {"path": "", "limit": 1}, timeout=30)
    assert not isinstance(caught.value, SessionTimeoutError)


def _ctrl_c_once_sent(peer: PipePeer) -> list[dict[str, Any]]:
    """The requests ``peer`` reads (one): once it has read it, a Ctrl-C (SIGINT) comes to this thread."""
    main = threading.get_ident()
    sent: list[dict[str, Any]] = []

    def ctrl_c_once_sent() -> None:
        request = peer.peer_in.read()
        assert request is not None
        sent.append(request)
        signal.pthread_kill(main, signal.SIGINT)

    threading.Thread(target=ctrl_c_once_sent).start()
    return sent


def test_the_reply_to_a_request_ctrl_c_left_goes_to_on_late_reply_and_any_other_stays_a_violation() -> None:
    # Before: such a reply was a protocol violation, and killed the sandbox (a Ctrl-C, then no answer within the wait).
    peer = PipePeer()
    channel = ready_channel(peer)
    late: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
    channel.on_late_reply = lambda method, message: late.put((method, message))
    sent = _ctrl_c_once_sent(peer)
    with pytest.raises(KeyboardInterrupt):
        channel.request("execute", {}, timeout=30, on_interrupt=lambda: None, interrupt_wait=0.0)
    assert channel.wait_left("ping", 0) and not channel.wait_left("execute", 0.05)  # the next execute waits for it
    reply = {"id": sent[0]["id"], "result": {"state_reset": True}}
    peer.send(reply)
    assert late.get(timeout=10) == ("execute", reply)
    assert channel.wait_left("execute", 10)
    assert channel.broken is None and not peer.killed.is_set()
    peer.send(reply)  # once: the same reply again is a violation
    assert peer.killed.wait(10)
    assert channel.broken is not None and "unknown request" in channel.broken


def test_what_a_request_ctrl_c_left_still_streams_is_dropped_until_its_reply_and_is_then_a_violation() -> None:
    # A Ctrl-C during a workspace's save leaves the save's request while its entries still come. Before: the next
    # entry was "unexpected notification 'workspace.entries'", a protocol violation that killed the sandbox, with a
    # warning blaming it.
    peer = PipePeer()
    channel = ready_channel(peer)
    channel.on_late_reply = lambda method, message: None
    received: list[dict[str, Any]] = []
    sent = _ctrl_c_once_sent(peer)
    with pytest.raises(KeyboardInterrupt):
        channel.request("workspace.save", {}, timeout=30, sink=lambda method, params: received.append(params))
    entries = {"method": "workspace.entries", "params": {"entries": []}}
    peer.send(entries)
    peer.send({"id": sent[0]["id"], "result": {"files": 0}})
    assert channel.wait_left("workspace.save", 10)
    assert channel.broken is None and not peer.killed.is_set() and received == []
    peer.send(entries)  # with no request left to stream it: a violation
    assert peer.killed.wait(10)
    assert channel.broken is not None and "unexpected notification 'workspace.entries'" in channel.broken


def test_a_ctrl_c_landing_in_the_send_after_its_frame_is_written_stops_the_script_and_leaves_the_request() -> None:
    # Before: the interrupt went out of the send before the wait's handler: the script ran on to its timeout (no
    # cancel), and the request stayed waiting, so its reply, when the script ended, went to no one.
    peer = PipePeer()
    channel = ready_channel(peer)
    send = channel._sender.send

    def send_then_ctrl_c(frame: bytes) -> None:
        send(frame)
        raise KeyboardInterrupt

    channel._sender.send = send_then_ctrl_c  # type: ignore[method-assign]
    interrupted: list[bool] = []
    with pytest.raises(KeyboardInterrupt):
        channel.request("execute", {}, timeout=30, on_interrupt=lambda: interrupted.append(True), interrupt_wait=0.0)
    assert interrupted == [True]
    request = peer.peer_in.read()
    assert request is not None and request["method"] == "execute"
    assert not channel.wait_left("execute", 0.05)  # left for its late reply, not waiting for ever
    peer.send({"id": request["id"], "result": {"state_reset": False}})
    assert channel.wait_left("execute", 10)
    assert channel.broken is None and not peer.killed.is_set()


def test_a_request_that_cannot_be_sent_is_not_left_waiting() -> None:
    peer = PipePeer()
    channel = ready_channel(peer)
    with pytest.raises(SessionError, match="cannot send execute"):
        channel.request("execute", {"x": float("nan")}, timeout=30)
    assert channel._pending == {}
