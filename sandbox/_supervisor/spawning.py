"""The supervisor's workers started, and the sandbox's processes killed and reaped (`_Spawning`, which
`supervisor.Supervisor` takes them from).

A worker starts with its pump thread; under the sandbox's pids limit its start is tried again until there is room.
A timeout, a cancel not heeded or a reset kills the worker and, in a container, every other process of the sandbox
user, and waits until they are gone. As the container's init the supervisor reaps orphaned processes the way an
init does.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from typing import TYPE_CHECKING

from .files import Workspace
from .processes import Worker, oom_kill_count

REAP_INTERVAL = 1.0
SPAWN_WAIT = 5.0
"""Seconds a worker's start waits for room under the sandbox's pids limit (or ``nproc`` ulimit, which counts the
supervisor's threads too): the processes a kill just ended still hold their places for a moment."""
SWEEP_WAIT = 5.0
"""Seconds a kill of every process of the sandbox user waits for them to be gone and collected. Each holds its place
under the sandbox's process limit until then: an orphan's zombie until this init reaps it (the reaper's round comes
up to `REAP_INTERVAL` later), and under gVisor the killed processes end one after another over half a second."""


class _Spawning:
    """`Supervisor`'s workers started and processes killed; the state they use is `Supervisor`'s (set in its
    ``__init__``)."""

    workspace: Workspace
    kill_all: bool
    lock: threading.RLock
    replaced: threading.Condition
    sweeping: threading.Lock
    worker: Worker | None
    generation: int
    spawn_oom_kills: int
    broken: str | None
    unreaped: set[int]
    worker_argv: list[str]
    worker_env: dict[str, str]

    if TYPE_CHECKING:  # `Supervisor`'s

        def pump(self, worker: Worker) -> None: ...

    def reap_orphans(self) -> None:
        """As init: collect the exit status of orphaned processes (never of a worker), every `REAP_INTERVAL` s."""
        while True:
            time.sleep(REAP_INTERVAL)
            self.reap_zombies()

    def reap_zombies(self) -> int:
        """Collect the exit status of this process's zombie children but the workers; how many other processes are
        left (running, dying, or zombies of another parent)."""
        with self.lock:
            keep = set(self.unreaped)
        left = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in keep or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            if len(fields) > 1 and fields[0] == "Z" and fields[1] == str(os.getpid()):
                with contextlib.suppress(ChildProcessError):  # the reaper thread was first
                    os.waitpid(int(entry), os.WNOHANG)
            else:
                left += 1
        return left

    def spawn_worker(self) -> None:
        """Start a worker and its pump thread; when none can start, set ``broken`` (never raises).

        Under the sandbox's pids limit a script may hold every place: a fork or a thread start then fails
        (EAGAIN) until the processes a kill ended are gone, so it is tried again, reaping orphans between, for
        `SPAWN_WAIT` seconds; then, in a container, after a kill of every process of the sandbox user (the
        interpreter state is lost anyway), once more.
        """
        swept = False
        deadline = time.monotonic() + SPAWN_WAIT
        pause = 0.002
        while True:
            try:
                self._spawn_worker_once()
                return
            except (OSError, RuntimeError) as e:  # a fork or a thread refused
                problem = e
            self.reap_zombies()
            if time.monotonic() >= deadline:
                if swept or not self.kill_all:
                    break
                swept = True
                deadline = time.monotonic() + SPAWN_WAIT
                with self.sweeping:
                    self._sweep()
            time.sleep(pause)
            pause = min(pause * 2, 0.1)
        self.break_session(f"the Python worker cannot start: {problem} (the sandbox's processes fill its pids limit)")

    def break_session(self, why: str) -> None:
        with self.lock:
            self.broken = why
            self.replaced.notify_all()

    def _spawn_worker_once(self) -> None:
        # The old worker's death (``pump`` → ``on_worker_exit`` → ``finish``) can respawn while the
        # thread that killed it has yet to send kill(-1): that signal would kill the new worker
        # before it is ready ("failed to start", and a broken session). Wait for the sweep to end.
        with self.sweeping, self.lock:
            self.spawn_oom_kills = oom_kill_count()
            worker = Worker(self.generation + 1, self.worker_argv, self.workspace.root, self.worker_env)
            self.unreaped.add(worker.proc.pid)
            try:  # under the lock: the pump finds ``self.worker`` set
                threading.Thread(
                    target=self.pump, args=(worker,), name=f"worker-{worker.generation}", daemon=True
                ).start()
            except RuntimeError:
                worker.abandon()
                self.unreaped.discard(worker.proc.pid)
                raise
            self.generation = worker.generation
            self.worker = worker
            self.replaced.notify_all()

    def kill_everything(self, worker: Worker) -> None:
        """Kill the worker and, in a container, every other process of the sandbox user; return once they are gone.

        As pid 1 in the container, kill(-1) reaches every process of the sandbox user, including any that left the
        worker's session. Before, the reset (or the timeout's result) came back while the killed processes still held
        their places under the process limit, as zombies for up to `REAP_INTERVAL`: 81 of 128 under gVisor, and the
        next script's forks failed with EAGAIN. So the sweep reaps them at once and waits (`SWEEP_WAIT` at most) until
        none is left but the workers (whose status their pump collects), killing again what came to life meanwhile (a
        fork that raced the first kill). No worker starts until then (``sweeping``).
        """
        with self.sweeping:
            worker.kill()
            if self.kill_all:
                self._sweep()

    def _sweep(self) -> None:
        """kill(-1) and reap until no process of the sandbox user is left but the workers (`SWEEP_WAIT` at most);
        the caller holds ``sweeping``."""
        deadline = time.monotonic() + SWEEP_WAIT
        pause = 0.001
        while True:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(-1, signal.SIGKILL)
            if not self.reap_zombies() or time.monotonic() >= deadline:
                return
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
