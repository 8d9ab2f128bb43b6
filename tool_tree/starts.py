"""How many MCP servers may be starting at once: `StartGate`, and the ``pool:`` section that sets it.

A small Python MCP server spends about a CPU-second importing its SDK before it answers; started all
at once, a hundred of them share the cores so thinly that every one misses its timeout. Discovery
(``generate-tree``) and the runtime `ServerPool` therefore start servers through a gate: at most
``jobs`` are starting at a time (default: the cores this process may use), the others wait their
turn in order, and a server's timeout runs from its own start, not from when it was queued. A server
holds its place from spawning its process until it has listed its tools (or failed); stopping it
afterwards does not count. A server that hangs while starting holds its place for its whole
timeout, so the ones behind it start later (they wait; they do not time out).

One gate may be shared by pools running on different event loops and threads (``ServerPool(start_gate=...)``):
`tooltree serve` gives all its client sessions one, so ``start_jobs`` bounds the servers starting in the whole
process, not in each session (12 sessions over HTTP started 24 servers at once on 2 cores).

The ``pool:`` section of tooltree.yaml is owned here::

    pool:
      start_jobs: 4     # servers starting at once (generate-tree --jobs overrides it)
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import deque
from collections.abc import Callable

from tool_tree.config import Config, Setting

SECTION = "pool"
MAX_START_JOBS = 1024
"""The most servers a config may have starting at once (``pool.start_jobs``): each is a process importing its SDK,
and past the cores they only share them more thinly (as ``servers.NAME.concurrency`` is bounded)."""
SETTINGS: dict[str, Setting] = {
    "start_jobs": Setting(
        int,
        "servers starting at once; default: the number of cores",
        check=lambda v: None if v <= MAX_START_JOBS else f"at most {MAX_START_JOBS:,}, got {v:,}",
    ),
}
"""The ``pool:`` section of tooltree.yaml."""


def default_start_jobs() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def start_jobs(config: Config | None, override: int | None = None) -> int:
    """The start limit: ``override``, else the config's ``pool.start_jobs``, else `default_start_jobs`.

    Raises:
        ConfigError: the ``pool:`` section has an unknown key or a value that is not a positive integer.
        ValueError: ``override`` is less than 1.
    """
    if override is not None:
        if override < 1:
            raise ValueError(f"the start limit must be at least 1, got {override}")
        return override
    settings = config.section(SECTION).read(SETTINGS) if config is not None else {}
    jobs: int = settings.get("start_jobs") or default_start_jobs()
    return jobs


class StartSlot:
    """One server's place in the gate; `release` gives it back (only the first call counts)."""

    def __init__(self, release: Callable[[], None]) -> None:
        self._release: Callable[[], None] | None = release

    def release(self) -> None:
        if self._release is not None:
            release, self._release = self._release, None
            release()


class StartGate:
    """At most ``jobs`` servers starting at once; the rest wait in the order they asked.

    ``queued`` and ``starting`` count the servers waiting for a place and holding one. It may be shared by
    coroutines on several asyncio event loops in different threads (the pools of `tooltree serve`'s sessions).

    Raises (on creation):
        ValueError: ``jobs`` is less than 1.
    """

    def __init__(self, jobs: int) -> None:
        if jobs < 1:
            raise ValueError(f"the start limit must be at least 1, got {jobs}")
        self.jobs = jobs
        self.queued = 0
        self.starting = 0
        self._lock = threading.Lock()
        self._waiting: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    async def acquire(self) -> StartSlot:
        """Wait for a place (no deadline runs meanwhile) and take it."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self.starting < self.jobs and not self._waiting:
                self.starting += 1
                return StartSlot(self._release)
            waiter = (loop, loop.create_future())
            self._waiting.append(waiter)
            self.queued += 1
        try:
            await waiter[1]
        except BaseException:
            with self._lock:
                handed = waiter not in self._waiting
                if not handed:
                    self._waiting.remove(waiter)
                    self.queued -= 1
            if handed:  # the place was given to it as it was cancelled: pass it on
                self._release()
            raise
        return StartSlot(self._release)

    def _release(self) -> None:
        """Hand the place to the first waiter whose loop still runs (it counts as starting from now), else free it."""
        with self._lock:
            while self._waiting:
                loop, future = self._waiting.popleft()
                self.queued -= 1
                try:
                    loop.call_soon_threadsafe(_wake, future)
                except RuntimeError:  # its loop has closed: no one waits there any more
                    continue
                return
            self.starting -= 1


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():  # a cancelled waiter passes the place on itself
        future.set_result(None)
