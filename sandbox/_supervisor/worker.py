"""The worker: a long-lived Python process that runs every execution of a session.

Interpreter state persists because one process runs all of a session's executions in one
namespace (``exec`` of each cell into the same globals dict): variables, imports, functions
and open files carry over. ``reset`` — and a timeout or crash, which kill the process — start
a fresh worker, so nothing survives them (the result says so).

The worker talks to the supervisor over two pipes of frames (``--ctl-in`` / ``--ctl-out``):

    supervisor → worker   {"type": "exec", "exec": N, "code": "...", "filename": "..."}   (filename optional)
                          {"type": "reply", "id": K, "result": {...}} | {"type": "reply", "id": K, "error": {...}}
    worker → supervisor   {"type": "ready"}
                          {"type": "channel_closed"}   (a script closed or replaced --ctl-in; the worker ends)
                          {"type": "call", "id": K, "method": "tool_call" | "search_tools", "params": {...}}
                          {"type": "image", "exec": N, "mime": "image/png", "data": "<base64>"}
                          {"type": "done", "exec": N, "exit_status": 0, "error": null, "traceback": null}

Its stdout and stderr are pipes the supervisor captures, written block-buffered (`flushing`). Tool calls from any
number of threads are in flight at once; each waits for the reply carrying its id.

(Over 400 lines: one process's parts — its connection to the supervisor, the stubs' transport,
``show_image``, the runner — share its globals; the frame format is imported from `wire`, not repeated, and what
``show_image`` accepts is read in `images`.)
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import functools
import itertools
import linecache
import numbers
import os
import queue
import signal
import sys
import threading
import time
import traceback
import types
from typing import Any

from . import flushing
from .capture import FILE_BYTES
from .images import images_of
from .limits import (
    MAX_CALLS_IN_FLIGHT,
    MAX_ERROR_CHARS,
    MAX_IMAGES,
    MAX_IMAGES_TOTAL_BYTES,
    MAX_INT_DIGITS,
    MAX_TRACEBACK_CHARS,
    TRACEBACK_PART_CHARS,
    WHERE_SIGNAL,
    cut_middle,
    refused_argument,
    too_deep,
    too_many_values,
)
from .options import OptionError, parse_options
from .suggestions import suggested
from .wire import (
    MAX_DEPTH,
    MAX_FRAME_VALUES,
    FrameReader,
    FrameTooLarge,
    FrameWriter,
    TooDeep,
    TooManyValues,
    WireError,
    check_depth,
)

_CO_COROUTINE = 0x80
_PyCF_ALLOW_TOP_LEVEL_AWAIT = 0x2000


class HostError(Exception):
    """The host refused or failed a request (not a tool error: those come back as results)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


BUSY_RETRIES = 100
"""Tries of a call the host refused as one too many in flight (it still counted an answered one) before failing."""


def _identity(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


class Connection:
    """The worker's end of the control pipes."""

    def __init__(self, ctl_in: int, ctl_out: int) -> None:
        for fd in (ctl_in, ctl_out):  # a program the script runs (close_fds=False) holds no copy: see _leave_in_child
            os.set_inheritable(fd, False)
        self._reader = FrameReader(ctl_in, strict=False)  # the supervisor is the trusted side
        self._ctl_in = ctl_in
        self._ctl_in_identity = _identity(os.fstat(ctl_in))
        self._writer = FrameWriter(ctl_out)
        self._writer_fd = ctl_out
        self._ctl_out_identity = _identity(os.fstat(ctl_out))
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[threading.Event, list[dict[str, Any]]]] = {}
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_CALLS_IN_FLIGHT)
        self.executions: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.current_exec = 0
        self.images_sent = 0
        self.image_bytes_sent = 0
        threading.Thread(target=self._read_loop, name="tooltree-ctl", daemon=True).start()
        os.register_at_fork(after_in_child=self._leave_in_child)

    def _leave_in_child(self) -> None:
        """A process the script forks (os.fork, multiprocessing) keeps no copy of the control pipes: holding them, it
        kept the supervisor from seeing this process end (it died, and the script was said to have timed out), and a
        call it made was never answered (the answer came to this process)."""
        global _connection, _forked
        if _forked:  # a fork of a fork: the numbers may name the child's own files now
            return
        _connection, _forked = None, True
        for fd in (self._ctl_in, self._writer_fd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def send(self, message: dict[str, Any]) -> None:
        try:
            self._writer.send(message)
        except OSError:
            if self._channel_intact(self._writer_fd, self._ctl_out_identity):
                raise
            # A script closed the way out: the supervisor saw it close and ends this process, saying why, once it
            # finds it still running (before: it ended at once, "the Python process exited with status 1").
            threading.Event().wait()

    def _read_loop(self) -> None:
        # The host's cancel (SIGINT to this process) must reach the thread running the cell: taken here, it would
        # leave the cell asleep (in time.sleep, a lock) and the cancel would end in a restart.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            while (message := self._reader.read()) is not None:
                # A read under way when a script closed the descriptor still returns: what it read is not acted on.
                if not self._channel_intact(self._ctl_in, self._ctl_in_identity):
                    break
                kind = message.get("type")
                if kind == "exec":
                    self.executions.put(message)
                elif kind == "reply":
                    with self._lock:
                        waiter = self._pending.pop(message.get("id"), None)  # type: ignore[arg-type]
                    if waiter is not None:
                        waiter[1].append(message)
                        waiter[0].set()
        except (WireError, OSError):
            pass
        if not self._channel_intact(self._ctl_in, self._ctl_in_identity):
            # A script closed the descriptor: the supervisor is there, and is told why.
            with contextlib.suppress(OSError, ValueError):
                self._writer.send({"type": "channel_closed"})
        # The supervisor went away (or cannot be heard): nothing more can run.
        os._exit(0)

    @staticmethod
    def _channel_intact(fd: int, identity: tuple[int, int]) -> bool:
        """Whether ``fd`` is still the pipe the worker was given: a script may have closed it, and opened another
        file that took its number (before, that file was read as the way in: "the Python process exited with
        status 0")."""
        try:
            return _identity(os.fstat(fd)) == identity
        except OSError:
            return False

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request to the host and wait for its result; past `MAX_CALLS_IN_FLIGHT`, wait for a turn first.

        Raises:
            HostError: the host answered with an error.
        """
        with self._slots:
            for attempt in itertools.count():
                try:
                    return self._request_once(method, params)
                except HostError as e:
                    if e.code != "too_many_calls" or attempt >= BUSY_RETRIES:  # about 10 s of a full host: say so
                        raise
                # Never sent on: the host still counts a call that was answered a moment ago (or one a cancelled
                # cell left), so try again shortly rather than fail a call the script made within the limit.
                time.sleep(min(0.001 * 2**attempt, 0.1))
        raise AssertionError("unreachable")

    def _request_once(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        call_id = next(self._ids)
        event = threading.Event()
        box: list[dict[str, Any]] = []
        with self._lock:
            self._pending[call_id] = (event, box)
        try:
            # A call the supervisor (and the host) would refuse unparsed is refused here, with the host's words.
            message = {"type": "call", "id": call_id, "method": method, "params": params}
            flushing.flush_all()  # what the script printed before the call reaches the host before it
            limit = getattr(sys, "get_int_max_str_digits", lambda: 0)()  # none before Python 3.10.7
            raised = limit not in range(1, MAX_INT_DIGITS + 1)  # the script raised its interpreter's limit (0: none)
            if raised and (number := refused_argument(params.get("arguments"), sys.maxsize)) is not None:
                raise HostError(number, "invalid_arguments")
            try:
                try:
                    self._writer.send(message, max_values=MAX_FRAME_VALUES)
                except RecursionError:  # too deep for the encoder, or a call made from deep in a recursion: which?
                    check_depth(message, MAX_DEPTH)
                    raise
            except TooDeep:  # before: the supervisor refused it and restarted the interpreter, its variables lost
                raise HostError(
                    refused_argument(params.get("arguments")) or too_deep(), "arguments_too_large"
                ) from None
            except TooManyValues:
                raise HostError(too_many_values(), "arguments_too_large") from None
            except FrameTooLarge as e:
                raise HostError(f"the arguments are too large to send: {e}", "too_large") from None
            except (ValueError, TypeError) as e:  # NaN, infinity, a number past the interpreter's limit: named
                number = refused_argument(params.get("arguments"), sys.maxsize)  # not "use sys.set_int_max_str_digits"
                raise HostError(number or f"the arguments cannot be sent as JSON: {e}", "invalid_arguments") from None
            event.wait()
        finally:  # also when the wait is interrupted (KeyboardInterrupt, a script's own alarm)
            with self._lock:
                self._pending.pop(call_id, None)
        reply = box[0]
        error = reply.get("error")
        if isinstance(error, dict):
            raise HostError(str(error.get("message", "the request failed")), str(error.get("code", "call_failed")))
        result = reply.get("result")
        return result if isinstance(result, dict) else {}


_connection: Connection | None = None
_forked = False
"""This is a process a script forked: it has no channel to the supervisor (`Connection._leave_in_child`)."""


def _conn() -> Connection:
    if _forked:
        raise RuntimeError(
            "tool calls, search_tools and show_image work in the script's own process, not in one it forked (os.fork, "
            "multiprocessing): make them there, or from threads (tool_tree.runtime.parallel runs calls at once)"
        )
    if _connection is None:
        raise RuntimeError("not running inside the sandbox worker")
    return _connection


def tool_transport(server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The `tool_tree.runtime` transport: relay the call to the host and wait for the result."""
    from tool_tree.runtime import ToolCallError

    try:
        return _conn().request("tool_call", {"server": server, "tool": tool, "arguments": arguments})
    except HostError as e:
        raise ToolCallError(server, tool, str(e), e.code) from None


def search_tools(query: str, detail: str = "summary", limit: int = 5, regex: bool = False) -> str:
    """Search the tools of every server; returns the matches as text, best first.

    ``detail``: ``"name"`` (qualified names), ``"summary"`` (name, one line, signature) or
    ``"full"`` (each stub's text). ``limit``: 1 to 50. ``regex=True`` treats ``query`` as a
    pattern over names and descriptions.

    Raises:
        RuntimeError: the host offers no tool search or refused the query, or an argument (the message says which).
    """
    # As given, for the host to say which is wrong and how (`sandbox.calls`); before, each was converted first:
    # ``regex="false"`` ran a regex search, a list or None was searched for as its text, a limit of 2.9 was 2.
    count: object = limit  # typed as what a script should pass, not what it may
    if not isinstance(count, int) and isinstance(count, numbers.Integral):
        count = int(count)  # a numpy integer, say: JSON has no such type
    params = {"query": query, "detail": detail, "limit": count, "regex": regex}
    try:
        result = _conn().request("search_tools", params)
    except HostError as e:
        raise RuntimeError(f"search_tools: {e}") from None
    text = result.get("text")
    return text if isinstance(text, str) else ""


def show_image(image: Any) -> None:
    """Show an image to the model: a file path, PNG/JPEG/GIF/WebP bytes, a tool's image, an MCP image content
    block (a dict), or a figure; a tool result (``ToolResult``), a stub's structured result (the images of its tool
    result, or else the image blocks its ``content`` lists, as server-filesystem's ``read_media_file``'s), or a list
    or tuple shows each of its images in order (before: a tool result was refused, though it names its images when
    printed).

    Raises:
        ValueError: not a supported image, its headers not whole ("the GIF's logical screen is 0×0 pixels"), too
            large, or too many images in one execution; a tool result or a list without an image.
        TypeError: an argument of an unsupported kind.
        OSError: the file cannot be read.
    """
    for data, mime in images_of(image):
        conn = _conn()
        if conn.images_sent >= MAX_IMAGES:
            raise ValueError(
                f"show_image(): at most {MAX_IMAGES} images per execution: show the others from the next one (its "
                "variables are kept), or put several in one image"
            )
        if conn.image_bytes_sent + len(data) > MAX_IMAGES_TOTAL_BYTES:
            # Said as the count's refusal is, with what to do (before: bare numbers without separators or advice).
            raise ValueError(
                f"show_image(): the images of one execution may hold {MAX_IMAGES_TOTAL_BYTES:,} bytes together; "
                f"{conn.image_bytes_sent:,} are shown and this one has {len(data):,}: show it from the next execution "
                "(its variables are kept), or smaller (fewer pixels, or as JPEG)"
            )
        conn.images_sent += 1
        conn.image_bytes_sent += len(data)
        conn.send({"type": "image", "exec": conn.current_exec, "mime": mime, "data": base64.b64encode(data).decode()})


# Frames of the supervisor and the tool runtime are plumbing, never the user's concern.
_OWN_CODE = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,)


MAX_FILENAME_CHARS = 1024


def cell_filename(exec_id: int, requested: object = None) -> str:
    """The name a cell's frames carry: ``requested`` (a script's name, for the user) when it is plain text.

    Anything else — not a string, empty, over `MAX_FILENAME_CHARS`, holding a newline, another
    unprintable character or a double quote (it would end the name in ``File "..."``), padded with
    spaces, or naming a file of our own code (whose frames are hidden) — gives ``<cell-N>``.
    """
    if (
        isinstance(requested, str)
        and 0 < len(requested) <= MAX_FILENAME_CHARS
        and requested.isprintable()
        and '"' not in requested
        and requested.strip() == requested
        and not requested.startswith(_OWN_CODE)
    ):
        return requested
    return f"<cell-{exec_id}>"


_ARGV0 = {"<string>": "-c", "<stdin>": "-"}
"""``sys.argv[0]`` of a cell of these names: what ``python -c CODE`` and ``python -`` give."""


def cell_argv(filename: str) -> list[str]:
    """A cell's ``sys.argv``, as ``python`` gives a script run with no arguments: its name alone (``-c`` for code
    given so, ``-`` for standard input, ``''`` for an unnamed cell, as the interactive interpreter), never the
    worker's own command line."""
    if filename.startswith("<cell-"):
        return [""]
    return [_ARGV0.get(filename, filename)]


_in_cell = False
"""True while a cell runs: only then does SIGINT (the host's cancel) raise KeyboardInterrupt."""
_interrupted = False
"""The running cell got its KeyboardInterrupt: the cancel's later SIGINTs only wake blocking calls."""


def _interrupt(signum: int, frame: Any) -> None:
    global _interrupted
    if _in_cell and not _interrupted:
        _interrupted = True
        raise KeyboardInterrupt


def _say_where(runner: Runner, signum: int, frame: types.FrameType | None) -> None:
    """`WHERE_SIGNAL`: send where the running cell is (`Runner.where`) to the supervisor, which asked as the cell's
    time ran out. Sent from a thread of its own: the cell, which this handler interrupted, may hold the channel's lock.
    The cell runs on as if nothing came: an error here (no thread can start under the pids limit) is dropped, never
    raised in the cell."""
    connection = _connection
    if not _in_cell or connection is None or frame is None:
        return
    try:
        where = runner.where(frame)
        if where is not None:
            where = sendable(where)
            message = {"type": "where", "exec": connection.current_exec, "traceback": where}
            threading.Thread(target=connection.send, args=(message,), name="where", daemon=True).start()
    except Exception:  # no thread left under the pids limit: nothing is said, and nothing reaches the cell
        return


class Runner:
    """Runs cells in one persistent namespace and formats their errors."""

    def __init__(self, user_roots: tuple[str, ...]) -> None:
        script = types.ModuleType("__main__")
        self.namespace: dict[str, Any] = script.__dict__
        """The scripts' globals, the module ``sys.modules["__main__"]`` (`as_main`): pickle and multiprocessing find
        what a script defines there (before, it was the worker's own module: ``pickle.dumps`` of an instance of a
        script's class, or ``multiprocessing.Pool().map`` of its function, failed "attribute lookup ... on
        __main__ failed")."""
        self.namespace["__builtins__"] = builtins
        self.namespace["show_image"] = show_image
        self.namespace["search_tools"] = search_tools
        self.script = script
        self.user_roots = user_roots
        self.cell_names: set[str] = set()  # every name a cell ran under: its frames are the user's

    def _is_user_frame(self, filename: str) -> bool:
        return filename in self.cell_names or filename.startswith(self.user_roots)

    def _kept(self, frames: list[traceback.FrameSummary]) -> traceback.StackSummary:
        """The user's ``frames``, and the last (where it was raised, or stood) even in library code the user's called,
        not in ours nor in what ours called (before: a script that timed out in a tool call, or in `parallel`, ended
        its traceback at ``threading.py``'s ``waiter.acquire()``, where our runtime waited)."""
        users = [i for i, f in enumerate(frames) if self._is_user_frame(f.filename)]
        kept = [frames[i] for i in users]
        beyond = frames[users[-1] + 1 :] if users else []  # the frames the user's last one called
        if beyond and not any(f.filename.startswith(_OWN_CODE) for f in beyond):
            kept.append(beyond[-1])
        return traceback.StackSummary.from_list(kept)

    def where(self, frame: types.FrameType) -> str | None:
        """Where the cell running at ``frame`` is, as a traceback lists it (the user's frames), without its error's
        line; None when no frame of it is the user's."""
        stack = self._kept(list(traceback.extract_stack(frame)))
        if not stack:
            return None
        return cut_middle("Traceback (most recent call last):\n" + "".join(stack.format()), MAX_TRACEBACK_CHARS)

    def format_error(self, exc: BaseException) -> tuple[str, str]:
        """``(error, traceback trimmed to the user's frames)``: the error is the exception's type and message, every
        line of it, as the traceback ends (without its notes); both with the name a typo meant (`suggestions`)."""
        te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
        seen: set[int] = set()
        todo: list[tuple[traceback.TracebackException, BaseException | None]] = [(te, exc)]
        while todo:
            item, raised = todo.pop()
            if id(item) in seen:
                continue
            seen.add(id(item))
            item.stack = self._kept(list(item.stack))
            suggested(item, raised)
            todo.extend((x, getattr(raised, a, None)) for a in ("__cause__", "__context__") if (x := getattr(item, a)))
        lines = list(te.format_exception_only())
        line = next((x for x in lines if x[:1] not in (" ", "\t")), lines[-1]).strip()
        if isinstance(exc, SyntaxError) and exc.lineno:
            line += f" (line {exc.lineno})"
        return line, "".join(te.format())

    def run(self, code: str, filename: str) -> tuple[int, str | None, str | None]:
        """Run one cell; returns ``(exit status, error, traceback)``."""
        global _in_cell, _interrupted
        self.cell_names.add(filename)
        code = code.removeprefix("\ufeff")  # as `python` skips a file's BOM (before: "invalid non-printable character")
        lines = code.splitlines(keepends=True)
        linecache.cache[filename] = (len(code), None, lines, filename)
        # Before: the worker's own command line, which a script's `argparse` refused ("unrecognized arguments:
        # --workspace /workspace --user-root …", SystemExit 2), and what the last cell set.
        sys.argv = cell_argv(filename)
        _in_cell, _interrupted = True, False
        try:
            return self._run(code, filename)
        finally:
            _in_cell = False

    def _run(self, code: str, filename: str) -> tuple[int, str | None, str | None]:
        try:
            compiled = compile(code, filename, "exec", flags=_PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
            if compiled.co_flags & _CO_COROUTINE:
                import asyncio

                asyncio.run(eval(compiled, self.namespace))
            else:
                exec(compiled, self.namespace)
        except SystemExit as e:
            if e.code is None or e.code == 0:
                return 0, None, None
            if isinstance(e.code, int):
                return e.code, f"SystemExit: {e.code}", None
            print(e.code, file=sys.stderr)
            return 1, f"SystemExit: {e.code}", None
        except BaseException as e:  # the user's exception, whatever it is, becomes the result
            error, tb = self.format_error(e)
            return 1, error, tb
        return 0, None, None


SKILL_MD = """\
# Skills

Functions saved here stay with this workspace: later scripts (and later sessions that use the
same workspace) import them like any module:

    from skills.top_leads import top_leads

To save one, write `skills/<name>.py` (a function with a docstring saying what it does and what
it returns), then add one line for it below, so the next reader knows it exists.

"""


def ensure_skills(workspace: str) -> None:
    """Create ``skills/`` with its ``SKILL.md`` and ``__init__.py`` unless the workspace has them."""
    folder = os.path.join(workspace, "skills")
    try:
        os.makedirs(folder, exist_ok=True)
        for name, text in (("SKILL.md", SKILL_MD), ("__init__.py", "")):
            path = os.path.join(folder, name)
            if not os.path.lexists(path):
                with open(path, "x", encoding="utf-8") as f:
                    f.write(text)
    except OSError:
        pass  # a full or odd workspace must not stop the worker; scripts can still create it


def as_main(script: types.ModuleType) -> None:
    """Make the scripts' module ``__main__``; the worker's own module stays importable by its name."""
    worker = sys.modules["__main__"]
    spec = getattr(worker, "__spec__", None)
    if spec is not None:
        sys.modules.setdefault(spec.name, worker)
    sys.modules["__main__"] = script


def send_whole_traceback(conn: Connection, exec_id: int, tb: str) -> None:
    """Send the supervisor a traceback longer than a result holds, in parts, to save with the cut outputs (as far as
    a saved output holds: `FILE_BYTES`). Before, its middle was lost for good: the result said how many characters
    were cut, not where to read them."""
    for start in range(0, min(len(tb), FILE_BYTES), TRACEBACK_PART_CHARS):
        part = sendable(tb[start : start + TRACEBACK_PART_CHARS])
        conn.send({"type": "traceback_part", "exec": exec_id, "text": part, "cut": len(tb) > FILE_BYTES})


def sendable(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (``\\udc80``), as its repr shows it: a frame is UTF-8,
    which has none. Before, ``raise ValueError('\\udc80')`` ended the interpreter as it sent its result ("the Python
    process exited with status 1", the session's variables gone)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def main(argv: list[str] | None = None) -> int:
    """Run executions sent by the supervisor until the control pipe closes."""
    global _connection
    options, _, repeated = parse_options(
        sys.argv[1:] if argv is None else argv,
        values={"--ctl-in": None, "--ctl-out": None, "--workspace": None},
        repeated=("--user-root",),
    )
    if None in options.values():
        raise OptionError("--ctl-in, --ctl-out and --workspace are required")
    ctl_in, ctl_out, workspace = (
        int(str(options["--ctl-in"])),
        int(str(options["--ctl-out"])),
        str(options["--workspace"]),
    )
    user_roots = repeated["--user-root"]

    try:  # under memory pressure the kernel should kill this process, never the supervisor
        with open("/proc/self/oom_score_adj", "w", encoding="ascii") as f:
            f.write("1000")
    except OSError:
        pass
    os.chdir(workspace)
    if workspace not in sys.path:
        sys.path.insert(0, workspace)
    ensure_skills(workspace)

    from tool_tree.runtime import set_transport

    set_transport(tool_transport)
    flushing.install()
    signal.signal(signal.SIGINT, _interrupt)
    builtins.show_image = show_image  # type: ignore[attr-defined]
    builtins.search_tools = search_tools  # type: ignore[attr-defined]
    conn = _connection = Connection(ctl_in, ctl_out)
    roots = tuple(os.path.join(root, "") for root in [workspace, *user_roots])
    runner = Runner(roots)
    signal.signal(WHERE_SIGNAL, functools.partial(_say_where, runner))
    as_main(runner.script)
    conn.send({"type": "ready"})
    while (request := conn.executions.get()) is not None:
        exec_id = int(request.get("exec", 0))
        conn.current_exec = exec_id
        conn.images_sent = conn.image_bytes_sent = 0
        filename = cell_filename(exec_id, request.get("filename"))
        flushing.reinstate()
        status, error, tb = runner.run(str(request.get("code", "")), filename)
        flushing.end_of_cell()
        if _forked:  # a process the script forked ran on to the cell's end: it ends there, as at a script's end
            if error is not None and tb:
                print(tb, end="", file=sys.stderr, flush=True)
            os._exit(status if 0 <= status < 256 else 1)  # before: it waited for ever, for a cell that never came
        error = None if error is None else sendable(error[:MAX_ERROR_CHARS])  # so the report always fits a frame
        if tb is not None and len(tb) > MAX_TRACEBACK_CHARS:
            send_whole_traceback(conn, exec_id, tb)
        tb = None if tb is None else sendable(cut_middle(tb, MAX_TRACEBACK_CHARS))
        conn.send({"type": "done", "exec": exec_id, "exit_status": status, "error": error, "traceback": tb})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
