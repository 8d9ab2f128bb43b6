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
        stderr_bytes} (base64; see `stream`), never after its result: what the host shows if no result comes.

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
worker, the running execution, the relayed calls; the parts that stand on their own are the
modules beside it: wire, capture, stream, outputs, files, fswalk, transfer, processes, limits, populate.)
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import os
import re
import selectors
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
    MAX_IMAGE_BYTES,
    MAX_IMAGES,
    MAX_IMAGES_TOTAL_BYTES,
    MAX_LIST_ENTRIES,
    MAX_OUTPUT_CHARS,
    MAX_READ_BYTES,
    MAX_TRACEBACK_CHARS,
    WHERE_WAIT,
    base64_size,
    cut_middle,
    say_where_whole,
)
from .namespaces import report as namespaces_report
from .options import parse_options
from .outputs import OutputFolder, output_budget
from .processes import CHANNEL_CLOSED, Execution, Worker, killed_by, oom_kill_count
from .seccomp_probe import probe as seccomp_probe
from .tree_state import tree_complete
from .wire import FrameDecoder, FrameReader, FrameTooLarge, FrameWriter, WireError

OUTPUT_DIR = ".tooltree/outputs"
PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
PR_GET_NO_NEW_PRIVS = 39
_REPLY_HEAD = re.compile(rb'\{"id":"(c[0-9]{1,19})",')
"""The start of the host's answer to a tool call or search, as the host encodes it: the rest of the
frame (``"result":…}`` or ``"error":…}``) is handed to the worker as it came, never parsed here."""
DRAIN_BEFORE_CALL = 1 << 20
"""The most bytes of each stream read at a tool call, to be sent before it (a script's other thread may print on)."""
REAP_INTERVAL = 1.0
CANCEL_GRACE = 3.0
"""Seconds a cancelled execution has to end after its KeyboardInterrupt before the worker is killed."""
INTERRUPT_AGAIN = 0.25
"""Seconds between the SIGINTs of one cancel. A signal that lands just before a blocking call (``time.sleep``,
a read) sets Python's flag without waking that call, so the script slept through its only interrupt and was
killed; the next one wakes it. The worker raises KeyboardInterrupt once per cell, so the repeats never cut
short the script's own clean-up."""


SPAWN_WAIT = 5.0
"""Seconds a worker's start waits for room under the sandbox's pids limit (or ``nproc`` ulimit, which counts the
supervisor's threads too): the processes a kill just ended still hold their places for a moment."""
SWEEP_WAIT = 5.0
"""Seconds a kill of every process of the sandbox user waits for them to be gone and collected. Each holds its place
under the sandbox's process limit until then: an orphan's zombie until this init reaps it (the reaper's round comes
up to `REAP_INTERVAL` later), and under gVisor the killed processes end one after another over half a second."""


class Supervisor:
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

    def reap_orphans(self) -> None:
        """As init: collect the exit status of orphaned processes (never of a worker), every `REAP_INTERVAL` s."""
        while True:
            time.sleep(REAP_INTERVAL)
            self.reap_zombies()

    def reap_zombies(self) -> int:
        """Collect the exit status of this process's zombie children but the workers; how many other processes are
        left (running, dying, or zombies of another parent)."""
        with self.lock:
            keep = set(self.unreaped)
        left = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in keep or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            if len(fields) > 1 and fields[0] == "Z" and fields[1] == str(os.getpid()):
                with contextlib.suppress(ChildProcessError):  # the reaper thread was first
                    os.waitpid(int(entry), os.WNOHANG)
            else:
                left += 1
        return left

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

    def spawn_worker(self) -> None:
        """Start a worker and its pump thread; when none can start, set ``broken`` (never raises).

        Under the sandbox's pids limit a script may hold every place: a fork or a thread start then fails
        (EAGAIN) until the processes a kill ended are gone, so it is tried again, reaping orphans between, for
        `SPAWN_WAIT` seconds; then, in a container, after a kill of every process of the sandbox user (the
        interpreter state is lost anyway), once more.
        """
        swept = False
        deadline = time.monotonic() + SPAWN_WAIT
        pause = 0.002
        while True:
            try:
                self._spawn_worker_once()
                return
            except (OSError, RuntimeError) as e:  # a fork or a thread refused
                problem = e
            self.reap_zombies()
            if time.monotonic() >= deadline:
                if swept or not self.kill_all:
                    break
                swept = True
                deadline = time.monotonic() + SPAWN_WAIT
                with self.sweeping:
                    self._sweep()
            time.sleep(pause)
            pause = min(pause * 2, 0.1)
        self.break_session(f"the Python worker cannot start: {problem} (the sandbox's processes fill its pids limit)")

    def break_session(self, why: str) -> None:
        with self.lock:
            self.broken = why
            self.replaced.notify_all()

    def _spawn_worker_once(self) -> None:
        # The old worker's death (``pump`` → ``on_worker_exit`` → ``finish``) can respawn while the
        # thread that killed it has yet to send kill(-1): that signal would kill the new worker
        # before it is ready ("failed to start", and a broken session). Wait for the sweep to end.
        with self.sweeping, self.lock:
            self.spawn_oom_kills = oom_kill_count()
            worker = Worker(self.generation + 1, self.worker_argv, self.workspace.root, self.worker_env)
            self.unreaped.add(worker.proc.pid)
            try:  # under the lock: the pump finds ``self.worker`` set
                threading.Thread(
                    target=self.pump, args=(worker,), name=f"worker-{worker.generation}", daemon=True
                ).start()
            except RuntimeError:
                worker.abandon()
                self.unreaped.discard(worker.proc.pid)
                raise
            self.generation = worker.generation
            self.worker = worker
            self.replaced.notify_all()

    def kill_everything(self, worker: Worker) -> None:
        """Kill the worker and, in a container, every other process of the sandbox user; return once they are gone.

        As pid 1 in the container, kill(-1) reaches every process of the sandbox user, including any that left the
        worker's session. Before, the reset (or the timeout's result) came back while the killed processes still held
        their places under the process limit, as zombies for up to `REAP_INTERVAL`: 81 of 128 under gVisor, and the
        next script's forks failed with EAGAIN. So the sweep reaps them at once and waits (`SWEEP_WAIT` at most) until
        none is left but the workers (whose status their pump collects), killing again what came to life meanwhile (a
        fork that raced the first kill). No worker starts until then (``sweeping``).
        """
        with self.sweeping:
            worker.kill()
            if self.kill_all:
                self._sweep()

    def _sweep(self) -> None:
        """kill(-1) and reap until no process of the sandbox user is left but the workers (`SWEEP_WAIT` at most);
        the caller holds ``sweeping``."""
        deadline = time.monotonic() + SWEEP_WAIT
        pause = 0.001
        while True:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(-1, signal.SIGKILL)
            if not self.reap_zombies() or time.monotonic() >= deadline:
                return
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

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

    def pump(self, worker: Worker) -> None:
        """Move everything the worker writes: control frames to handlers, output to the capture."""
        sel = selectors.DefaultSelector()
        for fd in (worker.ctl_read_fd, worker.out_fd, worker.err_fd):
            sel.register(fd, selectors.EVENT_READ)
        decoder = FrameDecoder()
        ctl_open = True
        while ctl_open:
            for key, _ in sel.select(self.stream_due(worker)):
                fd = key.fd
                if fd == worker.ctl_read_fd:
                    data = self.read_nonblocking(fd)
                    if data is None:  # it exited, or its script closed the pipe and runs on (before: "SIGKILL: out
                        # of memory?", the kill below taken for the kernel's)
                        worker.channel_closed = worker.channel_closed or worker.lives_on()
                        ctl_open = False
                        break
                    if not self.handle_control_bytes(worker, decoder, data):
                        ctl_open = False
                        break
                elif self.read_output(worker, fd) is None:
                    sel.unregister(fd)
            self.stream_output(worker)
        sel.close()
        worker.kill()
        returncode = worker.proc.wait()
        with self.lock:
            self.unreaped.discard(worker.proc.pid)
            worker.exited = True
        self.drain_output(worker)
        os.close(worker.ctl_read_fd)
        for stream in (worker.proc.stdout, worker.proc.stderr):
            if stream is not None:
                stream.close()
        worker.close_control()
        self.on_worker_exit(worker, returncode)

    @staticmethod
    def read_nonblocking(fd: int) -> bytes | None:
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return b""
        return data or None

    def read_output(self, worker: Worker, fd: int) -> bytes | None:
        data = self.read_nonblocking(fd)
        if data:
            with self.lock:
                ex = self.current if self.worker is worker else None
                if ex is not None and not ex.finished:
                    (ex.stdout if fd == worker.out_fd else ex.stderr).feed(data)
                elif fd == worker.err_fd:
                    # Between executions (e.g. a worker failing to start): keep it as a diagnostic.
                    sys.stderr.write(data[:4096].decode("utf-8", errors="replace"))
        return data

    def _streaming(self, worker: Worker) -> Execution | None:
        ex = self.current if self.worker is worker else None
        return ex if ex is not None and not ex.finished else None

    def stream_due(self, worker: Worker) -> float | None:
        """Seconds until the running execution's output is due to go to the host (`stream`); None: nothing waits."""
        with self.lock:
            ex = self._streaming(worker)
            return None if ex is None else ex.streamer.due_in(ex.captures(), time.monotonic())

    def stream_output(self, worker: Worker, *, now: bool = False) -> None:
        """Send the host what the running execution printed since the last send, when it is due (`stream`), or
        (``now``) its head at once."""
        with self.output_lock:  # never after the execution's result: `finish` replies under it
            with self.lock:
                ex = self._streaming(worker)
                params = None if ex is None else ex.streamer.take(ex.captures(), now=now)
            if params is not None:
                self.send({"method": "output", "params": params})

    def drain_output(self, worker: Worker, limit: float = float("inf")) -> None:
        """Read what the worker's streams hold now (at most ``limit`` bytes of each: it may print on meanwhile)."""
        for fd in (worker.out_fd, worker.err_fd):
            taken = 0
            while taken < limit:
                try:
                    data = self.read_output(worker, fd)
                except OSError:
                    break
                if not data:
                    break
                taken += len(data)

    def handle_control_bytes(self, worker: Worker, decoder: FrameDecoder, data: bytes) -> bool:
        """Handle every frame ``data`` completes; False when the worker broke the protocol (also a field of the wrong
        type: before, a call's id ``"abc"`` raised in this thread, the execution never ended, and the host destroyed
        the sandbox 35 s later, its workspace unsaved)."""
        try:
            for message in decoder.feed(data):
                self.handle_worker_message(worker, message)
        except WireError as e:
            print(f"supervisor: bad frame from the worker: {e}", file=sys.stderr)
            worker.bad_frame = str(e)[:500]
            return False
        return True

    def handle_worker_message(self, worker: Worker, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "ready":
            worker.ready.set()
        elif kind == "channel_closed":  # its way in: it ends (before: "exited with status 0", said of the next script)
            worker.channel_closed = True
        elif kind == "call":
            if not isinstance(worker_call_id := message.get("id"), int) or isinstance(worker_call_id, bool):
                raise WireError(f"a call's id must be an integer, not {type(worker_call_id).__name__}")
            # What the script printed before the call goes to the host before it: a sandbox that dies during the
            # call (or once its answer came) has sent it (`stream`).
            self.drain_output(worker, DRAIN_BEFORE_CALL)
            self.stream_output(worker, now=True)
            with self.lock:
                ex = self.current if self.worker is worker else None
                self.call_seq += 1
                host_call_id = f"c{self.call_seq}"
                if ex is not None:
                    self.pending_calls[host_call_id] = (worker.generation, worker_call_id)
            if ex is None:
                self.to_worker(
                    worker,
                    {
                        "type": "reply",
                        "id": worker_call_id,
                        "error": {"code": "no_execution", "message": "no execution is running"},
                    },
                )
                return
            params = message.get("params") if isinstance(message.get("params"), dict) else {}
            try:
                self.send({"id": host_call_id, "method": str(message.get("method")), "params": params})
            except FrameTooLarge as e:
                self.relay_reply({"id": host_call_id, "error": {"code": "too_large", "message": f"the call: {e}"}})
            except (ValueError, TypeError):
                reason = "the call cannot be sent as JSON"
                self.relay_reply({"id": host_call_id, "error": {"code": "invalid_arguments", "message": reason}})
        elif kind == "image":
            with self.lock:
                ex = self.current if self.worker is worker else None
                data = message.get("data")
                if (
                    ex is not None
                    and len(ex.images) < MAX_IMAGES
                    and isinstance(data, str)
                    and len(data) <= base64_size(MAX_IMAGE_BYTES)
                    and ex.image_chars + len(data) <= base64_size(MAX_IMAGES_TOTAL_BYTES)
                ):
                    ex.image_chars += len(data)
                    ex.images.append({"mime": str(message.get("mime"))[:40], "data": data})
        elif kind == "where":  # the answer to `Worker.ask_where`
            with self.lock:
                ex = self.current if self.worker is worker else None
                where = message.get("traceback")
                if ex is not None and ex.exec_id == message.get("exec") and isinstance(where, str):
                    ex.where = where
                    ex.where_said.set()
        elif kind == "traceback_part":  # the whole of a long traceback, before its "done"
            with self.lock:
                ex = self.current if self.worker is worker else None
                text = message.get("text")
                if ex is not None and ex.exec_id == message.get("exec") and isinstance(text, str):
                    if ex.traceback is None:
                        ex.traceback = self._capture(f"{ex.exec_id}-{self.output_tag}-traceback.txt")
                    ex.traceback.feed(text.encode("utf-8", "backslashreplace"))
                    ex.traceback_cut = ex.traceback_cut or message.get("cut") is True
        elif kind == "done":
            with self.lock:
                ex = self.current if self.worker is worker else None
                if ex is None or ex.exec_id != message.get("exec"):
                    return
            self.drain_output(worker)  # what the cell printed before it ended is in the pipes by now
            self.finish(
                ex,
                {
                    "exit_status": message.get("exit_status"),
                    "error": message.get("error"),
                    "traceback": message.get("traceback"),
                    "timed_out": False,
                    "state_reset": False,
                },
            )

    @staticmethod
    def to_worker(worker: Worker, message: dict[str, Any]) -> bool:
        """Send a control message to the worker; False when it does not fit in a frame."""
        try:
            worker.send(message)
        except FrameTooLarge:
            return False
        return True

    def relay_encoded_reply(self, body: bytearray) -> bool:
        """Hand the host's answer to a call on to the worker without parsing it; False when ``body`` is not one."""
        head = _REPLY_HEAD.match(body)
        if head is None:
            return False
        with self.lock:
            target = self.pending_calls.pop(head.group(1).decode("ascii"), None)
            worker = self.worker
        if target is None or worker is None or worker.generation != target[0]:
            return True  # a call of a worker that is gone: nobody waits for it
        if not worker.send_body(b'{"type":"reply","id":%d,' % target[1] + body[head.end() :]):
            error = {"code": "too_large", "message": "the answer is too large to hand to the script"}
            self.to_worker(worker, {"type": "reply", "id": target[1], "error": error})
        return True

    def relay_reply(self, message: dict[str, Any]) -> None:
        with self.lock:
            target = self.pending_calls.pop(str(message.get("id")), None)
            worker = self.worker
        if target is None or worker is None or worker.generation != target[0]:
            return
        reply: dict[str, Any] = {"type": "reply", "id": target[1]}
        if "error" in message:
            reply["error"] = message["error"]
        else:
            reply["result"] = message.get("result")
        if not self.to_worker(worker, reply):
            error = {"code": "too_large", "message": "the answer is too large to hand to the script"}
            self.to_worker(worker, {"type": "reply", "id": target[1], "error": error})

    def on_worker_exit(self, worker: Worker, returncode: int) -> None:
        with self.lock:
            ex = self.current
            expected = worker.dead
            self.pending_calls = {k: v for k, v in self.pending_calls.items() if v[0] != worker.generation}
        if expected:
            return  # a reset replaced it
        if not worker.ready.is_set():
            # It died before it could run anything: respawning would only loop. Killed for memory since it was
            # started, it is said so (before: "exit status -9" alone, whatever the cause).
            why = f"the Python worker failed to start (exit status {returncode})"
            if returncode < 0 and oom_kill_count() > self.spawn_oom_kills:
                why = (
                    "the Python worker was killed as it started, out of memory: Python needs more than the sandbox's "
                    "memory limit, sandbox.memory, leaves it (at least about 20m); raise sandbox.memory"
                )
            self.break_session(why)
            worker.ready.set()
            if ex is not None:
                self.finish(
                    ex,
                    {
                        "exit_status": returncode,
                        "error": self.broken,
                        "traceback": None,
                        "timed_out": False,
                        "state_reset": True,
                    },
                )
            return
        if ex is not None and not ex.finished:
            if ex.timed_out:
                error = f"timed out after {ex.timeout:g} s"
            elif ex.cancelled:
                error = "the interpreter did not stop when interrupted and was restarted"
            elif worker.bad_frame is not None:
                error = f"the interpreter sent its supervisor a bad frame ({worker.bad_frame}) and was restarted"
            elif worker.channel_closed:
                error = CHANNEL_CLOSED
            elif returncode < 0 and oom_kill_count() > ex.oom_kills:
                error = "memory limit exceeded: the interpreter was killed (variables and imports are gone)"
            elif returncode < 0:
                error = killed_by(-returncode)
            else:
                error = f"the Python process exited with status {returncode}"
            # Where a timed-out script was (`on_timeout`), ending as a traceback does: with the error's line.
            where = ex.where.rstrip("\n") + f"\nTimeoutError: {error}\n" if ex.timed_out and ex.where else None
            self.finish(
                ex,
                {
                    "exit_status": returncode,
                    "error": error,
                    "traceback": where,
                    "timed_out": ex.timed_out,
                    "state_reset": True,
                },
                respawn=True,
            )
        else:
            with self.lock:  # before: the next script ran on a new interpreter, its variables gone unsaid
                self.reset_unsaid = True
                if worker.channel_closed:
                    self.ended_unsaid = CHANNEL_CLOSED
            self.link_tree()
            self.spawn_worker()

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
        with self.output_lock:
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
