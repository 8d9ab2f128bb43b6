"""The processes the supervisor runs: the worker, and the record of one execution."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
from typing import Any

from .capture import OutputCapture
from .clock import Alarm
from .limits import WHERE_SIGNAL
from .stream import OutputStreamer
from .wire import HEADER, MAX_FRAME_BYTES, FrameSender, encode_frame


class Execution:
    """One execution in progress: its limits, its captured output, and how it ended.

    A plain class, not a dataclass: importing ``dataclasses`` (and ``inspect`` behind it) costs the
    supervisor's start more than this class is worth.
    """

    def __init__(
        self,
        *,
        exec_id: int,
        host_id: Any,
        started: float,
        timeout: float,
        max_chars: int,
        stdout: OutputCapture,
        stderr: OutputCapture,
        oom_kills: int = 0,
    ) -> None:
        self.exec_id = exec_id
        self.host_id = host_id
        self.started = started
        self.timeout = timeout
        self.max_chars = max_chars
        self.stdout = stdout
        self.stderr = stderr
        self.oom_kills = oom_kills
        """The container's OOM-kill count when the execution started (see `oom_kill_count`)."""
        self.traceback: OutputCapture | None = None
        """The whole of a traceback longer than a result holds, as the worker sends it (``traceback_part``)."""
        self.traceback_cut = False
        """The worker sent only the start of that traceback: as much as a saved output may hold."""
        self.streamer = OutputStreamer(max_chars)
        """What of its output has been sent to the host while it runs (`stream`)."""
        self.images: list[dict[str, str]] = []
        self.image_chars = 0
        """The base64 characters of ``images`` together (bounded by `limits.MAX_IMAGES_TOTAL_BYTES`)."""
        self.timed_out = False
        self.where: str | None = None
        """Where the script was when its time ran out: its frames as a traceback lists them (`Worker.ask_where`)."""
        self.where_said = threading.Event()
        self.cancelled = False
        """The host asked to stop it (``cancel``): interrupted, or killed when it ignored the interrupt."""
        self.finished = False
        self.timer: Alarm | None = None
        self.state_lost = False
        """The interpreter it runs on replaced one that ended since the last execution: its result says the state
        was reset (before: the script ran without its variables and nothing said why)."""

    def captures(self) -> dict[str, OutputCapture]:
        """Its two streams' captures, by name."""
        return {"stdout": self.stdout, "stderr": self.stderr}


CLOSED_GRACE = 0.5
"""Seconds a worker whose control pipe closed is given to end on its own before it is taken to have closed it."""
CHANNEL_CLOSED = (
    "a script of this session closed the interpreter's control channel to its supervisor, so the interpreter was "
    "ended and restarted; variables and imports are gone"
)
"""The error of an execution whose interpreter lost its control channel to a script: this one closed the way out and
ran on, or this one or one before it closed the way in (found when the next message came)."""

_OOM_FILES = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")


def oom_kill_count() -> int:
    """How many processes the kernel killed for the container's memory limit (cgroup v2 or v1); 0 if unknown."""
    for path in _OOM_FILES:
        try:
            with open(path, encoding="ascii") as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return 0


def killed_by(signum: int) -> str:
    """The error of a worker killed by ``signum`` while the kernel counted no kill for the memory limit. Only a
    SIGKILL may still have been one (a count it could not read); before, a crash (SIGSEGV in native code, an abort)
    was said to be "out of memory?" too."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = "an unknown signal"
    why = ": out of memory?" if signum == signal.SIGKILL else ""
    return f"the Python process was killed by signal {signum} ({name}{why}); variables and imports are gone"


class Worker:
    """One worker process and the pipes to it."""

    def __init__(self, generation: int, argv: list[str], workspace: str, env: dict[str, str]) -> None:
        self.generation = generation
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        self.ctl_write_fd = to_worker_w
        self.ctl_read_fd = from_worker_r
        # Written at once when the pipe has room; a worker too busy to drain it never blocks the
        # supervisor's host reader: the rest is finished by the sender's thread. Its thread is started
        # first: when the sandbox's limit refuses it (RuntimeError), there is no process to end.
        try:
            self._sender = FrameSender(
                self._write_all,
                try_write=self._try_write,
                on_close=lambda: os.close(self.ctl_write_fd),
                name=f"to-worker-{generation}",
            )
        except RuntimeError:
            for fd in (to_worker_r, to_worker_w, from_worker_r, from_worker_w):
                os.close(fd)
            raise
        try:
            self.proc = subprocess.Popen(
                [*argv, "--ctl-in", str(to_worker_r), "--ctl-out", str(from_worker_w)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(to_worker_r, from_worker_w),
                cwd=workspace,
                env=env,
                start_new_session=True,
            )
        except OSError:  # EAGAIN: the sandbox's process limit
            self._sender.close()  # closes ctl_write_fd
            os.close(from_worker_r)
            raise
        finally:
            os.close(to_worker_r)
            os.close(from_worker_w)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.out_fd = self.proc.stdout.fileno()
        self.err_fd = self.proc.stderr.fileno()
        for fd in (self.ctl_write_fd, self.ctl_read_fd, self.out_fd, self.err_fd):
            os.set_blocking(fd, False)
        self.ready = threading.Event()
        self.dead = False
        self.exited = False
        """Its process ended and was collected (its pump set it; a new worker replaces it unless ``dead``)."""
        self.bad_frame: str | None = None
        """Why the supervisor stopped reading the worker (a frame it refused), if it did."""
        self.channel_closed = False
        """A script closed one of its control pipes: the way out (it ran on and was killed), or the way in (it said so
        and ended)."""

    def abandon(self) -> None:
        """End a worker whose pump never started (no thread for it): kill it, collect it, close its pipes."""
        self.dead = True
        self.kill()
        self.proc.wait()
        os.close(self.ctl_read_fd)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        self.close_control()

    def _try_write(self, data: bytes | memoryview) -> int:
        try:
            return os.write(self.ctl_write_fd, data)
        except BlockingIOError:
            return 0

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            select.select([], [self.ctl_write_fd], [])
            view = view[self._try_write(view) :]

    def send(self, message: dict[str, Any]) -> None:
        """Send one control message to the worker (in order; never blocks on a full pipe).

        Raises:
            FrameTooLarge: the message does not fit in a frame (nothing was sent).
            ValueError: the message is not valid JSON.
        """
        self._sender.send(encode_frame(message))

    def send_body(self, body: bytes) -> bool:
        """Send a frame whose body is already encoded (in order, like `send`); False when it is over the cap."""
        if len(body) > MAX_FRAME_BYTES:
            return False
        self._sender.send(HEADER.pack(len(body)) + body)
        return True

    def close_control(self) -> None:
        """Send what is queued, then close the control pipe (the worker's end of input)."""
        self._sender.close()

    def lives_on(self) -> bool:
        """Whether the process still runs `CLOSED_GRACE` seconds after its control pipe closed. A process that exits
        closes its pipes a moment before it can be collected, so the pipe's end alone does not tell."""
        try:
            self.proc.wait(CLOSED_GRACE)
        except subprocess.TimeoutExpired:
            return True
        return False

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def ask_where(self) -> None:
        """`WHERE_SIGNAL` to the worker alone: it sends where its running cell is (a ``where`` message), and runs on."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.proc.pid, WHERE_SIGNAL)

    def interrupt(self) -> None:
        """SIGINT to the worker alone: the running cell gets a KeyboardInterrupt, the namespace stays."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.proc.pid, signal.SIGINT)
