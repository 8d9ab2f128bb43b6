"""Running independent tool calls at the same time."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def parallel(*calls: Callable[[], Any], max_workers: int = 16) -> list[Any]:
    """Run zero-argument callables concurrently and return their results in order.

    ``parallel(lambda: get_doc(id="a"), lambda: get_doc(id="b"))`` makes both calls at once; a list of them
    (``parallel([lambda: ..., lambda: ...])``) works too. The first exception raised by any call is re-raised
    after all calls finish; a KeyboardInterrupt (Ctrl-C) while it waits is raised at once.

    Raises:
        TypeError: something given is not a function to call, before any is called (before: a list was called
            and failed "'list' object is not callable"; ``parallel(get_doc(id="a"), ...)`` made its calls one
            after another, as its arguments, then failed "'ToolResult' object is not callable"); ``max_workers`` is
            not a whole number (before: "'<' not supported between instances of 'int' and 'str'").
        ValueError: ``max_workers`` is less than 1.
    """
    workers: object = max_workers
    if isinstance(workers, bool) or not isinstance(workers, int):
        raise TypeError(f"parallel: max_workers must be a whole number, got {type(workers).__name__} {workers!r:.40}")
    if workers < 1:
        raise ValueError(f"parallel: max_workers must be at least 1 (calls at once), got {workers}")
    given: tuple[Any, ...] = calls
    if len(given) == 1 and isinstance(given[0], list | tuple):
        given = tuple(given[0])
    for n, call in enumerate(given, 1):
        if not callable(call):
            raise TypeError(
                f"parallel: argument {n} is a {type(call).__name__}, not a function to call: pass each call as "
                "lambda: tool(...), e.g. parallel(lambda: get_doc(id='a'), lambda: get_doc(id='b')) (a call written "
                "without lambda: has already run, before parallel)"
            )
    if not given:
        return []
    pool = ThreadPoolExecutor(max_workers=min(max_workers, len(given)))
    interrupted = False
    try:
        futures = [pool.submit(c) for c in given]
        return [f.result() for f in futures]
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        # Stopped (Ctrl-C, the host's cancel of the script): the calls still running are not waited for, those not
        # started never start (the execution's end cancels the calls it still waits on). Before, the script waited
        # for them all, so the sandbox, which gives a script 3 s to stop, restarted its interpreter.
        pool.shutdown(wait=not interrupted, cancel_futures=interrupted)
