"""`Drain`: how ``tooltree serve --http`` stops the HTTP requests in flight (`agent.serve.http_gate.SessionGate` serves
each of its requests through one).

`Drain.stop` ends every open ``GET`` stream at once and gives the other requests in flight a grace, then cancels them
too, each answered with an error that says serve is stopping (``503``, or the last event of its stream); a request
that comes after is refused ``503``. Left to uvicorn, a stop waited for every connection to close: with a client's
``GET`` stream open, SIGTERM did nothing for as long as the client stayed.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.types import Message, Scope, Send

from agent.serve.http_requests import refuse

STOPPED = -32000
"""The JSON-RPC code of the error that answers a request cancelled as serve stopped (a server error)."""


@dataclass
class Exchange:
    """What the gate learnt of one HTTP request while it was served."""

    request_id: Any = None
    """The id of the JSON-RPC request its ``POST`` carries, once its body was read (None: none to answer)."""


Handler = Callable[[Send, Exchange], Awaitable[None]]
"""Serves one HTTP request: sends its answer through the ``Send`` given, tells the `Exchange` what it learnt."""


class Drain:
    """The HTTP requests in flight, and their end when serving stops (see the module)."""

    def __init__(self) -> None:
        self._requests: dict[anyio.CancelScope, bool] = {}  # each request in flight: whether it is a GET stream
        self._grace: float | None = None  # the grace given to requests in flight by `stop`
        self._hurried = False  # `stop` was called again: requests in flight were cancelled at once

    def stop(self, grace: float) -> None:
        """Serving stops: end every ``GET`` stream now and every other request in flight after ``grace`` seconds;
        refuse new requests (on the event loop). Called again (a second signal), it cuts the grace given short."""
        self._hurried = self._grace is not None
        self._grace = grace if self._grace is None else min(grace, self._grace)
        now = anyio.current_time()
        for request, stream in self._requests.items():
            request.deadline = min(request.deadline, now if stream else now + grace)

    async def serve(self, scope: Scope, send: Send, handle: Handler) -> None:
        """Serve one HTTP request with ``handle``, which `stop` may cancel: its client is then answered."""
        if self._grace is not None:
            await refuse(send, 503, "tooltree serve is stopping")
            return
        started = finished = events = answered = False
        exchange = Exchange()

        async def watch(message: Message) -> None:
            nonlocal started, finished, events, answered
            if message["type"] == "http.response.start":
                started = True
                events = _event_stream(message)
            elif message["type"] == "http.response.body":
                answered = answered or (events and _answers(message.get("body", b""), exchange.request_id))
                finished = not message.get("more_body", False)
            await send(message)

        with anyio.CancelScope() as request:
            self._requests[request] = scope.get("method") == "GET"
            try:
                await handle(watch, exchange)
            finally:
                del self._requests[request]
        if request.cancelled_caught and not finished:  # `stop` ended it
            if started:
                # A request's stream of events gets its answer: the error, as the client reads one. Before, it ended
                # with none, and the SDK client said only "SSE stream ended without a response".
                # One whose answer was sent, its stream not yet closed, gets none: before, the error came after it.
                grace = None if self._hurried else self._grace
                last = _stopped_event(exchange.request_id, grace) if events and not answered else b""
                await send({"type": "http.response.body", "body": last, "more_body": False})
            else:
                await refuse(send, 503, "tooltree serve is stopping")


def _event_stream(start: Message) -> bool:
    """Whether the answer ``start`` begins is a stream of server-sent events."""
    for key, value in start.get("headers", []):
        if bytes(key).lower() == b"content-type":
            return bytes(value).decode("latin-1").startswith("text/event-stream")
    return False


def _stopped_event(request_id: Any, grace: float | None) -> bytes:
    """The server-sent event that answers request ``request_id`` (None: no event) with an error, as serve stopped
    while it was still running ``grace`` seconds after being told to (None: when told again)."""
    if request_id is None:
        return b""
    when = f"{grace:g} s after serve was told to stop" if grace is not None else "when serve was told again to stop"
    message = f"tooltree serve is stopping: this request was still running {when}, so it was cancelled (a script it "
    message += "ran was stopped)"
    answer = {"jsonrpc": "2.0", "id": request_id, "error": {"code": STOPPED, "message": message}}
    return b"event: message\r\ndata: " + json.dumps(answer).encode() + b"\r\n\r\n"


def _answers(chunk: bytes, request_id: Any) -> bool:
    """Whether ``chunk`` of a stream of server-sent events holds the answer (a result or an error) to request
    ``request_id`` (the SDK sends each event in one chunk)."""
    if request_id is None:
        return False
    for line in chunk.splitlines():
        if not line.startswith(b"data:"):
            continue
        try:
            message = json.loads(line[5:])
        except ValueError:
            continue
        if (
            isinstance(message, dict)
            and message.get("id") == request_id
            and ("result" in message or "error" in message)
        ):
            return True
    return False
