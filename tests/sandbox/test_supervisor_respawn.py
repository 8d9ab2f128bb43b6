"""The supervisor never starts a worker while a kill sweep is under way.

A runaway's timeout kills the worker and then, in a container, every process of the sandbox user
(kill(-1)). The worker's death alone makes its pump thread respawn a worker; when that happened
between the two kills, kill(-1) killed the fresh worker before it was ready and the session broke
("the Python worker failed to start (exit status -9)", seen once after a fork bomb). Here the
sweep is held between its two kills, and the respawn must wait for it. Nothing is really killed:
``os.kill`` and the worker are stand-ins.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from sandbox._supervisor import spawning
from sandbox._supervisor.supervisor import Supervisor


class FakeWorker:
    def __init__(self, generation: int, *_: Any) -> None:
        self.generation = generation
        self.proc = type("Proc", (), {"pid": 100_000 + generation})()
        self.killed = threading.Event()

    def kill(self) -> None:
        self.killed.set()


def test_a_worker_is_not_spawned_between_the_kill_of_the_worker_and_the_kill_of_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    try:
        sup = Supervisor(workspace=str(tmp_path), tree=None, kill_all=True, channel_in=read_in, channel_out=write_out)
        monkeypatch.setattr(spawning, "Worker", FakeWorker)  # where `spawn_worker` reads it
        monkeypatch.setattr(sup, "pump", lambda worker: None)
        monkeypatch.setattr(sup, "reap_zombies", lambda: 0)  # the sweep's wait: nothing it killed is left
        events: list[str] = []
        in_sweep = threading.Event()
        let_sweep_end = threading.Event()

        def fake_kill(pid: int, sig: int) -> None:
            assert pid == -1  # the sweep's kill of everything; nothing else may signal here
            events.append("kill(-1)")

        monkeypatch.setattr(spawning.os, "kill", fake_kill)
        sup.spawn_worker()
        old = sup.worker
        assert isinstance(old, FakeWorker)

        real_kill = old.kill

        def slow_kill() -> None:  # the sweep is descheduled right after the worker's own kill
            real_kill()
            events.append("worker killed")
            in_sweep.set()
            assert let_sweep_end.wait(10)

        old.kill = slow_kill  # type: ignore[method-assign]
        sweep = threading.Thread(target=sup.kill_everything, args=(old,))
        sweep.start()
        assert in_sweep.wait(10)

        def respawn() -> None:  # what the pump thread does once it sees the worker gone
            sup.spawn_worker()
            events.append("spawned")

        respawner = threading.Thread(target=respawn)
        respawner.start()
        respawner.join(0.3)  # bounded: it must still be waiting for the sweep
        assert respawner.is_alive() and events == ["worker killed"]
        let_sweep_end.set()
        sweep.join(10)
        respawner.join(10)
        assert events == ["worker killed", "kill(-1)", "spawned"]
        assert sup.worker is not old and sup.worker.generation == old.generation + 1  # type: ignore[union-attr]
    finally:
        for fd in (read_in, write_in, read_out, write_out):
            os.close(fd)
