"""One `Sandbox` started and closed from several threads at once: one container, and a close that returns only once
it is gone.

Run against `PipeSupervisor` connections (the supervisor's side played by the test) whose launch waits on a gate,
so the interleaving is forced rather than hoped for.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from sandbox import Sandbox, SessionError
from sandbox.bridge import FunctionBridge
from sandbox.results import ExecutionResult
from tests.sandbox.test_api_sandbox_args import no_tools
from tests.security.test_bridge_input import CONFIG, EMPTY_RESULT, PipeBackend, PipeSupervisor
from tests.support import in_thread


class Ended(PipeSupervisor):
    """A pipe supervisor that says when the host closed or killed it."""

    def __init__(self) -> None:
        super().__init__()
        self.ended = threading.Event()

    def close(self, timeout: float = 5.0) -> None:
        super().close(timeout)
        self.ended.set()

    def kill(self) -> None:
        super().kill()
        self.ended.set()


class GatedLaunches(PipeBackend):
    """A fresh pipe supervisor per launch; each launch waits until ``release`` is set."""

    def __init__(self) -> None:  # no peer until the first launch
        self.config = CONFIG
        self.peers: list[Ended] = []
        self.launching, self.release = threading.Event(), threading.Event()
        self._lock = threading.Lock()

    def launch(self, session_id: str) -> Ended:
        with self._lock:
            peer = Ended()
            self.peers.append(peer)
        self.launching.set()
        assert self.release.wait(30)
        self.peer = peer
        return super().launch(session_id)  # type: ignore[return-value]


def test_two_threads_starting_one_session_launch_one_container() -> None:
    # Before: each start launched a container; the session kept the second, and the first ran on after close.
    backend = GatedLaunches()
    sb = Sandbox(backend, tools=FunctionBridge(no_tools))
    first_done, first_errors = in_thread(sb.start)
    try:
        assert backend.launching.wait(10)
        second_done, second_errors = in_thread(sb.start)
        assert not second_done.wait(0.5)  # it waits for the first start instead of launching its own
    finally:
        backend.release.set()
    assert first_done.wait(30) and second_done.wait(30)
    assert first_errors == [] and second_errors == []
    assert len(backend.peers) == 1
    sb.close()
    assert all(peer.ended.is_set() for peer in backend.peers)


def test_a_close_during_a_start_returns_only_once_the_container_is_gone() -> None:
    # Before: close found no container yet and returned at once, the container still starting (seen by a leak check
    # right after); a kill between attach's check and its taking the channel left the container running for good.
    backend = GatedLaunches()
    sb = Sandbox(backend, tools=FunctionBridge(no_tools))
    start_done, start_errors = in_thread(sb.start)
    try:
        assert backend.launching.wait(10)
        close_done, close_errors = in_thread(sb.close)
        assert not close_done.wait(0.5), "close returned while the container was still starting"
    finally:
        backend.release.set()
    assert close_done.wait(30) and start_done.wait(30)
    assert close_errors == [] and start_errors == []
    assert [peer.ended.is_set() for peer in backend.peers] == [True]
    with pytest.raises(SessionError, match="closed"):
        sb.execute("print(1)")


def test_a_second_close_returns_once_the_first_is_done() -> None:
    # Before: the second close saw the session marked closed and returned while the first still closed it.
    class SlowClose(Ended):
        def __init__(self) -> None:
            super().__init__()
            self.closing, self.release = threading.Event(), threading.Event()

        def close(self, timeout: float = 5.0) -> None:
            self.closing.set()
            assert self.release.wait(30)
            super().close(timeout)

    peer = SlowClose()
    sb = Sandbox(PipeBackend(peer), tools=FunctionBridge(no_tools)).start()
    first_done, _ = in_thread(sb.close)
    try:
        assert peer.closing.wait(10)
        second_done, _ = in_thread(sb.close)
        assert not second_done.wait(0.5), "the second close returned with the container still running"
    finally:
        peer.release.set()
    assert first_done.wait(30) and second_done.wait(30)
    assert peer.ended.is_set()


def test_a_cancelled_aexecute_whose_script_just_ended_leaves_the_next_callers_script_alone() -> None:
    # Before: the cancel (run in the loop's executor) came after the script had ended and another caller's had
    # been sent: it stopped that one. Here the executor holds the cancel until the next script is sent.
    peer = PipeSupervisor()
    sb = Sandbox(PipeBackend(peer), tools=FunctionBridge(no_tools)).start()
    hold, next_sent, cancel_done = threading.Event(), threading.Event(), threading.Event()

    class Executor(ThreadPoolExecutor):
        def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
            if not hold.is_set():
                return super().submit(fn, *args, **kwargs)

            def held() -> Any:  # the cancel of the cancelled task
                assert next_sent.wait(30)
                try:
                    return fn(*args, **kwargs)
                finally:
                    cancel_done.set()

            return super().submit(held)

    results: list[ExecutionResult] = []
    second = threading.Thread(target=lambda: results.append(sb.execute("print('second')")), daemon=True)

    async def main() -> None:
        asyncio.get_running_loop().set_default_executor(Executor(4))
        task = asyncio.create_task(sb.aexecute("print('first')"))
        first = await asyncio.to_thread(peer.read)
        assert first["params"]["code"] == "print('first')"
        second.start()  # waits for its turn
        hold.set()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        peer.send({"id": first["id"], "result": EMPTY_RESULT})  # the first script ended as its task was cancelled
        sent = peer.read()
        assert sent["params"]["code"] == "print('second')"
        next_sent.set()
        if not cancel_done.wait(10):
            sb.kill()  # ends the cancel waiting for its answer, so the loop can end
            raise AssertionError("the first task's cancel was sent while the second caller's script ran")
        peer.send({"id": sent["id"], "result": EMPTY_RESULT})

    try:
        asyncio.run(main())
        second.join(30)
        assert [r.cancelled for r in results] == [False]
    finally:
        sb.kill()
