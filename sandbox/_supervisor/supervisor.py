"""The supervisor: the container's main process, and the only one that touches the channel.

Protocol with the host (JSON-RPC 2.0 shaped, one object per frame, ``jsonrpc`` omitted):

    host → supervisor  requests with integer ids:
        execute {code, timeout, max_chars}     → {exit_status, error, traceback, timed_out, state_reset,
                                                  stdout: {head, tail, truncated, bytes, path}, stderr: {...},
                                                  images: [{mime, data}], and when an output was saved
                                                  outputs: {budget, dropped}: the most the saved outputs
                                                  hold, how many older ones this execution deleted}
                 (and optionally filename: the name the traceback gives the code; the worker checks it)
        reset {workspace}                      → {}
        cancel {}                              → {cancelled}: stop the running execution (its reply says
                                                  ``cancelled: true``); false when none was running
        workspace.put {entries}                → {}        (entries: see transfer)
        workspace.save {max_bytes, max_entries, since?, keep?} → workspace.entries {entries} notifications,
                                                  then {files, same, dirs, bytes, skipped, save, stamp}: a
                                                  file left as the save ``since`` sent it goes as ``same``;
                                                  ``keep``: a later save may continue this one (``save``)
        workspace.stamp {max_entries}          → {stamp}: a digest of every entry's path, mode, size, mtime
                                                  and inode, or null when it cannot be walked
        workspace.read {path, max_bytes}       → {data, size}
        workspace.list {path, limit}           → {entries, total}: the first ``limit`` entries, folders first,
                                                  then by name; ``total``: how many the folder holds
        ping                                   → {}
    supervisor → host  a ``ready`` notification once the first worker is up (with the process's
        uid, capabilities, no_new_privs and seccomp mode, read before any user code runs), and
        requests with string ids for tool calls: tool_call {server, tool, arguments},
        search_tools {query, limit}; the host answers each with {id, result} or {id, error}; and while an
        execution runs, ``output`` notifications {stdout?, stderr?, stdout_tail?, stderr_tail?, stdout_bytes,
        stderr_bytes, order?} (base64; see `stream`), never after its result: what the host shows if no result comes.

One execution runs at a time; tool calls within it are relayed concurrently. A per-execution
timer asks the worker where its cell is (for the result's traceback; half a second at most), then kills it
(and, in a container, every other process of the sandbox user), a fresh worker is started, and the result says
the interpreter state was reset.

In the container the supervisor is the init process (pid 1), for the channel's sake: the
container's stdio is the channel, and with another init (``docker run --init``) any process of
the sandbox user could open ``/proc/1/fd/1`` and write to it. As pid 1 the supervisor makes
itself non-dumpable (so its ``/proc`` entries are closed to the sandbox user), cannot be
signalled from inside the container, and reaps orphaned processes the way an init does.

(Over 400 lines: one class, the container's init process, whose handlers share one state — the
worker, the running execution, the relayed calls; what passes between it and its worker, and its workers' start
and kill, are its bases in the modules relay and spawning; the parts that stand on their own are the
modules beside it: wire, capture, stream, outputs, files, fswalk, transfer, processes, limits, populate.)
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import signal
import sys
import threading
import time
from typing import Any

from .capture import FILE_BYTES, OutputCapture
from .cgroup import read_limits
from .clock import Clock
from .files import FileOpError, Workspace
from .limits import (
    MAX_ERROR_CHARS,
    MAX_LIST_ENTRIES,
    MAX_OUTPUT_CHARS,
    MAX_READ_BYTES,
    MAX_TRACEBACK_CHARS,
    WHERE_WAIT,
    cut_middle,
    say_where_whole,
)
from .namespaces import report as namespaces_report
from .options import parse_options
from .outputs import OutputFolder, output_budget
from .processes import Execution, Worker, oom_kill_count
from .relay import _WorkerRelay
from .seccomp_probe import probe as seccomp_probe
from .spawning import _Spawning
from .tree_state import tree_complete
from .wire import FrameReader, FrameTooLarge, FrameWriter, WireError

OUTPUT_DIR = ".tooltree/outputs"
PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
PR_GET_NO_NEW_PRIVS = 39
CANCEL_GRACE = 3.0
"""Seconds a cancelled execution has to end after its KeyboardInterrupt before the worker is killed."""
INTERRUPT_AGAIN = 0.25
"""Seconds between the SIGINTs of one cancel. A signal that lands just before a blocking call (``time.sleep``,
a read) sets Python's flag without waking that call, so the script slept through its only interrupt and was
killed; the next one wakes it. The worker raises KeyboardInterrupt once per cell, so the repeats never cut
short the script's own clean-up."""


class Supervisor(_WorkerRelay, _Spawning):
    def __init__(self, *, workspace: str, tree: str | None, kill_all: bool, channel_in: int, channel_out: int):
        self.workspace = Workspace(workspace)
        self.tree = tree
        self.kill_all = kill_all
        self.host = FrameWriter(channel_out)
        self.host_in = FrameReader(channel_in, strict=False)  # the host is the trusted side
        self.lock = threading.RLock()
        self.replaced = threading.Condition(self.lock)
        """Notified when a worker starts (``worker`` changes) or none can (``broken`` is set)."""
        self.output_lock = threading.Lock()
        """Held while an ``output`` notification or an execution's result is sent: none follows the result."""
        self.sweeping = threading.Lock()
        """Held while ``kill_everything`` kills: a worker is spawned only when no kill is under way."""
        self.worker: Worker | None = None
        self.generation = 0
        self.spawn_oom_kills = 0  # the container's OOM kills when the latest worker was started
        self.exec_counter = 0
        self.ended_unsaid: str | None = None
        """Why the interpreter ended between executions, when the next one must say it (a script closed its control
        channel, noticed by the interpreter only after that script's result): that one fails with it, not run."""
        self.reset_unsaid = False
        """The interpreter ended between executions (a script's thread ended it, the OOM killer): the next result says
        the state was reset."""
        self.outputs = OutputFolder(os.path.join(self.workspace.root, OUTPUT_DIR), output_budget(self.workspace.root))
        """Where cut outputs are saved whole, the oldest deleted while they hold more than a quarter of the
        workspace (before: never deleted, they filled it and the user's folder it is saved into)."""
        self.output_tag = os.urandom(3).hex()
        """In the names of this sandbox's output files: those of the sessions that share a workspace folder (or
        follow one another in it) never take one another's names (before: each counted from 1, and a save put the
        second session's ``1-stdout.txt`` over the first's, or beside it as a conflict)."""
        self.current: Execution | None = None
        self.call_seq = 0
        self.pending_calls: dict[str, tuple[int, int]] = {}  # host call id -> (generation, worker call id)
        self.broken: str | None = None
        self.unreaped: set[int] = set()  # workers whose exit status subprocess collects itself
        self.clock = Clock()
        """Every timeout and cancel: no thread to start once a script may hold every one the sandbox allows."""
        self.worker_argv = [sys.executable, *self._python_flags(), "-m", f"{__package__}.worker"]
        self.worker_argv += ["--workspace", workspace]
        if tree:
            self.worker_argv += ["--user-root", tree]
        self.worker_env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": workspace,
            "LANG": "C.UTF-8",
            "TMPDIR": "/tmp",
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "MPLBACKEND": "Agg",
        }
        if "PYTHONPATH" in os.environ and not sys.flags.isolated:
            self.worker_env["PYTHONPATH"] = os.environ["PYTHONPATH"]

    @staticmethod
    def _python_flags() -> list[str]:
        """``-B``: no bytecode beside a module a script imports from the workspace. ``PYTHONDONTWRITEBYTECODE``
        alone is ignored under ``-I`` (as the container runs): before, importing ``skills/x.py`` wrote
        ``skills/__pycache__/`` into /workspace, and the save put it in the user's folder."""
        flags = ["-u", "-B"]
        if sys.flags.isolated:
            flags.append("-I")
        return flags

    # ---- host side ------------------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        """Send one message to the host; a reply too large for a frame becomes an error reply.

        Raises:
            FrameTooLarge: a request or notification does not fit in a frame (nothing was sent).
        """
        try:
            self.host.send(message)
        except FrameTooLarge as e:
            if "method" in message or "id" not in message:
                raise
            self.host.send({"id": message["id"], "error": {"code": "too_large", "message": f"the answer: {e}"}})
        except OSError:
            pass  # the host went away: the read loop sees EOF and ends the process

    def reply(self, host_id: Any, result: dict[str, Any]) -> None:
        self.send({"id": host_id, "result": result})

    def reply_error(self, host_id: Any, message: str, code: str = "failed") -> None:
        self.send({"id": host_id, "error": {"code": code, "message": message}})

    def serve(self) -> int:
        self.link_tree()
        self.spawn_worker()
        if self.worker is not None:
            self.worker.ready.wait(60)
        status = self.status()
        if self.broken or self.worker is None or not self.worker.ready.is_set():
            status["error"] = self.broken or "the Python worker did not start within 60 s"
        self.send({"method": "ready", "params": status})
        while True:
            try:
                body = self.host_in.read_body()
                if body is None:
                    break
                if self.relay_encoded_reply(body):
                    continue
                message = self.host_in.parse(body)
            except WireError as e:
                print(f"supervisor: bad frame from host: {e}", file=sys.stderr)
                break
            self.dispatch(message)
        with self.lock:
            if self.worker is not None:
                self.worker.kill()
        return 0

    def status(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "uid": os.getuid(),
            "pid": os.getpid(),
            "dumpable": _prctl(PR_GET_DUMPABLE),
            "python": sys.version.split()[0],
        }
        try:
            with open("/proc/self/status", encoding="ascii") as f:
                for line in f:
                    key, _, value = line.partition(":")
                    if key in ("CapEff", "CapPrm", "NoNewPrivs", "Seccomp"):
                        info[key] = value.strip()
        except OSError:
            pass
        # gVisor's /proc/self/status has no NoNewPrivs line: ask the kernel (or the Sentry) directly.
        info.setdefault("NoNewPrivs", str(_prctl(PR_GET_NO_NEW_PRIVS)))
        # What the kernel applies, not what the engine says it asked for (sandbox.in_force).
        info["cgroup"] = read_limits()
        info["view"] = namespaces_report(["/", "/tmp", self.workspace.root, *([self.tree] if self.tree else [])])
        if self.tree:
            info["tree_complete"] = tree_complete(self.tree)
        try:
            info["seccomp_probe"] = seccomp_probe()
        except (OSError, AttributeError) as e:  # no libc to call through: reported missing, which the host refuses
            print(f"supervisor: the seccomp probe failed: {e}", file=sys.stderr)
        return info

    def dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        host_id = message.get("id")
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        assert isinstance(params, dict)
        if method is None:
            self.relay_reply(message)
            return
        try:
            if method == "execute":
                self.start_execution(host_id, params)
            elif method == "reset":
                self.reset(bool(params.get("workspace")))
                self.reply(host_id, {})
            elif method == "ping":
                self.reply(host_id, {})
            elif method == "cancel":
                self.reply(host_id, {"cancelled": self.cancel_execution()})
            elif method == "workspace.put":
                self.workspace.put_entries(params.get("entries"))
                self.reply(host_id, {})
            elif method == "workspace.save":
                summary = self.workspace.export(
                    self.send,
                    skip=self.top_level_skip(),
                    max_bytes=int(params.get("max_bytes", 0)),
                    max_entries=int(params.get("max_entries", 0)),
                    since=params.get("since"),
                    keep=params.get("keep") is True,
                )
                self.reply(host_id, summary)
            elif method == "workspace.stamp":
                stamp = self.workspace.stamp(skip=self.top_level_skip(), max_entries=int(params.get("max_entries", 0)))
                self.reply(host_id, {"stamp": stamp})
            elif method == "workspace.read":
                data, size = self.workspace.read(
                    str(params.get("path")), min(int(params.get("max_bytes", 0)), MAX_READ_BYTES)
                )
                self.reply(host_id, {"data": base64.b64encode(data).decode("ascii"), "size": size})
            elif method == "workspace.list":
                limit = min(int(params.get("limit", 1000)), MAX_LIST_ENTRIES)
                entries, total = self.workspace.listdir(str(params.get("path", "")), limit)
                self.reply(host_id, {"entries": entries, "total": total})
            else:
                self.reply_error(host_id, f"unknown method {method!r:.80}", "unknown_method")
        except (FileOpError, binascii.Error, ValueError, TypeError, AttributeError, OSError) as e:
            self.reply_error(host_id, str(e)[:2000])

    @staticmethod
    def top_level_skip() -> frozenset[str]:
        return frozenset({"servers"})  # the tree's place, never workspace content

    def link_tree(self) -> None:
        """Make ``<workspace>/servers`` point at the read-only tree (recreated if the user removed it)."""
        if not self.tree:
            return
        link = os.path.join(self.workspace.root, "servers")
        if not os.path.lexists(link):
            try:
                os.symlink(os.path.join(self.tree, "servers"), link)
            except OSError as e:
                print(f"supervisor: cannot link the tree: {e}", file=sys.stderr)

    # ---- workers ----------------------------------------------------------------------------

    def reset(self, wipe_workspace: bool) -> None:
        with self.lock:
            if self.current is not None:
                raise ValueError("an execution is running")
            old = self.worker
        if old is not None:
            old.dead = True
            self.kill_everything(old)
            old.proc.wait()
        if wipe_workspace:
            self.workspace.wipe(keep=self.top_level_skip())
        self.link_tree()
        self.spawn_worker()
        if self.broken:
            raise ValueError(self.broken)
        assert self.worker is not None
        self.worker.ready.wait(60)

    # ---- executions -------------------------------------------------------------------------

    def start_execution(self, host_id: Any, params: dict[str, Any]) -> None:
        with self.lock:
            if self.current is not None:
                self.reply_error(host_id, "an execution is already running", "busy")
                return
            worker = self.worker
        if worker is None:
            self.reply_error(host_id, self.broken or "no worker", "broken")
            return
        worker.ready.wait(60)
        with self.lock:
            # A worker that exited between executions is being replaced by its pump thread (under a full pids
            # limit that takes up to twice `SPAWN_WAIT`): handed to it, the script would go nowhere and never end.
            self.replaced.wait_for(lambda: self.broken or self.worker is None or not self.worker.exited, timeout=60)
            if self.broken or self.worker is None or self.worker.exited:
                self.reply_error(host_id, self.broken or "no worker (the last one exited)", "broken")
                return
            worker = self.worker
            self.exec_counter += 1
            n = self.exec_counter
            names = tuple(f"{n}-{self.output_tag}-{name}.txt" for name in ("stdout", "stderr", "traceback"))
            self.outputs.start(names, prune=n == 1)
            ex = Execution(
                exec_id=n,
                host_id=host_id,
                started=time.monotonic(),
                timeout=float(params.get("timeout", 30.0)),
                max_chars=min(int(params.get("max_chars", 20_000)), MAX_OUTPUT_CHARS),
                stdout=self._capture(names[0]),
                stderr=self._capture(names[1]),
                oom_kills=oom_kill_count(),
            )
            self.current = ex
            ex.timer = self.clock.call_later(ex.timeout, functools.partial(self.on_timeout, ex, worker))
            ended, self.ended_unsaid = self.ended_unsaid, None
            ex.state_lost, self.reset_unsaid = self.reset_unsaid, False
        if ended is not None:
            self.finish(ex, {"exit_status": 0, "error": ended, "traceback": None, "timed_out": False,
                             "state_reset": True})  # fmt: skip
            return
        request = {"type": "exec", "exec": n, "code": str(params.get("code", ""))}
        if isinstance(filename := params.get("filename"), str):  # the worker checks it before use
            request["filename"] = filename
        if not self.to_worker(worker, request):
            too_large = {"exit_status": 1, "error": "the code is too large to run", "traceback": None}
            self.finish(ex, {**too_large, "timed_out": False, "state_reset": False})

    def _capture(self, name: str) -> OutputCapture:
        path = os.path.join(self.outputs.path, name)
        return OutputCapture(path, file_bytes=min(FILE_BYTES, self.outputs.budget), folder=self.outputs)

    @staticmethod
    def _saved_traceback(traceback: str, whole: OutputCapture, cut: bool) -> str:
        """``traceback``, cut, its line naming the file that holds the whole of it (or as much as a saved output
        holds: ``cut``, the worker sent only that much), as a cut output's note does; unchanged when it could not be
        saved."""
        saved = whole.finish(MAX_TRACEBACK_CHARS)
        if saved["path"] is None:
            return traceback
        if cut or saved["saved"] < saved["bytes"]:
            where = f"; its first {saved['saved']:,} bytes are in {saved['path']} (a saved output holds at most that)"
        else:
            where = f"; the whole traceback is in {saved['path']}"
        return say_where_whole(traceback, MAX_TRACEBACK_CHARS, where)

    def on_timeout(self, ex: Execution, worker: Worker, timed_out: bool = True) -> None:
        """Kill ``worker``, running ``ex``, for its time limit (``timed_out``) or a cancel it did not heed. A timed-out
        cell is first asked where it is (`WHERE_WAIT` at most), for its result's traceback: before, a script stuck in a
        loop was told only that it timed out, not where."""
        with self.lock:
            if ex.finished or self.current is not ex:
                return
            asked = timed_out and not ex.timed_out
            ex.timed_out = ex.timed_out or timed_out
        if asked:
            worker.ask_where()
            ex.where_said.wait(WHERE_WAIT)
            with self.lock:  # it ended meanwhile: its own result stands
                if ex.finished or self.current is not ex:
                    return
        self.kill_everything(worker)

    def cancel_execution(self) -> bool:
        """Interrupt the running execution (KeyboardInterrupt: variables stay); kill the worker if it
        has not ended within `CANCEL_GRACE` seconds. False when nothing was running."""
        with self.lock:
            ex, worker = self.current, self.worker
            if ex is None or ex.finished or worker is None or ex.cancelled:
                return ex is not None and ex.cancelled and not ex.finished
            ex.cancelled = True
        self.interrupt_until_ended(ex, worker, time.monotonic() + CANCEL_GRACE)
        return True

    def interrupt_until_ended(self, ex: Execution, worker: Worker, deadline: float) -> None:
        """SIGINT the worker now and every `INTERRUPT_AGAIN` seconds (on the clock) until ``ex`` ends; kill it at
        ``deadline``."""
        left = deadline - time.monotonic()
        if left <= 0:
            self.on_timeout(ex, worker, False)
            return
        with self.lock:  # never once it ended: the signal could reach the next execution
            if ex.finished:
                return
            worker.interrupt()
        self.clock.call_later(
            min(INTERRUPT_AGAIN, left), functools.partial(self.interrupt_until_ended, ex, worker, deadline)
        )

    def finish(self, ex: Execution, result: dict[str, Any], *, respawn: bool = False) -> None:
        with self.lock:
            if ex.finished:
                return
            ex.finished = True
            if ex.timer is not None:
                ex.timer.cancel()
            self.current = None
        duration = time.monotonic() - ex.started
        # The one-line error keeps its start, the traceback its start and end (the error's type, where it was raised).
        if result.get("error") is not None:
            result["error"] = str(result["error"])[:MAX_ERROR_CHARS]
        whole, ex.traceback = ex.traceback, None
        if result.get("traceback") is not None:
            result["traceback"] = cut_middle(str(result["traceback"]), MAX_TRACEBACK_CHARS)
            if whole is not None and not result.get("timed_out"):  # not where a timed-out script was
                result["traceback"] = self._saved_traceback(result["traceback"], whole, ex.traceback_cut)
        if whole is not None:
            whole.close()
        result["stdout"] = ex.stdout.finish(ex.max_chars)
        result["stderr"] = ex.stderr.finish(ex.max_chars)
        if result["stdout"]["path"] or result["stderr"]["path"] or self.outputs.dropped:
            result["outputs"] = {"budget": self.outputs.budget, "dropped": self.outputs.dropped}
        result["images"] = ex.images
        result["duration"] = round(duration, 6)
        if ex.state_lost:
            result["state_reset"] = True
        # A cancel that arrived as the script ended cleanly changed nothing: not reported.
        result["cancelled"] = ex.cancelled and not ex.timed_out and result.get("exit_status") != 0
        if result["cancelled"]:
            result["error"] = f"cancelled ({result.get('error') or 'interrupted'})"
        if respawn:
            self.link_tree()
            self.spawn_worker()
        # What the heads hold that was not sent goes before the result: a live listener (`tooltree exec`) shows the
        # last of both streams in the order read, not stdout's rest, then stderr's, from the result.
        last = ex.streamer.take(ex.captures(), now=True)
        with self.output_lock:
            if last is not None:
                self.send({"method": "output", "params": last})
            self.reply(ex.host_id, result)


def main(argv: list[str] | None = None) -> int:
    """Serve the channel on stdin/stdout until the host closes it."""
    options, flags, _ = parse_options(
        sys.argv[1:] if argv is None else argv,
        values={"--workspace": "/workspace", "--tree": None},
        flags=("--kill-all-on-timeout",),
    )
    workspace, tree = str(options["--workspace"]), options["--tree"]

    # Keep the channel to ourselves: nothing this process or its children print can reach it.
    channel_in, channel_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    for fd in (channel_in, channel_out):
        os.set_inheritable(fd, False)
    is_init = os.getpid() == 1
    _prctl(PR_SET_DUMPABLE, 0)
    supervisor = Supervisor(
        workspace=os.path.abspath(workspace),
        tree=tree,
        kill_all="--kill-all-on-timeout" in flags and is_init,
        channel_in=channel_in,
        channel_out=channel_out,
    )
    if is_init:
        # No signal handlers: pid 1 without one cannot be signalled from inside the container.
        # Python installs one for SIGINT (KeyboardInterrupt), so restore the default: otherwise a
        # script could end the supervisor, and its session, with kill(1, SIGINT).
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        threading.Thread(target=supervisor.reap_orphans, name="reaper", daemon=True).start()
    return supervisor.serve()


def _prctl(option: int, value: int = 0) -> int:
    """``prctl(2)`` through ctypes; -1 when unavailable (which the host's check treats as a failure)."""
    try:
        import ctypes

        return int(ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0))
    except (OSError, AttributeError, ImportError):
        return -1
