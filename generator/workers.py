"""Work spread over forked worker processes: rendering stubs (`generator.layout.render_many`) and comparing
their signatures (`generator.api_changes`)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

PARALLEL_THRESHOLD = 400
"""Jobs from which `forked_map` forks workers (below it, forking costs more than it saves)."""
_J = TypeVar("_J")
_R = TypeVar("_R")


def forked_map(function: Callable[[_J], _R], jobs: Sequence[_J]) -> Iterator[_R]:
    """``map(function, jobs)``, in order, in worker processes when there are at least `PARALLEL_THRESHOLD`
    jobs and more than one core. Workers are forked (cheap: the generator is already imported), and only
    from a process with a single thread, where forking is safe; otherwise it is serial. The workers end
    with the process that forked them, however it ends (`_end_with_parent`)."""
    cores = os.cpu_count() or 1
    fork_ok = "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
    if len(jobs) < PARALLEL_THRESHOLD or cores < 2 or not fork_ok:
        yield from map(function, jobs)
        return
    workers = min(cores, 8)
    alive_r, alive_w = os.pipe()
    try:
        with ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("fork"),
            initializer=_end_with_parent,
            initargs=(alive_r, alive_w),
        ) as pool:
            yield from pool.map(function, jobs, chunksize=max(16, len(jobs) // (workers * 8)))
    finally:
        os.close(alive_r)
        os.close(alive_w)


def _end_with_parent(alive_r: int, alive_w: int) -> None:
    """A worker's start: it exits once the process that forked it has ended (its write end of the pipe closed).

    A parent killed with SIGKILL (or by the kernel for want of memory) cannot shut its pool down, and its workers
    then waited for work for good, each holding its copy of what the parent had open: the tree's lock among them,
    so every later run of `generate-tree`, `exec` or `serve` on that tree waited forever, without a word."""
    os.close(alive_w)

    def watch() -> None:
        with contextlib.suppress(OSError):
            while os.read(alive_r, 1):
                pass
        os._exit(1)

    threading.Thread(target=watch, name="end-with-parent", daemon=True).start()
