"""The check of a function a caller gives tooltree to be told of something as it happens (a listener: ``on_event``,
``on_output``, ``on_tools_changed``, ``progress``, …): tooltree calls it and never awaits what it returns."""

from __future__ import annotations

import functools
import inspect


def refuse_async(listener: object, name: str) -> None:
    """Refuse an ``async def`` function as the listener ``name``: called, it returns a coroutine that nobody awaits,
    so its body never runs (before: taken, then a RuntimeWarning "coroutine … was never awaited" at each call, and
    the caller was told nothing).

    Raises:
        TypeError: ``listener`` is an ``async def`` function (or a `functools.partial` of one).
    """
    if inspect.iscoroutinefunction(listener):
        function = listener
        while isinstance(function, functools.partial):
            function = function.func
        what = getattr(function, "__name__", None) or type(function).__name__
        raise TypeError(
            f"{name}: expected a plain function, got the async function {what!s:.60}: tooltree calls it without "
            "awaiting it, so its body would never run; use a `def` (it may hand work to your event loop with "
            "asyncio.run_coroutine_threadsafe)"
        )
