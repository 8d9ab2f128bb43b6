"""`Runtime`: the live side of a run — the server pool, the bridge, and a sandbox session.

::

    with Runtime(config, "tree") as rt:          # servers start here
        rt.call_tool("crm", "get_record", {...})  # through a bridge: allowlist, validation, audit
        rt.sandbox.execute("print(1)")            # the container starts on first use

`tooltree exec` uses one per script; an agent run uses one for all its turns (tests share one
across runs to keep containers few), and a run given no runtime makes its own and closes it.

A runtime dropped open (no ``with``, no `Runtime.close`) warns once, naming it (`ResourceWarning`, as an unclosed
file does), when it is garbage-collected or at interpreter exit, and its sandbox and servers are stopped then; the
pool and session it made warn nothing of their own for it (the user made neither).

Its sandbox session (started on first use, replaced when it ended on its own, stopped with the servers kept) is
`sandbox.runtime_sandbox`'s, which `Runtime` takes it from.

(Over 400 lines: one class whose opening, following of a regenerated tree, direct calls, closing and finaliser share
its locks and the server pools it holds open.)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import threading
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from sandbox.runtime_sandbox import _RuntimeSandbox
from tool_tree.config import Config
from tool_tree.tree import tree_lock

if TYPE_CHECKING:
    from sandbox.backend import SandboxBackend
    from sandbox.bridge import CallCancel
    from sandbox.config import SandboxConfig
    from sandbox.mcp_bridge import AuditLog, McpBridge
    from sandbox.pool import SandboxPool
    from sandbox.session import Sandbox
    from tool_tree.held_values import HeldValues
    from tool_tree.pool import BackgroundPool, ProgressListener
    from tool_tree.server_asks import Asker
    from tool_tree.starts import StartGate
    from tool_tree.tree import Manifest


logger = logging.getLogger(__name__)

CLOSED = "the runtime is closed: open() it again (or use a new one) to call its tools or run scripts"
"""What a use of a closed runtime is told (`Runtime.call_tool`, `Runtime.bridge`, `Runtime.sandbox`)."""


class _Held:
    """What an open `Runtime` would leave running if dropped, for its finaliser (never the `Runtime` itself)."""

    def __init__(self, pool: BackgroundPool, audit: AuditLog | None) -> None:
        self.pool = pool
        self.audit = audit
        self.sandbox: Sandbox | None = None

    def release(self) -> None:
        """Destroy the sandbox (its workspace not saved) and stop the servers."""
        try:
            if self.sandbox is not None:
                self.sandbox.kill()
        finally:
            try:
                self.pool.close()
            finally:
                if self.audit is not None:
                    self.audit.close()


def _adopt(part: BackgroundPool | Sandbox) -> None:
    """The runtime answers for ``part`` (its pool, its session) left open: ``part``'s own warning, when the runtime
    is dropped, would name an object the user never made, beside the runtime's."""
    if part._finalizer is not None:
        part._finalizer.detach()


def _unclosed(held: _Held, pid: int, tree: Path) -> None:
    """An open `Runtime` was collected (or the interpreter exits) without `Runtime.close`: say so, and stop what it
    holds on a thread of its own (never on the collecting thread, which may hold the runtime's locks)."""
    if pid != os.getpid():  # a fork's copy: the sandbox and servers are its parent's
        return
    sandbox = held.sandbox
    # First: a warning made an error (``-W error``) must not leave them running. An interpreter ending may start no
    # thread: its exit closes the servers' and the container's stdin, which ends them.
    with contextlib.suppress(RuntimeError):
        threading.Thread(target=held.release, name="runtime-unclosed", daemon=True).start()
    stopped = "its servers are stopped now"
    if sandbox is not None and sandbox.ended is None:
        unsaved = f", without saving its workspace {sandbox.workspace}" if sandbox.workspace is not None else ""
        stopped += f" and its sandbox's container {sandbox.name} destroyed{unsaved}"
    warnings.warn(
        f"unclosed Runtime (tree {tree}) dropped while open: {stopped}; use it as "
        "`with Runtime(config, tree) as rt:`, or call rt.close()",
        ResourceWarning,
        stacklevel=3,  # the code that dropped it, when that was the last reference
    )


class Runtime(_RuntimeSandbox):
    """Live MCP sessions for the servers of a tree, the bridge to them, and one sandbox session.

    Args:
        config: the configuration that says how to start each server of the tree.
        tree: the generated tree (its manifest is the bridge's allowlist).
        sandbox_config: limits of the sandbox session (default: the config's ``sandbox:`` section).
        workspace: a host folder restored into ``/workspace`` and saved back when the runtime closes.
        audit: a file that gets one JSON line per tool call, or an `AuditLog` shared with other
            runtimes (left open when this one closes).
        sandbox_pool: take the session from these warm sandboxes instead of starting a container.
        sandbox_backend: start each sandbox on this backend rather than on a `DockerBackend` of its own
            (`tooltree serve`'s client sessions without warm sandboxes share one: it removes the copy of a tree a
            regeneration replaced once no sandbox mounts it, `DockerBackend.refresh_tree`); not with ``sandbox_pool``.
        session: the session id written into audit lines.
        on_tools_changed: called with a server's name when one of this runtime's server sessions says its tools,
            prompts or resources changed, and which with ``kind=`` when it takes a ``kind``
            (`tool_tree.pool.ServerPool`); on the server pool's thread, so it must not block.
        held_within: a count of the servers' listings shared with other runtimes (`tooltree serve`'s client
            sessions): `tool_tree.pool.ServerPool`'s ``held_within``.
        start_gate: a `tool_tree.starts.StartGate` shared with other runtimes (`tooltree serve`'s client sessions):
            their servers start through it, at most its ``jobs`` at once in all (default: a gate of this runtime's
            own, of the config's ``pool.start_jobs``).

    Raises:
        TypeError: ``config`` is not a `Config` (a path: load it with ``load_config``), ``tree`` or ``workspace``
            not a path, ``audit`` neither a path nor an `AuditLog`, ``sandbox_config``, ``sandbox_pool`` or
            ``sandbox_backend`` not one,
            ``on_tools_changed`` not callable, ``held_within`` not a `HeldValues`, ``start_gate`` not a `StartGate`.
        ValueError: ``workspace`` or ``audit`` is an empty path, ``sandbox_pool``'s or ``sandbox_backend``'s
            sandboxes run another tree, or both are given.

    Raises (on enter):
        TreeError: the tree has no readable manifest.
        ConfigError: the config's ``pool:`` section is invalid.
        PoolError: the server pool did not start.

    The runtime checks calls against the tree as it read it at `open` (`sandbox.tool_changes.StaleTools` refuses the
    tools a `generate-tree` since changed or removed). A sandbox it starts after such a regeneration, on a backend of
    its own (no ``sandbox_pool``, no ``sandbox_backend``), runs the regenerated tree, and the runtime moves to it then:
    a new bridge of its manifest and a new server pool, said once by `take_sandbox_note` (`_follow_tree`). Before, that
    sandbox's stubs were the regenerated tree's while its bridge checked calls against the manifest read at `open`.
    A sandbox of a ``sandbox_pool`` or ``sandbox_backend`` that mounts a copy of the tree of another generation than
    the bridge's manifest (a regeneration the pool or backend was not yet given, or one it was given after `open`) is
    destroyed before it runs anything and another started once the two agree
    (`sandbox.runtime_sandbox._RuntimeSandbox._on_the_bridges_tree`).

    A runtime serves the process that opened it: in a fork of that process, its calls, ``bridge``, ``sandbox``
    and ``open`` raise `SandboxError` saying so (the child has no copy of the server pool's thread).
    """

    def __init__(
        self,
        config: Config,
        tree: str | Path,
        *,
        sandbox_config: SandboxConfig | None = None,
        workspace: str | Path | None = None,
        audit: str | Path | AuditLog | None = None,
        sandbox_pool: SandboxPool | None = None,
        sandbox_backend: SandboxBackend | None = None,
        session: str = "",
        on_tools_changed: Callable[..., None] | None = None,
        held_within: HeldValues | None = None,
        start_gate: StartGate | None = None,
    ) -> None:
        from sandbox.mcp_bridge import AuditLog
        from tool_tree.held_values import checked_within

        given: object = config  # typed, but a caller may hand a path
        if not isinstance(given, Config):
            raise TypeError(
                f"config: expected a Config (load_config(path) reads a tooltree.yaml), got {type(given).__name__}"
            )
        from sandbox.session_args import runtime_args

        runtime_args(tree, workspace, audit, sandbox_config, sandbox_pool, sandbox_backend)
        from tool_tree.pool import checked_gate, checked_listener

        checked_gate(start_gate, None)
        self.start_gate = start_gate
        self.on_tools_changed = checked_listener(on_tools_changed)
        self.held_within = checked_within(held_within)
        self.config = config
        self.tree = Path(tree)
        self.sandbox_config = sandbox_config
        self.workspace = Path(workspace) if workspace is not None else None
        self.audit_path = Path(audit) if isinstance(audit, str | os.PathLike) else None
        self._shared_audit = audit if isinstance(audit, AuditLog) else None
        self.sandbox_pool = sandbox_pool
        self.sandbox_backend = sandbox_backend
        self.session = session
        self.following: Callable[[str], float | None] | None = None
        """Given a server's name, the seconds until its part of the tree is regenerated, as it said its tools changed
        (`tooltree serve`; `sandbox.mcp_bridge.McpBridge.following`, which each bridge of the runtime is given)."""
        self.on_tree_followed: Callable[[McpBridge, McpBridge], None] | None = None
        """Called with the bridge the runtime left and its new one once it moved to a regenerated tree (`_follow_tree`),
        the old one's server pool stopped (or stopping once its calls in flight end), from the thread that starts its
        sandbox (holding the tree's shared lock): what the old servers were asked to keep ends with them (`tooltree
        serve` subscribes its client's resources again on the new ones: `agent.serve.client_session.ClientSession`)."""
        self._pool: BackgroundPool | None = None
        self._opened_in = os.getpid()  # the process whose thread runs `_pool`
        self._open_lock = threading.Lock()  # one thread opens (or closes) the server pool; the others wait for it
        self._bridge: McpBridge | None = None
        self._direct: McpBridge | None = None
        self._direct_lock = threading.Lock()
        self._in_flight: dict[int, int] = {}
        """`call_tool` calls in flight, by the id of the server pool they run on."""
        self._retiring: dict[int, BackgroundPool] = {}
        """Server pools of a tree the runtime left (`_follow_tree`), stopped once their calls in flight end."""
        self._sandbox: Sandbox | None = None
        self._sandbox_lock = threading.Lock()  # one thread starts the sandbox
        self._sandbox_note = ""
        self.sandbox_replacements = 0
        """How many sessions whose sandbox ended on its own were replaced by a new one."""
        self._handover = threading.Lock()  # a started sandbox is kept, or closed if the runtime closed meanwhile
        self._closed = threading.Event()
        self._audit: AuditLog | None = None
        self._held: _Held | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        """Warns of the sandbox and servers left running when the runtime is collected open (`_unclosed`)."""

    def __enter__(self) -> Runtime:
        return self.open()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close(interrupted=isinstance(e, KeyboardInterrupt))

    def open(self) -> Runtime:
        """Start the server pool (servers themselves start on their first call)."""
        from sandbox.mcp_bridge import AuditLog
        from sandbox.stored_definitions import versioned_manifest

        self._refuse_in_fork()  # before: returned at once (the parent's pool set), every call then "closed"
        # Before: threads opening it at once (the first `call_tool` beside the first `sandbox`) each started a server
        # pool, one never closed; one that found the pool but not yet the bridge failed an assertion.
        with self._open_lock:
            if self._pool is not None:
                return self
            self._closed.clear()
            with tree_lock(self.tree, shared=True):  # not half of a generation `generate-tree` is writing
                version, manifest = versioned_manifest(self.tree)  # one copy for the runtimes of the process
            own_audit = AuditLog(self.audit_path) if self.audit_path is not None else None
            try:
                pool, bridge = self._start_pool(version, manifest, own_audit or self._shared_audit)
            except BaseException:
                if own_audit is not None:
                    own_audit.close()
                raise
            self._audit, self._bridge, self._pool = own_audit, bridge, pool
            self._opened_in = os.getpid()
            _adopt(pool)
            self._held = _Held(pool, own_audit)
            self._finalizer = weakref.finalize(self, _unclosed, self._held, self._opened_in, self.tree)
        return self

    def _start_pool(
        self, version: tuple[int, ...], manifest: Manifest, audit: AuditLog | None
    ) -> tuple[BackgroundPool, McpBridge]:
        """A running server pool of the servers of ``manifest`` (read from the file's ``version``), and its bridge."""
        from sandbox.mcp_bridge import McpBridge
        from tool_tree.pool import BackgroundPool
        from tool_tree.starts import start_jobs

        wanted = {s.name for s in manifest.servers}
        servers = [s for s in self.config.offered_servers if s.name in wanted]
        pool = BackgroundPool(
            servers,
            start_jobs=start_jobs(self.config) if self.start_gate is None else None,
            source=self.config.file,
            on_tools_changed=self.on_tools_changed,
            held_within=self.held_within,
            start_gate=self.start_gate,
        )
        try:
            pool.__enter__()
            bridge = McpBridge(
                self.tree, pool.pool, audit=audit, session=self.session, manifest=manifest, config=self.config,
                manifest_version=version,
            )  # fmt: skip
            bridge.following = self.following
        except BaseException:
            pool.__exit__(None, None, None)  # a no-op when it did not start
            raise
        return pool, bridge

    def _follow_tree(self) -> str:
        """Move the runtime to the tree as `generate-tree` regenerated it since its bridge read it: a new bridge of the
        regenerated manifest (keeping the old one's refusals of a regeneration's, `McpBridge.keep_refusals`: before, a
        `tooltree serve` session's next refusal said "start a new run" and did not renew it), and a new server pool
        (the old one's servers listed their tools before); the old pool is stopped once the `call_tool` calls in flight
        on it end, and `on_tree_followed` is told. Called as a sandbox starts, with no sandbox running,
        holding the tree's shared lock. Returns what to tell the user.

        Raises:
            SandboxError: the runtime was closed meanwhile.
            TreeError: the regenerated manifest cannot be read.
        """
        from sandbox.errors import SandboxError
        from sandbox.stored_definitions import versioned_manifest

        with self._direct_lock, self._open_lock:
            old, left = self._pool, self._bridge
            if old is None or self._closed.is_set():
                raise SandboxError(CLOSED)
            version, manifest = versioned_manifest(self.tree)
            pool, bridge = self._start_pool(version, manifest, self._audit or self._shared_audit)
            if self._bridge is not None:  # the session's refusals, as its runner words and counts them
                bridge.keep_refusals(self._bridge)
            self._bridge, self._pool, self._direct = bridge, pool, None
            _adopt(pool)
            if self._held is not None:
                self._held.pool = pool
            if self._in_flight.get(id(old)):
                self._retiring[id(old)] = old
                old = None
        if old is not None:
            old.close()
        if self.on_tree_followed is not None and left is not None:
            self.on_tree_followed(left, bridge)
        logger.warning("the tree %s was regenerated since this runtime read it: its new sandbox runs the regenerated "
                       "tree, and its servers start again", self.tree)  # fmt: skip
        return (
            "the tree was regenerated (tooltree generate-tree) since this runtime read it: this sandbox runs the "
            "regenerated tree, its tool calls are checked against it, and its servers were started again"
        )

    def _refuse_in_fork(self) -> None:
        """Raises: SandboxError: the runtime is open in the process this one is a fork of (checked before any of
        the runtime's locks, which a thread of the parent may have held at the fork)."""
        from sandbox.errors import SandboxError

        if self._pool is not None and self._opened_in != os.getpid():
            raise SandboxError(
                f"this Runtime was opened in process {self._opened_in}, not in this one (a fork of it has no copy "
                "of its server pool's thread): make a new Runtime(config, tree) in the forked process"
            )

    def _running_loop(self, pool: BackgroundPool | None = None) -> asyncio.AbstractEventLoop:
        """The loop of the server pool (of ``pool``, when given: one a `call_tool` under way took).

        Raises:
            SandboxError: the runtime is closed (or was closed meanwhile, by another thread), or in a fork.
        """
        from sandbox.errors import SandboxError
        from tool_tree.pool import PoolError

        self._refuse_in_fork()
        pool = pool or self._pool
        if pool is not None:
            with contextlib.suppress(PoolError):  # its `with` block ended since: closed by another thread
                return pool.loop
        raise SandboxError(CLOSED)

    @property
    def bridge(self) -> McpBridge:
        """The sandbox's bridge, the runtime opened on first use.

        Raises:
            SandboxError: the runtime was closed (before: it opened again, its servers left running; `open` it
                again explicitly to use it once more), or this is a fork of the process that opened it.
        """
        from sandbox.errors import SandboxError

        self._refuse_in_fork()
        closed = SandboxError(CLOSED)
        if self._bridge is None:
            if self._closed.is_set():
                raise closed
            self.open()
        bridge = self._bridge
        if bridge is None:  # closed by another thread meanwhile
            raise closed
        return bridge

    @property
    def on_tree_now(self) -> bool:
        """Whether the runtime is open on the tree's manifest as it is on disk now: False once a `generate-tree`
        replaced it, or while closed. Never opens it."""
        bridge = self._bridge
        return bridge is not None and not bridge.regenerated()

    def call_tool(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        cancel: CallCancel | None = None,
        progress: ProgressListener | None = None,
        asker: Asker | None = None,
    ) -> dict[str, Any]:
        """Call one tool through a bridge, from a thread that is not the pool's loop.

        Not the sandbox's bridge: that one holds the budgets of the script running there, which a call
        made here must neither reset nor spend. Its companion (same pool, manifest, audit log and
        schema validators) counts each call on its own. ``cancel``: another thread may cancel the call with it.
        ``progress``: told the server's progress notifications for the call, on the server pool's thread
        (`tool_tree.pool.ProgressListener`: thread-safe, never blocking). ``asker``: answers what the server asks
        during the call (`tool_tree.server_asks.Asker`, awaited on the server pool's loop), else refused.

        Raises:
            ToolCallRefused: the bridge refused the call or the server is unavailable; ``cancelled``: ``cancel``
                cancelled it.
            SandboxError: the runtime was closed (by another thread: before or during the call), or in a fork, or
                this is the server pool's own thread (an ``on_tools_changed`` listener, a coroutine on its loop): the
                call would wait there for itself.
            TypeError: ``progress`` is an ``async def`` function (it would never run).
        """
        from sandbox.bridge import ToolCallRefused, resolve
        from sandbox.errors import SandboxError
        from sandbox.session_args import refuse_on_pool_loop
        from tool_tree.listeners import refuse_async

        refuse_async(progress, "progress")
        self._refuse_in_fork()  # before the direct bridge's lock, which the parent may have held at the fork
        bridge, pool = self._direct_bridge()
        try:
            loop = self._running_loop(pool)  # not an AssertionError when another thread closed the runtime meanwhile
            refuse_on_pool_loop(loop)  # before: the call waited for ever, and every call of the pool with it
            bridge.begin_execution()
            started = cancel.started if cancel is not None else None
            return resolve(
                bridge.call_tool(server, tool, arguments, progress=progress, asker=asker), loop, started=started
            )
        except concurrent.futures.CancelledError:  # before: that error itself, undocumented
            if cancel is not None and cancel.cancelled:
                raise ToolCallRefused("the call was cancelled before the server answered", "cancelled") from None
            raise SandboxError("the runtime was closed during the call (its outcome is unknown)") from None
        finally:
            self._call_ended(pool)

    def _direct_bridge(self) -> tuple[McpBridge, BackgroundPool | None]:
        """The bridge of `call_tool`, made on its first call (it shares the sandbox bridge's checked schemas), and the
        server pool it calls, counted in flight until `_call_ended`."""
        with self._direct_lock:
            if self._direct is None:
                self._direct = self.bridge.companion()  # opens the runtime if needed
            pool = self._pool
            if pool is not None:
                self._in_flight[id(pool)] = self._in_flight.get(id(pool), 0) + 1
            return self._direct, pool

    def _call_ended(self, pool: BackgroundPool | None) -> None:
        """A `call_tool` on ``pool`` ended: the last one on a pool of a tree the runtime left stops it."""
        if pool is None:
            return
        with self._direct_lock:
            left = self._in_flight.pop(id(pool), 1) - 1
            if left:
                self._in_flight[id(pool)] = left
            retired = self._retiring.pop(id(pool), None) if not left else None
        if retired is not None:
            retired.close()

    def close(self, *, interrupted: bool = False) -> None:
        """Save the workspace (when one was given), stop the sandbox and the servers.

        ``interrupted``: Ctrl-C stopped the runtime's user (as when it leaves the runtime's ``with``): a stdio server
        still at a call (the one stopped, or one given up on unanswered) gets SIGTERM as its stdin closes, not after
        the 2 s of grace a server is given to leave on its own. From any thread: a sandbox still starting in another
        is stopped by that thread once it has started.
        """
        if self._finalizer is not None:
            self._finalizer.detach()  # closed: nothing to warn of
        with self._handover:
            self._closed.set()
            sandbox, self._sandbox = self._sandbox, None
        try:
            if sandbox is not None:
                sandbox.close()
        finally:
            with self._direct_lock:  # before `_open_lock`, as `_direct_bridge` and `_follow_tree` take them
                retiring = list(self._retiring.values())
                self._retiring.clear()
            with self._open_lock:  # a close from another thread meanwhile returns once the servers are stopped
                pool, self._pool = self._pool, None
                self._bridge = None
                self._direct = None
                try:
                    for left in [*retiring, pool]:
                        if left is not None:
                            left.close(interrupted=interrupted)
                finally:
                    if self._audit is not None:
                        self._audit.close()
                        self._audit = None
