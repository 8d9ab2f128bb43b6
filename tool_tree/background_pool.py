"""`BackgroundPool`: a `ServerPool` on its own event loop in a background thread, for synchronous callers.

Documented as ``from tool_tree.pool import BackgroundPool``; its errors and settings are the pool's.

A running pool dropped without being closed (no ``with``, no `BackgroundPool.close`) warns (`ResourceWarning`, as an
unclosed file does) when it is garbage-collected, and its servers are stopped then; at interpreter exit it warns
likewise (its servers end with the process, their stdin closing). Its thread holds no reference to it, so that a
pool dropped can be collected.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
import threading
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Literal, NoReturn

from tool_tree.config import Config, ServerConfig
from tool_tree.held_values import HeldValues, checked_within
from tool_tree.listeners import refuse_async
from tool_tree.pool import (
    DEFAULT_CONCURRENCY,
    ChangeListener,
    PoolError,
    ProgressListener,
    ServerPool,
    checked_gate,
    checked_listener,
)
from tool_tree.pool_errors import _closed_during_call
from tool_tree.pool_settings import _check_call, _pool_settings
from tool_tree.run_loop import run_to_the_end, wait_handed
from tool_tree.starts import StartGate


class _Loop:
    """What the pool's thread runs and shares with the pool (never the `BackgroundPool` itself, so that one dropped
    unclosed is collected, its finaliser stopping this)."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pool: ServerPool | None = None
        self.stop: asyncio.Event | None = None
        self.error: BaseException | None = None
        self.ended = False
        """`end` was called: a loop not yet running when it was ends as soon as it runs."""
        self.interrupted = False
        """The pool was left by an interrupt (Ctrl-C): its servers still at a call are signalled at once."""

    def run(self, make: Callable[[], ServerPool]) -> None:
        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            self.stop = asyncio.Event()
            if self.ended:  # before the two above were set, so it could not set ``stop``
                return
            try:
                async with make() as pool:
                    self.pool = pool
                    self.ready.set()
                    await self.stop.wait()
                    pool._interrupted = self.interrupted
            finally:
                self.pool = None

        try:
            run_to_the_end(main())  # calls handed to the loop as it ends are ended too, not destroyed pending
        except BaseException as e:
            self.error = e
        finally:
            self.ready.set()

    def end(self, interrupted: bool = False) -> None:
        """Tell the loop to stop the servers and end (from any thread; a no-op once it has ended); ``interrupted``: a
        Ctrl-C stopped the pool's user."""
        self.interrupted = interrupted
        self.ended = True
        if self.loop is not None and self.stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed already
                self.loop.call_soon_threadsafe(self.stop.set)


def _unclosed(running: _Loop, pid: int, servers: str) -> None:
    """A running `BackgroundPool` was collected (or the interpreter exits) without being closed."""
    if pid != os.getpid():  # a fork's copy: the pool is its parent's
        return
    running.end()  # first: a warning made an error (``-W error``) must not leave the servers running
    warnings.warn(
        f"unclosed BackgroundPool (servers {servers}) dropped while running: its servers are stopped now; use it as "
        "`with BackgroundPool(...) as pool:`, or call pool.close()",
        ResourceWarning,
        stacklevel=3,  # the code that dropped it, when that was the last reference
    )


class BackgroundPool:
    """A `ServerPool` running on its own event loop in a background thread, for synchronous callers.

    ``with BackgroundPool(servers) as bg:`` then ``bg.call(server, tool, args)`` from any thread,
    or hand ``bg.loop`` and ``bg.pool`` to code that schedules coroutines itself. ``servers``,
    ``concurrency``, ``start_jobs``, ``source``, ``on_tools_changed``, ``held_within`` and ``start_gate`` are as for
    `ServerPool`
    (checked here; the listener is called on the pool's thread, and told which list changed when it takes a
    ``kind``). A pool runs once:
    ``loop``, ``pool`` and ``call`` work only inside its ``with`` block, in the process that entered it (a
    forked child has no copy of its thread: make a new pool there), and entering it a second time is an
    error (make a new one). On the pool's own loop, ``await bg.pool.call(...)`` rather than ``bg.call``. `close`
    does what leaving the ``with`` does; one entered and dropped without either warns (`ResourceWarning`) when
    collected, and its servers are stopped then.

    Raises (on creation):
        TypeError, ValueError: a wrong argument, named.
        ConfigError: the Config's ``pool:`` section is invalid.

    Raises (on enter):
        PoolError: the pool was entered before, or its loop did not start.
    """

    def __init__(
        self,
        servers: Sequence[ServerConfig] | Config,
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        start_jobs: int | None = None,
        source: str | None = None,
        on_tools_changed: ChangeListener | None = None,
        held_within: HeldValues | None = None,
        start_gate: StartGate | None = None,
    ) -> None:
        self._servers, self._start_jobs, self._source = _pool_settings(servers, concurrency, start_jobs, source)
        checked_gate(start_gate, start_jobs)
        self._start_gate = start_gate
        self._on_tools_changed = checked_listener(on_tools_changed)
        self._held_within = checked_within(held_within)
        self._concurrency = concurrency
        self._state: Literal["new", "running", "closed"] = "new"
        self._state_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._running = _Loop()
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._pid = os.getpid()

    def _not_running(self) -> PoolError:
        if self._pid != os.getpid():
            # Only the forking thread lives on in a child: the pool's loop runs in no thread there, and a call
            # handed to it waited for ever, whatever its timeout.
            return PoolError(
                f"this BackgroundPool runs in process {self._pid}, not in this one (a fork of it, which has no "
                "copy of the pool's thread): make a new BackgroundPool(...) here"
            )
        if self._state == "closed":
            return PoolError(
                "the pool is not running (its `with` block has ended): use it inside "
                "`with BackgroundPool(...) as pool:`, or make a new one"
            )
        return PoolError("the pool is not running: use it inside `with BackgroundPool(...) as pool:`")

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The pool's event loop. Raises: PoolError: outside the pool's ``with`` block (or its process)."""
        loop = self._running.loop
        if self._state != "running" or loop is None or self._pid != os.getpid():
            raise self._not_running()
        return loop

    @property
    def pool(self) -> ServerPool:
        """The running `ServerPool`. Raises: PoolError: outside the pool's ``with`` block (or its process)."""
        pool = self._running.pool
        if self._state != "running" or pool is None or self._pid != os.getpid():
            raise self._not_running()
        return pool

    def __enter__(self) -> BackgroundPool:
        with self._state_lock:  # two threads entering one pool: one of them starts it
            if self._state != "new":
                which = "is running" if self._state == "running" else "has run"
                raise PoolError(
                    f"this BackgroundPool was already entered (it {which}): a pool runs once; "
                    "make a new BackgroundPool(...) for another `with`"
                )
            self._state = "running"
            self._pid = os.getpid()
        gate = self._start_gate  # with its own limit: start_jobs is not given beside it
        make = functools.partial(
            ServerPool, self._servers, concurrency=self._concurrency,
            start_jobs=self._start_jobs if gate is None else None, source=self._source,
            on_tools_changed=self._on_tools_changed, held_within=self._held_within, start_gate=gate,
        )  # fmt: skip
        running = self._running
        self._thread = threading.Thread(target=running.run, args=(make,), name="tooltree-server-pool", daemon=True)
        self._thread.start()
        try:
            running.ready.wait()
        except BaseException:  # Ctrl-C as it starts: before, its loop ran on for the process's life, closed by no one
            self.close()
            raise
        if running.pool is None:
            self._state = "closed"
            self._thread.join()  # the loop has ended already: nothing is left running
            raise PoolError(f"the server pool did not start: {running.error!r}")
        names = ", ".join(s.name for s in self._servers[:5]) + (", …" if len(self._servers) > 5 else "")
        self._finalizer = weakref.finalize(self, _unclosed, running, self._pid, names or "none")
        return self

    def close(self, *, interrupted: bool = False) -> None:
        """Stop the servers and the pool's loop, as leaving its ``with`` does (from any thread, any number of times:
        each returns once the servers are stopped; a no-op before the pool ran). ``interrupted``: Ctrl-C stopped the
        pool's user, as when a KeyboardInterrupt leaves the ``with``: a stdio server still at a call (the one stopped,
        or one given up on unanswered) gets SIGTERM at once as its stdin closes."""
        self._leave(interrupted)

    def __exit__(self, *exc: object) -> None:
        self._leave(len(exc) > 1 and isinstance(exc[1], KeyboardInterrupt))

    def _leave(self, interrupted: bool) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()  # closed: nothing to warn of
        with self._state_lock:
            first = self._state == "running"
            if first:
                self._state = "closed"
        if self._pid != os.getpid():  # a forked child leaving the `with`: the pool is its parent's to close
            return
        thread = self._thread
        if thread is None:
            return
        if first:  # left by Ctrl-C: a server still at a call (the one it stopped) is signalled at once
            self._running.end(interrupted=interrupted)
        # A second leave (another thread's) returns, like the first, once the servers are stopped: before, at once.
        if thread is not threading.current_thread():  # the pool's own loop cannot wait for itself
            thread.join(timeout=60)

    def call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        timeout: float | None = None,
        progress: ProgressListener | None = None,
    ) -> dict[str, Any]:
        """`ServerPool.call`, from a synchronous caller (``progress`` is told on the pool's thread).

        An interrupt (Ctrl-C) while it waits gives the call up: it is cancelled on the pool's loop.

        Raises:
            UnknownServerError, ServerUnavailable: as `ServerPool.call`.
            TypeError, ValueError: as `ServerPool.call`: ``tool``, ``arguments`` or ``timeout`` is wrong.
            PoolError: outside the pool's ``with`` block or the process that entered it, on the pool's own
                thread (it would wait for itself: ``await bg.pool.call(...)`` there), or the pool closed
                during the call.
        """
        _check_call(tool, arguments, timeout)
        refuse_async(progress, "progress")
        pool, loop = self.pool, self.loop
        if threading.current_thread() is self._thread:
            raise PoolError(
                "BackgroundPool.call was called on the pool's own event loop, where it would wait for itself for "
                "ever: there, use `await bg.pool.call(...)`"
            )
        thread = self._thread
        assert thread is not None  # set before the pool runs
        coroutine = pool.call(server, tool, arguments, timeout=timeout, progress=progress)
        try:
            future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        except RuntimeError:  # the `with` block ended since the check above and the loop is closed
            coroutine.close()
            raise _closed_during_call() from None
        try:
            return wait_handed(future, lambda: not thread.is_alive(), _cancelled)
        except concurrent.futures.CancelledError:  # the loop ended with the call in flight
            if not thread.is_alive():  # or before it ran the call, which it dropped: no "never awaited" warning
                coroutine.close()
            raise _closed_during_call() from None
        except BaseException:
            future.cancel()  # an interrupt: nothing waits for the call any more (a no-op once it is done)
            raise


def _cancelled() -> NoReturn:
    """The loop ended without running the call (handed to it as the pool closed, after its last round of tasks)."""
    raise concurrent.futures.CancelledError from None
