"""A `sandbox.host.Runtime`'s sandbox session: started on first use (`_RuntimeSandbox.sandbox`, by one thread when
several ask at once), replaced by a new one when it ended on its own (its container exited or was killed, the engine
restarted), said once by `take_sandbox_note`, and stopped with the servers kept (`stop_sandbox`); a sandbox started
after a `generate-tree` regenerated the tree moves the runtime to it (`Runtime._follow_tree`), and one of a warm pool
or backend shared with other runtimes runs the generation of the tree its bridge checks calls against
(`_RuntimeSandbox._on_the_bridges_tree`). A session started while the runtime was closed by another thread is stopped
by the thread that started it.

`Runtime` takes these from `_RuntimeSandbox`; the state they use is `Runtime`'s (set in its ``__init__``), and they
log as ``sandbox.host``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from tool_tree.tree import tree_lock

if TYPE_CHECKING:
    from sandbox.backend import SandboxBackend
    from sandbox.config import SandboxConfig
    from sandbox.host import _Held
    from sandbox.mcp_bridge import McpBridge
    from sandbox.pool import SandboxPool
    from sandbox.session import Sandbox
    from tool_tree.config import Config

logger = logging.getLogger("sandbox.host")

_WHY_CHARS = 600
"""Most characters of why a sandbox ended in the note that says it was replaced."""
_TREE_TRIES = 3
"""How many sandboxes a start takes again, at most, to find one of a shared pool or backend that mounts the generation
of the tree its bridge checks calls against (`_RuntimeSandbox._on_the_bridges_tree`): one more each time the tree was
regenerated meanwhile."""


class _RuntimeSandbox:
    """`Runtime`'s sandbox session; the runtime's state they use is `Runtime`'s (set in its ``__init__``)."""

    config: Config
    tree: Path
    sandbox_config: SandboxConfig | None
    workspace: Path | None
    sandbox_pool: SandboxPool | None
    sandbox_backend: SandboxBackend | None
    sandbox_replacements: int
    _sandbox: Sandbox | None
    _sandbox_lock: threading.Lock
    _sandbox_note: str
    _handover: threading.Lock
    _closed: threading.Event
    _held: _Held | None

    if TYPE_CHECKING:  # `Runtime`'s

        @property
        def bridge(self) -> McpBridge: ...
        def _refuse_in_fork(self) -> None: ...
        def _follow_tree(self) -> str: ...
        def _running_loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def sandbox(self) -> Sandbox:
        """The session, started on first use (by one thread, when several ask at once).

        A session whose sandbox ended on its own (`Sandbox.ended`: its container exited or was killed, the engine
        restarted) is closed and replaced by a new one here, and `take_sandbox_note` says so once: before, every
        later use failed with the first one's error, for as long as the runtime lived (a ``tooltree serve`` client
        session: until the client restarted).

        A sandbox started after a `generate-tree` regenerated the tree moves the runtime to the regenerated tree
        (the class says how), and `take_sandbox_note` says that once too.

        Raises:
            SandboxError: the container could not be started (no engine, no image, ...), or in a fork.
            TreeError: the regenerated tree's manifest cannot be read.
        """
        self._refuse_in_fork()
        current = self._sandbox
        if current is not None and current.ended is None:
            return current
        with self._sandbox_lock:
            return self._start_sandbox()

    @property
    def running_sandbox(self) -> Sandbox | None:
        """The session if one is started and has not ended (never starts one)."""
        current = self._sandbox
        return current if current is not None and current.ended is None else None

    @property
    def sandbox_ended(self) -> str | None:
        """Why the sandbox this runtime started ended on its own (`Sandbox.ended`), until a use of `sandbox` replaces
        it; None when none was started, one runs, or it was stopped (`stop_sandbox`, `close`). Never starts one."""
        current = self._sandbox
        return current.ended if current is not None else None

    def take_sandbox_note(self) -> str:
        """What the user of this runtime's sandbox should hear once: that it was replaced, and why ("" if not)."""
        with self._handover:
            note, self._sandbox_note = self._sandbox_note, ""
        return note

    def _retire(self, ended: Sandbox, why: str) -> None:
        """Close a session whose sandbox ended, and keep the note that says a new one replaces it."""
        from sandbox.errors import SandboxError

        lost = "its variables, imports and workspace files are gone"
        if ended.workspace is not None:
            lost += " (the new one restores the workspace's host folder: what the old one wrote since its last save is"
            lost += " lost)"
        with self._handover:
            if self._sandbox is ended:
                self._sandbox = None
                if self._held is not None:
                    self._held.sandbox = None
            self._sandbox_note = f"a new sandbox was started: the previous one ended ({why[:_WHY_CHARS]}); {lost}"
        self.sandbox_replacements += 1
        logger.warning("sandbox %s ended (%s); the next use starts a new one", ended.name, why)
        with contextlib.suppress(SandboxError):  # nothing to save (its workspace cannot be read), only to remove
            ended.close()

    def _start_sandbox(self) -> Sandbox:
        current = self._sandbox
        if current is not None:
            why = current.ended
            if why is None:
                return current
            self._retire(current, why)
        from sandbox.config import SandboxConfig
        from sandbox.errors import SandboxError
        from sandbox.host import CLOSED, _adopt

        if self._closed.is_set():  # before: "the runtime is closed" alone, not what to do
            raise SandboxError(CLOSED)
        own = self.sandbox_pool is None and self.sandbox_backend is None  # a backend that copies the tree as it is now
        if self.sandbox_pool is not None:
            settings = self.sandbox_pool.backend.config
        elif self.sandbox_backend is not None:
            settings = self.sandbox_backend.config
        else:
            settings = self.sandbox_config or SandboxConfig.from_config(self.config)
        # Held while the container starts, so the tree it copies is the one the bridge was read from.
        with tree_lock(self.tree, shared=True) if own else contextlib.nullcontext():
            if own and self.bridge.regenerated():
                self._add_note(self._follow_tree())
            session = self._new_session(settings)
        if not own:
            session = self._on_the_bridges_tree(session, settings)
        with self._handover:
            if not self._closed.is_set():
                self._sandbox = session
                if self._held is not None:
                    _adopt(session)
                    self._held.sandbox = session
                return session
        # `close` ran while the container started (a client that left meanwhile): nobody else would stop it
        session.close()
        raise SandboxError("the runtime was closed while its sandbox started")

    def _new_session(self, settings: SandboxConfig) -> Sandbox:
        """A started session on the runtime's bridge: the pool's, or on the backend (``settings`` make one when none
        is given).

        Raises:
            SandboxError: it could not start (a runtime or limit of the config named when it is the cause).
        """
        from sandbox.errors import SandboxError
        from sandbox.session import Sandbox
        from sandbox.start_problems import limit_problem, runtime_problem

        bridge = self.bridge
        loop = self._running_loop()
        try:
            if self.sandbox_pool is not None:
                return self.sandbox_pool.acquire(tools=bridge, workspace=self.workspace, tool_loop=loop)
            session = Sandbox(
                self.sandbox_backend, config=settings, tree=self.tree, tools=bridge, tool_loop=loop,
                workspace=self.workspace,
            )  # fmt: skip
            session.start()
            return session
        except SandboxError as e:
            named = runtime_problem(e, settings.runtime, self.config) or limit_problem(e, self.config)
            if named is not None:
                raise named from e
            raise

    def _on_the_bridges_tree(self, session: Sandbox, settings: SandboxConfig) -> Sandbox:
        """``session``, of the warm pool or backend the runtime shares (`tooltree serve`'s), when its container mounts
        the copy of the tree whose manifest the bridge checks calls against; else it is destroyed (nothing ran in it,
        its workspace was only restored) and another started once the two agree: the runtime moves to the tree as it
        is now when the copy is of a later generation than its bridge (`_follow_tree`, said once as after a
        regeneration), and the pool or backend takes the tree as it is now when its copy is of an earlier one (a
        `generate-tree` it was not yet told of: `SandboxBackend.refresh_tree`). Before, a session opened between the
        regeneration and serve's refresh ran the old stubs while its calls were checked against the new manifest (a
        changed tool called as its stub read was refused as invalid arguments), and one opened before a refresh that
        came as its sandbox started ran the new stubs against the old manifest.

        When the pool or backend cannot copy the tree as it is now, the sandbox started after it mounts the copy it
        has, as before, with a warning.

        Raises:
            SandboxError: the runtime was closed meanwhile, or another sandbox cannot start.
            TreeError: the regenerated manifest cannot be read.
        """
        from sandbox.errors import SandboxError

        for tried in range(_TREE_TRIES + 1):
            mounted = session.tree_manifest
            if mounted is None or self.bridge.checks_tree(mounted):
                return session
            if tried == _TREE_TRIES:
                break
            session.kill()
            with tree_lock(self.tree, shared=True):
                if self.bridge.regenerated():
                    self._add_note(self._follow_tree())
            shared = self.sandbox_pool if self.sandbox_pool is not None else self.sandbox_backend
            try:
                if shared is not None:
                    shared.refresh_tree()
            except SandboxError as e:  # as serve's refresh: its sandboxes keep the copy they have, as before
                logger.warning("the sandboxes of %s keep the copy of the tree they have: %s", self.tree, e)
                return self._new_session(settings)
            session = self._new_session(settings)
        logger.warning(
            "the sandbox %s mounts another generation of the tree %s than its tool calls are checked against: the "
            "tree was regenerated %s times as it started",
            session.name, self.tree, _TREE_TRIES,
        )  # fmt: skip
        return session

    def _add_note(self, note: str) -> None:
        with self._handover:
            self._sandbox_note = "; ".join(filter(None, [self._sandbox_note, note]))

    def stop_sandbox(self) -> bool:
        """Stop the sandbox and keep the servers: the workspace is saved (when one was given) and the container
        removed; the next use of `sandbox` starts a new one, which restores the workspace. False: none was running
        (or the runtime is closed). A use of `sandbox` from another thread meanwhile waits for the save first.

        Raises:
            WorkspaceError: the save failed (the container is removed all the same, as by `close`).
        """
        with self._sandbox_lock:  # `sandbox` starts the next one only once this one's workspace is saved
            with self._handover:
                sandbox = self._sandbox
                if sandbox is None or self._closed.is_set():
                    return False
                self._sandbox = None
                if self._held is not None:
                    self._held.sandbox = None
            sandbox.close()
            return True

    @property
    def sandbox_started(self) -> bool:
        return self._sandbox is not None
