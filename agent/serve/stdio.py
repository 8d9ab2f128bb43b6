"""``tooltree serve`` over stdio: one client per process; it ends when stdin closes or on SIGTERM/SIGINT.

The SDK's stdio transport reads stdin through a worker thread that cannot be cancelled, so on
SIGTERM the server would wait for the client's next line before it could stop. Here a daemon
thread reads stdin into a memory stream instead: a signal ends the server at once, and the
client's session (its container and upstream servers) is closed before the process exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.abc
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.runner import serve_dual_era_loop
from mcp.server.stdio import stdio_server

from agent.serve.server import ToolServer

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StdinLines:
    """Lines of a file descriptor, read by a daemon thread; iterate with ``async for``.

    Cancelling the iteration never waits for the blocked read (the thread is left to the
    process's exit). The thread reads with ``os.read`` (no buffered reader, whose lock a daemon
    thread would hold at interpreter shutdown). Started by the first iteration.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        send, receive = anyio.create_memory_object_stream[str](16)
        self._send: MemoryObjectSendStream[str] = send
        self._receive: MemoryObjectReceiveStream[str] = receive
        self._started = False

    def _lines(self) -> Iterator[bytes]:
        pending = b""
        while chunk := os.read(self._fd, 1 << 16):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            yield from lines
        if pending:
            yield pending

    def _read(self, token: anyio.lowlevel.EventLoopToken) -> None:
        try:
            for raw in self._lines():
                anyio.from_thread.run(self._send.send, raw.decode("utf-8", errors="replace"), token=token)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, RuntimeError, OSError):
            pass  # the server stopped reading, or the loop is gone
        finally:
            with contextlib.suppress(RuntimeError):
                anyio.from_thread.run_sync(self._send.close, token=token)

    def __aiter__(self) -> AsyncIterator[str]:
        if not self._started:
            self._started = True
            token = anyio.lowlevel.current_token()
            threading.Thread(target=self._read, args=(token,), name="tooltree-stdin", daemon=True).start()
        return self._receive.__aiter__()


def claim_stdin() -> int:
    """A private descriptor for the client's stdin; fd 0 then reads the null device (children inherit nothing)."""
    fd = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return fd


async def stop_on_signals(stop: Callable[[], None]) -> None:
    """On the first SIGTERM or SIGINT, signal the upstream servers (`terminate_children`), then call
    ``stop`` (run as a task; cancel it when done)."""
    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async for _ in signals:
            terminate_children()
            stop()
            return


def terminate_children() -> list[int]:
    """SIGTERM every child process of this one (and its process group, when it leads one); their pids.

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
                os.killpg(pid, signal.SIGTERM)
            else:
                os.kill(pid, signal.SIGTERM)
    return pids


async def serve_stdio(app: ToolServer, *, stdin: int | None = None) -> None:
    """Serve one client on stdin (or the descriptor ``stdin``) and stdout until stdin closes or a
    signal comes; then end its session.

    Raises:
        SandboxError: the warm sandboxes cannot start (raised before anything is served).
    """
    server = app.mcp_server(http=False)
    lines = StdinLines(stdin if stdin is not None else claim_stdin())
    async with app, anyio.create_task_group() as tg:
        tg.start_soon(stop_on_signals, tg.cancel_scope.cancel)
        async with (
            stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream),
            server.lifespan(server) as state,
        ):
            # As `Server.run`, but the handshake's options are built when the client asks, not now:
            # a tree refreshed in the meantime gives its instructions.
            await serve_dual_era_loop(server, read_stream, write_stream, lifespan_state=state)
        tg.cancel_scope.cancel()
