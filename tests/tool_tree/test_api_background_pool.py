"""`BackgroundPool` used as a developer embedding it would, mistakes included: a fork, a call from the pool's own
loop, a call cut by the pool closing or by Ctrl-C, arguments that are not JSON."""

from __future__ import annotations

import _thread
import asyncio
import json
import os
import signal
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from mcp.client.stdio import PROCESS_TERMINATION_TIMEOUT

from tests.support import RAW_SERVER, in_a_fork, wait_until
from tool_tree.config import ServerConfig
from tool_tree.pool import BackgroundPool, PoolError

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_servers"


def media() -> ServerConfig:
    return ServerConfig(name="media", command=sys.executable, args=(str(SAMPLE / "media.py"),), timeout=30)


def text(result: dict[str, Any]) -> str:
    return "".join(b["text"] for b in result["content"] if b["type"] == "text")


def test_a_forked_child_gets_a_pool_error_at_once_instead_of_waiting_for_ever() -> None:
    # Before: the child's call was handed to a loop no thread runs there, and waited for ever, whatever its timeout.
    with BackgroundPool([media()]) as bg:
        assert text(bg.call("media", "slow_echo", {"text": "parent", "seconds": 0})) == "parent"

        def child() -> str:  # what the call did in the child
            bg.call("media", "slow_echo", {"text": "child", "seconds": 0}, timeout=5)
            return "returned"

        outcome = in_a_fork(child)
        assert outcome.startswith(f"PoolError: this BackgroundPool runs in process {os.getpid()}, not in this one")
        assert "make a new BackgroundPool(...) here" in outcome
        assert text(bg.call("media", "slow_echo", {"text": "still", "seconds": 0})) == "still"  # the parent's is fine


def test_a_call_from_the_pools_own_loop_is_refused_rather_than_waiting_for_itself() -> None:
    # Before: bg.call in a coroutine on bg.loop blocked that loop, which was the one to run the call: it hung.
    with BackgroundPool([media()]) as bg:

        async def inside() -> dict[str, Any]:
            return bg.call("media", "slow_echo", {"text": "x", "seconds": 0}, timeout=3)

        with pytest.raises(PoolError, match=r"on the pool's own event loop.*await bg\.pool\.call"):
            asyncio.run_coroutine_threadsafe(inside(), bg.loop).result(timeout=30)

        async def awaited() -> dict[str, Any]:
            return await bg.pool.call("media", "slow_echo", {"text": "awaited", "seconds": 0})

        assert text(asyncio.run_coroutine_threadsafe(awaited(), bg.loop).result(timeout=30)) == "awaited"


def test_calls_in_flight_when_the_pool_closes_raise_a_pool_error_saying_so() -> None:
    # Before: they raised concurrent.futures.CancelledError with no message (or "server 'media' is unavailable:
    # the connection closed"), neither of them the documented PoolError.
    outcomes: list[BaseException | dict[str, Any]] = []
    bg = BackgroundPool([media()]).__enter__()
    bg.call("media", "slow_echo", {"text": "x", "seconds": 0})

    def call() -> None:
        try:
            outcomes.append(bg.call("media", "slow_echo", {"text": "x", "seconds": 30}))
        except BaseException as e:
            outcomes.append(e)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    # All four sent: the sample server answers nothing for 30 s.
    wait_until(lambda: bg.pool._slots["media"].limiter.borrowed_tokens == 4, "the calls were never sent")
    bg.__exit__(None, None, None)
    for t in threads:
        t.join(timeout=30)
    assert len(outcomes) == 4
    for outcome in outcomes:
        assert isinstance(outcome, PoolError), outcome
        assert str(outcome).startswith("the pool closed during the call (its `with` block ended meanwhile)")


def test_ctrl_c_during_a_call_gives_the_call_up_on_the_pools_loop() -> None:
    # Before: the KeyboardInterrupt reached the caller, but the call went on holding its server's only slot, so
    # the next call waited for it (here: timed out waiting for its turn).
    with BackgroundPool([media()], concurrency=1) as bg:
        main = threading.main_thread().ident
        assert main is not None

        def interrupt_once_sent() -> None:
            # The server starts on this first call: running means the call holds the slot and is being sent.
            wait_until(lambda: bg.pool.state("media") == "running", "the server never started")
            signal.pthread_kill(main, signal.SIGINT)

        helper = threading.Thread(target=interrupt_once_sent)
        helper.start()
        with pytest.raises(KeyboardInterrupt):
            bg.call("media", "slow_echo", {"text": "slow", "seconds": 30})
        helper.join(timeout=30)
        after = bg.call("media", "slow_echo", {"text": "next", "seconds": 0}, timeout=10)
        assert text(after) == "next", after


def logged_sigterm(log: Path) -> float | None:
    """When a raw server logged its SIGTERM (`time.monotonic`, system-wide), or None: it never got one."""
    lines = [line for line in log.read_text(encoding="utf-8").splitlines() if line.startswith("sigterm ")]
    return float(lines[0].split()[1]) if lines else None


def test_a_pool_left_by_ctrl_c_signals_the_server_still_at_the_call_at_once_and_lets_an_idle_one_leave(
    tmp_path: Path,
) -> None:
    # Before: the server still at the call Ctrl-C stopped got SIGTERM only after the SDK's 2 s of grace from its stdin's
    # close (a server busy with a call may never leave at its stdin's end), and `tooltree agent` waited for it.
    servers, logs = [], {}
    for name in ("busy", "idle"):
        logs[name] = tmp_path / f"{name}.log"
        spec = tmp_path / f"{name}.json"
        tools = [{"name": tool, "inputSchema": {"type": "object"}} for tool in ("sleep", "echo")]
        spec.write_text(json.dumps({"pages": [tools], "log_file": str(logs[name]), "log_signals": True}), "utf-8")
        servers.append(ServerConfig(name=name, command=sys.executable, args=(str(RAW_SERVER), str(spec))))
    main = threading.main_thread().ident
    assert main is not None
    sent: list[float] = []

    def interrupt_once_taken() -> None:
        log = logs["busy"]
        wait_until(lambda: log.exists() and "called:sleep " in log.read_text(encoding="utf-8"), "the call never came")
        sent.append(time.monotonic())
        signal.pthread_kill(main, signal.SIGINT)

    helper = threading.Thread(target=interrupt_once_taken)
    with pytest.raises(KeyboardInterrupt), BackgroundPool(servers) as bg:
        bg.call("idle", "echo", {})
        helper.start()
        bg.call("busy", "sleep", {"seconds": 120})
    helper.join(timeout=30)
    signalled = logged_sigterm(logs["busy"])
    assert signalled is not None and signalled - sent[0] < PROCESS_TERMINATION_TIMEOUT
    assert logged_sigterm(logs["idle"]) is None  # it left at its stdin's end, as at any close


@pytest.mark.parametrize("interrupted", [True, False], ids=["interrupted", "closed"])
def test_close_interrupted_signals_a_server_still_at_a_call_given_up_at_once(tmp_path: Path, interrupted: bool) -> None:
    # `close(interrupted=True)`: for a caller that handled the Ctrl-C itself (`tooltree exec`'s first one stops only
    # the script). A plain close still gives the server the SDK's grace to leave at its stdin's end.
    log, spec = tmp_path / "busy.log", tmp_path / "busy.json"
    tools = [{"name": "sleep", "inputSchema": {"type": "object"}}]
    spec.write_text(json.dumps({"pages": [tools], "log_file": str(log), "log_signals": True}), encoding="utf-8")
    busy = ServerConfig(name="busy", command=sys.executable, args=(str(RAW_SERVER), str(spec)))
    bg = BackgroundPool([busy]).__enter__()
    try:
        timed_out = bg.call("busy", "sleep", {"seconds": 120}, timeout=0.5)  # given up on: the server is still at it
        assert timed_out["isError"] and "timed out" in text(timed_out)
    finally:
        closing = time.monotonic()
        bg.close(interrupted=interrupted)
    signalled = logged_sigterm(log)
    assert signalled is not None  # SIGTERM ends it either way, at once or once the grace is over
    assert (signalled - closing < PROCESS_TERMINATION_TIMEOUT) is interrupted


def test_a_ctrl_c_that_lands_just_before_the_calls_wait_is_raised_at_once(ctrl_c_raises: None) -> None:
    # interrupt_main sets Python's flag as a signal does, without waking a blocking call: as a Ctrl-C landing just
    # before the wait. Before, the KeyboardInterrupt came only when the call ended (here after 40 s).
    # `ctrl_c_raises`: in a suite run as a background job SIGINT is ignored, and interrupt_main did nothing.
    with BackgroundPool([media()], concurrency=1) as bg:
        sent: list[float] = []

        def interrupt_once_sent() -> None:
            wait_until(lambda: bg.pool.state("media") == "running", "the server never started")
            sent.append(time.monotonic())
            _thread.interrupt_main()

        helper = threading.Thread(target=interrupt_once_sent)
        helper.start()
        with pytest.raises(KeyboardInterrupt):
            bg.call("media", "slow_echo", {"text": "slow", "seconds": 40}, timeout=60)
        # Counted from the Ctrl-C: the server's start-up before it, which a loaded machine stretches, is no part of it.
        assert time.monotonic() - sent[0] < 20
        helper.join(timeout=30)


def test_arguments_that_are_not_json_are_a_type_error_naming_them_and_the_session_goes_on() -> None:
    # Before: pydantic_core.PydanticSerializationError, an exception of the SDK's no docstring names.
    with BackgroundPool([media()]) as bg:
        with pytest.raises(TypeError, match=r"^arguments: cannot be sent as JSON \(Unable to serialize unknown type"):
            bg.call("media", "slow_echo", {"text": object()})
        assert text(bg.call("media", "slow_echo", {"text": "fine", "seconds": 0})) == "fine"
        assert bg.pool.restarts("media") == 0


NOTIFYING_SERVER = """
import json, sys
TOOLS = [{"name": "change", "inputSchema": {"type": "object"}}]
def send(m):
    sys.stdout.write(json.dumps(m) + "\\n")
    sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if mid is None:
        continue
    if method == "initialize":
        caps = {"tools": {"listChanged": True}}
        info = {"name": "n", "version": "1"}
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-11-25", "capabilities": caps,
                                                       "serverInfo": info}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
    elif method == "tools/call":  # its tools changed, it says, before it answers
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "changed"}]}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
"""


def test_an_on_tools_changed_listener_that_raises_is_logged_and_the_servers_session_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: raised in the session's read stream, it ended the session: the call in flight failed as "the server
    # died during the call", the server was restarted, and soon backed off ("not restarted for 1.0 s more").
    script = tmp_path / "notifying.py"
    script.write_text(NOTIFYING_SERVER, encoding="utf-8")
    server = ServerConfig(name="n", command=sys.executable, args=(str(script),), timeout=30, protocol="legacy")
    told: list[tuple[str, str]] = []

    def listener(name: str, kind: str) -> None:
        told.append((name, kind))
        raise RuntimeError("the listener's own bug")

    with BackgroundPool([server], on_tools_changed=listener) as bg:
        for _ in range(3):
            assert text(bg.call("n", "change", {}, timeout=30)) == "changed"
        assert bg.pool.restarts("n") == 0
    assert told == [("n", "tools")] * 3
    said = [r for r in caplog.records if r.getMessage().startswith("the on_tools_changed listener raised")]
    assert len(said) == 3 and said[0].exc_info is not None


class _InterruptedWait(threading.Event):
    """The pool's "ready" event, as a Ctrl-C finds it: ``at_once`` before the pool's loop runs, else as it is up."""

    def __init__(self, at_once: bool) -> None:
        super().__init__()
        self.at_once = at_once

    def wait(self, timeout: float | None = None) -> bool:
        if not self.at_once:
            super().wait(timeout)
        raise KeyboardInterrupt


@pytest.mark.parametrize("at_once", [True, False], ids=["before_its_loop_runs", "once_it_is_up"])
def test_ctrl_c_while_the_pool_starts_leaves_no_loop_running(at_once: bool) -> None:
    # Before: the interrupt went on with the pool's loop (and its ServerPool) running in its thread for the process's
    # life; the `with` never began, so nothing closed it, and nothing warned of it.
    pool = BackgroundPool([media()])
    pool._running.ready = _InterruptedWait(at_once)
    before = set(threading.enumerate())
    with pytest.raises(KeyboardInterrupt):
        pool.__enter__()
    assert [t for t in set(threading.enumerate()) - before if t.name == "tooltree-server-pool" and t.is_alive()] == []
    with pytest.raises(PoolError, match="it has run"):
        pool.__enter__()


def _nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (10**5000, "holds a whole number of more than 4,300 digits, more than a server's JSON parser reads"),
        (-(10**4300), "holds a whole number of more than 4,300 digits"),
        (_nested(198), "nests more than 198 levels deep (the arguments' own object the first): with the request"),
        ({"k": float("nan")}, "holds nan, which JSON cannot carry (it would reach the server as null)"),
        ([float("-inf")], "holds -inf, which JSON cannot carry"),
    ],
    ids=["5000_digits", "4301_digits", "199_levels", "nan", "infinity"],
)
def test_arguments_a_server_cannot_read_are_a_value_error_naming_the_argument_and_the_session_goes_on(
    value: Any, said: str
) -> None:
    # Before: the MCP SDK's server could not parse the request (more than 4,300 digits, 200 levels) and said nothing,
    # so the call waited out its whole timeout ("the call timed out after 5 s"); NaN and infinity reached it as null.
    with BackgroundPool([replace(media(), timeout=5)]) as bg:
        with pytest.raises(ValueError) as caught:
            bg.call("media", "slow_echo", {"text": "x", "extra": value})
        assert str(caught.value).startswith(f"arguments: argument 'extra' {said}")
        assert str(caught.value).endswith("nothing was sent")
        assert text(bg.call("media", "slow_echo", {"text": "fine", "seconds": 0, "extra": _nested(197)})) == "fine"
        assert bg.pool.restarts("media") == 0
