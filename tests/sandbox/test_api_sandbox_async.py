"""`Sandbox.aexecute` cancelled by its caller (``asyncio.wait_for``): the script is cancelled in the sandbox too."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from sandbox import Sandbox
from sandbox.bridge import FunctionBridge
from tests.sandbox.test_api_sandbox_args import no_tools
from tests.security.test_bridge_input import EMPTY_RESULT, PipeBackend, PipeSupervisor


def test_cancelling_an_awaited_execution_cancels_the_script_in_the_sandbox() -> None:
    # Before: only the awaiting task was cancelled; the worker thread went on waiting for the script, which ran to
    # its timeout holding the session (the next execution waited 14 s behind one cancelled after 1 s).
    peer = PipeSupervisor()
    sb = Sandbox(PipeBackend(peer), tools=FunctionBridge(no_tools))
    sb.start()
    frames: list[dict[str, Any]] = []
    execute_seen, cancel_seen = threading.Event(), threading.Event()

    def supervisor() -> None:
        execute = peer.read()
        frames.append(execute)
        execute_seen.set()
        cancel = peer.read()  # the host's next frame
        frames.append(cancel)
        cancel_seen.set()
        peer.send({"id": cancel["id"], "result": {"cancelled": True}})
        peer.send({"id": execute["id"], "result": {**EMPTY_RESULT, "cancelled": True}})

    player = threading.Thread(target=supervisor, daemon=True)
    player.start()

    async def caller() -> None:
        task = asyncio.create_task(sb.aexecute("import time; time.sleep(60)"))
        assert await asyncio.to_thread(execute_seen.wait, 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(caller())
        assert cancel_seen.wait(30), "no cancel reached the sandbox"
        assert [f["method"] for f in frames] == ["execute", "cancel"]
        player.join(30)
    finally:
        sb.kill()


def test_cancelling_an_execution_still_waiting_for_its_turn_sends_nothing_and_spares_the_running_one() -> None:
    # Before: cancelling it cancelled whichever script was running (another caller's), and its own script was still
    # sent once that one ended.
    peer = PipeSupervisor()
    sb = Sandbox(PipeBackend(peer), tools=FunctionBridge(no_tools))
    sb.start()
    first_seen, second_cancelled = threading.Event(), threading.Event()
    frames: list[dict[str, Any]] = []

    def supervisor() -> None:
        first = peer.read()
        frames.append(first)
        first_seen.set()
        assert second_cancelled.wait(30)
        peer.send({"id": first["id"], "result": {**EMPTY_RESULT, "stdout": {"head": "first\n", "truncated": False}}})
        frames.append(peer.read())  # the next frame the host sends
        peer.send(
            {"id": frames[-1]["id"], "result": {**EMPTY_RESULT, "stdout": {"head": "third\n", "truncated": False}}}
        )

    player = threading.Thread(target=supervisor, daemon=True)
    player.start()

    async def caller() -> tuple[str, str]:
        first = asyncio.create_task(sb.aexecute("print('first')"))
        assert await asyncio.to_thread(first_seen.wait, 30)
        second = asyncio.create_task(sb.aexecute("print('second')"))  # waits for the first to end
        await asyncio.sleep(0)  # its worker thread is handed the call
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
        second_cancelled.set()
        third = await sb.aexecute("print('third')")
        return (await first).stdout, third.stdout

    try:
        assert asyncio.run(caller()) == ("first\n", "third\n")
        player.join(30)
        assert [(f["method"], f["params"]["code"]) for f in frames] == [
            ("execute", "print('first')"),
            ("execute", "print('third')"),
        ]
    finally:
        sb.kill()
