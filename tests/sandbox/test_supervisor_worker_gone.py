"""An execution that arrives while the supervisor replaces a worker that died between executions runs on the new one.

The worker can die when no execution runs (a thread of the last script ended the process, the kernel's OOM killer);
its pump thread then starts another, which under a full pids limit waits up to `SPAWN_WAIT` seconds (and a kill
sweep) for room. Before, an execution arriving meanwhile was handed to the dead worker: its script went nowhere, it
never finished (its timeout killed a process already gone), every later one was "busy", and the host destroyed the
session once it waited the timeout and a grace. The supervisor here is in-process with a real worker process; the
wait for room is stood in for by holding the new worker's start until the execution has arrived.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox._supervisor.supervisor import Supervisor
from sandbox._supervisor.wire import FrameDecoder

REPO = Path(__file__).resolve().parents[2]


class _Ready:
    """The dead worker's ``ready``: says when the execution's start waits on it."""

    def __init__(self, asked: threading.Event) -> None:
        self._asked = asked

    def wait(self, timeout: float | None = None) -> bool:
        self._asked.set()
        return True

    def is_set(self) -> bool:
        return True

    def set(self) -> None:
        pass


def _reply(fd: int, timeout: float) -> dict[str, Any] | None:
    decoder = FrameDecoder()
    while select.select([fd], [], [], timeout)[0]:
        for message in decoder.feed(os.read(fd, 1 << 20)):
            if "id" in message:
                return dict(message)
    return None


@pytest.fixture
def supervisor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Supervisor, int]]:
    """An in-process supervisor with a real worker process (started by the test), and the fd its answers come on."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the worker is `python -m sandbox._supervisor.worker`
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    sup = Supervisor(workspace=str(tmp_path), tree=None, kill_all=False, channel_in=read_in, channel_out=write_out)
    try:
        yield sup, read_out
    finally:
        with sup.lock:
            worker = sup.worker
            if worker is not None:
                worker.dead = True  # not replaced once killed
        if worker is not None:
            worker.kill()
            worker.proc.wait(30)
        for fd in (read_in, write_in, read_out, write_out):
            os.close(fd)


def test_an_execution_sent_while_a_dead_worker_is_replaced_runs_on_the_new_worker(
    supervisor: tuple[Supervisor, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    sup, read_out = supervisor
    sup.spawn_worker()
    old = sup.worker
    assert old is not None and old.ready.wait(30)
    asked, respawning = threading.Event(), threading.Event()
    start_once = sup._spawn_worker_once

    def start_when_asked() -> None:  # as under a full pids limit: the new worker starts only later
        respawning.set()
        assert asked.wait(30)
        start_once()

    monkeypatch.setattr(sup, "_spawn_worker_once", start_when_asked)
    monkeypatch.setattr(old, "ready", _Ready(asked))
    old.kill()  # between executions
    assert respawning.wait(30)
    request = {"id": 1, "method": "execute", "params": {"code": "print(7)", "timeout": 3.0}}
    threading.Thread(target=sup.dispatch, args=(request,), daemon=True).start()
    reply = _reply(read_out, 20)
    assert reply is not None, "the execution never ended"
    assert reply["result"]["error"] is None and reply["result"]["stdout"]["head"] == "7\n"
    assert reply["result"]["state_reset"] is True  # before: false, the variables gone without a word
    assert sup.worker is not old


LATER_CLOSE = """\
import os, sys, threading, time
fd = int(sys.orig_argv[sys.orig_argv.index('--ctl-in') + 1])
main = threading.main_thread().ident

def later():
    frame = sys._current_frames()[main]
    while not (frame.f_code.co_name == 'wait' and frame.f_back and frame.f_back.f_code.co_name == 'get'):
        time.sleep(0.005)  # until the interpreter waits for the next execution: this one has ended
        frame = sys._current_frames()[main]
    os.close(fd)
    search_tools('x')  # answered by the supervisor at once ("no execution"): the interpreter reads its way in

threading.Thread(target=later, daemon=True).start()
print(1)
"""


def test_an_interpreter_that_finds_its_channel_closed_between_executions_has_the_next_one_say_so(
    supervisor: tuple[Supervisor, int],
) -> None:
    # Before: the worker found its way in closed only after the script's result (its reader was not waiting on it
    # when the script closed it, or was woken later), ended between executions, and the next script ran on a new
    # interpreter without a word: its variables gone, no error, state_reset false.
    from sandbox._supervisor.processes import CHANNEL_CLOSED

    sup, read_out = supervisor
    sup.spawn_worker()
    old = sup.worker
    assert old is not None and old.ready.wait(30)
    first = {"id": 1, "method": "execute", "params": {"code": LATER_CLOSE, "timeout": 10.0}}
    threading.Thread(target=sup.dispatch, args=(first,), daemon=True).start()
    reply = _reply(read_out, 20)
    assert reply is not None and reply["result"]["error"] is None, reply
    assert old.proc.wait(30) == 0  # it ended between executions
    second = {"id": 2, "method": "execute", "params": {"code": "print(2)", "timeout": 10.0}}
    threading.Thread(target=sup.dispatch, args=(second,), daemon=True).start()
    reply = _reply(read_out, 20)
    assert reply is not None, "the execution never ended"
    assert (reply["result"]["error"], reply["result"]["state_reset"]) == (CHANNEL_CLOSED, True)
    third = {"id": 3, "method": "execute", "params": {"code": "print(3)", "timeout": 10.0}}
    threading.Thread(target=sup.dispatch, args=(third,), daemon=True).start()
    reply = _reply(read_out, 20)
    assert reply is not None and reply["result"]["error"] is None and reply["result"]["stdout"]["head"] == "3\n"
    assert reply["result"]["state_reset"] is False  # said once
