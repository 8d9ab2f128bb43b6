"""`SessionGate`: which client sessions ``tooltree serve --http`` keeps, what their requests may cost, and what
happens to a request whose client left; in front of the SDK's Streamable HTTP session manager, behind the token.

**Sessions.** The SDK refuses a new client with ``503`` once ``max_sessions`` are open, and ends a session only on
its client's ``DELETE`` or after ``idle_timeout`` with no request in flight, an open ``GET`` stream counting as
one. So 16 clients that never said goodbye (one that crashed; the MCP Inspector CLI, which never sends ``DELETE``)
locked every other client out for 30 minutes, and 16 open ``GET`` streams for ever. Here a new client's
``initialize`` that finds every place taken ends the session that has gone longest without a request in flight (an
open ``GET`` stream does not count; one whose client left, its ``GET`` stream closed, goes first): its client's next
request gets ``404`` and, as the MCP spec says, it initializes again. A session whose client is still in its
handshake (initialized under `FIRST_REQUEST_GRACE` seconds ago, no request yet) is never ended. Only when every
session has a request in flight or is that new (still, after `ADMISSION_GRACE`) is the new client refused, with a
``503`` that names ``serve.max_sessions`` and ``idle_timeout``. The session
is ended through the SDK's own door (a ``DELETE`` of it, sent from here), and its sandbox session with it. Its
sandbox session also ends when the SDK ended the session on a ``DELETE`` or answers that it does not know it
(``404``); never on a ``DELETE`` the SDK refused (a foreign ``Origin``).

**Sessions not known.** A request in a session the gate does not know is answered ``404`` here, one in a session the
SDK ended on its own (its ``idle_timeout``) has the SDK's ``404`` replaced: both begin ``Session not found`` (clients
match it) with the code ``-32001`` (on which a client initializes again), then say why the session ended (its client's
``DELETE``, a new client's need of its place, the idle timeout: the gate keeps the reason of the latest `GONE_KEPT`)
or, for one it never knew, what may have ended it (the idle timeout, with its value, or serve's restart), and to start
a new session. Before, the message was "Session not found" alone, and the SDK's code ``-32600`` for an idle one.

**Clients that left.** Claude Code never sends ``DELETE``: it keeps a ``GET`` stream open and just exits. Its
sandbox session (a container that may hold a script's variables, up to the sandbox's memory, and the upstream
servers it started) was then held for ``idle_timeout``, 30 minutes, after every ``claude -p`` run. So the gate
tells the sessions (``on_stream``) when a session's ``GET`` stream opens and closes: a session whose stream closed
and whose client sends nothing for `agent.serve.sessions.GONE_GRACE` seconds ends (the client's next call, if it
comes back after all, starts a new one and is told so).

**Stopping.** `stop` ends every request in flight, at once or after a grace, each answered: `agent.serve.http_stop`'s.

(Over 400 lines: sessions, clients that left and disconnects are one gate's, each deciding what
happens to the same requests and sessions.)

**Requests.** What each may cost (its body, its JSON values counted before parsing, the requests a session
and the server may have in flight) is `agent.serve.http_requests`'s.

**Disconnects.** The SDK goes on serving a request whose client's connection closed (a killed client; a
dropped network): a script ran to its timeout. When the connection of a ``POST`` closes before its answer,
the gate sends the session a ``notifications/cancelled`` for it, as the client would have, so the script
stops and the session lives on.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent.serve.http_requests import (
    SESSION_NOT_FOUND,
    SMALL_BODY,
    SMALL_VALUES,
    InFlight,
    Places,
    Refusal,
    check_values,
    content_length,
    read_body,
    refuse,
    session_not_found,
)
from agent.serve.http_stop import Drain, Exchange

logger = logging.getLogger(__name__)

SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
SAY_EVERY = 10.0
"""Seconds between two log lines of one kind (refusals, evictions, cancels): a client cannot flood the log."""
ADMISSION_GRACE = 1.0
"""Seconds a new client waits for a session's request to finish when every session has one in flight, before its
``503``. A client has its answer a moment before the gate counts its request finished (the answer's last bytes are
still being sent), so one that sent its next ``initialize`` at once was refused (a test saw it under load)."""
FIRST_REQUEST_GRACE = 5.0
"""Seconds after its ``initialize`` during which a session that has not yet sent a request (a notification is none)
is never ended for a new client: its client is still in its handshake, with its first call about to come. Before,
such a session was the one to end when every other had a request in flight: of 20 MCP Inspector CLI runs at once
against 16 places, 4 failed with ``404 Session not found`` on their first call instead of a ``503`` that says why."""

GONE_KEPT = 1024
"""Sessions that ended whose reason the gate keeps, for their client's next request (the oldest forgotten first)."""

Ended = Callable[[str], Awaitable[None]]
Stream = Callable[[str, bool], None]
"""Called with a session id and whether its ``GET`` stream opened (True) or closed (False)."""
HeaderList = list[tuple[bytes, bytes]]


@dataclass
class _Session:
    key: str
    host: bytes
    """The ``Host`` header its ``initialize`` came with (the SDK's DNS-rebinding check passed it)."""
    active: float
    """When its last ``POST`` began or ended (monotonic)."""
    in_flight: InFlight = field(default_factory=InFlight)
    streams: int = 0
    """Its ``GET`` streams open now."""
    left: bool = False
    """Its client left: its ``GET`` stream closed, and no request came from it since."""
    opened: float = field(default_factory=time.monotonic)
    """When its ``initialize`` was answered (monotonic)."""
    asked: bool = False
    """It has sent a request since (a ``POST`` of a JSON-RPC request, not a notification nor a response)."""

    def new(self, now: float) -> bool:
        """Its client may still be in its handshake: it has sent no request in the `FIRST_REQUEST_GRACE` seconds
        since its ``initialize``."""
        return not self.asked and now - self.opened < FIRST_REQUEST_GRACE


class SessionGate:
    """ASGI middleware in front of the SDK's Streamable HTTP app (see the module).

    Args:
        app: the SDK's app.
        max_sessions: the most client sessions at once (``serve.max_sessions``).
        idle_timeout: seconds after which an idle session ends (named when a client is refused).
        on_end: called with the session id of a session that ended (its sandbox session ends).
        on_stream: called when a session's ``GET`` stream opens or closes (see the module).
    """

    def __init__(
        self, app: ASGIApp, *, max_sessions: int, idle_timeout: float, on_end: Ended, on_stream: Stream | None = None
    ) -> None:
        self.app = app
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self.on_end = on_end
        self.on_stream = on_stream
        self._sessions: dict[str, _Session] = {}
        self._drain = Drain()
        self._opening = 0  # requests without a session that the SDK may be opening one for
        self._in_flight = InFlight()
        self._finished: anyio.Event | None = None  # set when a session's request finishes (`_open` waits on it)
        self._gone: dict[str, str] = {}  # why each session that ended here ended, the latest `GONE_KEPT`

    def stop(self, grace: float) -> None:
        """Serving stops: end every ``GET`` stream now and every other request in flight after ``grace`` seconds;
        refuse new requests (on the event loop). Called again (a second signal), it cuts the grace given short."""
        self._drain.stop(grace)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return

        async def handle(send: Send, exchange: Exchange) -> None:
            await self._request(scope, receive, send, exchange)

        await self._drain.serve(scope, send, handle)

    async def _request(self, scope: Scope, receive: Receive, send: Send, exchange: Exchange) -> None:
        key = _header(scope, SESSION_HEADER)
        if key is not None and key not in self._sessions:  # unknown here, so to the SDK too: answered 404 unread
            # -32001, the code the TypeScript SDK's servers answer a session they do not know with (the SDK's: -32600)
            await refuse(send, 404, session_not_found(self._why_gone(key)), SESSION_NOT_FOUND)
            if scope.get("method") != "POST":
                await self._ended(key)
            return
        if key is not None:  # a session the SDK ended on its own (its idle_timeout) is told why too, as above
            send = self._told_why(key, self._sessions[key].active, send)
        if scope.get("method") == "POST":
            await self._post(key, scope, receive, send, exchange)
            return
        if scope.get("method") == "GET" and key is not None and key in self._sessions:
            await self._get(key, scope, receive, send)
            return
        status = await _answered(self.app, scope, receive, send)
        if key is not None and scope.get("method") == "DELETE" and status == 200:
            await self._ended(key, "its client ended it (DELETE)")
        elif key is not None and status == 404:
            await self._ended(key)

    async def _get(self, key: str, scope: Scope, receive: Receive, send: Send) -> None:
        """A session's ``GET`` stream: `on_stream` hears when it opens and when it closes."""
        opened = False
        session = self._sessions[key]

        async def watch(message: Message) -> None:
            nonlocal opened
            if message["type"] == "http.response.start" and message["status"] == 200:
                opened = True
                session.streams += 1
                session.left = False
                if self.on_stream is not None:
                    self.on_stream(key, True)
            await send(message)

        try:
            status = await _answered(self.app, scope, receive, watch)
        finally:
            if opened:
                session.streams -= 1
                session.left = session.streams == 0
                if self.on_stream is not None:
                    self.on_stream(key, False)
        if status == 404:
            await self._ended(key)

    async def _ended(self, key: str, why: str | None = None) -> None:
        if self._sessions.pop(key, None) is not None and why is not None:
            self._remember(key, why)
        await self.on_end(key)

    # ---- why a session is not known ----------------------------------------------------------------

    def _remember(self, key: str, why: str) -> None:
        self._gone[key] = why
        if len(self._gone) > GONE_KEPT:
            del self._gone[next(iter(self._gone))]

    def _why_gone(self, key: str) -> str:
        """Why session ``key`` is not known: the reason it ended here, or what may have ended it."""
        return self._gone.get(key) or (
            f"it ended (after serve.idle_timeout, {self.idle_timeout:g} s, without a request, or to make room for a "
            "new client) or tooltree serve restarted since it began"
        )

    def _told_why(self, key: str, since: float, send: Send) -> Send:
        """``send``, with the SDK's ``404`` for session ``key`` (whose last request was at ``since``) replaced by the
        gate's own: the code a client initializes again on, and why (before: the SDK's "Session not found", -32600)."""
        replaced = False

        async def told(message: Message) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start" and message["status"] == 404:
                replaced = True
            if not replaced:
                await send(message)
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                idle = time.monotonic() - since >= self.idle_timeout  # the SDK ends a session idle that long
                why = f"it ended after serve.idle_timeout ({self.idle_timeout:g} s) without a request"
                self._remember(key, why if idle else "it ended on the server")
                await refuse(send, 404, session_not_found(self._gone[key]), SESSION_NOT_FOUND)

        return told

    async def _end(self, key: str) -> None:
        await self.on_end(key)

    # ---- POST -----------------------------------------------------------------------------------

    async def _post(self, key: str | None, scope: Scope, receive: Receive, send: Send, exchange: Exchange) -> None:
        session = self._sessions.get(key) if key is not None else None
        length = content_length(scope)
        large = length is None or length > SMALL_BODY
        places = Places(self._in_flight, session.in_flight if session is not None else None)
        try:
            places.take(large)
            if session is not None:
                session.active = time.monotonic()
                session.left = False
            body = await read_body(receive, length)
            exchange.request_id = _request_id(body)
            if session is not None and exchange.request_id is not None:
                session.asked = True
            if check_values(body) > SMALL_VALUES and not large:
                places.take(True)
            if session is None and not _modern(scope):
                await self._open(scope, body, receive, send)
                return
            await self._forward(key, scope, body, receive, send)
        except Refusal as e:
            if e.status != 499:
                _say(str(e.status), f"tooltree serve: refused a request ({e.status}): {e}")
            await refuse(send, e.status, str(e))
        finally:
            places.release()
            if session is not None:
                session.active = time.monotonic()
                if self._finished is not None:
                    self._finished.set()
                    self._finished = None

    async def _forward(self, key: str | None, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        """Hand the request to the SDK; if its connection closes before the answer, cancel it in its session."""
        answered = False
        base = _base_scope(scope)

        async def watch(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered = True
            await send(message)

        async with anyio.create_task_group() as tg:

            def left() -> None:
                request_id = _request_id(body)
                if key is not None and not answered and request_id is not None:
                    tg.start_soon(self._cancel, base, key, request_id)

            status = await _answered(self.app, scope, _replay(body, receive, left), watch)
        if key is not None and status == 404:
            await self._ended(key)

    async def _cancel(self, base: Scope, key: str, request_id: Any) -> None:
        """What the client would send: ``notifications/cancelled`` for its request, in its session."""
        message = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": request_id, "reason": "the client's connection closed"}}  # fmt: skip
        headers = [(b"content-type", b"application/json"), (b"accept", b"application/json, text/event-stream")]
        version = _header(base, VERSION_HEADER)
        if version is not None:
            headers.append((VERSION_HEADER.encode(), version.encode("latin-1")))
        host = (_header(base, "host") or "").encode("latin-1")
        status = await self._inside(base, "POST", key, host, headers, json.dumps(message).encode())
        # Before: the cancel's HTTP status ended the line as is, "... as its client would have (202)".
        done = (
            "it was cancelled in its session, as its client would have"
            if status == 202
            else f"its session did not take the cancel (HTTP status {status}): it may run on to its end"
        )
        _say("cancel", f"tooltree serve: a request's connection closed before its answer; {done}")

    async def _inside(
        self, base: Scope, method: str, key: str, host: bytes, headers: HeaderList, body: bytes
    ) -> int | None:
        """A request of our own to the SDK in session ``key`` (``host``: a ``Host`` header it accepted); its status."""
        own = [(b"host", host), (SESSION_HEADER.encode(), key.encode()), *headers]
        scope = {**base, "method": method, "query_string": b"", "state": {}, "headers": own}
        return await _answered(self.app, scope, _replay(body, None, None), _discard)

    # ---- a new session -------------------------------------------------------------------------

    async def _open(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        """A request without a session id (an ``initialize``): make room for it if need be, then hand it over."""
        initialize = _method(body) == "initialize"
        # No lock: nothing is awaited between finding a place (or a session to end) and taking it, so newcomers wait
        # for a place side by side. Before, they waited in turn under a lock, each up to ADMISSION_GRACE: of 10 at
        # once against 16 sessions all in their handshake, the fourth was refused after 4 s, and of 200, one after 50 s.
        evicted: _Session | None = None
        deadline = anyio.current_time() + ADMISSION_GRACE
        while len(self._sessions) + self._opening >= self.max_sessions:
            evicted = self._victim() if initialize else None
            if evicted is not None:
                del self._sessions[evicted.key]
                self._remember(evicted.key, self._evicted_why())
                break
            remaining = deadline - anyio.current_time()
            if not initialize or remaining <= 0:
                raise Refusal(503, self._full())
            if self._finished is None:
                self._finished = anyio.Event()
            with anyio.move_on_after(remaining):
                await self._finished.wait()
        self._opening += 1
        opening = True
        host = (_header(scope, "host") or "").encode("latin-1")

        async def watch(message: Message) -> None:
            nonlocal opening
            if message["type"] == "http.response.start" and opening:
                opening = False
                self._opening -= 1
                key = _response_header(message, SESSION_HEADER)
                if message["status"] < 400 and key is not None:
                    now = time.monotonic()
                    self._sessions[key] = _Session(key, host, now, opened=now)
            await send(message)

        try:
            async with anyio.create_task_group() as tg:
                if evicted is not None:
                    await self._evict(scope, evicted)
                    tg.start_soon(self._end, evicted.key)  # its sandbox closes while the new client starts
                await _answered(self.app, scope, _replay(body, receive, None), watch)
        finally:
            if opening:
                self._opening -= 1

    def _victim(self) -> _Session | None:
        """The session to end for a new one: of those with no request in flight, the one whose last request is
        oldest (a crashed client's, or one's that never said goodbye, before long); one whose client left (its
        ``GET`` stream closed, nothing since) before any other. Such sessions stay until ``idle_timeout`` (their
        sandboxes end sooner), so where clients come and go without a ``DELETE`` they take every place: before, a
        connected client idle a little longer than them was ended instead (its variables lost). Never a `_Session.new`
        one: its client is still in its handshake (before, it got ``404`` on its first call)."""
        now = time.monotonic()
        idle = [s for s in self._sessions.values() if s.in_flight.requests == 0 and not s.new(now)]
        return min(idle, key=lambda s: (not s.left, s.active), default=None)

    async def _evict(self, scope: Scope, session: _Session) -> None:
        status = await self._inside(_base_scope(scope), "DELETE", session.key, session.host, [], b"")
        idle = time.monotonic() - session.active
        _say(
            "evict",
            f"tooltree serve: ended a session without a request for {idle:.0f} s to make room for a new "
            f"client: {self.max_sessions} session{'s are' if self.max_sessions != 1 else ' is'} open, the most "
            f"serve.max_sessions allows"
            + ("" if status == 200 else f" (the session's end was answered {status}, not 200)"),
        )

    def _evicted_why(self) -> str:
        return (
            f"it was ended to make room for a new client (serve.max_sessions is {self.max_sessions}: every place was "
            "taken, and it had no request in flight)"
        )

    def _full(self) -> str:
        return (
            f"Too many open sessions: all {self.max_sessions} (serve.max_sessions) have a request in flight or have "
            f"just begun (a session is kept for {FIRST_REQUEST_GRACE:g} s after its initialize for its first "
            "request), so none can be ended to make room. Try again when one has been answered, or raise "
            "serve.max_sessions in tooltree.yaml. A session with no request in flight is ended when a new client "
            f"needs its place, or after serve.idle_timeout ({self.idle_timeout:g} s, --idle-timeout) without a request."
        )


_said: dict[str, tuple[float, int]] = {}


def _say(kind: str, text: str) -> None:
    """Log ``text`` as a warning, at most once every `SAY_EVERY` seconds for each ``kind`` (with how many were not)."""
    now = time.monotonic()
    last, unsaid = _said.get(kind, (-SAY_EVERY, 0))
    if now - last < SAY_EVERY:
        _said[kind] = (last, unsaid + 1)
        return
    _said[kind] = (now, 0)
    logger.warning("%s%s", text, f" (and {unsaid} more like it since the last)" if unsaid else "")


# ---- ASGI helpers -------------------------------------------------------------------------------


def _header(scope: Scope, name: str) -> str | None:
    wanted = name.encode()
    for key, value in scope.get("headers", []):
        if key.lower() == wanted:
            return bytes(value).decode("latin-1")
    return None


def _response_header(message: Message, name: str) -> str | None:
    wanted = name.encode()
    for key, value in message.get("headers", []):
        if bytes(key).lower() == wanted:
            return bytes(value).decode("latin-1")
    return None


def _modern(scope: Scope) -> bool:
    """A request of the session-less protocol era (the SDK serves it without a session)."""
    version = _header(scope, VERSION_HEADER)
    return version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS


def _base_scope(scope: Scope) -> Scope:
    """The parts of a request's scope a request of our own reuses (not what the app added to it)."""
    keep = ("type", "asgi", "http_version", "scheme", "server", "client", "root_path", "path", "raw_path", "headers")
    return {k: scope[k] for k in keep if k in scope}


def _replay(body: bytes, receive: Receive | None, on_disconnect: Callable[[], None] | None) -> Receive:
    """A ``receive`` that gives ``body`` once, then what the connection says (its disconnect is reported)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        if receive is None:
            return {"type": "http.disconnect"}
        message = await receive()
        if message["type"] == "http.disconnect" and on_disconnect is not None:
            on_disconnect()
        return message

    return replay


async def _discard(message: Message) -> None:
    pass


async def _answered(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> int | None:
    """Run ``app`` for one request; the status it answered with (None: none).

    The SDK answers a notification ``202`` before handing it to its session; when that session's stream closed
    meanwhile (a client that cancels a call and leaves at once) it answers ``500`` too, which is not sent, and raises
    that the stream is closed, which ends here. Before: the HTTP server raised on the second answer, and logged the
    error, a traceback of about 40 lines on serve's stderr each time."""
    status: int | None = None
    done = False

    async def watch(message: Message) -> None:
        nonlocal status, done
        if done:
            return
        if message["type"] == "http.response.start":
            status = int(message["status"])
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            done = True
        await send(message)

    try:
        await app(scope, receive, watch)
    except anyio.ClosedResourceError:
        if not done:
            raise
    return status


def _parsed(body: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _method(body: bytes) -> str | None:
    message = _parsed(body)
    method = message.get("method") if message is not None else None
    return method if isinstance(method, str) else None


def _request_id(body: bytes) -> Any:
    """The id of a JSON-RPC request to cancel (not of ``initialize``, which may not be); None for others."""
    message = _parsed(body)
    if message is None or "id" not in message or not isinstance(message.get("method"), str):
        return None
    return None if message["method"] == "initialize" else message["id"]
