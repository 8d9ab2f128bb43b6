"""`Sandbox`: one session — a container with its own interpreter state and workspace.

::

    with Sandbox(tree="tree", tools=handler, workspace="runs/42") as sb:
        result = sb.execute("from servers.crm import list_leads\\nprint(len(list_leads().json()['leads']))")
        print(result.stdout, result.ledger())

``handler(server, tool, arguments)`` returns the tool's result (a ``tools/call`` result as a dict); the stubs are
those of the tree (``tooltree generate-tree``).

State between executions: workspace files always; interpreter state (variables, imports)
too, because one long-lived worker process runs every execution of the session in the same
namespace. `reset` starts a fresh worker (``reset(workspace=True)`` also empties the
workspace). A timeout or crash restarts the worker as well; the result says
``state_reset=True``.

The workspace, when a host directory is given, is restored into the container's tmpfs at
start and saved back on `close` (which stops a script running meanwhile first, as `cancel` does). A started session
dropped without `close` (or `kill`) warns (`ResourceWarning`, as an unclosed file does) when it is garbage-collected
or at interpreter exit, and its container is then destroyed without saving the workspace. Tool calls from the script
go to the session's `ToolBridge`, many at once, served by its `CallServer` (`sandbox.calls`); the host keeps the ledger
of them itself.

(Over 400 lines: the session's lifecycle, its executions and its workspace operations share one channel,
its locks and the checks that guard them: its arguments (`sandbox.session_args`), the thread running its
tool loop, a forked child.)
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import dataclasses
import functools
import logging
import os
import stat
import threading
import time
import uuid
import warnings
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple

from sandbox._supervisor.limits import MAX_LIST_ENTRIES
from sandbox.backend import SandboxBackend
from sandbox.bridge import ToolBridge, ToolHandler
from sandbox.calls import NAME_CHARS, CallServer
from sandbox.channel import INTERRUPTED_ANSWER, SessionTimeoutError, SupervisorChannel
from sandbox.config import TREE_MOUNT, SandboxConfig
from sandbox.errors import (
    INTERRUPTED_EXECUTION,
    INTERRUPTED_UNREPORTED,
    IncompleteTreeError,
    ProtocolError,
    SandboxError,
    SessionError,
    Unreported,
    WorkspaceError,
)
from sandbox.results import ExecutionResult, ToolCallRecord, parse_execution, reported_count
from sandbox.session_args import (
    check_code,
    count,
    refuse_on_loop,
    same_tree,
    timeout_seconds,
    tool_bridge,
    tree_in_workspace,
    workspace_folder,
    workspace_path,
)
from sandbox.streamed import OutputListener, StreamedOutput
from sandbox.workspace import MAX_ENTRIES, WorkspaceReceiver, iter_restore_batches, leftovers_note, restoring
from sandbox.workspace_merge import RestoreRecord
from tool_tree.listeners import refuse_async
from tool_tree.text import shown

logger = logging.getLogger(__name__)

NOTES_KEPT = 1_000
"""Notes of workspace saves a session keeps (`Sandbox.workspace_notes`, the latest) and one save logs (its first)."""
UNSAVED_LOG = "sandbox %s: workspace not saved: %s"
"""How `Sandbox.close` logs that the sandbox ended before the workspace could be saved (`Sandbox.not_saved`)."""
_GRACE_SECONDS = 15.0
_SCRIPT_END_SLACK = 5.0
"""Seconds after its timeout from which a script's requests are taken for ones it left behind (`CallServer.begin`).
The supervisor starts a script's clock once its interpreter is ready: after a timeout or a reset it first waits for
the new one, so a slack of 1 s could refuse an honest script's last calls as "the execution's time is up" on a
loaded machine. Within the host's deadline (timeout + 15 s), 10 s are left for reading on."""
_OP_TIMEOUT = 120.0
_STOP_RETRY = 0.1
"""Seconds between `Sandbox.close`'s tries to stop the running script (`Sandbox._stop_running`)."""
_INTERRUPT_WAIT = 10.0
"""Seconds a Ctrl-C in `Sandbox.execute` waits for the script it stops (the sandbox gives it 3 s, then restarts the
interpreter) before the KeyboardInterrupt goes on; a second Ctrl-C goes on at once."""


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


def _skills_problem(folder: Path) -> str | None:
    """Why ``folder`` cannot be restored because of its ``skills`` (None: it can).

    The sandbox makes ``skills/``, the folder of the functions scripts save, before the restore, which cannot then
    put a file in its place. Before: "cannot restore 'skills': Is a directory … make it fit", at every start, for a
    file a user named so or a script left there, with advice about the size."""
    try:
        st = os.lstat(folder / "skills")
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None  # a folder is restored into; a link or special file never crosses
    return (
        f"could not restore the workspace {folder}: its skills is a file, and the sandbox keeps the functions scripts "
        f"save in a folder of that name (skills/); rename the file (or make it a folder) and start again. Nothing "
        "in the workspace was changed"
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


@contextlib.contextmanager
def _tree_link(relative: str, method: str, backend: SandboxBackend) -> Iterator[None]:
    """A workspace operation's `SessionError` for a path through ``servers``, the workspace's link to the tree (the
    operations never follow a link), said as what to do: read the tree on the host, or from a script.

    Before: ``list_folder("servers")`` failed with the sandbox's words alone ("workspace.list failed in the sandbox:
    'servers': Not a directory"), though the sandbox lists ``servers`` as an entry of the workspace.
    """
    try:
        yield
    except SessionError as e:
        text = str(e)
        if relative.split("/", 1)[0] != "servers" or not ("Not a directory" in text or "symbolic links" in text):
            raise
        tree = getattr(backend, "tree", None)  # a DockerBackend's: the host folder the tree was copied from
        host = f"{Path(tree) / relative}" if isinstance(tree, Path) else f"{relative} in the tree's folder"
        if method == "list_folder":
            script = f"import os; print(sorted(os.listdir({relative!r})))"
        else:
            script = f"print(open({relative!r}).read())"
        raise SessionError(
            f"{method}({relative!r}): /workspace/servers is the sandbox's read-only link to the tree ({TREE_MOUNT}/"
            f"servers), and {method} reads the workspace alone, never through a link: {method.split('_')[0]} "
            f"{host} on the host, or from a script: execute({script!r}) (the sandbox said: "
            f"{text.split(' failed in the sandbox: ', 1)[-1]})"
        ) from e


class Listing(NamedTuple):
    """What `Sandbox.list_folder` gives: ``entries, total = sandbox.list_folder(path, limit=500)``."""

    entries: list[dict[str, Any]]
    """The first entries, folders first, then by name: ``{"name", "type", "size"}`` each."""
    total: int
    """How many entries the folder holds in all (at least ``len(entries)``)."""


class _Turn:
    """One `aexecute`'s script: sent to the sandbox, or abandoned before it was (its task cancelled)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sent = self._abandoned = self._ended = False

    def start(self) -> bool:
        """Just before the script is sent: whether it still may be."""
        with self._lock:
            self._sent = not self._abandoned
            return self._sent

    def abandon(self) -> bool:
        """The task was cancelled: no script is sent from now on; whether one was (and is to be cancelled)."""
        with self._lock:
            self._abandoned = True
            return self._sent

    def end(self) -> None:
        """Its script's answer came (or none will): the session's next script may be sent once this returns."""
        with self._lock:
            self._ended = True

    def cancel(self, stop: Callable[[], object]) -> None:
        """``stop()`` its script if it has not ended; `end` waits meanwhile, so the stop cannot reach the next one.

        Before: a task cancelled as its script ended stopped the session's next script, another caller's.
        """
        with self._lock:
            if self._sent and not self._ended:
                stop()


class Sandbox:
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
            if (problem := _skills_problem(self.workspace)) is not None:
                self.kill()
                raise WorkspaceError(problem)
            try:
                # Not half of a save another session is merging into the folder (`restoring`).
                with self._lock, restoring(self.workspace):  # an execute from another thread waits for all of it
                    self._restored = RestoreRecord.before_restore(self.workspace)
                    batches = iter_restore_batches(self.workspace, max_bytes=self.config.workspace_bytes)
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

    # ---- executions -----------------------------------------------------------------------

    def execute(
        self,
        code: str,
        *,
        timeout: float | None = None,
        filename: str | None = None,
        on_output: OutputListener | None = None,
    ) -> ExecutionResult:
        """Run ``code`` in the session and return what happened.

        ``filename`` names the code in its traceback (a script's path as the user gave it); the
        sandbox uses ``<cell-N>`` when it is None or not one line of plain text. ``on_output`` is called with
        ``("stdout" | "stderr", bytes, skipped)`` as the script's output arrives while it runs (``skipped``: how many
        bytes of the stream came between the last bytes it was given and these, 0 within the first 4 ×
        ``output_chars``: `sandbox.streamed.OutputListener`), on the channel's thread: keep it short; e.g. to show it
        live, or `cancel` the script on a line it printed.

        A script that raises, exits non-zero or times out gives a result with ``error`` set, not
        an exception; after a timeout the session stays usable (with fresh interpreter state). One that `close`
        stopped (from another thread, with a workspace) gives a result with ``cancelled=True``.

        ``timeout`` is in seconds, more than 0 and at most a week (`sandbox.config.MAX_TIMEOUT`); None: the config's.

        Raises:
            TypeError: ``code`` is not a str, ``timeout`` not a number, ``filename`` not a str, or ``on_output`` not
                callable or an ``async def`` function (checked before anything runs or changes).
            ValueError: ``timeout`` is not more than 0 and at most a week (NaN and infinity included), or ``code``
                or ``filename`` has a character UTF-8 cannot encode (a lone surrogate).
            KeyboardInterrupt: Ctrl-C during the wait; the script is stopped as by `cancel` (waited for up to 10 s)
                and the session stays usable, its variables kept; the stopped script's result (``cancelled``) goes
                on with the interrupt when it came within that wait (`sandbox.errors.interrupted_execution`); else
                what it printed and the tool calls it made, as far as the host knows (`interrupted_unreported`).
            SessionError: the session is closed or broken, the sandbox stopped answering (it is then
                destroyed), or this is the thread that runs ``tool_loop`` (use `aexecute` there). One that ended
                the script carries the tool calls it had made (``tool_calls``, ``tool_calls_omitted``).
        """
        if on_output is not None and not callable(on_output):  # before: taken, then failed on each output, logged
            raise TypeError(
                f"on_output must be a function (stream, data, skipped) or None, got {type(on_output).__name__}"
            )
        refuse_async(on_output, "on_output")
        return self._execute(code, timeout, filename, None, on_output)

    def _execute(
        self,
        code: str,
        timeout: float | None,
        filename: str | None,
        turn: _Turn | None,
        on_output: OutputListener | None = None,
    ) -> ExecutionResult:
        """`execute`; ``turn``: an `aexecute`'s, which its cancelling may abandon before the script is sent."""
        check_code(code, filename)
        limit = self.config.timeout if timeout is None else timeout_seconds(timeout)
        refuse_on_loop(self.tool_loop)
        self._refuse_in_fork()
        with self._lock:
            channel = self._require_channel()
            if self._closed:  # a close under way, which stops the running script and saves: none starts meanwhile
                raise SessionError("the sandbox session is closed")
            # One a Ctrl-C left before its result may still run: it ends within seconds (before: "an execution is
            # already running").
            channel.wait_left("execute", _INTERRUPT_WAIT)
            self.bridge.begin_execution()
            # The supervisor stops the script `limit` seconds after it gets it; the slack covers the way there.
            ends_at = time.monotonic() + limit + _SCRIPT_END_SLACK
            self._calls.begin(ends_at)
            channel.expect_script_end(ends_at)
            if turn is not None and not turn.start():
                self._calls.end()
                channel.expect_script_end(None)
                raise SessionError("the execution was cancelled before its script was sent; nothing ran")
            started = time.monotonic()
            interrupted: KeyboardInterrupt | None = None
            answer: object = None
            ledger: list[ToolCallRecord] = []
            printed = self._printing = StreamedOutput(self.config.output_chars, on_output)
            try:
                try:
                    params: dict[str, Any] = {"code": code, "timeout": limit, "max_chars": self.config.output_chars}
                    if filename is not None:
                        params["filename"] = filename
                    raw = channel.request(
                        "execute",
                        params,
                        timeout=limit + _GRACE_SECONDS,
                        sink=printed.receive,
                        # Ctrl-C stops the script too, and returns once it has ended (before: it ran on to its
                        # timeout, and every execute of the session meanwhile failed, "an execution is already
                        # running").
                        on_interrupt=functools.partial(self._interrupted, channel),
                        interrupt_wait=_INTERRUPT_WAIT,
                    )
                except SessionTimeoutError:
                    self._ended = (
                        f"the sandbox did not report back within {limit + _GRACE_SECONDS:g} s and was destroyed"
                    )
                    self.kill()
                    raise SessionError(self._ended) from None
                except KeyboardInterrupt as e:  # the stopped script's result goes on with it, when it came in time
                    interrupted, answer = e, getattr(e, INTERRUPTED_ANSWER, None)
                finally:
                    if turn is not None:
                        turn.end()  # first: a cancel of this turn under way is sent while this script still runs
                    ledger = self._calls.end()
                    channel.expect_script_end(None)
                    self._printing = None
            except SessionError as e:
                # The sandbox ended (or was destroyed) under the script: the calls the bridge handled for it happened
                # all the same. Before: only the error's text, and a caller made them again.
                e.tool_calls, e.tool_calls_omitted = tuple(ledger), self._calls.omitted
                e.stdout, e.stderr = printed.text("stdout"), printed.text("stderr")  # before: lost with the sandbox
                raise
            if interrupted is None:
                result = parse_execution(
                    raw,
                    max_chars=self.config.output_chars,
                    duration=time.monotonic() - started,
                    tool_calls=ledger,
                    tool_calls_omitted=self._calls.omitted,
                )
                if result.cancelled and self._stopped_by_close:
                    result = dataclasses.replace(
                        result, error=f"{result.error}: the sandbox session was closed, which stopped the script"
                    )
                if self._reset_unsaid:  # before: a NameError for a variable the caller had set, and no word why
                    self._reset_unsaid = False
                    result = dataclasses.replace(result, state_reset=True)
                return result
            # What it did as far as the host knows, for when its result did not come (second Ctrl-C, none in time).
            unreported = Unreported(printed.text("stdout"), printed.text("stderr"), tuple(ledger), self._calls.omitted)
            setattr(interrupted, INTERRUPTED_UNREPORTED, unreported)  # `sandbox.errors.interrupted_unreported`
            if isinstance(answer, dict):
                with contextlib.suppress(ProtocolError):  # a malformed answer: the interrupt goes on without it
                    stopped = parse_execution(
                        answer,
                        max_chars=self.config.output_chars,
                        duration=time.monotonic() - started,
                        tool_calls=ledger,
                        tool_calls_omitted=self._calls.omitted,
                    )
                    setattr(interrupted, INTERRUPTED_EXECUTION, stopped)  # `sandbox.errors.interrupted_execution`
            raise interrupted

    def _late_reply(self, method: str, message: dict[str, Any]) -> None:
        """The reply to a request a Ctrl-C left before it came (`SupervisorChannel.on_late_reply`): an execution's
        that restarted its interpreter (a script that did not stop) makes the next result say so."""
        result = message.get("result")
        if method == "execute" and isinstance(result, dict) and result.get("state_reset") is True:
            self._reset_unsaid = True

    def last_printed(self) -> str | None:
        """The last line the running execution has printed so far, as far as the sandbox sent it (cleaned, on one
        line, at most 200 characters), from any thread; None when none runs or it printed no line yet."""
        printing = self._printing
        return None if printing is None else printing.last_line()

    @staticmethod
    def _interrupted(channel: SupervisorChannel) -> None:
        """Ctrl-C in `execute`: stop its script (the sandbox's answer to the cancel comes at once)."""
        channel.script_stopped()
        with contextlib.suppress(SessionError):
            channel.request("cancel", {}, timeout=_INTERRUPT_WAIT)

    def cancel(self) -> bool:
        """Stop the execution running now, from any thread; the session stays usable. From `execute`'s ``on_output``
        listener (on the thread that reads the sandbox's answers) it returns True at once, the cancel sent from a
        thread of its own.

        The script gets one KeyboardInterrupt (its ``except``/``finally`` clean-up is not interrupted again), so
        variables and imports survive; one that does not stop within a few seconds has its interpreter restarted
        (the result says ``state_reset``).
        The running `execute` returns a result with ``cancelled=True``. Returns False when no
        execution was running (or the session is closed or broken).
        """
        channel = self._channel if self._calls.executing and not self._forked() else None
        if channel is None:
            return False
        if channel.reads_here():
            # An `execute`'s on_output listener: its thread reads the sandbox's answers, this one's too. Before: it
            # waited for it, and the script's output with it, until the sandbox was destroyed as not answering.
            threading.Thread(target=self._cancel_on, args=(channel,), name="sandbox-cancel", daemon=True).start()
            return True
        return self._cancel_on(channel)

    @staticmethod
    def _cancel_on(channel: SupervisorChannel) -> bool:
        """`cancel`'s request: whether the sandbox stopped a script."""
        channel.script_stopped()
        try:
            # Frames go out in order: this cancel reaches the supervisor before any later execute.
            return channel.request("cancel", {}, timeout=_OP_TIMEOUT).get("cancelled") is True
        except SessionError:
            return False

    async def aexecute(
        self, code: str, *, timeout: float | None = None, filename: str | None = None
    ) -> ExecutionResult:
        """`execute` for async callers (runs in a worker thread).

        Cancelling the awaiting task (``asyncio.wait_for``, a task group) cancels the execution in the sandbox
        too, as `cancel` does, so the session's next execution does not wait for it; one still waiting for
        its turn (another execution runs) is never sent, and the running one goes on.

        Raises:
            TypeError, ValueError, SessionError: as `execute`.
        """
        turn = _Turn()
        try:
            return await asyncio.to_thread(self._execute, code, timeout, filename, turn)
        except asyncio.CancelledError:
            # The worker thread runs on. Its script, if sent, is stopped (before, it ran to its timeout, holding the
            # session); if not sent yet (waiting for another execution to end), it never is: cancelling the running
            # one would stop another caller's script. Not awaited: the task is being cancelled.
            if turn.abandon():
                asyncio.get_running_loop().run_in_executor(None, turn.cancel, self.cancel)
            raise

    def reset(self, *, workspace: bool = False) -> None:
        """Start clean: a fresh interpreter; with ``workspace=True`` also an empty workspace.

        Raises:
            TypeError: ``workspace`` is not a bool.
            SessionError: the session is closed or broken.
        """
        if not isinstance(workspace, bool):  # "no" was true: the workspace was emptied
            raise TypeError(f"workspace must be True or False, got {type(workspace).__name__} {shown(workspace)}")
        self._refuse_in_fork()
        with self._lock:
            channel = self._require_channel()
            if self._closed:  # a close under way saves the workspace next: never emptied before it
                raise SessionError("the sandbox session is closed")
            channel.request("reset", {"workspace": workspace}, timeout=_OP_TIMEOUT)

    # ---- files ----------------------------------------------------------------------------

    def read_file(self, path: str | os.PathLike[str], *, max_bytes: int = 1 << 20) -> bytes:
        """Up to ``max_bytes`` of a regular file in the workspace.

        ``path`` (a str or a ``Path``) is relative to the workspace, or absolute under ``/workspace`` (as results name
        files). Symlinks are never followed: ``servers``, the link to the tree, neither (its error says where to read
        the tree instead).

        Raises:
            TypeError, ValueError: ``path`` is not a str or ``Path``, or ``max_bytes`` not a whole number of at least
                1.
            SessionError: no such regular file, a path under ``servers``, or the session is unusable.
        """
        relative, max_bytes = workspace_path(path), count(max_bytes, "max_bytes")
        self._refuse_in_fork()
        with self._lock, _tree_link(relative, "read_file", self.backend):
            raw = self._require_channel().request(
                "workspace.read", {"path": relative, "max_bytes": max_bytes}, timeout=_OP_TIMEOUT
            )
        try:
            data = base64.b64decode(str(raw.get("data", "")), validate=True)
        except (binascii.Error, ValueError):
            raise SessionError("the sandbox sent file data that is not base64") from None
        return data[:max_bytes]

    def list_files(self, path: str | os.PathLike[str] = "", *, limit: int = 1000) -> list[dict[str, Any]]:
        """Entries of a workspace directory: ``{"name", "type", "size"}``, at most ``limit`` (and at most
        `MAX_LIST_ENTRIES`, 32,768, so the answer fits a frame's value budget): the first ones, folders first, then
        by name. `list_folder` says how many the directory holds in all.

        Raises:
            TypeError, ValueError: ``path`` is not a str or ``Path``, or ``limit`` not a whole number of at least 1.
            SessionError: not a directory, or the session is unusable.
        """
        return self.list_folder(path, limit=limit).entries

    def list_folder(self, path: str | os.PathLike[str] = "", *, limit: int = 1000) -> Listing:
        """The first ``limit`` entries of a workspace directory, as `list_files` gives them, and how many it holds in
        all: a folder of any size is counted in one answer of at most ``limit`` entries.

        Before: only `list_files`, without the count, so a caller that showed 500 entries and the count asked for
        32,768 entries (about 2 MB from a big folder) to count them.

        The workspace alone: ``servers``, its link to the tree, is not followed (its error says where to list the
        tree instead).

        Raises:
            TypeError, ValueError: ``path`` is not a str or ``Path``, or ``limit`` not a whole number of at least 1.
            SessionError: not a directory, a path under ``servers``, or the session is unusable.
        """
        relative, limit = workspace_path(path), min(count(limit, "limit"), MAX_LIST_ENTRIES)
        self._refuse_in_fork()
        with self._lock, _tree_link(relative, "list_folder", self.backend):
            raw = self._require_channel().request(
                "workspace.list", {"path": relative, "limit": limit}, timeout=_OP_TIMEOUT
            )
        entries = raw.get("entries")
        out: list[dict[str, Any]] = []
        for e in entries[:limit] if isinstance(entries, list) else []:
            if isinstance(e, dict) and isinstance(e.get("name"), str) and reported_count(e.get("size")) is not None:
                out.append({"name": e["name"][:NAME_CHARS], "type": str(e.get("type"))[:10], "size": e["size"]})
        total = raw.get("total")  # the sandbox's word, like the entries: never fewer than those it sent
        if isinstance(total, bool) or not isinstance(total, int) or total < len(out):
            total = len(out)
        return Listing(out, total)

    def save_workspace_if_changed(self) -> bool:
        """`save_workspace` into the session's workspace folder, when anything in the workspace was made, written,
        moved or deleted since it was last saved there (the first call always saves); whether it saved.

        What changed is told by each entry's path, mode, size, mtime, ctime and inode (`workspace.stamp`, a walk
        without reading any file; a script cannot set a ctime back). `close` saves with it too.

        Raises:
            WorkspaceError: the session has no workspace folder, or the save failed (as `save_workspace`).
            SessionError: the session is unusable.
        """
        if self.workspace is None:
            raise WorkspaceError("no workspace directory to save into")
        self._refuse_in_fork()
        with self._lock:
            stamp = self._stamp(self._require_channel())
        if stamp is not None and stamp == self._saved_stamp:
            return False
        self.save_workspace()
        return True

    def _stamp(self, channel: SupervisorChannel) -> str | None:
        """The workspace's stamp, or None when the sandbox could not take it (hold ``_lock``)."""
        try:
            raw = channel.request("workspace.stamp", {"max_entries": MAX_ENTRIES}, timeout=_OP_TIMEOUT)
        except SessionError:
            return None
        stamp = raw.get("stamp")
        return stamp if isinstance(stamp, str) else None

    def save_workspace(self, dest: str | Path | None = None) -> Path:
        """Copy the workspace out to ``dest`` (default: the session's workspace directory).

        Only directories and regular files come out, within the caps, with their names byte for
        byte. The copy is complete or not made: on any failure the previous copy stays as it was.
        Into the session's own folder, a save after the first sends only the files changed since the last one
        (a file is unchanged while its inode, size, mtime and ctime are).

        Raises:
            TypeError, ValueError: ``dest`` is not a path, or is an empty string.
            WorkspaceError: no destination, or the copy was refused or failed.
        """
        target = workspace_folder(dest, "dest") if dest is not None else self.workspace
        if target is None:
            raise WorkspaceError("no workspace directory to save into")
        own = target == self.workspace
        params: dict[str, Any] = {"max_bytes": self.config.workspace_bytes, "max_entries": MAX_ENTRIES}
        record = self._restored if own else None
        since = self._saved_as if own else None
        if own:
            params["keep"] = True  # the next save into the folder continues this one
        if since is not None:
            params["since"] = since  # files left as that save sent them come without their data
        receiver = WorkspaceReceiver(
            target,
            max_bytes=params["max_bytes"],
            max_entries=MAX_ENTRIES,
            record=record,
            continues=since is not None,
            max_data=self.config.workspace_data_bytes,
        )
        try:
            self._refuse_in_fork()
            with self._lock:
                summary = self._require_channel().request("workspace.save", params, timeout=_OP_TIMEOUT, sink=receiver)
            receiver.check(summary)
            receiver.commit()
        except SandboxError as e:
            receiver.discard()
            if receiver.merging:
                raise WorkspaceError(f"could not save the workspace: {e}") from None  # says where both copies are
            raise WorkspaceError(f"could not save the workspace ({target} is left as it was): {e}") from None
        except BaseException:  # an interrupt: nothing of the half-received copy is left behind
            receiver.discard()
            raise
        self.last_save = dict(receiver.counts)
        if own:  # the stamp of what was walked and saved, and the save's id for the next one to continue
            saved_as, stamp = summary.get("save"), summary.get("stamp")
            self._restored = receiver.next_record
            self._saved_as = saved_as if isinstance(saved_as, str) and len(saved_as) <= 64 else None
            self._saved_stamp = stamp if isinstance(stamp, str) else None
        notes = list(receiver.notes)
        skipped = summary["skipped"] if isinstance(summary.get("skipped"), int) else 0
        if skipped > 0 and (not own or skipped != self._links_said):  # said once, not every save
            notes.append(f"{skipped} link(s) or special file(s) made in the sandbox's workspace were not saved "
                         "(they never leave the sandbox)")  # fmt: skip
        if own:
            self._links_said = skipped
        notes += self._leftovers(target)
        self._keep_notes(target, notes)
        return target

    def _keep_notes(self, target: Path, notes: list[str]) -> None:
        """Log a save's ``notes`` and keep them (the latest `NOTES_KEPT`) in `workspace_notes`."""
        for note in notes[:NOTES_KEPT]:
            logger.warning("workspace %s: %s", target, note)
        if len(notes) > NOTES_KEPT:
            logger.warning("workspace %s: %s", target, f"… and {len(notes) - NOTES_KEPT:,} more notes of this save")
        self.workspace_notes_total += len(notes)
        self.workspace_notes = [*self.workspace_notes, *notes[-NOTES_KEPT:]][-NOTES_KEPT:]

    def _leftovers(self, target: Path) -> list[str]:
        """The note naming folders that unfinished saves into ``target`` kept beside it (a killed merge's, or a failed
        one's whose process is gone: no save removes them), looked for once a session."""
        if target in self._leftovers_looked:
            return []
        self._leftovers_looked.add(target)
        note = leftovers_note(target)
        return [] if note is None else [note]
