"""`Sandbox`: one session — a container with its own interpreter state and workspace.

::

    with Sandbox(tools=handler, workspace="runs/42") as sb:
        result = sb.execute("from servers.crm import list_leads\\nprint(len(list_leads()))")
        print(result.stdout, result.ledger())

State between executions: workspace files always; interpreter state (variables, imports)
too, because one long-lived worker process runs every execution of the session in the same
namespace. `reset` starts a fresh worker (``reset(workspace=True)`` also empties the
workspace). A timeout or crash restarts the worker as well; the result says
``state_reset=True``.

The workspace, when a host directory is given, is restored into the container's tmpfs at
start and saved back on `close`. Tool calls from the script go to the session's `ToolBridge`
on a small thread pool, many at once; the host keeps the ledger of them itself.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

from sandbox._supervisor.limits import MAX_LIST_ENTRIES, too_many_values
from sandbox._supervisor.wire import MAX_FRAME_VALUES
from sandbox.backend import SandboxBackend
from sandbox.bridge import ToolBridge, ToolCallRefused, ToolHandler, as_bridge, resolve
from sandbox.call_limits import ArgumentsRefused, CallSize, InFlight, measure
from sandbox.channel import SessionTimeoutError, SupervisorChannel
from sandbox.config import WORKSPACE, SandboxConfig
from sandbox.errors import SandboxError, SessionError, WorkspaceError
from sandbox.results import ExecutionResult, ToolCallRecord, parse_execution
from sandbox.workspace import MAX_ENTRIES, WorkspaceReceiver, iter_restore_batches

logger = logging.getLogger(__name__)

MAX_CALLS_IN_FLIGHT = 64
MAX_RESULT_BYTES = 8 * 1024 * 1024
_NAME_CHARS = 256
_GRACE_SECONDS = 15.0
_OP_TIMEOUT = 120.0


def _relative(path: str) -> str:
    """A workspace path as the supervisor wants it: relative (``/workspace/a`` → ``a``)."""
    if path in (WORKSPACE, WORKSPACE + "/"):
        return ""
    return path[len(WORKSPACE) + 1 :] if path.startswith(WORKSPACE + "/") else path


def open_channel(backend: SandboxBackend, session_id: str) -> SupervisorChannel:
    """Launch one sandbox and wait until its supervisor is ready and verified.

    Raises:
        HardeningError: the sandbox is not confined as required.
        SessionError: it did not start.
        SandboxError: the backend could not launch it.
    """
    connection = backend.launch(session_id)
    channel = SupervisorChannel(connection, session_id)
    try:
        status = channel.wait_ready(backend.config.start_timeout)
        backend.verify_ready(connection, status)
    except BaseException:
        channel.kill()
        raise
    return channel


class Sandbox:
    """A sandbox session. Use as a context manager, or call `start` and `close`.

    Args:
        backend: what runs the container; default a `DockerBackend` built from ``config`` and ``tree``.
        tools: the `ToolBridge` (or a plain handler function) that script tool calls go to.
        workspace: a host directory restored into ``/workspace`` at start and saved back on close.
        config: used only to build the default backend.
        tree: used only to build the default backend.
        tool_loop: the event loop on which async bridge methods run.
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
        if backend is None:
            from sandbox.docker_backend import DockerBackend

            backend = DockerBackend(config, tree=tree)
        self.backend = backend
        self.config = backend.config
        self.bridge = as_bridge(tools)
        self.workspace = Path(workspace) if workspace is not None else None
        self.tool_loop = tool_loop
        self.session_id = uuid.uuid4().hex
        self._channel: SupervisorChannel | None = None
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=32, thread_name_prefix="sandbox-tool")
        self._calls_lock = threading.Lock()
        self._executing = False
        self._in_flight = 0
        self._arguments_in_flight = InFlight()
        self._ledger: list[ToolCallRecord] = []
        self._closed = False

    # ---- lifecycle ------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The container's name (empty before start)."""
        return self._channel.connection.name if self._channel else ""

    def start(self) -> Sandbox:
        """Start the container (if not started) and restore the workspace.

        Raises:
            HardeningError: the container is not confined as required.
            SessionError: it did not start.
            WorkspaceError: the workspace could not be restored.
            SandboxError: anything else the backend raises.
        """
        if self._channel is None:
            self.attach(open_channel(self.backend, self.session_id))
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
        channel.on_request = self._on_request
        if self.workspace is not None and self.workspace.is_dir():
            try:
                for method, params in iter_restore_batches(self.workspace, max_bytes=self.config.workspace_max_bytes):
                    channel.request(method, params, timeout=_OP_TIMEOUT)
            except SandboxError as e:
                self.kill()  # nothing is saved from a partial restore: the folder on the host stays as it is
                raise WorkspaceError(
                    f"could not restore the workspace {self.workspace}: {e}. Nothing in it was changed; "
                    f"make it fit (at most {MAX_ENTRIES} files and folders, {self.config.workspace_max_bytes} bytes) "
                    "or start without it"
                ) from None

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _require_channel(self) -> SupervisorChannel:
        if self._channel is None:
            raise SessionError("the sandbox session is not started (use it as a context manager or call start())")
        return self._channel

    def close(self) -> None:
        """Save the workspace (when one was given) and destroy the container.

        Raises:
            WorkspaceError: the workspace could not be saved (the container is destroyed anyway).
        """
        if self._closed:
            return
        self._closed = True
        channel = self._channel
        try:
            if channel is not None and self.workspace is not None:
                if channel.broken is None:
                    self.save_workspace()
                else:
                    logger.warning("sandbox %s: workspace not saved: %s", channel.connection.name, channel.broken)
        finally:
            if channel is not None:
                channel.close()
            self._executor.shutdown(wait=False, cancel_futures=True)

    def kill(self) -> None:
        """Destroy the container without saving anything."""
        self._closed = True
        if self._channel is not None:
            self._channel.kill()
        self._executor.shutdown(wait=False, cancel_futures=True)

    # ---- executions -----------------------------------------------------------------------

    def execute(self, code: str, *, timeout: float | None = None) -> ExecutionResult:
        """Run ``code`` in the session and return what happened.

        A script that raises, exits non-zero or times out gives a result with ``error`` set, not
        an exception; after a timeout the session stays usable (with fresh interpreter state).

        Raises:
            SessionError: the session is closed or broken, or the sandbox stopped answering
                (it is then destroyed).
        """
        limit = self.config.timeout if timeout is None else timeout
        with self._lock:
            channel = self._require_channel()
            self.bridge.begin_execution()
            with self._calls_lock:
                self._executing, self._ledger = True, []
            started = time.monotonic()
            try:
                raw = channel.request(
                    "execute",
                    {"code": code, "timeout": limit, "max_chars": self.config.output_chars},
                    timeout=limit + _GRACE_SECONDS,
                )
            except SessionTimeoutError:
                self.kill()
                raise SessionError(
                    f"the sandbox did not report back within {limit + _GRACE_SECONDS:g} s and was destroyed"
                ) from None
            finally:
                with self._calls_lock:
                    self._executing = False
                    ledger = list(self._ledger)
            return parse_execution(
                raw, max_chars=self.config.output_chars, duration=time.monotonic() - started, tool_calls=ledger
            )

    def cancel(self) -> bool:
        """Stop the execution running now, from any thread; the session stays usable.

        The script gets a KeyboardInterrupt, so variables and imports survive; one that does not
        stop within a few seconds has its interpreter restarted (the result says ``state_reset``).
        The running `execute` returns a result with ``cancelled=True``. Returns False when no
        execution was running (or the session is closed or broken).
        """
        with self._calls_lock:
            channel = self._channel if self._executing else None
        if channel is None:
            return False
        try:
            # Frames go out in order: this cancel reaches the supervisor before any later execute.
            return channel.request("cancel", {}, timeout=_OP_TIMEOUT).get("cancelled") is True
        except SessionError:
            return False

    async def aexecute(self, code: str, *, timeout: float | None = None) -> ExecutionResult:
        """`execute` for async callers (runs in a worker thread).

        Raises:
            SessionError: as `execute`.
        """
        return await asyncio.to_thread(self.execute, code, timeout=timeout)

    def reset(self, *, workspace: bool = False) -> None:
        """Start clean: a fresh interpreter; with ``workspace=True`` also an empty workspace.

        Raises:
            SessionError: the session is closed or broken.
        """
        with self._lock:
            self._require_channel().request("reset", {"workspace": workspace}, timeout=_OP_TIMEOUT)

    # ---- files ----------------------------------------------------------------------------

    def read_file(self, path: str, *, max_bytes: int = 1 << 20) -> bytes:
        """Up to ``max_bytes`` of a regular file in the workspace.

        ``path`` is relative to the workspace, or absolute under ``/workspace`` (as results name
        files). Symlinks are never followed.

        Raises:
            SessionError: no such regular file, or the session is unusable.
        """
        with self._lock:
            raw = self._require_channel().request(
                "workspace.read", {"path": _relative(path), "max_bytes": max_bytes}, timeout=_OP_TIMEOUT
            )
        try:
            data = base64.b64decode(str(raw.get("data", "")), validate=True)
        except (binascii.Error, ValueError):
            raise SessionError("the sandbox sent file data that is not base64") from None
        return data[:max_bytes]

    def list_files(self, path: str = "", *, limit: int = 1000) -> list[dict[str, Any]]:
        """Entries of a workspace directory: ``{"name", "type", "size"}``, at most ``limit`` (and at most
        `MAX_LIST_ENTRIES`, 32,768, so the answer fits a frame's value budget).

        Raises:
            SessionError: not a directory, or the session is unusable.
        """
        limit = min(limit, MAX_LIST_ENTRIES)
        with self._lock:
            raw = self._require_channel().request(
                "workspace.list", {"path": _relative(path), "limit": limit}, timeout=_OP_TIMEOUT
            )
        entries = raw.get("entries")
        out: list[dict[str, Any]] = []
        for e in entries[:limit] if isinstance(entries, list) else []:
            if isinstance(e, dict) and isinstance(e.get("name"), str) and isinstance(e.get("size"), int):
                out.append({"name": e["name"][:_NAME_CHARS], "type": str(e.get("type"))[:10], "size": e["size"]})
        return out

    def save_workspace(self, dest: str | Path | None = None) -> Path:
        """Copy the workspace out to ``dest`` (default: the session's workspace directory).

        Only directories and regular files come out, within the caps, with their names byte for
        byte. The copy is complete or not made: on any failure the previous copy stays as it was.

        Raises:
            WorkspaceError: no destination, or the copy was refused or failed.
        """
        target = Path(dest) if dest is not None else self.workspace
        if target is None:
            raise WorkspaceError("no workspace directory to save into")
        limits = {"max_bytes": self.config.workspace_max_bytes, "max_entries": MAX_ENTRIES}
        receiver = WorkspaceReceiver(target, max_bytes=limits["max_bytes"], max_entries=limits["max_entries"])
        try:
            with self._lock:
                summary = self._require_channel().request("workspace.save", limits, timeout=_OP_TIMEOUT, sink=receiver)
            receiver.check(summary)
            receiver.commit()
        except SandboxError as e:
            receiver.discard()
            raise WorkspaceError(f"could not save the workspace ({target} is left as it was): {e}") from None
        skipped = summary.get("skipped")
        if isinstance(skipped, int) and skipped > 0:
            logger.warning("workspace saved without its %d links and special files (never saved)", skipped)
        return target

    # ---- tool calls from the script -------------------------------------------------------

    def _on_request(self, call_id: str, method: str, params: dict[str, Any] | None) -> None:
        channel = self._channel
        assert channel is not None
        with self._calls_lock:
            if not self._executing:
                refusal = ("no_execution", "no execution is running")
            elif self._in_flight >= MAX_CALLS_IN_FLIGHT:
                refusal = ("too_many_calls", f"more than {MAX_CALLS_IN_FLIGHT} tool calls in flight")
            elif method not in ("tool_call", "search_tools"):
                refusal = ("unknown_method", "unknown request")
            elif params is None:  # refused unparsed by the channel: more values than any frame may hold
                refusal = (
                    ("arguments_too_large", too_many_values(self._arguments_in_flight.limits.nodes))
                    if method == "tool_call"
                    else ("invalid_arguments", f"the request holds more than {MAX_FRAME_VALUES:,} values")
                )
            else:
                refusal = None
                self._in_flight += 1
        size: CallSize | None = None
        if (
            refusal is None
            and params is not None
            and method == "tool_call"
            and isinstance(params.get("arguments"), dict)
        ):
            # Measured here, on the channel's reader, before the call is queued: arguments past the
            # limits are dropped at once, before validation and before anything reaches a server.
            try:
                size = measure(params["arguments"], self._arguments_in_flight.limits)
                self._arguments_in_flight.reserve(size)
            except ArgumentsRefused as e:
                size, refusal = None, (e.code, e.message)
                with self._calls_lock:
                    self._in_flight -= 1
        if refusal is not None:
            channel.respond(call_id, error={"code": refusal[0], "message": refusal[1]})
            return
        assert params is not None  # refused above
        try:
            self._executor.submit(self._serve_call, channel, call_id, method, params, size)
        except RuntimeError:  # shut down
            with self._calls_lock:
                self._in_flight -= 1
            if size is not None:
                self._arguments_in_flight.release(size)
            channel.respond(call_id, error={"code": "closed", "message": "the session is closing"})

    def _serve_call(
        self, channel: SupervisorChannel, call_id: str, method: str, params: dict[str, Any], size: CallSize | None
    ) -> None:
        try:
            if method == "search_tools":
                self._serve_search(channel, call_id, params)
            else:
                self._serve_tool_call(channel, call_id, params, size)
        finally:
            with self._calls_lock:
                self._in_flight -= 1
            if size is not None:
                self._arguments_in_flight.release(size)

    def _serve_search(self, channel: SupervisorChannel, call_id: str, params: dict[str, Any]) -> None:
        query, limit = params.get("query"), params.get("limit", 5)
        detail, regex = params.get("detail", "summary"), params.get("regex", False)
        if (
            not isinstance(query, str)
            or len(query) > 1000
            or not isinstance(limit, int)
            or isinstance(limit, bool)
            or detail not in ("name", "summary", "full")
            or not isinstance(regex, bool)
        ):
            message = "search_tools(query: str, detail: 'name'|'summary'|'full', limit: int, regex: bool)"
            channel.respond(call_id, error={"code": "invalid_arguments", "message": message})
            return
        try:
            text = resolve(self.bridge.search_tools(query, detail=detail, limit=limit, regex=regex), self.tool_loop)
        except ToolCallRefused as e:
            channel.respond(call_id, error={"code": e.code, "message": e.message})
            return
        except Exception:  # the bridge is foreign code: its bug must not kill the session
            logger.exception("tool search failed")
            channel.respond(call_id, error={"code": "internal", "message": "tool search failed on the host"})
            return
        text, cap = str(text), 256 * 1024  # tool_tree.search renders at most 64,000 characters; another bridge may not
        if len(text) > cap:
            text = text[:cap] + f"\n[… cut at {cap} characters]\n"
        channel.respond(call_id, result={"text": text})

    def _serve_tool_call(
        self, channel: SupervisorChannel, call_id: str, params: dict[str, Any], size: CallSize | None
    ) -> None:
        server, tool, arguments = params.get("server"), params.get("tool"), params.get("arguments")
        if not (isinstance(server, str) and isinstance(tool, str) and isinstance(arguments, dict) and size is not None):
            channel.respond(call_id, error={"code": "invalid_arguments", "message": "malformed tool call"})
            return
        if len(server) > _NAME_CHARS or len(tool) > _NAME_CHARS:
            channel.respond(call_id, error={"code": "invalid_arguments", "message": "server or tool name too long"})
            return
        request_bytes = size.bytes  # as they travel, UTF-8 JSON (measured when the call came in)
        started = time.monotonic()
        error: dict[str, Any] | None = None
        result: dict[str, Any] | None = None
        response_bytes = 0
        try:
            value = resolve(self.bridge.call_tool(server, tool, arguments), self.tool_loop)
            if not isinstance(value, dict):
                raise TypeError(f"the bridge returned {type(value).__name__}, not a dict")
            try:
                response_bytes = len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8"))
            except (ValueError, RecursionError):  # NaN, a lone surrogate, absurd nesting: from a hostile server
                response_bytes = -1
            if response_bytes < 0:
                error = {
                    "code": "invalid_result",
                    "message": "the tool result cannot be sent as UTF-8 JSON (a non-finite number, a lone "
                    "surrogate or too deep nesting)",
                }
            elif response_bytes > MAX_RESULT_BYTES:
                error = {
                    "code": "result_too_large",
                    "message": f"the result is {response_bytes} bytes (limit {MAX_RESULT_BYTES})",
                }
            else:
                result = value
        except ToolCallRefused as e:
            error = {"code": e.code, "message": e.message}
        except Exception:  # the bridge is foreign code: its bug must not kill the session
            logger.exception("tool call %s.%s failed in the bridge", server, tool)
            error = {"code": "internal", "message": "the tool call failed on the host"}
        elapsed_ms = (time.monotonic() - started) * 1000
        ok = error is None and not (result or {}).get("isError")
        message = error["message"] if error else (None if ok else "the tool reported an error")
        record = ToolCallRecord(server, tool, ok, request_bytes, response_bytes, round(elapsed_ms, 1), message)
        with self._calls_lock:
            if self._executing:
                self._ledger.append(record)
        channel.respond(call_id, result=result, error=error)
