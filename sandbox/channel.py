"""`SupervisorChannel`: the host's end of one supervisor's attached stdio.

Threads, per channel (so a slow, silent or hostile container stalls only its own session):

* a reader parses frames (`sandbox._supervisor.wire`, the one framing of both sides: size cap
  and value budget before parsing, strict JSON, depth cap)
  and routes them: replies to waiting requests, ``ready`` and streaming notifications, and
  the container's own requests (tool calls) to the session's handler — also a request over the
  value budget, unparsed, when its first bytes name it the way the supervisor writes requests;
* frames to the container are written by the sending thread when the write cannot block
  (a connection whose stdin has ``write_nowait``), and otherwise finished by a writer thread
  (`FrameSender`), so a container that stops reading cannot block a caller past its timeout;
* a drain keeps the last few KiB of the container's stderr for error messages.

The reader charges each request from the container to the sandbox's `RequestBudget` (the CPU it
spent on the frame, and an estimate of what follows: more for a larger request, whose arguments the
host encodes again); once the budget is spent it waits before reading on, so a script that floods the
host with requests is slowed, not served without bound. Answers are not charged: the tool results a
script may pull are bounded by the bridge's budget per execution (`sandbox.mcp_bridge.Budgets`).

Any protocol violation kills the container and fails every waiting request. The reply to a request a Ctrl-C left
before it came is not one: it goes to ``on_late_reply``.

(Over 400 lines: the reader, the writer and the stderr drain share the pending requests and their lock.)
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from sandbox._supervisor.wire import FrameReader, FrameSender, FrameTooLarge, TooManyValues, WireError, encode_frame
from sandbox.backend import ByteSink, ByteSource, Connection
from sandbox.errors import ProtocolError, QuitNow, SessionError
from sandbox.request_budget import DOWNSTREAM_SECONDS, REREAD_SHARE, RequestBudget

logger = logging.getLogger(__name__)

RequestHandler = Callable[[str, str, dict[str, Any] | None], None]
"""``(call id, method, params)``: a request from the container; answer with `SupervisorChannel.respond`.
``params`` is None for a request refused unparsed: its frame held more values than a frame may."""
NotificationSink = Callable[[str, dict[str, Any]], None]

_STDERR_KEEP = 8192
_SIGNAL_CHECK = 0.5
"""Seconds a request's wait lasts at most before Python may run a signal handler (see `wait_for`)."""
_MAX_ID_CHARS = 64
_REQUEST_HEAD = re.compile(
    rb'\{"id":"([A-Za-z0-9_.-]{1,%d})","method":"([A-Za-z_.]{1,40})","params":\{' % _MAX_ID_CHARS
)
"""The start of a request as the supervisor writes it (`encode_frame`): how a frame over the value
budget is known for a request, and answered, without parsing it."""


def _close_quietly(stream: ByteSink | ByteSource) -> None:
    with contextlib.suppress(OSError, ValueError):
        stream.close()


def wait_for(event: threading.Event, timeout: float) -> bool:
    """``event.wait(timeout)`` in slices of `_SIGNAL_CHECK` seconds; True when it was set.

    A Ctrl-C or SIGTERM that lands just before a long wait sets Python's flag without waking it: waited in one
    piece, an execution's wait ran on to the script's end or its timeout (30 s by default) before the handler
    ran. Between slices it runs at once.
    """
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        if event.wait(min(left, _SIGNAL_CHECK)):
            return True
    return event.is_set()


class SessionTimeoutError(SessionError):
    """The supervisor did not answer a request in time."""


LEFT_REQUESTS = 16
"""Requests a Ctrl-C left before their reply that the channel still knows (a reply to an older one is a violation)."""
INTERRUPTED_ANSWER = "answer"
"""The attribute of a ``KeyboardInterrupt`` out of `SupervisorChannel.request` holding the answer's result (a dict,
not checked) when it came within the interrupt's wait."""


class _Pending:
    def __init__(self, method: str, sink: NotificationSink | None) -> None:
        self.method = method
        self.event = threading.Event()
        self.message: dict[str, Any] | None = None
        self.sink = sink


class SupervisorChannel:
    """Requests to, and requests from, one supervisor. ``budget``: the host CPU its requests may cost."""

    def __init__(self, connection: Connection, session_id: str, *, budget: RequestBudget | None = None) -> None:
        self.connection = connection
        self.session_id = session_id
        self._reader = FrameReader(connection.stdout)
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._lock = threading.Lock()
        self._budget = budget or RequestBudget()
        self._stopping = threading.Event()
        self.script_ends_at: float | None = None
        """When the running execution's script is stopped (`time.monotonic`), set by its session: requests read after
        it are not waited on for the budget, up to a burst of their charges (`_charge`)."""
        self._stale_for: float | None = None
        """The `script_ends_at` whose stopped script's requests `_stale_left` is for."""
        self._stale_left = 0.0
        stdin = connection.stdin

        def write_all(data: bytes) -> None:
            stdin.write(data)
            stdin.flush()

        self._sender = FrameSender(
            write_all,
            try_write=getattr(stdin, "write_nowait", None),
            on_error=lambda e: self._fail("the sandbox stopped reading its channel"),
            on_close=lambda: _close_quietly(stdin),
            name=f"sandbox-write-{session_id}",
        )
        self._ready = threading.Event()
        self.ready_status: dict[str, Any] = {}
        self._stderr_tail = bytearray()
        self.broken: str | None = None
        self.closed = False
        self.on_request: RequestHandler | None = None
        self.on_late_reply: Callable[[str, dict[str, Any]], object] | None = None
        """Told of the reply to a request a Ctrl-C left before it came (its method, the reply)."""
        self._left: dict[int, str] = {}
        """Requests a Ctrl-C left before their reply (the last `LEFT_REQUESTS`), by id: their method."""
        self._left_streams: set[int] = set()
        """Those of `_left` that had a sink: what the sandbox still sends for them (a save's entries) is dropped until
        their reply (before: a protocol violation, which killed the sandbox, blamed in a warning)."""
        self._left_replied = threading.Condition(self._lock)
        self._threads = [threading.Thread(target=self._read_loop, name=f"sandbox-read-{session_id}", daemon=True)]
        if connection.stderr is not None:
            self._threads.append(
                threading.Thread(target=self._drain_stderr, name=f"sandbox-stderr-{session_id}", daemon=True)
            )
        for t in self._threads:
            t.start()

    @property
    def budget(self) -> RequestBudget:
        """What the sandbox's requests may cost the host: the reader charges it, and its session charges the searches
        and argument validations of those requests to it too (`sandbox.request_budget.ACCOUNT`)."""
        return self._budget

    # ---- threads --------------------------------------------------------------------------

    def _read_loop(self) -> None:
        # However the channel ends, the container is removed before anyone waiting learns of it.
        try:
            while True:
                started = time.thread_time()
                try:
                    message = self._reader.read()
                except TooManyValues as e:
                    self._route_unparsed(e)
                    self._charge(started)
                    continue
                if message is None:
                    break
                if (downstream := self._route(message, started)) is not None:
                    self._charge(started, downstream)
            self._fail("the sandbox closed its channel", kill=True)
        except (ProtocolError, WireError) as e:
            self._fail(f"protocol violation from the sandbox: {e}", kill=True, violation=True)
        except ConnectionAbortedError as e:  # the backend shut the channel and says why
            self._fail(str(e), kill=True)
        except (OSError, ValueError) as e:
            self._fail(f"the channel to the sandbox failed: {e}", kill=True)
        finally:
            _close_quietly(self.connection.stdout)

    def _charge(self, started: float, downstream: float = DOWNSTREAM_SECONDS) -> None:
        """Charge a request the reader began at thread time ``started`` (and what follows on the host, ``downstream``
        seconds); wait while the budget is spent, but never past `script_ends_at`: from then on the requests the
        stopped script left in the stream, before its result or after it, are read on without waiting until their
        charges reach the budget's burst (before, each waited its share: a script whose threads' large calls queued at
        its timeout had its result read after the host's deadline, the sandbox destroyed, its workspace not saved).
        Their charges stay in the budget; once a stopped script's requests spent the burst, the reader waits again.
        """
        charge = time.thread_time() - started + downstream
        delay = self._budget.charge(charge)
        with self._lock:
            now, ends_at = time.monotonic(), self.script_ends_at
            if ends_at is not None and now >= ends_at and self._stale_for != ends_at:  # once for each stopped script
                self._stale_for, self._stale_left = ends_at, self._budget.burst
            if self._stale_left > 0:
                self._stale_left -= charge
                return
            if ends_at is not None:
                delay = min(delay, ends_at - now)
        if delay > 0:
            self._stopping.wait(delay)

    def expect_script_end(self, at: float | None) -> None:
        """The running execution's script is stopped at ``at`` (`time.monotonic`; None: no execution runs)."""
        with self._lock:
            self.script_ends_at = at

    def script_stopped(self) -> None:
        """The running script is being stopped now (a cancel, a Ctrl-C, a close): the requests it left are read on as
        after its timeout (`_charge`), so the answer to the stop comes at once (before: behind each of them waited on,
        a cancel 10 s into a flood of large calls returned 22 s later, and the interpreter was restarted)."""
        with self._lock:
            now = time.monotonic()
            if self.script_ends_at is not None and self.script_ends_at > now:
                self.script_ends_at = now

    def _route_unparsed(self, refused: TooManyValues) -> None:
        """A frame over the value budget: a request goes to the handler (params None); anything else is a violation.

        Raises:
            TooManyValues: the frame does not start as the supervisor's requests do.
        """
        head = _REQUEST_HEAD.match(refused.head)
        if head is None:
            raise refused
        self._dispatch_request(head.group(1).decode("ascii"), head.group(2).decode("ascii"), None)

    def _dispatch_request(self, call_id: str, method: str, params: dict[str, Any] | None) -> None:
        handler = self.on_request
        if handler is None:
            self.respond(call_id, error={"code": "no_handler", "message": "the host is not accepting calls"})
        else:
            handler(call_id, method, params)

    def _route(self, message: dict[str, Any], started: float) -> float | None:
        """Hand ``message`` (read from thread time ``started`` on) on; the seconds of host work after the reader's to
        charge it, None: it is not charged (a reply, ``ready``, a save's entries: answers to the host's own requests).

        Raises:
            ProtocolError: it is neither a well-formed request, notification nor reply to a pending request.
        """
        method = message.get("method")
        msg_id = message.get("id")
        if method is not None:
            if not isinstance(method, str):
                raise ProtocolError("method is not a string")
            params = message.get("params", {})
            if not isinstance(params, dict):
                raise ProtocolError("params is not an object")
            if msg_id is None:
                return self._notification(method, params)
            if not (isinstance(msg_id, str) and 0 < len(msg_id) <= _MAX_ID_CHARS):
                raise ProtocolError("a request from the sandbox must have a short string id")
            # The host encodes a request's arguments again (their digest, the call to the server) at about the cost
            # of reading them: before, only 0.5 ms was charged for that, whatever their size.
            downstream = DOWNSTREAM_SECONDS + REREAD_SHARE * (time.thread_time() - started)
            self._dispatch_request(msg_id, method, params)
            return downstream
        if not isinstance(msg_id, int) or isinstance(msg_id, bool):
            raise ProtocolError("a reply must carry the integer id of a request")
        with self._lock:
            pending = self._pending.pop(msg_id, None)
        if pending is None:
            self._late(msg_id, message)
            return None
        pending.message = message
        pending.event.set()
        return None

    def _leave(self, request_id: int, pending: _Pending) -> None:
        """Stop waiting for ``request_id``: its reply, when it comes later, is handed to `on_late_reply` (before: a
        protocol violation, which killed the sandbox)."""
        with self._lock:
            if self._pending.pop(request_id, None) is not None and pending.message is None:
                self._left[request_id] = pending.method
                if pending.sink is not None:
                    self._left_streams.add(request_id)
                while len(self._left) > LEFT_REQUESTS:
                    self._left_streams.discard(oldest := next(iter(self._left)))
                    del self._left[oldest]

    def wait_left(self, method: str, timeout: float) -> bool:
        """Wait (at most ``timeout`` seconds) until no ``method`` request a Ctrl-C left still waits for its reply (the
        channel failing ends the wait too); whether none does."""
        with self._left_replied:
            return self._left_replied.wait_for(
                lambda: self.broken is not None or method not in self._left.values(), timeout
            )

    def _late(self, msg_id: int, message: dict[str, Any]) -> None:
        """The reply to a request left before it came (`_leave`).

        Raises:
            ProtocolError: no request of that id was left.
        """
        with self._lock:
            method = self._left.pop(msg_id, None)
            self._left_streams.discard(msg_id)
            self._left_replied.notify_all()
        if method is None:
            raise ProtocolError(f"a reply to unknown request {msg_id}")
        if (told := self.on_late_reply) is not None:
            told(method, message)

    def _notification(self, method: str, params: dict[str, Any]) -> float | None:
        """Hand a notification on; as `_route`: ``output`` is charged the reader's work alone (it is kept, no more)."""
        if method == "ready":
            if self._ready.is_set():
                raise ProtocolError("a second ready notification")
            self.ready_status = params
            self._ready.set()
            return None
        if method == "output":  # what a running script printed: to its execute, if one still waits (else dropped)
            with self._lock:
                sinks = [p.sink for p in self._pending.values() if p.method == "execute" and p.sink is not None]
            if sinks:
                sinks[0](method, params)
            return 0.0
        with self._lock:
            sinks = [p.sink for p in self._pending.values() if p.sink is not None]
            if not sinks and self._left_streams:  # the rest of what a request a Ctrl-C left streams: dropped
                return None
        if len(sinks) != 1:
            raise ProtocolError(f"unexpected notification {method[:40]!r}")
        sinks[0](method, params)
        return None

    def _drain_stderr(self) -> None:
        stream = self.connection.stderr
        assert stream is not None
        try:
            while chunk := stream.read(4096):
                with self._lock:
                    self._stderr_tail += chunk
                    del self._stderr_tail[:-_STDERR_KEEP]
        except (OSError, ValueError):
            pass
        finally:
            _close_quietly(stream)

    # ---- state ----------------------------------------------------------------------------

    def stderr_tail(self) -> str:
        """The last few KiB the container wrote to stderr (diagnostics only: untrusted text)."""
        with self._lock:
            return self._stderr_tail.decode("utf-8", errors="replace")

    def _fail(self, reason: str, *, kill: bool = False, violation: bool = False) -> None:
        self._stopping.set()
        with self._lock:
            if self.broken is None:
                self.broken = reason
            pending, self._pending = self._pending, {}
            self._left_replied.notify_all()
        if kill and not self.closed:  # before anyone waiting learns of it: the container is gone by then
            if violation:
                logger.warning("sandbox %s: %s; killing it", self.connection.name, reason)
            self.connection.kill()
        for p in pending.values():
            p.event.set()
        self._ready.set()

    def _check_usable(self) -> None:
        if self.closed:
            raise SessionError("the sandbox session is closed")
        if self.broken is not None:
            raise SessionError(f"the sandbox session is unusable: {self.broken}")

    # ---- API ------------------------------------------------------------------------------

    def wait_ready(self, timeout: float) -> dict[str, Any]:
        """Wait for the supervisor's ``ready`` report and return it.

        Raises:
            SessionError: it did not come in time, or the channel failed first.
        """
        if not self._ready.wait(timeout):
            self.kill()
            raise SessionError(f"the sandbox did not start within {timeout:g} s: {self.stderr_tail()[-1000:]}")
        if not self.ready_status:
            tail = self.stderr_tail()[-1000:]  # before: an empty one left the message ending in "):"
            raise SessionError(f"the sandbox failed to start ({self.broken})" + (f": {tail}" if tail.strip() else ""))
        if "error" in self.ready_status:
            self.kill()
            raise SessionError(f"the sandbox failed to start: {str(self.ready_status['error'])[:500]}")
        return self.ready_status

    def send(self, message: dict[str, Any]) -> None:
        """Queue one message for the supervisor.

        Raises:
            SessionError: the message cannot be sent (over the frame cap, or not JSON).
        """
        try:
            frame = encode_frame(message)
        except (ValueError, TypeError, RecursionError) as e:
            raise SessionError(
                f"cannot send {str(message.get('method', 'a message'))[:40]} to the sandbox: {e}"
            ) from None
        self._sender.send(frame)

    def request(
        self,
        method: str,
        params: dict[str, Any],
        *,
        timeout: float,
        sink: NotificationSink | None = None,
        on_interrupt: Callable[[], object] | None = None,
        interrupt_wait: float = 0.0,
    ) -> dict[str, Any]:
        """Send a request and wait for its result; ``sink`` receives notifications meanwhile.

        A KeyboardInterrupt (Ctrl-C) during the send or the wait calls ``on_interrupt`` and waits up to
        ``interrupt_wait`` seconds more for the answer before it goes on, that answer's result (unchecked) in its
        `INTERRUPTED_ANSWER`; a `sandbox.errors.QuitNow` goes on at once.

        Raises:
            SessionTimeoutError: no answer within ``timeout`` (the caller decides what to do).
            SessionError: the channel is closed or failed, or the supervisor answered with an error.
            ProtocolError: the answer is not a well-formed reply.
        """
        self._check_usable()
        request_id = next(self._ids)
        pending = _Pending(method, sink)
        with self._lock:
            # A close or failure since the check above has already woken every waiter: this one would wait its timeout.
            usable = self.broken is None
            if usable:
                self._pending[request_id] = pending
        if not usable:
            self._check_usable()  # raises: it is closed or broken
            raise SessionError(f"the sandbox session is unusable: {self.broken}")
        try:
            try:
                self.send({"id": request_id, "method": method, "params": params})
            except SessionError:  # nothing was sent: nothing to wait for
                with self._lock:
                    self._pending.pop(request_id, None)
                raise
            # A Ctrl-C inside the send may come after its frame was written: handled as one during the wait (before:
            # it went out without ``on_interrupt``, the script ran on to its timeout and the request waited for ever).
            answered = wait_for(pending.event, timeout)
        except KeyboardInterrupt as e:
            try:
                if on_interrupt is not None and not isinstance(e, QuitNow):  # e.g. stop the script, and wait
                    on_interrupt()
                    wait_for(pending.event, interrupt_wait)  # a second Ctrl-C here goes on at once
            finally:  # a second Ctrl-C too (before: the request stayed registered, and took the next one's output)
                self._leave(request_id, pending)
            answer = pending.message.get("result") if pending.message is not None else None
            if isinstance(answer, dict):
                setattr(e, INTERRUPTED_ANSWER, answer)  # the caller may read it (`Sandbox.execute`)
            raise
        if not answered:
            with self._lock:
                self._pending.pop(request_id, None)
            raise SessionTimeoutError(f"the sandbox did not answer {method} within {timeout:g} s")
        message = pending.message
        if message is None:
            self._check_usable()
            raise SessionError("the sandbox session ended")
        error = message.get("error")
        if error is not None:
            text = error.get("message") if isinstance(error, dict) else None
            raise SessionError(f"{method} failed in the sandbox: {str(text)[:2000]}")
        result = message.get("result")
        if not isinstance(result, dict):
            raise ProtocolError(f"the reply to {method} has no result object")
        return result

    def respond(
        self, call_id: str, *, result: dict[str, Any] | None = None, error: dict[str, Any] | None = None
    ) -> None:
        """Answer a request the container made."""
        if self.broken is not None or self.closed:
            return
        message = {"id": call_id, "error": error} if error is not None else {"id": call_id, "result": result or {}}
        try:
            frame = encode_frame(message)
        except FrameTooLarge as e:
            frame = encode_frame({"id": call_id, "error": {"code": "too_large", "message": f"the answer: {e}"}})
        except (ValueError, RecursionError):  # e.g. a lone surrogate in text from a hostile server
            reason = "the host's answer cannot be sent as UTF-8 JSON"
            frame = encode_frame({"id": call_id, "error": {"code": "invalid_result", "message": reason}})
        self._sender.send(frame)

    def reads_here(self) -> bool:
        """Whether this is the thread that reads the sandbox's messages (an ``output`` sink runs on it), which cannot
        wait for a reply: it would have to read that reply itself."""
        return threading.current_thread() is self._threads[0]

    def kill(self) -> None:
        """Destroy the container now."""
        self._fail("the session was killed")
        self.closed = True
        self._sender.close()
        self.connection.kill()

    def close(self, timeout: float = 5.0) -> None:
        """End the supervisor gracefully and destroy its container."""
        if self.closed:
            return
        self.closed = True
        self._stopping.set()  # a reader waiting out the request budget reads on, to the end of the stream
        self._sender.close()
        self.connection.close(timeout)
        self._fail("the session is closed")
