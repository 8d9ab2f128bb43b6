"""`run_to_the_end`: `asyncio.run` for a loop that other threads hand work to, ended so that no task is left pending.

`BackgroundPool`'s loop takes calls from other threads (``call_soon_threadsafe``, ``run_coroutine_threadsafe``:
a sandbox session's tool calls). `asyncio.run` cancels the tasks there are when its coroutine returns, then
awaits the shutdown of async generators and of the default executor, then closes the loop: a task another
thread started meanwhile (a script's call arriving as its session closed) was destroyed pending, its coroutine
never run ("Task was destroyed but it is pending!", "coroutine … was never awaited", which failed an unrelated
test's setup). Here, after the same shutdown, the tasks started meanwhile are cancelled and run to their end,
until none is left; once the loop no longer runs, work handed to it is never started.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn, TypeVar

T = TypeVar("T")

WORKERS_WAIT = 5.0
"""Most seconds to wait, after the loop closed, for its `anyio.to_thread` worker threads to leave."""

ROUNDS = 100
"""Most rounds of cancelling what was started meanwhile (each round runs the loop only until the tasks it
cancelled have ended, so a thread that keeps handing work cannot hold the end for ever)."""


def run_to_the_end(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` on a new event loop in this thread, then end every task left (cancelled, each run to its end)
    before the loop closes.

    Raises:
        BaseException: what ``main`` raised.
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(main)
    finally:
        try:
            _end_tasks(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
            _end_tasks(loop)
        finally:
            asyncio.set_event_loop(None)
            loop.close()
            _join_workers(loop)


def _join_workers(loop: asyncio.AbstractEventLoop) -> None:
    """Wait (at most `WORKERS_WAIT` seconds in all) for the loop's `anyio.to_thread` worker threads to leave.

    AnyIO tells them to stop when the task that started them ends, and each leaves a moment later: before, one could
    outlive the `with BackgroundPool(...)` block that ended the loop (an idle "AnyIO worker thread" seen after it).
    They are known by the loop they serve (their ``loop`` attribute).
    """
    deadline = time.monotonic() + WORKERS_WAIT
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and getattr(thread, "loop", None) is loop:
            thread.join(max(0.0, deadline - time.monotonic()))


def _end_tasks(loop: asyncio.AbstractEventLoop) -> None:
    for _ in range(ROUNDS):
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        if not pending:
            return
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


def wait_handed(future: concurrent.futures.Future[T], gone: Callable[[], bool], refuse: Callable[[], NoReturn]) -> T:
    """``future.result()`` of work handed to such a loop from another thread, waited for in half-second slices.

    A Ctrl-C that lands just before a wait sets Python's flag without waking it: waited in one piece, it came only
    when the work ended. And a loop that ends after taking the work but before running it drops it: once ``gone()``
    (the loop closed, its thread ended) and the work is not done, it is cancelled and ``refuse()`` raises (before:
    a wait for ever).
    """
    while True:
        try:
            return future.result(timeout=0.5)
        except concurrent.futures.TimeoutError:
            ended = gone()  # before looking at the future: nothing changes it once the loop is gone
            if future.done():  # it ended as the wait did, or the work itself timed out: its own outcome
                return future.result()
            if ended:
                future.cancel()
                refuse()
