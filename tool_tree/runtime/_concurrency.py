"""Running independent tool calls at the same time."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def parallel(*calls: Callable[[], Any], max_workers: int = 16) -> list[Any]:
    """Run zero-argument callables concurrently and return their results in order.

    ``parallel(lambda: get_doc(id="a"), lambda: get_doc(id="b"))`` makes both calls at once.
    The first exception raised by any call is re-raised after all calls finish.
    """
    if not calls:
        return []
    with ThreadPoolExecutor(max_workers=min(max_workers, len(calls))) as pool:
        futures = [pool.submit(c) for c in calls]
        return [f.result() for f in futures]
