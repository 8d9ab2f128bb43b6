"""`SandboxPool`: sandboxes started ahead of time, so a new session costs almost nothing.

A background thread keeps ``size`` containers created, verified, started and warm (their
worker interpreter already running). `acquire` takes one, binds the session's tools and
workspace, and the thread starts a replacement. Containers are never reused: a closed
session's container is destroyed, so no state can pass from one session to the next.

A started pool dropped without `SandboxPool.close` (or its ``with``) warns (`ResourceWarning`, as an unclosed file
does) when it is garbage-collected or at interpreter exit, and its warm containers are then destroyed (sessions
acquired from it stay open). Its filling thread holds no reference to it, so that a pool dropped can be collected.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
import uuid
import warnings
import weakref
from pathlib import Path
from types import TracebackType
from typing import Any

from sandbox.backend import SandboxBackend
from sandbox.bridge import ToolBridge, ToolHandler
from sandbox.channel import SupervisorChannel
from sandbox.config import SandboxConfig
from sandbox.errors import EngineError, SandboxError, SessionError
from sandbox.session import Sandbox, open_channel
from sandbox.session_args import count as counted
from sandbox.session_args import wait_seconds
from tool_tree.text import counted as said_count
from tool_tree.text import shown

logger = logging.getLogger(__name__)

_RETRY_DELAY = 2.0

MAX_SIZE = 64
"""The most sandboxes a pool keeps warm. Each is a started container holding its memory limit (64 at the default
512m is 32 GiB), and the pool starts them with nobody asking: a mistyped size (``1_000_000``) started containers
until the engine or the host gave out. ``tooltree serve`` keeps at most 16 warm; a host built for more can run
several pools."""


class _Warm:
    """What the pool's filling thread runs and shares with the pool (never the `SandboxPool` itself, so that one
    dropped unclosed is collected, its finaliser closing this)."""

    def __init__(self, backend: SandboxBackend, size: int) -> None:
        self.backend = backend
        self.size = size
        self.ready: list[SupervisorChannel] = []
        self.cond = threading.Condition()
        self.closed = False
        self.last_error: BaseException | None = None
        self.generation = 0  # of the backend's tree: a sandbox started on an older one is not handed out

    def _wanted(self) -> int | None:
        """Wait until a sandbox is missing: the tree generation to start it on; None once closed."""
        with self.cond:
            while not self.closed and len(self.ready) >= self.size:
                self.cond.wait()
            return None if self.closed else self.generation

    def fill(self) -> None:
        while (generation := self._wanted()) is not None:
            try:
                channel = open_channel(self.backend, uuid.uuid4().hex)
            except SandboxError as e:
                logger.warning("could not start a pooled sandbox: %s", e)
                with self.cond:
                    self.last_error = e
                    self.cond.notify_all()
                    self.cond.wait(_RETRY_DELAY)
                continue
            with self.cond:
                if self.closed:  # closed while this one was starting
                    channel.kill()
                    return
                if generation != self.generation:  # started on the tree before a refresh: start another
                    channel.kill()
                    continue
                self.ready.append(channel)
                self.last_error = None
                self.cond.notify_all()

    def close(self) -> None:
        """Stop refilling and destroy the idle sandboxes (the filling thread ends once a start under way is done)."""
        with self.cond:
            self.closed = True
            idle, self.ready = self.ready, []
            self.cond.notify_all()
        for channel in idle:
            channel.kill()


def _unclosed(warm: _Warm, pid: int) -> None:
    """A started `SandboxPool` was collected (or the interpreter exits) without `SandboxPool.close`: say so, and
    destroy its warm containers on a thread of its own (never on the collecting thread, which may hold the pool's
    lock)."""
    if pid != os.getpid() or warm.closed:  # a fork's copy (the parent's containers), or closed already
        return
    # First: a warning made an error (``-W error``) must not leave the containers. An interpreter ending may start
    # no thread: its exit closes the containers' stdin, which ends them.
    idle = len(warm.ready)
    with contextlib.suppress(RuntimeError):
        threading.Thread(target=warm.close, name="sandbox-pool-unclosed", daemon=True).start()
    warnings.warn(
        f"unclosed SandboxPool (size {warm.size}, {idle} warm) dropped while started: its warm "
        "containers are destroyed now; use it as `with SandboxPool(...) as pool:`, or call pool.close()",
        ResourceWarning,
        stacklevel=3,  # the code that dropped it, when that was the last reference
    )


class SandboxPool:
    """Keeps ``size`` sandboxes warm.

    Args:
        backend: what runs containers; default a `DockerBackend` from ``config`` and ``tree``.
        size: how many started sandboxes to keep ready (1 to `MAX_SIZE`).

    Raises:
        TypeError: ``backend`` is a `SandboxConfig` (pass it as ``config=``), or ``size`` is not an int.
        SandboxError: ``size`` is below 1.
        ValueError: ``size`` is above `MAX_SIZE`.

    A pool serves the process that made it: in a fork of that process, `acquire` and `wait_ready` raise
    `SessionError` (the child would take the parent's warm containers, whose connections it shares) and `close`
    leaves the parent's sandboxes alone. One started and dropped without `close` (or its ``with``) warns
    (`ResourceWarning`) when collected, and its warm containers are destroyed then.
    """

    def __init__(
        self,
        backend: SandboxBackend | None = None,
        *,
        size: int = 2,
        config: SandboxConfig | None = None,
        tree: str | Path | None = None,
    ) -> None:
        given: object = backend  # typed, but a caller may hand the config first (before: AttributeError on start)
        if isinstance(given, SandboxConfig):
            raise TypeError(
                "SandboxPool's first argument is the backend, not a SandboxConfig: pass it as config=… "
                "(SandboxPool(config=cfg, tree=…))"
            )
        count: object = size
        if isinstance(count, bool) or not isinstance(count, int):  # before: "'<' not supported" for "2"
            raise TypeError(
                f"size: expected a whole number of sandboxes (an int), got {type(count).__name__} {shown(count)}"
            )
        if size < 1:
            raise SandboxError("a pool needs a size of at least 1")
        if size > MAX_SIZE:
            raise ValueError(
                f"size: at most {MAX_SIZE} warm sandboxes (each is a started container holding its memory limit), "
                f"got {shown(size)}: use a smaller size, or several pools on a host made for that many"
            )
        if backend is None:
            from sandbox.docker_backend import DockerBackend

            backend = DockerBackend(config, tree=tree)
        self.backend = backend
        self.size = size
        self._warm = _Warm(backend, size)
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._finalizer: weakref.finalize[Any, Any] | None = None
        """Warns of the warm containers left when the pool is collected unclosed (`_unclosed`)."""

    def _check_process(self) -> None:
        """Raises: SessionError: this is a fork of the process that made the pool."""
        if self._pid != os.getpid():
            # Before: the child took a warm container the parent still held; its answer reached the parent's
            # reader (a "protocol violation" that destroyed the container) and the child waited out its timeout.
            raise SessionError(
                f"this SandboxPool belongs to process {self._pid}, not to this one (a fork of it shares its warm "
                "sandboxes' connections): make a new SandboxPool here"
            )

    def start(self) -> SandboxPool:
        """Prepare the backend and start filling the pool.

        Raises:
            SandboxError: the backend cannot run sandboxes (engine, image, tree).
        """
        self.backend.prepare()
        warm = self._warm
        with warm.cond:  # one filling thread, however many threads start the pool (`acquire` does) at once
            if self._thread is None:
                self._thread = threading.Thread(target=warm.fill, name="sandbox-pool", daemon=True)
                self._thread.start()
                self._finalizer = weakref.finalize(self, _unclosed, warm, self._pid)
        return self

    def __enter__(self) -> SandboxPool:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def refresh_tree(self) -> bool:
        """Have the backend take the regenerated tree (`SandboxBackend.refresh_tree`) and, when it changed, replace
        the warm sandboxes started on the old one; sessions already taken keep theirs. Whether it changed.

        Raises:
            SandboxError: as the backend's (the warm sandboxes are kept).
        """
        if not self.backend.refresh_tree():
            return False
        warm = self._warm
        with warm.cond:
            warm.generation += 1
            stale, warm.ready = warm.ready, []
            warm.cond.notify_all()
        for channel in stale:
            channel.kill()
        return True

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._warm.closed

    def wait_ready(self, count: int | None = None, timeout: float = 120.0) -> None:
        """Wait until ``count`` (default: all) sandboxes are warm.

        Raises:
            SessionError: not within ``timeout``; at once when the pool was never started or is closed, or the
                engine refuses every start (as `acquire` says); or this is a fork of the process that made the pool.
            TypeError: ``count`` is not an int or None, or ``timeout`` not a number.
            ValueError: ``count`` is less than 1, or ``timeout`` less than 0 or more than a week (NaN included).
        """
        # Before: a str failed on "'<' not supported", and a NaN timeout spun the CPU for ever.
        want = self.size if count is None else min(counted(count, "count"), self.size)
        timeout = wait_seconds(timeout)
        self._check_process()
        deadline = time.monotonic() + timeout
        warm = self._warm
        with warm.cond:
            while len(warm.ready) < want:
                if warm.closed:
                    raise SessionError("the pool is closed")
                if self._thread is None:  # before: waited out the whole timeout, then "...: None"
                    raise SessionError("the pool is not started: call start() or use it in a with block first")
                if _refused(warm.last_error):
                    raise SessionError(f"no pooled sandbox can start: {warm.last_error}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    warmed = said_count(want, "sandbox", "sandboxes")
                    raise SessionError(f"the pool did not warm {warmed} in {timeout:g} s: {warm.last_error}")
                warm.cond.wait(remaining)

    def _take(self, timeout: float) -> SupervisorChannel:
        deadline = time.monotonic() + timeout
        warm = self._warm
        with warm.cond:
            while True:
                if warm.closed:
                    raise SessionError("the pool is closed")
                while warm.ready:
                    channel = warm.ready.pop(0)
                    warm.cond.notify_all()
                    if channel.broken is None and not channel.closed:
                        return channel
                    channel.kill()
                if _refused(warm.last_error):  # every retry would be refused the same: say it now
                    raise SessionError(f"no pooled sandbox can start: {warm.last_error}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SessionError(f"no pooled sandbox became ready in {timeout:g} s: {warm.last_error}")
                warm.cond.wait(remaining)

    def acquire(
        self,
        *,
        tools: ToolBridge | ToolHandler | None = None,
        workspace: str | Path | None = None,
        tool_loop: asyncio.AbstractEventLoop | None = None,
        timeout: float = 60.0,
    ) -> Sandbox:
        """A started session from the pool (waiting up to ``timeout`` if none is warm).

        Raises:
            SessionError: the pool is closed, nothing became ready in time, or this is a fork of the process that
                made the pool.
            WorkspaceError: the workspace could not be restored.
            TypeError: ``timeout`` is not a number (or ``tools`` no bridge, as `Sandbox` says).
            ValueError: ``timeout`` is less than 0 or more than a week (NaN included).
        """
        timeout = wait_seconds(timeout)
        self._check_process()
        if self._warm.closed:
            raise SessionError("the pool is closed")
        if self._thread is None:
            self.start()
        # Made first: arguments it refuses must not cost a warm sandbox.
        sandbox = Sandbox(self.backend, tools=tools, workspace=workspace, tool_loop=tool_loop)
        channel = self._take(timeout)
        sandbox.attach(channel)
        return sandbox

    def close(self) -> None:
        """Stop refilling and destroy the idle sandboxes (acquired sessions stay open); in a fork of the process
        that made the pool, only mark it closed."""
        if self._finalizer is not None:
            self._finalizer.detach()  # closed: nothing to warn of
        if self._pid != os.getpid():
            self._warm.closed = True
            return
        self._warm.close()
        if self._thread is not None:
            self._thread.join(timeout=60)


def _refused(error: BaseException | None) -> bool:
    """Whether the engine refused the last start as a bad request (``400``: an unknown runtime, a bad setting),
    which no retry changes (before: a caller waited out its whole timeout, 60 s, for the same refusal)."""
    return isinstance(error, EngineError) and error.returncode == 400
