"""Work spread over forked worker processes: rendering stubs (`generator.layout.render_many`) and comparing
their signatures (`generator.api_changes`)."""

from __future__ import annotations

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
    from a process with a single thread, where forking is safe; otherwise it is serial."""
    cores = os.cpu_count() or 1
    fork_ok = "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
    if len(jobs) < PARALLEL_THRESHOLD or cores < 2 or not fork_ok:
        yield from map(function, jobs)
        return
    workers = min(cores, 8)
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
        yield from pool.map(function, jobs, chunksize=max(16, len(jobs) // (workers * 8)))
