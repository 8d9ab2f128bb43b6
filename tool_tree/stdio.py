"""The stdio client transport for servers started by command: the SDK's, with a reader that is linear
in what it reads and a cap on one message.

`mcp.client.stdio.stdio_client` joins each chunk it reads to the partial line before it and splits
the whole again (``(buffer + chunk).split("\\n")``), on the event loop every session shares: quadratic
in a line's length (a 30 MiB line cost 8.5 s of CPU; a 100 MiB result outlived its call's timeout).
`stdio_client` here is the same transport (the SDK's process start, stderr handling, pipe tasks and
shutdown, reused from `mcp.client.stdio`, private helpers included: should an SDK release rename them,
`LINEAR` is false and the SDK's own transport is used, with a warning, its stderr still a bounded
pipe: `tool_tree.stderr_log.StderrLog.file`) except for its reader,
which keeps the partial line as bytes, scans only each new chunk for a newline and decodes each
complete line once. A message longer than ``max_message_bytes`` is never buffered whole: the reader
stops, ends the server's process group, fails every request in flight with an error naming the
server and the limit, and closes the session's read stream; no other server is touched.

The reader also holds the server to the budgets of `tool_tree.budget`, deciding on a line's bytes before
the SDK parses it where it can (`tool_tree.stdio_lines.Lines`, `tool_tree.unparsed`). A line whose values
are more than ``max_message_values`` is refused as one over the byte cap is: parsed, 10 million empty objects in a
30 MB line took the host to 3.4 GB and blocked the pool's loop for 6 s. The message's id can be anywhere
in it, and finding it means parsing it, so the server is ended rather than the one request failed. More
than `tool_tree.budget.MAX_SERVER_REQUESTS` requests from the server whose answers are not written yet
(a server that stops reading its stdin) end it too: the SDK keeps a task for each; a request of more
than `tool_tree.budget.MAX_REQUEST_VALUES` values is answered with an error, unread. An answer to no
request in flight is dropped (unread when it opens with its id, as the SDKs write it), and past a small
allowance ends the server; late answers to requests given up on are dropped without a count. The first error of id
null (JSON-RPC's answer to a request whose id the server could not read: which call it failed is not told) is logged.
Notifications, and lines that are not JSON-RPC, past the server's `tool_tree.budget.NotificationBudget`
(charged by their values) are dropped unread: a line with no ``"id"`` and no backslash cannot be a request
or a response, and is dropped once counted; any other is charged once parsed, before the SDK dispatches
it. The answers to the client's requests are never dropped.

Everything else the reader does for a line (counting, parsing, dropping, and the SDK's dispatch after it,
estimated) is charged to the server's `tool_tree.budget.ReaderBudget`; past it the reader waits before it
reads on, and the server, its stdout pipe full, waits too. A reply nested deeper than the SDK's parser
takes (about 200 levels) fails its request at once, naming the limit, when its id can be read unparsed.
A line holding a JSON-RPC batch (an array of messages, which JSON-RPC 2.0 lets a server send) is read as its messages,
each judged as a line of its own (`tool_tree.stdio_lines.Lines.messages`). A server that writes a message across
several lines (pretty-printed JSON), or in UTF-16, is ended at the message's ``"jsonrpc"`` line, its start or call
failing saying so (`tool_tree.stdio_framing`); one of a thousand lines not JSON-RPC before any message, at the last.

A server that has exited while its stdout stays open (a process it started inherited the pipe) is taken as ended
once the reader has waited `_HELD_STDOUT_WAIT` for more of it, unless it had exited before it wrote anything (a
launcher that started the server and left it serving): the session sees the connection close, as when the
stdout ends, instead of its calls waiting for their timeout.

Given a ``stderr_sink``, the server's stderr is a pipe read on the loop and handed to it chunk by
chunk (`tool_tree.stderr_log.StderrLog` keeps the last 64 KiB), instead of a file that grows as long as
the server writes: a server that logs each call's arguments wrote as much to the host's disk as the
calls a script made.
"""

from __future__ import annotations

import codecs
import logging
import subprocess
import sys
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any, TextIO

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.client._transport import TransportStreams
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.client.stdio import stdio_client as sdk_stdio_client

try:
    from mcp.client.stdio import (
        _WRITER_FLUSH_TIMEOUT,
        _aclose_all,
        _close_pipe,
        _create_platform_compatible_process,
        _drain_stdout,
        _get_executable_command,
        _stop_server_process,
        _terminate_process_tree,
    )
    from mcp.os.posix.utilities import terminate_posix_process_tree
except ImportError:  # an SDK release whose private helpers moved: its own transport is used instead
    LINEAR = False
else:
    LINEAR = True
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import SessionMessage

from tool_tree.budget import HANDED_ON_SECONDS, MAX_MESSAGE_VALUES, ReaderBudget, refusal
from tool_tree.guard import guarded
from tool_tree.ledgers import Outstanding, closed_error
from tool_tree.stdio_lines import End, Lines, LineSplitter, Refuse
from tool_tree.stdio_lines import NotJSONRPC as NotJSONRPC  # connect reports the lines it holds
from tool_tree.strays import MARK_ENV, end_marked, new_mark

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 32 * 1024 * 1024
"""The longest message (one line, without its newline) a stdio server may send: 4× the bridge's
result cap (`sandbox.calls.MAX_RESULT_BYTES`, 8 MiB, measured as UTF-8 JSON without ``\\u`` escapes).
A server that escapes everything non-ASCII (Python's ``json.dumps`` default) spends up to 3× that on
the wire (``é``, 2 bytes, is ``\\u00e9``, 6); the fourth 8 MiB is headroom for the envelope and fields
the SDK drops. A result that needs more would be refused by the bridge anyway."""


_ENDED = "; tooltree stopped reading, closed the connection and ended the server"
"""How a refusal that ends the server ends (the pool reads "closed the connection" as the connection lost)."""

_STDERR_DRAIN_TIMEOUT = 1.0
"""Seconds the end of a session waits for the rest of an ended server's stderr (a process it left
behind may hold the pipe open)."""
_EXITED_WAIT = 0.5
"""Seconds a server whose stdout ended is given to exit, for its exit status (`stdio_client`'s ``on_exit``)."""
_HELD_STDOUT_WAIT = 0.5
"""Seconds the reader may wait for more of an exited server's stdout before it is taken as ended: a process the server
started (a helper, a launcher's child) that inherited the pipe keeps it open after the server exits."""
_EXIT_POLL = 0.1
"""Seconds between looks at whether the server exited (not ``process.wait()``, which waits for its pipes to close)."""


@asynccontextmanager
async def stdio_client(
    server: StdioServerParameters,
    errlog: TextIO = sys.stderr,
    *,
    name: str | None = None,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    max_message_values: int = MAX_MESSAGE_VALUES,
    stderr_sink: Callable[[bytes], None] | None = None,
    cpu: ReaderBudget | None = None,
    on_exit: Callable[[int], None] | None = None,
    on_unaddressed: Callable[[types.ErrorData], None] | None = None,
    hurry: Callable[[], bool] | None = None,
) -> AsyncGenerator[TransportStreams, None]:
    """Spawns an MCP server subprocess and connects to it over stdin/stdout.

    As `mcp.client.stdio.stdio_client` (same process group, environment, stderr and shutdown), but a
    message longer than ``max_message_bytes`` or of more than ``max_message_values`` values, or more
    than `tool_tree.budget.MAX_SERVER_REQUESTS` requests from the server not answered yet, end the
    server: the requests in flight fail with an error naming the server (``name``, default its command)
    and the limit, and the session sees the connection close; so do answers to no request in flight
    past their allowance. Notifications past the server's budget are dropped; a request of more than
    `tool_tree.budget.MAX_REQUEST_VALUES` values is answered with an error, unread. What the reader spends
    on all but the answers to the session's requests is charged to ``cpu`` (default: a
    `tool_tree.budget.ReaderBudget` of its own), which makes it wait past its budget. With ``stderr_sink``,
    what the server writes to stderr goes to it (``errlog`` is then unused), all of it by the time the
    context exits, unless a process the server left behind still holds its stderr open a second after the
    server ended. ``on_exit`` is called with the server's exit status (negative: the signal that ended it) when it
    ended on its own: its stdout ended and it exited within `_EXITED_WAIT`, before tooltree stopped it.
    ``on_unaddressed`` is given each error the server sent with the id null (an answer to no request it could name).
    When ``hurry()`` is true at the close (its caller was interrupted: Ctrl-C) and a request still awaits the server's
    answer (in flight, or given up on), the server gets SIGTERM as its stdin closes, not after the SDK's grace.

    Raises:
        OSError: If the server process cannot be spawned.
        ValueError: If the spawn parameters are invalid (embedded NUL bytes), or the encoding is not UTF-8.
    """
    if not LINEAR:
        logger.warning("this mcp SDK moved the stdio helpers tooltree reuses: reading %s with the SDK's reader, "
                       "without the caps on one message", name or server.command)  # fmt: skip
        # The request, answer and notification budgets, after parsing.
        async with guarded(sdk_stdio_client(server, errlog), name or server.command) as streams:
            yield streams
        return
    if codecs.lookup(server.encoding).name != "utf-8":
        raise ValueError(f"the stdio transport reads UTF-8 only, not {server.encoding!r}")
    label = name if name is not None else server.command
    command = await _get_executable_command(server.command)
    stray_mark = new_mark()

    process = await _create_platform_compatible_process(
        command=command,
        args=server.args,
        env=get_default_environment() | (server.env or {}) | {MARK_ENV: stray_mark},  # its strays are found by it
        errlog=subprocess.PIPE if stderr_sink is not None else errlog,  # type: ignore[arg-type]
        cwd=server.cwd,
    )

    # The spawn succeeded; no awaits until the task group is entered, or a
    # cancellation delivered in the gap would leak the live process.
    read_stream_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_stream_reader = anyio.create_memory_object_stream[SessionMessage](0)

    shutting_down = False
    ended = False  # the server's stdout ended (EOF): it exited, or closed its stdout
    reading_since: float | None = None  # when the reader began to wait for the server's next chunk (None: it is busy)
    spoke_alive: bool | None = None  # whether the server was running when its first output came (None: none yet)
    refusing = False  # the reader is ending the server and failing the requests in flight itself
    writer_done = anyio.Event()
    stderr_done = anyio.Event()
    # Requests sent and not yet answered: what fails, with the reason, when the server is refused.
    outstanding = Outstanding(label)
    lines_of = Lines(label, max_message_values, server.encoding_error_handler, outstanding, on_unaddressed)
    cpu = cpu if cpu is not None else ReaderBudget(label)

    async def refuse(reason: str) -> None:
        """Ends the server that broke a limit and fails the requests waiting on it with ``reason``."""
        assert process.stdout, "Opened process is missing stdout"
        nonlocal refusing
        # A write blocked on the server's full stdin fails once it is ended: the writer then leaves the
        # session's stream open for the errors below.
        refusing = True
        reason += _ENDED
        logger.warning("%s", reason)
        # Not the polite shutdown (stdin closed, a grace period): the server is still writing, and
        # nothing of what it sends is read any more.
        await _terminate_process_tree(process)
        await _close_pipe(process.stdout)  # ends the reader's drain at once
        error = closed_error(reason)
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):  # the session is gone: nobody waits
            for request_id in outstanding.pending():
                await read_stream_writer.send(
                    SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
                )

    async def answer_refused(request_id: types.RequestId, why: str | None) -> None:
        """Answers a request `Lines` refused unread (in a task: the server may be slow to take it)."""
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await write_stream.send(refusal(request_id, label, why))

    async def stdout_reader() -> None:
        nonlocal ended, reading_since, spoke_alive
        assert process.stdout, "Opened process is missing stdout"

        splitter = LineSplitter(max_message_bytes)
        try:
            async with read_stream_writer:
                try:
                    # One line at a time; no read-ahead while a delivery is blocked.
                    carried = 0.0  # CPU spent cutting the line in progress: charged with it
                    while True:
                        reading_since = anyio.current_time()
                        try:
                            chunk = await process.stdout.receive()
                        except anyio.EndOfStream:
                            break
                        reading_since = None
                        if spoke_alive is None:
                            spoke_alive = process.returncode is None
                        mark = time.thread_time()  # what the reader spends from here to its next await is charged
                        try:
                            lines = splitter.feed(chunk)
                        except OverflowError:
                            await refuse(
                                f"server {label!r} sent a message longer than {max_message_bytes:,} bytes, the "
                                "limit for one message"
                            )
                            return
                        if not lines:
                            carried += time.thread_time() - mark
                            continue
                        mark, carried = mark - carried, 0.0
                        for line in (message for whole in lines for message in lines_of.messages(whole)):
                            item = lines_of.judge(line)
                            if isinstance(item, End):
                                await refuse(item.reason)
                                return
                            # The answer to one of the session's requests is not charged, nor the cutting of it.
                            spent = time.thread_time() - mark + (HANDED_ON_SECONDS if item is not None else 0.0)
                            wait = cpu.charge(0.0 if lines_of.asked else spent)
                            if isinstance(item, Refuse):
                                tg.start_soon(answer_refused, item.request_id, item.why)
                            elif item is not None:
                                try:
                                    await read_stream_writer.send(item)
                                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                                    return  # the session is gone; only the drain below remains
                            if wait:
                                await anyio.sleep(wait)  # the server's pipe fills: it waits too
                            mark = time.thread_time()
                    ended = True
                finally:
                    reading_since = None
                    await _drain_stdout(process)
        except anyio.ClosedResourceError:
            pass  # our own shutdown closed the stdout stream under the read
        except (anyio.BrokenResourceError, ConnectionError):
            # Teardown noise during shutdown, a real failure otherwise; either way
            # the session sees clean closure when the read stream closes.
            if not shutting_down:
                logger.exception("Reading from the MCP server's stdout failed mid-session")

    async def exit_watcher() -> None:
        """Ends the reader when the server exited and its stdout stays open: a process it started holds the pipe, and
        a call the server died during would wait for its answer to the timeout, said to have hung. Not when it had
        exited before its first output: a launcher that started the server and exited, the server serving on."""
        nonlocal ended
        while not (ended or shutting_down):
            await anyio.sleep(_EXIT_POLL)
            since = reading_since
            if (
                spoke_alive
                and process.returncode is not None
                and since is not None
                and anyio.current_time() - since >= _HELD_STDOUT_WAIT
            ):
                ended = True  # as at the end of its stdout: its exit status is reported
                assert process.stdout, "Opened process is missing stdout"
                await _close_pipe(process.stdout)  # the reader sees the stream closed, the session the connection
                return

    async def stderr_reader() -> None:
        stream = getattr(process, "stderr", None)  # an anyio process (POSIX)
        assert stream is not None and stderr_sink is not None
        try:
            async for chunk in stream:
                stderr_sink(chunk)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        finally:
            stderr_done.set()

    async def stdin_writer() -> None:
        assert process.stdin, "Opened process is missing stdin"

        try:
            async with write_stream_reader:
                async for session_message in write_stream_reader:
                    message = session_message.message
                    if isinstance(message, types.JSONRPCRequest):
                        outstanding.sent(message.id)  # before sending: the answer may come at once
                    elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
                        outstanding.given_up(cancelled_request_id_from_params(message.params))
                    json = message.model_dump_json(by_alias=True, exclude_unset=True)
                    data = (json + "\n").encode(encoding=server.encoding, errors=server.encoding_error_handler)
                    await process.stdin.send(data)
                    if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                        lines_of.requests.answered(message.id)  # its answer is in the pipe
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server may still be alive: close the read stream so the session
            # sees the connection end instead of a request hanging forever.
            if not refusing:  # else the reader closes it, once the requests in flight have their error
                await read_stream_writer.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        """Winds the transport down: stop traffic, flush, stop the server, release the streams."""
        # Unblock the reader into its drain: a server stuck writing stdout cannot
        # read its stdin, so draining is what lets the flush below complete.
        read_stream.close()
        # Bounded window for the writer to flush already-accepted messages.
        write_stream.close()
        with anyio.move_on_after(_WRITER_FLUSH_TIMEOUT) as flush_scope:
            await writer_done.wait()
        if flush_scope.cancelled_caught:
            await anyio.lowlevel.cancel_shielded_checkpoint()  # resync coverage on 3.11 (gh-106749)
        if ended and on_exit is not None:  # its status, if it exited on its own (before the stop below signals it)
            with anyio.move_on_after(_EXITED_WAIT):
                await process.wait()
            if process.returncode is not None:
                on_exit(process.returncode)
        if hurry is not None and hurry() and outstanding.unanswered():
            # Ctrl-C stopped the call it is still at: the SDK's grace (2 s) is for a server leaving at its stdin's
            # end, which one busy with a call may never do. SIGTERM to its group as stdin closes, SIGKILL as below.
            assert process.stdin, "Opened process is missing stdin"
            await _close_pipe(process.stdin)
            await _terminate_process_tree(process)
        await _stop_server_process(process)
        await _end_group(process)
        await anyio.to_thread.run_sync(end_marked, stray_mark)  # and those that left it (`setsid`)
        if stderr_sink is not None:  # the last lines of a server that just ended, before anyone asks for them
            with anyio.move_on_after(_STDERR_DRAIN_TIMEOUT):
                await stderr_done.wait()
        await _aclose_all(read_stream, write_stream, read_stream_writer, write_stream_reader)
        # One pass so unblocked tasks exit via their except paths before the cancel.
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        tg.start_soon(exit_watcher)
        if stderr_sink is not None:
            tg.start_soon(stderr_reader)
        try:
            yield read_stream, write_stream
        finally:
            shutting_down = True
            # Shutdown must finish even under caller cancellation, or the server
            # process would leak; every wait inside is bounded.
            with anyio.CancelScope(shield=True):
                await shutdown()
            # Unstick pipe tasks a kill survivor's open pipe end could still block.
            tg.cancel_scope.cancel()
    # The cancel lands via throw(); one yield resyncs 3.11 coverage (gh-106749).
    await anyio.lowlevel.cancel_shielded_checkpoint()


async def _end_group(process: Any) -> None:
    """End what is left of the server's process group once the server is stopped: the SDK kills the group only
    when the server outlives its grace period, so the helpers of a server that exited in time (a child it
    started, a ``sleep 600``) ran on after tooltree ended. SIGTERM, then SIGKILL 2 s later to any left (a group
    already gone costs nothing). A process that left the group (``setsid``) is ended by its mark after this
    (`tool_tree.strays`)."""
    if sys.platform != "win32":
        with suppress(OSError):
            await terminate_posix_process_tree(process, _GROUP_KILL_TIMEOUT)


_GROUP_KILL_TIMEOUT = 2.0
