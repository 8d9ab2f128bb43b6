"""`Sandbox`: one session — a container with its own interpreter state and workspace.

::

    with Sandbox(tree="tree", tools=handler, workspace="runs/42") as sb:
        result = sb.execute("from servers.crm import list_leads\\nprint(len(list_leads().json()['leads']))")
        print(result.stdout, result.ledger())

``handler(server, tool, arguments)`` returns the tool's result (a ``tools/call`` result as a dict); the stubs are
those of the tree (``tooltree generate-tree``).

The workspace, when a host directory is given, is restored into the container's tmpfs at
start and saved back on `close` (which stops a script running meanwhile first, as `cancel` does). A started session
dropped without `close` (or `kill`) warns (`ResourceWarning`, as an unclosed file does) when it is garbage-collected
or at interpreter exit, and its container is then destroyed without saving the workspace. Tool calls from the script
go to the session's `ToolBridge`, many at once, served by its `CallServer` (`sandbox.calls`); the host keeps the ledger
of them itself.

`Sandbox` takes its executions (`execute`, `aexecute`, `cancel`, `reset`, and the state kept between them) from
`sandbox.session_executions`, and its workspace operations (`read_file`, `list_folder`, `save_workspace`) from
`sandbox.session_files`.

(Over 400 lines: the session's lifecycle, its start, the restore of its workspace and its close, share one channel
with its executions and its workspace operations, its locks and the checks that guard them: its arguments
(`sandbox.session_args`), the thread running its tool loop, a forked child.)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import stat
import threading
import uuid
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from sandbox.backend import SandboxBackend
from sandbox.bridge import ToolBridge, ToolHandler
from sandbox.calls import CallServer
from sandbox.channel import SupervisorChannel
from sandbox.config import SandboxConfig
from sandbox.errors import IncompleteTreeError, SandboxError, SessionError, WorkspaceError
from sandbox.session_args import same_tree, tool_bridge, tree_in_workspace, workspace_folder
from sandbox.session_executions import _INTERRUPT_WAIT, _OP_TIMEOUT, _Executions
from sandbox.session_files import NOTES_KEPT as NOTES_KEPT
from sandbox.session_files import Listing as Listing
from sandbox.session_files import _WorkspaceFiles
from sandbox.streamed import StreamedOutput
from sandbox.workspace import MAX_ENTRIES, iter_restore_batches, restoring
from sandbox.workspace_merge import RestoreRecord
from tool_tree.text import shown

logger = logging.getLogger(__name__)

UNSAVED_LOG = "sandbox %s: workspace not saved: %s"
"""How `Sandbox.close` logs that the sandbox ended before the workspace could be saved (`Sandbox.not_saved`)."""
_STOP_RETRY = 0.1
"""Seconds between `Sandbox.close`'s tries to stop the running script (`Sandbox._stop_running`)."""


def open_channel(backend: SandboxBackend, session_id: str) -> SupervisorChannel:
    """Launch one sandbox and wait until its supervisor is ready and verified; once more when its tree volume held no
    whole copy of the tree (`IncompleteTreeError`: the backend copies the tree again first).

    Before: that start failed, 'its tree volume holds no whole copy of the tree', when the volume was removed between
    the backend's finding it and the container's create (`tooltree sandbox prune`), and the engine made an empty one.

    Raises:
        HardeningError: the sandbox is not confined as required.
        IncompleteTreeError: the second start found no whole copy of the tree either.
        SessionError: it did not start.
        SandboxError: the backend could not launch it.
    """
    try:
        return _open_channel(backend, session_id)
    except IncompleteTreeError as e:
        logger.info("%s; starting the sandbox once more", e)
    return _open_channel(backend, session_id)


def _open_channel(backend: SandboxBackend, session_id: str) -> SupervisorChannel:
    connection = backend.launch(session_id)
    channel: SupervisorChannel | None = None
    try:
        channel = SupervisorChannel(connection, session_id)
        status = channel.wait_ready(backend.config.start_timeout)
        backend.verify_ready(connection, status)
    except BaseException:  # an interrupt (Ctrl-C) too: the container is never left behind
        if channel is not None:
            channel.kill()
        else:
            connection.kill()
        raise
    return channel


def _skills_file(folder: Path) -> str | None:
    """The note for a ``folder`` whose ``skills`` is a file (None: it is not), which is then not restored.

    The sandbox makes ``skills/``, the folder of the functions scripts save, before the restore, which cannot then
    put a file in its place: the session starts without it, and its save keeps the file as ``skills.host`` (the
    merge's rule for a host file where the sandbox has a folder), so the folder is whole again. Before: "could not
    restore the workspace …: its skills is a file … rename the file", exit 4 at every start, which under ``serve``
    only the user could mend, after a script had replaced ``skills/`` with a file (an earlier "cannot restore
    'skills': Is a directory … make it fit" advised about the size)."""
    try:
        st = os.lstat(folder / "skills")
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None  # a folder is restored into; a link or special file never crosses
    return (
        "its skills is a file, and the sandbox keeps the functions scripts save in a folder of that name (skills/): "
        "the file was not restored (the session started with a new skills/), and the save keeps it as it is, as "
        "skills.host (skills.host-2, … when that name is taken)"
    )


def _unclosed(channel: SupervisorChannel, calls: CallServer, pid: int, workspace: Path | None) -> None:
    """A started `Sandbox` was collected (or the interpreter exits) without `close` or `kill`: say so (unless its
    session had broken, which ended its container), and destroy its container on a thread of its own (never on the
    collecting thread, which may hold the channel's locks)."""
    if pid != os.getpid() or channel.closed:  # a fork's copy (the parent's container), or destroyed already
        return

    def destroy() -> None:
        channel.kill()
        calls.close()

    # First: a warning made an error (``-W error``) must not leave the container. An interpreter ending may start no
    # thread: its exit closes the container's stdin, which ends the container.
    ended = channel.broken is not None  # it broke (or died), which ended its container: nothing ran on to warn of
    with contextlib.suppress(RuntimeError):
        threading.Thread(target=destroy, name="sandbox-unclosed", daemon=True).start()
    if ended:
        return
    unsaved = f", without saving its workspace {workspace}" if workspace is not None else ""
    warnings.warn(
        f"unclosed Sandbox (container {channel.connection.name}) dropped while running: its container is destroyed "
        f"now{unsaved}; use it as `with Sandbox(...) as sandbox:`, or call sandbox.close()",
        ResourceWarning,
        stacklevel=3,  # the code that dropped it, when that was the last reference
    )


def _weak(method: Callable[[str, dict[str, Any]], None]) -> Callable[[str, dict[str, Any]], None]:
    """``method`` of an object the channel must not keep alive (a `Sandbox` dropped unclosed is then collected)."""
    ref = weakref.WeakMethod(method)

    def told(name: str, message: dict[str, Any]) -> None:
        if (bound := ref()) is not None:
            bound(name, message)

    return told


class Sandbox(_Executions, _WorkspaceFiles):
    """A sandbox session. Use as a context manager, or call `start` and `close`.

    Args:
        backend: what runs the container; default a `DockerBackend` built from ``config`` and ``tree``.
        tools: the `ToolBridge` (or a plain handler function) that script tool calls go to.
        workspace: a host directory restored into ``/workspace`` at start and saved back on close.
        config: used only to build the default backend.
        tree: used only to build the default backend.
        tool_loop: the event loop on which async bridge methods run; for an `McpBridge`, the loop of
            its server pool (``BackgroundPool.loop``): required.

    Raises:
        TypeError: ``backend`` is a `SandboxConfig` (it goes as ``config=``); ``tools`` is not a `ToolBridge`, a
            function or None; ``config`` is not a `SandboxConfig`
            or None; ``workspace`` is not a path or None.
        ValueError: ``tools`` is an `McpBridge` (a bridge whose ``loop_bound`` is true) and ``tool_loop``
            is None, or one of another tree than the sandbox's; ``workspace`` or ``tree`` is an empty string.
        WorkspaceError: ``workspace`` exists and is not a folder, or holds the tree or lies inside it.
    """

    def __init__(
        self,
        backend: SandboxBackend | None = None,
        *,
        tools: ToolBridge | ToolHandler | None = None,
        workspace: str | Path | None = None,
        config: SandboxConfig | None = None,
        tree: str | Path | None = None,
        tool_loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        if isinstance(backend, SandboxConfig):  # before: "'SandboxConfig' object has no attribute 'config'"
            raise TypeError("Sandbox's first argument is the backend, not a SandboxConfig: pass it as config=… "
                            "(Sandbox(config=cfg, tree=…))")  # fmt: skip
        bridge = tool_bridge(tools, tool_loop)
        given: object = config  # typed, but a caller may hand a dict or tooltree's Config
        if given is not None and not isinstance(given, SandboxConfig):
            hint = " (a tooltree.yaml's: SandboxConfig.from_config(config))" if hasattr(config, "servers") else ""
            raise TypeError(
                f"config must be a SandboxConfig{hint} or None, got {type(config).__name__} {shown(config)}"
            )
        if tree is not None and not isinstance(tree, str | os.PathLike):  # before: os.fspath's error, unnamed
            raise TypeError(f"tree must be the path (str or os.PathLike) of a tree or None, got {shown(tree)}")
        if backend is None:
            from sandbox.docker_backend import DockerBackend

            backend = DockerBackend(config, tree=tree)
        same_tree(bridge, backend)
        self.backend = backend
        self.config = backend.config
        self.bridge = bridge
        self.workspace = workspace_folder(workspace) if workspace is not None else None
        # The tree the sandbox runs: the backend's, when one was given (`SandboxPool.acquire` gives its own). Before,
        # only a ``tree=`` was checked: a session from a pool, or of a backend, took a workspace holding its tree.
        run: object = tree if tree is not None else getattr(backend, "tree", None)
        if (
            self.workspace is not None
            and isinstance(run, str | os.PathLike)
            and (problem := tree_in_workspace(self.workspace, run))
        ):
            raise WorkspaceError(f"workspace {workspace} {problem}")
        self.workspace_notes: list[str] = []
        """What the user should know about the saves so far (conflicts kept beside, links not saved): the latest
        `NOTES_KEPT` (a save says one per read-only host file a script deleted: before, a session kept every note of
        every save, up to the entry cap's worth of paths each time)."""
        self.workspace_notes_total = 0
        """How many notes the saves so far gave, those no longer kept in `workspace_notes` too."""
        self._restored: RestoreRecord | None = None
        self._saved_stamp: str | None = None
        """The workspace's `workspace.stamp` when it was last saved into its folder; None before the first save,
        which always happens: the sandbox adds to what it restored (``skills/``), and the folder gets that too."""
        self.last_save: dict[str, int] = {}
        """What the last save (`save_workspace`) moved: ``files`` (sent with their data), ``same`` (left as the
        session's previous save into its folder sent them: not sent again), ``dirs`` and ``bytes`` of data."""
        self.not_saved: str | None = None
        """Why the workspace was not saved into its folder at the session's end: the sandbox had ended (its container
        killed or exited) before `close`, or `kill` destroyed it; the folder is left as the last save left it. None
        otherwise (a save that failed raises instead)."""
        self._links_said: int | None = None
        """How many links or special files the last save into the session's folder left out (its note says so)."""
        self._leftovers_looked: set[Path] = set()
        """Folders this session looked beside for leftovers of unfinished saves (`leftovers_note`): once each, at the
        first save (listing the folder's parent at every save would cost each script's save a directory read)."""
        self._saved_as: str | None = None
        """The id of the save that left ``_restored`` (the sandbox's answer): the next save into the folder continues
        it, sending only what changed since (``since``). None before the first save, which sends everything."""
        self.tool_loop = tool_loop
        self.session_id = uuid.uuid4().hex
        self._channel: SupervisorChannel | None = None
        self._lock = threading.Lock()
        self._life = threading.Lock()
        """Held by `start` and `close`: one container per session, and a close waits for a start under way."""
        self._calls = CallServer(self.bridge, tool_loop)
        self._closed = False
        self._ended: str | None = None  # why the session destroyed its own sandbox (it stopped answering)
        self._stopped_by_close = False  # `close` cancelled the running execution (`_stop_running`)
        self._printing: StreamedOutput | None = None  # what the running execution has printed so far
        self._reset_unsaid = False
        """The result of an execution a Ctrl-C left said its interpreter was restarted: the next result says so."""
        self._pid = os.getpid()
        """The process whose threads read the channel; a fork of it has the connection but not them."""
        self._finalizer: weakref.finalize[Any, Any] | None = None
        """Warns of the session's container left running when it is collected unclosed (`_unclosed`)."""

    # ---- lifecycle ------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The container's name (empty before start)."""
        return self._channel.connection.name if self._channel else ""

    @property
    def tree_manifest(self) -> tuple[int, ...] | None:
        """The version of the manifest file (`sandbox.stored_definitions.manifest_version`) of the tree whose copy its
        container mounts, when its backend says (`sandbox.docker_backend.DockerConnection.tree_manifest`); None before
        `start`, or when not known."""
        channel = self._channel
        mounted = getattr(channel.connection, "tree_manifest", None) if channel is not None else None
        return tuple(mounted) if mounted is not None else None

    @property
    def ended(self) -> str | None:
        """Why this session can run nothing more, when its sandbox ended without `close` or `kill`: its container
        exited or was killed (past ``sandbox.memory`` under gVisor, ``docker kill``), the engine restarted, it broke
        the protocol, or it stopped answering and was destroyed. None while usable, before `start`, after `close`.
        """
        if self._ended is not None:
            return self._ended
        channel = self._channel
        return channel.broken if channel is not None and not self._closed else None

    def start(self) -> Sandbox:
        """Start the container (if not started) and restore the workspace.

        Raises:
            HardeningError: the container is not confined as required.
            SessionError: it did not start.
            WorkspaceError: the workspace could not be restored.
            SandboxError: anything else the backend raises.
        """
        # Before: two threads starting one session each launched a container; the session kept the last, and the
        # other ran on after close. A close meanwhile returned while the container still started.
        with self._life:
            if self._closed:
                raise SessionError("the sandbox session is closed")
            if self._channel is None:
                channel = open_channel(self.backend, self.session_id)
                try:
                    self.attach(channel)
                except BaseException:  # an interrupt during the restore too: the container goes, the folder stays
                    self._channel = channel
                    self.kill()
                    raise
        return self

    def attach(self, channel: SupervisorChannel) -> None:
        """Use an already started channel (from a pool) and restore the workspace into it.

        Raises:
            WorkspaceError: the workspace could not be restored.
        """
        if self._closed:
            raise SessionError("the sandbox session is closed")
        self.session_id = channel.session_id
        self._channel = channel
        self._pid = os.getpid()
        if self._closed_meanwhile():  # a `kill` from another thread since the check: it may not have seen this channel
            self.kill()
            raise SessionError("the sandbox session was killed while it started")
        self._calls.account = channel.budget
        channel.on_request = functools.partial(self._calls.on_request, channel)
        channel.on_late_reply = _weak(self._late_reply)
        if self._finalizer is None:
            self._finalizer = weakref.finalize(self, _unclosed, channel, self._calls, self._pid, self.workspace)
        if self.workspace is not None:
            self._restored = RestoreRecord()
        if self.workspace is not None and self.workspace.is_dir():
            try:
                # Not half of a save another session is merging into the folder (`restoring`).
                with self._lock, restoring(self.workspace):  # an execute from another thread waits for all of it
                    self._restored = RestoreRecord.before_restore(self.workspace)
                    skills = _skills_file(self.workspace)
                    if skills is not None:  # neither sent nor recorded: to the save, the host's own file
                        self._restored.entries.pop(b"skills", None)
                    batches = iter_restore_batches(
                        self.workspace, max_bytes=self.config.workspace_bytes, skip_top=skills is not None
                    )
                    for method, params in self._restored.sent(batches):
                        channel.request(method, params, timeout=_OP_TIMEOUT)
            except SandboxError as e:
                self.kill()  # nothing is saved from a partial restore: the folder on the host stays as it is
                if isinstance(e, WorkspaceError) and e.unreadable:  # before: advised to make it fit, all the same
                    advice = "make that entry readable by this user, or move it out of the folder, or start without it"
                elif isinstance(e, WorkspaceError) and e.busy:
                    advice = "try again once that save has ended"
                else:
                    advice = (
                        f"make it fit (at most {MAX_ENTRIES} files and folders, {self.config.workspace_size} of data: "
                        "sandbox setting workspace_size) or start without it"
                    )
                raise WorkspaceError(
                    f"could not restore the workspace {self.workspace}: {e}. Nothing in it was changed; {advice}"
                ) from None
            except BaseException:  # interrupted (Ctrl-C): likewise, nothing saved and the container destroyed
                self.kill()
                raise
            if skills is not None:
                self._keep_notes(self.workspace, [skills])

    def _closed_meanwhile(self) -> bool:
        """``_closed`` read again (a method: after a check of it, mypy would take it as unchanged)."""
        return self._closed

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _require_channel(self) -> SupervisorChannel:
        if self._channel is None:  # closed before it started: `start` refuses it too, so it is not advised
            raise SessionError(
                "the sandbox session is closed"
                if self._closed
                else "the sandbox session is not started (use it as a context manager or call start())"
            )
        self._refuse_in_fork()
        return self._channel

    def _refuse_in_fork(self) -> None:
        """Raises: SessionError: this is a fork of the process that started the session (checked before the
        session's lock, which the parent may have held at the fork)."""
        if self._forked():
            # Its request went out on the shared connection, its answer reached the parent's reader, which took it
            # for a protocol violation and destroyed the parent's container; the child waited out its timeout.
            raise SessionError(
                f"this sandbox session runs in process {self._pid}, not in this one (a fork of it shares the "
                "container's connection but not the threads that read it): start a new Sandbox here"
            )

    def _forked(self) -> bool:
        return self._channel is not None and self._pid != os.getpid()

    def close(self) -> None:
        """Save the workspace (when one was given) and destroy the container.

        From any thread. With a workspace, an execution running meanwhile is stopped first, as `cancel` stops it
        (within seconds): its `execute` returns a result with ``cancelled=True`` whose ``error`` says the session was
        closed, and what the script wrote until then is saved; an execution waiting for its turn is refused
        (`SessionError`), never run. Without a workspace the container is destroyed at once, and a running `execute`
        raises `SessionError` ("the sandbox session is closed"). From `execute`'s ``on_output`` listener (on the
        thread that reads the sandbox's answers) it returns at once, the close done on a thread of its own (a save
        that failed is logged).

        In a forked child of the process that started it, this only closes the session there: the container
        and the workspace are left to that process.

        Raises:
            WorkspaceError: the workspace could not be saved (the container is destroyed anyway).
        """
        self._closed_now()
        if self._pid != os.getpid():  # before the lock, which the parent may have held (starting it) at the fork
            self._closed = True
            return
        channel = self._channel
        if channel is not None and self.workspace is not None and channel.reads_here():
            # `execute`'s on_output listener: its thread reads the sandbox's answers, the cancel's and the save's too.
            # Before: the close waited there for the script's timeout, which destroyed the sandbox, its files unsaved.
            threading.Thread(target=self._close_logged, name="sandbox-close").start()
            return
        with self._life:  # a second close returns once the first one's save and removal are done
            self._close()

    def _close_logged(self) -> None:
        """`close` on a thread of its own (asked from `execute`'s ``on_output`` listener): a failed save is logged."""
        try:
            self.close()
        except WorkspaceError as e:
            logger.warning("sandbox %s: %s", self.name, e)

    def _closed_now(self) -> None:
        """`close` or `kill` was called: the session is not left open (nothing to warn of when it is collected)."""
        if self._finalizer is not None:
            self._finalizer.detach()

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._forked():
            return
        channel = self._channel
        try:
            if channel is not None and self.workspace is not None:
                if channel.broken is None:
                    self._stop_running(channel)
                if channel.broken is None:
                    self.save_workspace_if_changed()  # a save after each script (`tooltree serve`) left nothing
                else:
                    self.not_saved = channel.broken
                    logger.warning(UNSAVED_LOG, channel.connection.name, channel.broken)
                    self._keep_notes(self.workspace, self._leftovers(self.workspace))
        finally:
            if channel is not None:
                channel.close()
            self._calls.close()

    def _stop_running(self, channel: SupervisorChannel) -> None:
        """`close` with a workspace: the running execution is stopped first, as `cancel` stops it, and the save waits
        for it to end (seconds: an interrupt, the interpreter restarted after 3 s if it did not stop), not for the
        script's whole run. No execution starts meanwhile (`_execute` refuses once the session is closed).

        Before: a close from another thread waited for the script to end (18 s of a 20 s sleep) before it saved."""
        while not self._lock.acquire(timeout=_STOP_RETRY):
            # Tried again while it runs: a script begun but not yet sent finds nothing to cancel in the sandbox.
            if not self._stopped_by_close and self._calls.executing and not channel.reads_here():
                self._stopped_by_close = True  # before the cancel: its result may come before the cancel's answer
                self._stopped_by_close = self._cancel_on(channel)
        try:  # one a Ctrl-C left (stopped already) ends before the save reads its files
            channel.wait_left("execute", _INTERRUPT_WAIT)
        finally:
            self._lock.release()

    def kill(self) -> None:
        """Destroy the container without saving anything (in a forked child: as `close`)."""
        self._closed_now()
        if not self._closed and self.workspace is not None and self._channel is not None:
            self.not_saved = self._ended or "the sandbox session was destroyed"
        self._closed = True
        if self._forked():
            return
        if self._channel is not None:
            self._channel.kill()
        self._calls.close()
