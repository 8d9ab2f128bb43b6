"""``tooltree serve`` over stdio: one client per process; it ends when stdin closes or on SIGTERM/SIGINT/SIGHUP.

The SDK's stdio transport reads stdin through a worker thread that cannot be cancelled, so on
SIGTERM the server would wait for the client's next line before it could stop. Here a daemon
thread reads stdin into a memory stream instead: a signal ends the server at once, and the
client's session (its container and upstream servers) is closed before the process exits. Stdout is written
the same way (`StdoutWriter`): a write that finds the pipe broken (a client killed during a call, whose stdin
may not even have been read to its end yet) ends the session as stdin's closing does, not with an error.

Signals are handled from before the server opens until after it has closed (`StopSignals`): a client
that leaves closes stdin, and the SDK's client sends SIGTERM 2 s later and SIGKILL 2 s after that. So the
upstream servers get `CLOSE_GRACE` seconds to exit once stdin has closed (one busy with a call may never
do so), then SIGTERM, and SIGKILL `KILL_WAIT` seconds later; a signal, also one during the close, sends
SIGTERM at once (SIGKILL as well `KILL_WAIT` seconds later) and the close goes on. So no server or container
is left behind when this process ends, whenever the signal comes. Why serving ended (the client closed stdin or
its stdout, or which signal came), and that serve stopped, are said on stderr, the log a client keeps of it.

The reader is linear in what it reads (`LineSplitter`) and caps one message at
`MAX_MESSAGE_BYTES`, the 4 MiB the SDK's Streamable HTTP transport accepts in one request body. A
longer line is never buffered: it is skipped up to its newline, logged, and a request whose id
can be read from its first or last bytes is answered with an error; the next line is read as usual. So is a request
the SDK's parser refuses (`agent.serve.unread`: before, dropped unanswered).

Over 400 lines: the reader, the writer and the signal handling (which serve over HTTP shares) are one transport's,
each shaped by how a client leaves.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import anyio
import anyio.abc
import anyio.lowlevel
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.runner import serve_dual_era_loop, serve_loop
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.message import SessionMessage

from agent.serve.server import ToolServer
from agent.serve.unread import ENDS_KEPT as _ENDS_KEPT
from agent.serve.unread import id_at_ends, unread

logger = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
CLOSE_GRACE = 1.0
"""Seconds the upstream servers have to exit on their own once the client has closed stdin, before SIGTERM:
the SDK's client waits 2 s (``PROCESS_TERMINATION_TIMEOUT``) before it sends this process SIGTERM, and
the close (the sandbox's takes a tenth of a second) should be over by then."""
FIRST_WAIT = 0.5
"""Seconds each of `StopSignals`' ``first`` hooks may take before the children are signalled anyway (within the
client's 2 s, with `KILL_WAIT`)."""
KILL_WAIT = 1.0
"""Seconds from SIGTERM to SIGKILL for upstream servers still running: the SDK's client sends this process
SIGKILL 2 s after its SIGTERM (``FORCE_KILL_TIMEOUT``), and the close has to end before that."""
MAX_MESSAGE_BYTES = DEFAULT_MAX_REQUEST_BODY_SIZE
"""The longest message a client may send over stdio (one line, without its newline): what the SDK's
Streamable HTTP transport accepts in one request body (4 MiB), so both transports take the same."""


@dataclass(frozen=True)
class Overlong:
    """A line longer than the cap, not kept: its length and its first and last bytes."""

    size: int
    head: bytes
    tail: bytes

    def request_id(self) -> types.RequestId | None:
        """The id of the request it carried, when it is the first member (after ``jsonrpc`` and ``method``,
        as the Python SDK writes it) or the last (as the TypeScript SDK does); else None."""
        return id_at_ends(self.head, self.tail)


class LineSplitter:
    """Cuts a byte stream into lines in time linear in its length; a line over ``limit`` bytes is skipped.

    Only the new chunk is scanned for a newline; the partial line waits in a bytearray that never
    grows past ``limit``, and a line is decoded once, when complete. A line that goes past the
    limit is dropped as it arrives, except for its first and last bytes, and comes out as an
    `Overlong`; the line after it is read as usual. (`tool_tree.stdio`'s splitter, on the client
    side, stops at such a line instead: there it ends a server, here a client's bad line is refused.)
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._partial = bytearray()
        self._over: int | None = None
        """The length so far of the current line, once it is over the limit (its bytes are not kept)."""
        self._head = b""
        self._tail = bytearray()

    def feed(self, chunk: bytes) -> list[str | Overlong]:
        """The lines ``chunk`` completes (decoded, without their newline) and those too long to keep."""
        view = memoryview(chunk)
        lines: list[str | Overlong] = []
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            self._add(view[start:end])
            lines.append(self._take())
            start = end + 1
        self._add(view[start:])
        return lines

    def end(self) -> list[str | Overlong]:
        """The last line, when the stream ended without a newline after it."""
        return [self._take()] if self._partial or self._over is not None else []

    def _add(self, piece: memoryview) -> None:
        if self._over is None:
            if len(self._partial) + len(piece) <= self._limit:
                self._partial += piece
                return
            # This piece takes the line past the limit: from now on only its ends are kept.
            self._over, self._head = len(self._partial), bytes(self._partial[:_ENDS_KEPT])
            self._tail = bytearray(self._partial[-_ENDS_KEPT:])
            self._partial = bytearray()
        if len(self._head) < _ENDS_KEPT:
            self._head += piece[: _ENDS_KEPT - len(self._head)]
        self._tail += piece[-_ENDS_KEPT:]
        del self._tail[:-_ENDS_KEPT]
        self._over += len(piece)

    def _take(self) -> str | Overlong:
        if self._over is None:
            line = self._partial.decode("utf-8", "replace")
            self._partial.clear()
            return line
        over = Overlong(self._over, self._head, bytes(self._tail))
        self._over, self._head, self._tail = None, b"", bytearray()
        return over


class StdinLines:
    """Lines of a file descriptor, read by a daemon thread; iterate with ``async for``.

    Cancelling the iteration never waits for the blocked read (the thread is left to the
    process's exit). The thread reads with ``os.read`` (no buffered reader, whose lock a daemon
    thread would hold at interpreter shutdown). Started by the first iteration. A line over
    ``limit`` bytes is logged and left out; when the id of the request it carried can be read,
    the error that answers it comes out of `refused` (`serve_stdio` writes it to the client).
    """

    def __init__(self, fd: int, *, limit: int = MAX_MESSAGE_BYTES) -> None:
        self._fd = fd
        self._limit = limit
        send, receive = anyio.create_memory_object_stream[str](16)
        self._send: MemoryObjectSendStream[str] = send
        self._receive: MemoryObjectReceiveStream[str] = receive
        refuse, refused = anyio.create_memory_object_stream[types.JSONRPCError](16)
        self._refuse: MemoryObjectSendStream[types.JSONRPCError] = refuse
        self.refused: MemoryObjectReceiveStream[types.JSONRPCError] = refused
        self._started = False

    def _read(self, token: anyio.lowlevel.EventLoopToken) -> None:
        splitter = LineSplitter(self._limit)
        try:
            while chunk := os.read(self._fd, 1 << 16):
                for line in splitter.feed(chunk):
                    self._hand_on(line, token)
            for line in splitter.end():
                self._hand_on(line, token)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, RuntimeError, OSError):
            pass  # the server stopped reading, or the loop is gone
        finally:
            with contextlib.suppress(RuntimeError):
                anyio.from_thread.run_sync(self._refuse.close, token=token)
                anyio.from_thread.run_sync(self._send.close, token=token)

    def _hand_on(self, line: str | Overlong, token: anyio.lowlevel.EventLoopToken) -> None:
        if isinstance(line, str):
            anyio.from_thread.run(self._send.send, line, token=token)
            return
        request_id, size, limit = line.request_id(), f"{line.size:,}", f"{self._limit:,}"
        refused = "" if request_id is None else f"; request {request_id!r} is answered with an error"
        logger.warning("a message of %s bytes from the client was left out (at most %s bytes)%s", size, limit, refused)
        if request_id is None:
            return
        message = f"the message is {size} bytes; tooltree serve reads at most {limit} bytes in one message"
        error = types.ErrorData(code=types.INVALID_REQUEST, message=message)
        refusal = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
        # Nobody writing the answers out (or a flood of them) leaves only the log line.
        with contextlib.suppress(anyio.WouldBlock):
            anyio.from_thread.run_sync(self._refuse.send_nowait, refusal, token=token)

    def close(self) -> None:
        """Stop handing lines and answers on (the thread stops with the next line it reads)."""
        self._receive.close()
        self.refused.close()

    def __aiter__(self) -> AsyncIterator[str]:
        if not self._started:
            self._started = True
            token = anyio.lowlevel.current_token()
            threading.Thread(target=self._read, args=(token,), name="tooltree-stdin", daemon=True).start()
        return self._receive.__aiter__()


async def _answer_unread(read: Any, session: MemoryObjectSendStream[SessionMessage | Exception], write: Any) -> None:
    """Hand the session what the SDK read from stdin, but answer a request it could not parse (`unread`) instead."""
    async with session:
        async for item in read:
            if isinstance(item, Exception) and (answer := unread(item)) is not None:
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await write.send(SessionMessage(answer))
                continue
            await session.send(item)


async def _answer_refused(refused: MemoryObjectReceiveStream[types.JSONRPCError], write: Any) -> None:
    """Write the errors `StdinLines` answers over-long requests with to the client, until stdin or stdout closes."""
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        async for error in refused:
            await write.send(SessionMessage(error))


def claim_stdin() -> int:
    """A private descriptor for the client's stdin; fd 0 then reads the null device (children inherit nothing)."""
    fd = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return fd


def claim_stdout() -> int:
    """A private descriptor for the client's stdout; fd 1 then writes to stderr (a stray print misses the wire)."""
    fd = os.dup(1)
    os.dup2(2, 1)
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class StdoutWriter:
    """Writes the client's messages to a file descriptor, for the SDK's stdio transport (its ``stdout``).

    A write that fails (the pipe is broken: the client was killed, or closed its end) is the client's leaving, as
    stdin's closing is: ``gone`` is called once, and what is written after it is dropped. (The SDK's own writer lets
    the error out of its task group, which ended ``tooltree serve`` with an error and skipped part of the close.)
    Each message is written whole (unbuffered, on a worker thread), so nothing is left to flush at exit.
    """

    def __init__(self, fd: int, gone: Callable[[], None]) -> None:
        self._fd = fd
        self._gone: Callable[[], None] | None = gone
        self.broken = False
        """A write found the pipe broken: the client left."""

    async def write(self, text: str) -> None:
        if self._gone is None:
            return
        try:
            await anyio.to_thread.run_sync(_write_all, self._fd, text.encode("utf-8"))
        except OSError as e:
            gone, self._gone = self._gone, None
            self.broken = True
            logger.info("the client's end of stdout is closed (%s): the client has left", e.strerror or e)
            gone()

    async def flush(self) -> None:
        """Nothing to do: `write` leaves nothing buffered."""


class StopSignals:
    """Handle SIGTERM, SIGINT and SIGHUP while inside: enter it before the server opens, leave it after it closed.

    The first signal calls ``stop``; each one sends this process's children (the upstream servers, and
    those of a refresh) SIGTERM at once (the first, ``children_after`` seconds later) and SIGKILL `KILL_WAIT`
    seconds after that if they are still there.
    The process is never ended by the signal itself, so a signal during the close (the SDK's client
    sends one 2 s after closing stdin) lets the close finish: the sessions' containers are removed and
    no server outlives it. A body's exception comes out as it was (no exception group).

    Args:
        stop: what stops serving (called once, on the event loop).
        first: called on a worker thread at the first signal, before the children are signalled (each given at
            most `FIRST_WAIT` seconds): what must stop before its servers are killed, as a refresh of the tree
            that would otherwise take its killed servers for failed ones.
        children_after: seconds from the first signal to the children's SIGTERM (a later signal sends it at once).
            Over HTTP, the grace in which serve still answers the requests in flight (`agent.serve.http.STOP_GRACE`):
            before, their servers were ended at the signal, so a call that needed a second more was answered "the
            server died during the call". Over stdio 0: the client that sent the signal may kill this process soon.
        again: called (on the event loop) at each later signal: over HTTP, what cancels the requests in flight at once,
            their grace cut short.
    """

    def __init__(
        self,
        stop: Callable[[], None],
        *,
        first: Sequence[Callable[[], None]] = (),
        children_after: float = 0.0,
        again: Callable[[], None] | None = None,
    ) -> None:
        self._stop: Callable[[], None] | None = stop
        self._again = again
        self._first = list(first)
        self._children_after = children_after
        self._delayed = False
        """A signal came and the children's SIGTERM waits for ``children_after``: leaving sends it at once."""
        self._receiver: contextlib.AbstractContextManager[AsyncIterator[int]] | None = None
        self._tasks: anyio.abc.TaskGroup | None = None
        self.received: str | None = None
        """The name of the first signal that came (None: none did)."""

    async def __aenter__(self) -> StopSignals:
        receiver = anyio.open_signal_receiver(*STOP_SIGNALS)
        signals = receiver.__enter__()
        self._receiver = receiver
        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        self._tasks.start_soon(self._watch, signals)
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if self._delayed:  # the close ended before the grace did: no child may outlive this process
            with anyio.CancelScope(shield=True):
                await self._end_children(0)
        tasks, receiver, self._tasks, self._receiver = self._tasks, self._receiver, None, None
        try:
            if tasks is not None:
                tasks.cancel_scope.cancel()
                await tasks.__aexit__(None, None, None)
        finally:
            if receiver is not None:
                receiver.__exit__(None, None, None)

    def end_children(self, after: float) -> None:
        """SIGTERM this process's children in ``after`` seconds, and SIGKILL those left `KILL_WAIT` seconds later
        (unless this is left first)."""
        if self._tasks is not None:
            self._tasks.start_soon(self._end_children, after)

    async def _end_children(self, after: float) -> None:
        await anyio.sleep(after)
        self._delayed = False
        if terminate_children():
            await anyio.sleep(KILL_WAIT)
            terminate_children(signal.SIGKILL)

    async def _watch(self, signals: AsyncIterator[int]) -> None:
        async for signum in signals:
            logger.info("%s: stopping", signal.Signals(signum).name)
            self.received = self.received or signal.Signals(signum).name
            first, self._first = self._first, []
            for hook in first:
                with anyio.move_on_after(FIRST_WAIT):
                    try:
                        await anyio.to_thread.run_sync(hook, abandon_on_cancel=True)
                    except Exception:  # a hook's failure never keeps the children from being ended
                        logger.exception("stopping: %r failed", hook)
            stop, self._stop = self._stop, None
            after = self._children_after if stop is not None else 0
            self._delayed = self._delayed or after > 0
            self.end_children(after)
            if stop is not None:
                stop()
            elif self._again is not None:
                self._again()


def terminate_children(signum: signal.Signals = signal.SIGTERM) -> list[int]:
    """Send ``signum`` to every child process of this one (to its process group, when it leads one); their pids.

    The children are the upstream MCP servers (each in its own session, as the SDK starts them).
    A client may kill this process soon after it asks it to stop (Claude Code sends SIGINT, then
    SIGTERM, then SIGKILL within about half a second), sooner than the servers' orderly close
    (stdin closed, two seconds' grace, then SIGTERM) would end a server that ignores its stdin; so
    they are told to stop at once, and the orderly close then finds them gone. Linux only (it reads
    ``/proc``); elsewhere nothing is signalled.
    """
    pids: list[int] = []
    for children in Path("/proc/self/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            pids += [int(p) for p in children.read_text(encoding="ascii").split()]
    for pid in pids:
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, signum)
            else:
                os.kill(pid, signum)
    return pids


async def serve_stdio(app: ToolServer, *, stdin: int | None = None, stdout: int | None = None) -> None:
    """Serve one client on stdin and stdout (or the descriptors ``stdin`` and ``stdout``) until stdin closes, stdout
    breaks (the client was killed) or a signal comes; then end its session (see the module for how fast, and what a
    signal does).

    Raises:
        SandboxError: the warm sandboxes cannot start (raised before anything is served).
    """
    server = app.mcp_server(http=False)
    saved = f", the workspace saved into {app.workspace}" if app.workspace is not None else ""
    lines = StdinLines(stdin if stdin is not None else claim_stdin())
    serving = anyio.CancelScope()
    out = StdoutWriter(stdout if stdout is not None else claim_stdout(), serving.cancel)
    with contextlib.closing(lines):
        async with StopSignals(serving.cancel, first=app.on_stop_signal) as signals, app:
            with serving:
                async with anyio.create_task_group() as tg:
                    async with (
                        stdio_server(stdin=cast(Any, lines), stdout=cast(Any, out)) as (read_stream, write_stream),
                        server.lifespan(server) as state,
                    ):
                        tg.start_soon(_answer_refused, lines.refused, write_stream)
                        read, session = anyio.create_memory_object_stream[SessionMessage | Exception](0)
                        tg.start_soon(_answer_unread, read_stream, read, write_stream)
                        # As `Server.run`, but the handshake's options are built when the client asks, not now:
                        # a tree refreshed in the meantime gives its instructions. The handshake era only when a
                        # server may ask the client during a call (2026-07-28 over stdio has no channel for it).
                        serve = serve_loop if app.asks_client else serve_dual_era_loop
                        with session:
                            await serve(server, session, write_stream, lifespan_state=state)
                    tg.cancel_scope.cancel()
            # The client is gone (or a signal came); `app` closes its session as this block ends. An upstream
            # server busy with a call may not exit when its stdin closes: it is ended before the client's SIGTERM.
            signals.end_children(after=CLOSE_GRACE)
            say(f"{_why_stopped(signals.received, out.broken)}: ending the client's session (a running script is "
                 f"stopped{saved}, the sandbox and the servers end)")  # fmt: skip
        say("stopped")


def _why_stopped(received: str | None, broken: bool) -> str:
    """Why serving over stdio ended: a signal's name, or how the client left."""
    if received is not None:
        return received
    return "the client left (its end of stdout is closed)" if broken else "the client closed stdin"


def say(text: str) -> None:
    """A line on stderr, the one log an MCP client keeps of its server (Claude Desktop: ``mcp-server-NAME.log``);
    before, a client's leaving ended serve without a word there. A stderr that can no longer be written is left."""
    with contextlib.suppress(OSError, ValueError):
        print(f"tooltree serve: {text}", file=sys.stderr, flush=True)
