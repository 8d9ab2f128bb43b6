"""What one client request to ``tooltree serve --http`` may cost: its body, its JSON values, and the places it
holds while in flight (`agent.serve.http_gate.SessionGate` applies them).

A client's message is at most `BODY_LIMIT` bytes, as the SDK's, and `MAX_MESSAGE_VALUES` JSON values, counted
before anything parses it (`tool_tree.unparsed.count_values`); its body must arrive within `BODY_TIMEOUT`
seconds. Each ``POST`` holds a place of its session and of the server until it is answered
(`SESSION_REQUESTS`, `TOTAL_REQUESTS`); a large one (a body over `SMALL_BODY` bytes or of unknown length, or
over `SMALL_VALUES` values) one of `SESSION_LARGE` and `TOTAL_LARGE` as well. Past them it is refused at once
(``429`` for the session, ``503`` for the server), never queued: a queued request would hold its connection,
and the client's ``notifications/cancelled`` could wait behind the requests it cancels. Before, 16 requests
of 3.7 MiB of ``[{}, {}, …]`` at once on one session took serve to 1.6 GB, 48 to 4.9 GB, and another
client's call waited up to 8 s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import anyio
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from starlette.datastructures import Headers
from starlette.types import Receive, Scope, Send

from sandbox._supervisor.limits import MAX_CALL_VALUES
from tool_tree.unparsed import count_values

BODY_LIMIT = DEFAULT_MAX_REQUEST_BODY_SIZE
"""Bytes of one client message (the SDK's limit, 4 MiB)."""
MAX_MESSAGE_VALUES = MAX_CALL_VALUES + 100
"""JSON values one client message may hold: as many as the arguments of a script's tool call
(`sandbox._supervisor.limits.MAX_CALL_VALUES`, 100,000; a passthrough call goes through the same bridge), and
room for the envelope. An ``execute_python`` call is code text, about ten values. 100,000 ``{}`` parse to
7 MB; the 1.3 million of a 3.7 MiB body to 90 MB."""
BODY_TIMEOUT = 60.0
"""Seconds a request's body may take to arrive (4 MiB at 0.5 Mbit/s), so a body trickled a byte at a time
holds its connection and its places no longer."""
SESSION_REQUESTS = 64
"""``POST`` requests of one session in flight: an honest client has a few; the sessions' own queues
(`agent.serve.client_session`) take 8 executions and make further calls wait for a thread, without refusing."""
TOTAL_REQUESTS = 256
"""``POST`` requests in flight on the server."""
SMALL_BODY = 64 * 1024
"""A body over this (or of unknown length) is large."""
SMALL_VALUES = 1_000
"""A message over this many values is large."""
SESSION_LARGE = 4
"""Large requests of one session in flight: each may hold `BODY_LIMIT` bytes and `MAX_MESSAGE_VALUES` values
(~15 MB once parsed) until it is answered; 4 are ~60 MB."""
TOTAL_LARGE = 16
"""Large requests in flight on the server (~250 MB)."""


class Refusal(Exception):
    """A request refused before the SDK sees it: its HTTP ``status`` and why (sent as a JSON-RPC error)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class InFlight:
    """Requests in flight, of one session or of the server."""

    requests: int = 0
    large: int = 0


class Places:
    """The places one ``POST`` holds while in flight: of the ``server`` and of its ``session`` (if it has one)."""

    def __init__(self, server: InFlight, session: InFlight | None) -> None:
        self.server, self.session = server, session
        self.held = self.large = False

    def take(self, large: bool) -> None:
        """Take a place (and a large one, if ``large``); what it already holds it keeps.

        Raises:
            Refusal: the session (429) or the server (503) has no place left.
        """
        server, session = self.server, self.session
        if not self.held:
            if session is not None and session.requests >= SESSION_REQUESTS:
                raise Refusal(429, f"this session has {SESSION_REQUESTS} requests in flight, the most one may "
                              "have; wait for their answers")  # fmt: skip
            if server.requests >= TOTAL_REQUESTS:
                raise Refusal(503, f"the server has {TOTAL_REQUESTS} requests in flight; try again shortly")
            self.held = True
            for counts in _present(server, session):
                counts.requests += 1
        if large and not self.large:
            if session is not None and session.large >= SESSION_LARGE:
                raise Refusal(429, f"this session has {SESSION_LARGE} large requests in flight ({_LARGE}), the "
                              "most one may have; wait for their answers")  # fmt: skip
            if server.large >= TOTAL_LARGE:
                raise Refusal(503, f"the server has {TOTAL_LARGE} large requests in flight ({_LARGE}); try again "
                              "shortly")  # fmt: skip
            self.large = True
            for counts in _present(server, session):
                counts.large += 1

    def release(self) -> None:
        for counts in _present(self.server, self.session):
            counts.requests -= self.held
            counts.large -= self.large
        self.held = self.large = False


_LARGE = f"a body over {SMALL_BODY // 1024} KiB or over {SMALL_VALUES:,} JSON values"


def _present(*counts: InFlight | None) -> list[InFlight]:
    return [c for c in counts if c is not None]


def content_length(scope: Scope) -> int | None:
    value = Headers(scope=scope).get("content-length")
    return int(value) if value is not None and value.strip().isascii() and value.strip().isdigit() else None


async def read_body(receive: Receive, length: int | None) -> bytes:
    """The request's body: at most `BODY_LIMIT` bytes, within `BODY_TIMEOUT` seconds.

    Raises:
        Refusal: too large (413), too slow (408), or the client left (499, never sent).
    """
    if length is not None and length > BODY_LIMIT:
        raise Refusal(413, f"the request body is {length:,} bytes; a client message may be {BODY_LIMIT:,}")
    chunks: list[bytes] = []
    size = 0
    with anyio.move_on_after(BODY_TIMEOUT):
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise Refusal(499, "the client left before sending its request")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > BODY_LIMIT:
                raise Refusal(413, f"the request body is over {BODY_LIMIT:,} bytes, the most a client message may be")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
    raise Refusal(408, f"the request body did not arrive within {BODY_TIMEOUT:g} s")


def check_values(body: bytes) -> int:
    """How many JSON values ``body`` holds (as far as `MAX_MESSAGE_VALUES` needs to know), before it is parsed.

    Raises:
        Refusal: more than `MAX_MESSAGE_VALUES` (413).
    """
    values = count_values(body, MAX_MESSAGE_VALUES)
    if values > MAX_MESSAGE_VALUES:
        raise Refusal(413, f"the message holds more than {MAX_MESSAGE_VALUES:,} JSON values (counted unparsed), the "
                      "most one client message may hold")  # fmt: skip
    return values


SESSION_NOT_FOUND = -32001
"""The JSON-RPC code of a ``404`` answering a request in a session the server does not know, as the TypeScript SDK's
servers answer it (the Python SDK's is ``-32600``, the code of a malformed request): a client reading the code
learns that it should initialize again."""
INITIALIZE_AGAIN = "start a new session (initialize again)"


def session_not_found(why: str) -> str:
    """The message of a ``404`` answering a request in a session the server does not know: ``Session not found``
    first, as clients (and the SDKs' servers) say it, then ``why`` it may have ended and what to do. Before, the
    message was "Session not found" alone: a user shown it learnt neither."""
    return f"Session not found: {why}; {INITIALIZE_AGAIN}"


async def refuse(send: Send, status: int, text: str, code: int = -32600) -> None:
    """A JSON-RPC error of ``code`` without an id (the SDK client gives it its request's) at HTTP ``status``."""
    if status == 499:  # the client is gone
        return
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": text}}).encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body})
