"""`SandboxPool`: sandboxes started ahead of time, so a new session costs almost nothing.

A background thread keeps ``size`` containers created, verified, started and warm (their
worker interpreter already running). `acquire` takes one, binds the session's tools and
workspace, and the thread starts a replacement. Containers are never reused: a closed
session's container is destroyed, so no state can pass from one session to the next.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import uuid
from pathlib import Path
from types import TracebackType

from sandbox.backend import SandboxBackend
from sandbox.bridge import ToolBridge, ToolHandler
from sandbox.channel import SupervisorChannel
from sandbox.config import SandboxConfig
from sandbox.errors import EngineError, SandboxError, SessionError
from sandbox.session import Sandbox, open_channel
from tool_tree.text import shown

logger = logging.getLogger(__name__)

_RETRY_DELAY = 2.0

MAX_SIZE = 64
"""The most sandboxes a pool keeps warm. Each is a started container holding its memory limit (64 at the default
512m is 32 GiB), and the pool starts them with nobody asking: a mistyped size (``1_000_000``) started containers
until the engine or the host gave out. ``tooltree serve`` keeps at most 16 warm; a host built for more can run
several pools."""


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
    leaves the parent's sandboxes alone.
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
        self._ready: list[SupervisorChannel] = []
        self._cond = threading.Condition()
        self._closed = False
        self._last_error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._generation = 0  # of the backend's tree: a sandbox started on an older one is not handed out

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
        with self._cond:  # one filling thread, however many threads start the pool (`acquire` does) at once
            if self._thread is None:
                self._thread = threading.Thread(target=self._fill, name="sandbox-pool", daemon=True)
                self._thread.start()
        return self

    def __enter__(self) -> SandboxPool:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _fill(self) -> None:
        while True:
            with self._cond:
                while not self._closed and len(self._ready) >= self.size:
                    self._cond.wait()
                if self._closed:
                    return
                generation = self._generation
            try:
                channel = open_channel(self.backend, uuid.uuid4().hex)
            except SandboxError as e:
                logger.warning("could not start a pooled sandbox: %s", e)
                with self._cond:
                    self._last_error = e
                    self._cond.notify_all()
                    self._cond.wait(_RETRY_DELAY)
                continue
            with self._cond:
                if self.closed:  # closed while this one was starting
                    channel.kill()
                    return
                if generation != self._generation:  # started on the tree before a refresh: start another
                    channel.kill()
                    continue
                self._ready.append(channel)
                self._last_error = None
                self._cond.notify_all()

    def refresh_tree(self) -> bool:
        """Have the backend take the regenerated tree (`SandboxBackend.refresh_tree`) and, when it changed, replace
        the warm sandboxes started on the old one; sessions already taken keep theirs. Whether it changed.

        Raises:
            SandboxError: as the backend's (the warm sandboxes are kept).
        """
        if not self.backend.refresh_tree():
            return False
        with self._cond:
            self._generation += 1
            stale, self._ready = self._ready, []
            self._cond.notify_all()
        for channel in stale:
            channel.kill()
        return True

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._closed

    def wait_ready(self, count: int | None = None, timeout: float = 120.0) -> None:
        """Wait until ``count`` (default: all) sandboxes are warm.

        Raises:
            SessionError: not within ``timeout``; at once when the pool was never started or is closed, or the
                engine refuses every start (as `acquire` says); or this is a fork of the process that made the pool.
        """
        self._check_process()
        want = self.size if count is None else min(count, self.size)
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self._ready) < want:
                if self._closed:
                    raise SessionError("the pool is closed")
                if self._thread is None:  # before: waited out the whole timeout, then "...: None"
                    raise SessionError("the pool is not started: call start() or use it in a with block first")
                if _refused(self._last_error):
                    raise SessionError(f"no pooled sandbox can start: {self._last_error}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SessionError(f"the pool did not warm {want} sandboxes in {timeout:g} s: {self._last_error}")
                self._cond.wait(remaining)

    def _take(self, timeout: float) -> SupervisorChannel:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if self._closed:
                    raise SessionError("the pool is closed")
                while self._ready:
                    channel = self._ready.pop(0)
                    self._cond.notify_all()
                    if channel.broken is None and not channel.closed:
                        return channel
                    channel.kill()
                if _refused(self._last_error):  # every retry would be refused the same: say it now
                    raise SessionError(f"no pooled sandbox can start: {self._last_error}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SessionError(f"no pooled sandbox became ready in {timeout:g} s: {self._last_error}")
                self._cond.wait(remaining)

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
        """
        self._check_process()
        if self._closed:
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
        if self._pid != os.getpid():
            self._closed = True
            return
        with self._cond:
            self._closed = True
            idle, self._ready = self._ready, []
            self._cond.notify_all()
        for channel in idle:
            channel.kill()
        if self._thread is not None:
            self._thread.join(timeout=60)


def _refused(error: BaseException | None) -> bool:
    """Whether the engine refused the last start as a bad request (``400``: an unknown runtime, a bad setting),
    which no retry changes (before: a caller waited out its whole timeout, 60 s, for the same refusal)."""
    return isinstance(error, EngineError) and error.returncode == 400
