"""What passes between the supervisor and its worker (`_WorkerRelay`, which `supervisor.Supervisor` takes it from).

Each worker has a pump thread that moves everything it writes: its control frames to their handlers (a tool call or
search relayed to the host, whose answer goes back to the worker unparsed; an image; where a timed-out cell is; a long
traceback; the end of a cell), its stdout and stderr to the running execution's capture and, as they come, to the
host (`stream`). When the worker exits, the running execution ends saying why and another worker starts.
"""

from __future__ import annotations

import os
import re
import selectors
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from .capture import OutputCapture
from .limits import MAX_IMAGE_BYTES, MAX_IMAGES, MAX_IMAGES_TOTAL_BYTES, base64_size
from .processes import CHANNEL_CLOSED, Execution, Worker, killed_by, oom_kill_count
from .wire import FrameDecoder, FrameTooLarge, WireError

_REPLY_HEAD = re.compile(rb'\{"id":"(c[0-9]{1,19})",')
"""The start of the host's answer to a tool call or search, as the host encodes it: the rest of the
frame (``"result":…}`` or ``"error":…}``) is handed to the worker as it came, never parsed here."""
DRAIN_BEFORE_CALL = 1 << 20
"""The most bytes of each stream read at a tool call, to be sent before it (a script's other thread may print on)."""


class _WorkerRelay:
    """`Supervisor`'s side of its workers' pipes; the state it uses is `Supervisor`'s (set in its ``__init__``)."""

    lock: threading.RLock
    output_lock: threading.Lock
    worker: Worker | None
    current: Execution | None
    call_seq: int
    pending_calls: dict[str, tuple[int, int]]
    broken: str | None
    unreaped: set[int]
    spawn_oom_kills: int
    ended_unsaid: str | None
    reset_unsaid: bool
    output_tag: str

    if TYPE_CHECKING:  # `Supervisor`'s (spawn_worker and break_session: its base `spawning._Spawning`'s)

        def send(self, message: dict[str, Any]) -> None: ...
        def finish(self, ex: Execution, result: dict[str, Any], *, respawn: bool = False) -> None: ...
        def _capture(self, name: str) -> OutputCapture: ...
        def link_tree(self) -> None: ...
        def spawn_worker(self) -> None: ...
        def break_session(self, why: str) -> None: ...

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
                    name = "stdout" if fd == worker.out_fd else "stderr"
                    capture = ex.stdout if fd == worker.out_fd else ex.stderr
                    capture.feed(data)
                    ex.streamer.read(name, capture.total - len(data), capture.total)
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
