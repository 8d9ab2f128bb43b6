"""The HTTP client of a Streamable HTTP server: the SDK's, with one message bounded as over stdio.

The SDK bounds one server-sent event (``max_sse_event_size``, 1 MiB by default) but reads a JSON reply whole, however
long: one reply of 1.5 GB took the host to 9.6 GB of memory. Here both are bounded by
`tool_tree.stdio.MAX_MESSAGE_BYTES`, the cap of a stdio message, so a result a stdio server may send (a 3 MB
spreadsheet) also arrives from an HTTP one, and nothing bigger is held.

Replies are asked for uncompressed (``Accept-Encoding: identity``). A server (or a proxy before it) that compresses
anyway with gzip or deflate is read through a bounded inflater here, which unpacks a step at a time and counts what it
unpacked, so a small compressed body cannot unpack to gigabytes before the count sees it; any other encoding is refused
with a message saying so.

The values of each message are counted before the SDK parses it, as over stdio (`tool_tree.unparsed.count_values`,
`tool_tree.budget.MAX_MESSAGE_VALUES`): a JSON reply is held until its last byte and handed on only if within the limit;
an event stream is scanned as it arrives, each event ending at a blank line (as the SDK's parser ends it) counted before
its bytes are handed on, and read as UTF-8 whatever charset it names, as the count assumes. A reply over the limit fails
the request it answers, naming the server and the limit. Events that can only be notifications are charged to the
connection's notification budget by their values, and past it dropped before the SDK parses them (200,000 small ones,
parsed, took 36 s). Every event but a request's answer is charged to the connection's `tool_tree.budget.ReaderBudget`
(its cutting out, measured; the SDK's parsing and dispatch, estimated), past which the stream is read on only after a
wait. The SDK's GETs are paced by `tool_tree.get_streams.GetStreams`: the stream of the messages a server sends unasked
(its requests and notifications tied to no call: a ``ping``, ``notifications/tools/list_changed``) is reopened after a
wait that grows, a few times a minute at most, whatever ``retry`` the server sends, also after a failure that may pass
(a 503, a connection refused or cut), given up at once on a status of 400 or more (405: it has none)
(`tool_tree.get_streams.KeepingClient`); its events are bounded as above, an answer on it (none belongs there) dropped
unparsed as a stray (`tool_tree.ledgers.Outstanding`, shared with the guard: past the allowance the connection ends). A
GET resuming a request's stream is paced apart (`tool_tree.get_streams.RESUMES_AT_ONCE`, then one a second); none is
sent once the connection ended.

An answer whose text holds more items than an answer keeps (`tool_tree.answer_items`) has them cut before the SDK
parses it, its text written again, and what was cut told to the guard through the connection's ledger: the SDK parses
an answer whole (330,000 text blocks cost about 1 s of CPU when cut only after that, 0.36 s cut before:
``bench/answer_items.py``).

A reply that is a JSON-RPC batch (an array of messages, which JSON-RPC 2.0 lets a server send) is read as its
messages, once its values are counted whole: an event's as one event for each, each judged as above (an event on a
request's stream holding two answers to it fails it, as a JSON reply's does: `tool_tree.http_errors`); a JSON reply's,
which the SDK reads as one message, as its one answer (the notifications beside it are not read).
A JSON reply after a UTF-8 byte order mark is read without it, as a stdio server's line is.

(Over 400 lines: the byte streams of a reply, which share the counting of values, events and answers.)
"""

from __future__ import annotations

import logging
import re
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import anyio
import httpx2
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT
from mcp.shared.dispatcher import coerce_request_id
from pydantic_core import PydanticSerializationError, from_json, to_json

from tool_tree.answer_items import MAX_ANSWER_ITEMS, cut_answer
from tool_tree.budget import (
    HANDED_ON_SECONDS,
    MAX_MESSAGE_VALUES,
    NotificationBudget,
    ReaderBudget,
    notification_cost,
    too_many_values,
)
from tool_tree.get_streams import GetStreams, KeepingClient, StreamRefused
from tool_tree.http_errors import answering, posted_id
from tool_tree.ledgers import Outstanding
from tool_tree.stdio import MAX_MESSAGE_BYTES
from tool_tree.unparsed import count_values, peek, unaddressed

PARSE_SECONDS_PER_VALUE = 1.1e-6
"""What the SDK's parser is estimated to spend on one value of an event: the costliest shape measured, a
million values as annotated text blocks, took 1.1 s (`tool_tree.budget.MAX_MESSAGE_VALUES`)."""


class MessageTooLarge(httpx2.StreamError):
    """A reply past the limit, or compressed: the SDK fails the request it answers with this message."""


class EventRefused(httpx2.SSEError):
    """An event past the value limit: the SDK fails the request whose stream it is in with this message; or, on the
    stream of unasked messages, an answer past the allowance of stray answers: that stream ends."""


class _Refusals(logging.Filter):
    """Keeps the SDK from logging a traceback for a reply refused here: the call's error says it all."""

    def filter(self, record: logging.LogRecord) -> bool:
        refused = MessageTooLarge | EventRefused | StreamRefused
        return not (record.exc_info and isinstance(record.exc_info[1], refused))


logging.getLogger("mcp.client.streamable_http").addFilter(_Refusals())


class _Bounded(httpx2.AsyncByteStream):
    def __init__(self, stream: httpx2.AsyncByteStream, limit: int, problem: str | None) -> None:
        self._stream, self._limit, self._problem = stream, limit, problem

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._problem is not None:
            raise MessageTooLarge(self._problem)
        seen = 0
        async for chunk in self._stream:
            seen += len(chunk)
            if seen > self._limit:
                raise MessageTooLarge(_too_large(self._limit))
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


_STEP = 1 << 20
"""Bytes one step of the inflater may unpack: what is held before the count sees it."""
_INFLATED = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class _Inflated(httpx2.AsyncByteStream):
    """A compressed body unpacked a step at a time, at most ``limit`` bytes in all (None: each step only)."""

    def __init__(self, stream: httpx2.AsyncByteStream, encoding: str, limit: int | None) -> None:
        self._stream, self._encoding, self._limit = stream, encoding, limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        wbits = _INFLATED[self._encoding]
        inflater = zlib.decompressobj(wbits)
        seen = raw = 0
        first = True
        async for chunk in self._stream:
            raw += len(chunk)
            if self._limit is not None and raw > self._limit:
                raise MessageTooLarge(_too_large(self._limit))
            data = chunk
            while data and not inflater.eof:  # what follows the compressed stream's end is not kept
                try:
                    out = inflater.decompress(data, _STEP)
                except zlib.error as e:
                    if not (first and wbits == zlib.MAX_WBITS):
                        raise MessageTooLarge(f"the server's {self._encoding} reply is corrupt ({e})") from e
                    # "deflate" is sometimes sent raw, without the zlib header (as httpx also accepts).
                    wbits = -zlib.MAX_WBITS
                    inflater = zlib.decompressobj(wbits)
                    continue
                first = False
                data = inflater.unconsumed_tail
                seen += len(out)
                if self._limit is not None and seen > self._limit:
                    raise MessageTooLarge(_too_large(self._limit))
                if out:
                    yield out
        rest = inflater.flush()
        if self._limit is not None and seen + len(rest) > self._limit:
            raise MessageTooLarge(_too_large(self._limit))
        if rest:
            yield rest

    async def aclose(self) -> None:
        await self._stream.aclose()


def _too_large(limit: int) -> str:
    return f"the server's reply is larger than {limit // 2**20} MiB, the limit for one message"


def _rough(data: bytes) -> int:
    """The ``,[{`` in ``data``: each value but a message's first follows one (`count_values`' first pass)."""
    return len(data) - len(data.translate(None, b",[{"))


class _Counted(httpx2.AsyncByteStream):
    """A JSON reply held until its last byte, then handed on if it holds at most ``limit`` values; an answer of more
    items than an answer keeps, with them cut (`_cut`)."""

    def __init__(
        self, stream: httpx2.AsyncByteStream, limit: int, server: str | None, cuts: Outstanding | None = None
    ) -> None:
        self._stream, self._limit, self._server, self._cuts = stream, limit, server, cuts

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks: list[bytes] = []
        rough = 1
        async for chunk in self._stream:  # `_Bounded` or `_Inflated`: at most the byte cap
            chunks.append(chunk)
            rough += _rough(chunk)
        if rough > self._limit and count_values(b"".join(chunks), self._limit) > self._limit:
            raise MessageTooLarge(too_many_values(self._server, self._limit))
        if chunks and len(chunks[0]) < len(_BOM):
            chunks = [b"".join(chunks)]
        if chunks and chunks[0].startswith(_BOM):  # JSON lets a parser ignore it (RFC 8259, 8.1); the SDK's does not
            chunks[0] = chunks[0][len(_BOM) :]
        if _BATCH.match(chunks[0] if chunks else b"") and (batch := _batch(b"".join(chunks))) is not None:
            answers = [message for message in batch if _answers(message)]
            if len(answers) == 1:  # the SDK reads one message of a JSON reply: the others (notifications) are dropped
                chunks = [answers[0]]
        data = b"".join(chunks) if rough > MAX_ANSWER_ITEMS else b""
        if data and (cut := _cut(data, self._cuts)) is not None:
            yield cut
            return
        for chunk in chunks:
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


_BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte order mark a server may write before its JSON reply (as over stdio: `tool_tree.stdio_lines`)."""
_BATCH = re.compile(rb'\s*\[\s*\{\s*"')
"""How a JSON-RPC batch (an array of messages) opens."""


def _batch(data: bytes) -> list[bytes] | None:
    """The messages of a JSON-RPC batch (an array of messages, each with its ``jsonrpc`` member), each written again
    alone; None for any other text. JSON-RPC 2.0 lets a server answer so (and MCP's 2025-03-26 protocol); the SDK reads
    one message in a reply, or in an event. Called on a text whose values are counted within the limit."""
    try:
        batch = from_json(data)
    except ValueError:
        return None
    if not isinstance(batch, list) or not all(isinstance(m, dict) and "jsonrpc" in m for m in batch):
        return None
    try:
        return [to_json(message) for message in batch]
    except PydanticSerializationError:
        return None


def _answers(message: bytes) -> bool:
    """Whether a message of a batch is an answer (its id first, then its result or error, as `_batch` writes it)."""
    head = peek(message)
    return head is not None and head[0] == "response"


_ITEM_KEYS = (b'"type"', b'"uri"', b'"role"')
"""A key each item of a list `tool_tree.answer_items` cuts has: a content block's, a resource content's, a message's."""
_ESCAPED_ITEM_KEYS = re.compile(
    rb'"(?:(?:t|\\u0074)(?:y|\\u0079)(?:p|\\u0070)(?:e|\\u0065)'
    rb"|(?:u|\\u0075)(?:r|\\u0072)(?:i|\\u0069)"
    rb'|(?:r|\\u0072)(?:o|\\u006[fF])(?:l|\\u006[cC])(?:e|\\u0065))"'
)
"""`_ITEM_KEYS` however their letters are written (each plain or as a JSON escape): looked for only in a text holding
an escape of such a letter (``\\u00``), so a server hiding its keys behind escapes is cut before the SDK parses it too.
"""


def _cut(data: bytes, cuts: Outstanding | None) -> bytes | None:
    """``data``, an answer's text, with the items past what an answer keeps cut before the SDK parses it, what was cut
    told to ``cuts`` (the connection's ledger, which the guard asks: `tool_tree.answer_items.cut_answer`); None when
    nothing is cut. Only a text of more ``,[{`` than `MAX_ANSWER_ITEMS` is looked at (a list that long has that many
    commas), and parsed only when it names more items than that: a content block's ``"type"``, a resource content's
    ``"uri"`` or a prompt message's ``"role"``, written plainly or with escapes (`_ESCAPED_ITEM_KEYS`; an answer of
    rows of structured content, the common big one, is not parsed twice), nor is a listing of tools: its result has no
    list that is cut, and the ``"type"`` keys of its schemas would make one of 20,000 tools look like one (0.2 s)."""
    if cuts is not None and (seen := peek(data)) is not None and seen[0] == "response" and cuts.lists_tools(seen[1]):
        return None
    named = 0
    if cuts is not None:
        escaped = b"\\u00" in data
        named = sum(1 for _ in _ESCAPED_ITEM_KEYS.finditer(data)) if escaped else sum(map(data.count, _ITEM_KEYS))
    done = cut_answer(data) if named > MAX_ANSWER_ITEMS else None
    if done is None:
        return None
    text, request_id, left = done
    assert cuts is not None
    cuts.was_cut(request_id, left)
    return text


_PAIRS = re.compile(rb"(?=\n[\r\n]|\r\r)")
"""Where two line endings in a row begin (``\\r\\n``, ``\\r`` or ``\\n`` each): a blank line, where the SDK's
parser ends an event."""
_BLANK_LINES = (b"\n\n", b"\n\r", b"\r\r")
_DATA = re.compile(rb"^data(?::\x20?(.*))?$", re.MULTILINE)
"""A ``data`` field's line, its value without the one space after the colon (as the SDK's parser reads it)."""
_HEAD = 1024
"""Bytes of an event looked at for its data's id (`tool_tree.unparsed.peek`)."""


class _Events:
    """An event stream cut into its events as the bytes arrive; each event's values counted and, past the
    notification budget, an event that cannot be a request or a response dropped, before the SDK parses it.

    Each piece runs to the end of a blank line (as the SDK's parser ends an event), so it holds one event's
    lines whole, with the comments and other fields among them, and leaving a piece out leaves the lines of
    the others as they were. A piece's ``,[{`` bound its data's values (`count_values`' first pass); only
    a piece over the limit that way has its ``data`` lines joined as the SDK joins them and counted exactly.
    A piece is held until its end (to be counted, or dropped) up to ``hold`` bytes: one longer is no event
    the SDK takes (it refuses events over the byte cap) unless it is mostly comments; it is passed on as it
    comes and judged by its ``,[{`` alone. A piece with an object in it (``{``) and no ``"id"`` nor backslash
    (`tool_tree.unparsed.unaddressed`) is a notification (or not JSON-RPC) and is charged to
    ``notifications`` by its values (`tool_tree.budget.notification_cost`); past the budget it is dropped.
    Each piece passed on but an answer (its data opening with its id and result or error:
    `tool_tree.unparsed.peek`) adds what the SDK is estimated to spend on it to `owed`; without ``answers`` (a
    stream on which no answer belongs: the one of unasked messages), an answer too; with ``strays``, it is dropped
    instead, a stray answer (`Outstanding.stray`), past whose allowance the connection ends (`EventRefused`).
    """

    def __init__(
        self, limit: int, hold: int, server: str | None, notifications: NotificationBudget | None,
        answers: bool = True, strays: Outstanding | None = None, cuts: Outstanding | None = None,
        request: Any = None,
    ) -> None:  # fmt: skip
        self._limit, self._hold, self._server, self._notifications = limit, hold, server, notifications
        self._answers, self._strays, self._cuts, self._request = answers, strays, cuts, request
        self._held: list[bytes] | None = []  # the event in progress; None once past ``hold``
        self._size = self._rough = 0
        self._last = b""  # the last byte fed: a blank line may straddle two chunks
        self.owed = 0.0  # estimated seconds of the SDK's CPU for the events passed on, not yet charged

    def feed(self, chunk: bytes) -> list[bytes]:
        """Take the next bytes of the stream; what to pass on to the SDK's parser now.

        Raises:
            EventRefused: an event they end holds more than the limit of values.
        """
        out: list[bytes] = []
        start = 0
        for end in self._ends(chunk):
            self._add(chunk[start:end], out)
            self._end(out)
            start = end
        self._add(chunk[start:], out)
        self._last = chunk[-1:] or self._last
        return out

    def close(self) -> list[bytes]:
        """The stream ended: the event in progress, counted (the SDK's parser may still end it)."""
        out: list[bytes] = []
        self._end(out)
        return out

    def _ends(self, chunk: bytes) -> list[int]:
        """Where the blank lines ending in ``chunk`` end: after their second line ending (a ``\\r`` last in the
        chunk may be followed by a ``\\n``, which then begins the next piece: one more empty line, no event)."""
        seconds = [found.start() + 1 for found in _PAIRS.finditer(chunk)]
        if self._last + chunk[:1] in _BLANK_LINES:
            seconds.insert(0, 0)
        return [at + 2 if chunk[at : at + 2] == b"\r\n" else at + 1 for at in seconds]

    def _add(self, piece: bytes, out: list[bytes]) -> None:
        if not piece:
            return
        self._rough += _rough(piece)
        self._size += len(piece)
        if self._held is None:
            out.append(piece)
        elif self._size <= self._hold:
            self._held.append(piece)
        else:  # too long to hold: passed on as it comes
            out += self._held
            out.append(piece)
            self._held = None

    def _end(self, out: list[bytes]) -> None:
        held, rough, size = self._held, self._rough, self._size
        self._held, self._size, self._rough = [], 0, 0
        if not size:
            return
        if 1 + rough > self._limit:
            values = 1 + rough
            if held is not None:
                lines = b"".join(held).replace(b"\r\n", b"\n").replace(b"\r", b"\n")
                values = count_values(b"\n".join(_DATA.findall(lines)), self._limit)
            if values > self._limit:
                raise EventRefused(too_many_values(self._server, self._limit))
        if held is None:
            self.owed += HANDED_ON_SECONDS + (1 + rough) * PARSE_SECONDS_PER_VALUE
            return
        event = b"".join(held)
        ones = _events_of_batch(event) or [event]
        if self._request is not None and len(ones) > 1 and (own := sum(map(self._own, ones))):
            # Two answers to it: the batch whole, which fails it saying so (`_as_asked`), as a JSON reply's does
            # (before: the SDK took the first); one: the others, not its answer, are not used.
            ones = [event] if own > 1 else [one for one in ones if self._own(one) or not _is_answer(one)]
        for one in ones:
            self._judge(one, _rough(one) if one is not event else rough, out)

    def _judge(self, event: bytes, rough: int, out: list[bytes]) -> None:
        """Pass ``event`` on, drop it or refuse it (an event of at most the limit of values, ``rough`` its ``,[{``)."""
        if self._request is not None and b"{" in event and not unaddressed(event):
            event = self._as_asked(event)
        if b"{" in event and unaddressed(event):
            if self._notifications is not None and not self._notifications.take(notification_cost(1 + rough)):
                return
        elif self._answers and _is_answer(event):  # a request's answer: not charged
            out.append(self._cut(event) if rough > MAX_ANSWER_ITEMS else event)
            return
        elif self._strays is not None and _is_answer(event):  # an answer where none belongs: a stray, unparsed
            if (reason := self._strays.stray()) is not None:
                self._strays.end(reason)
                raise EventRefused(reason)
            return
        if b"{" in event:
            self.owed += HANDED_ON_SECONDS + (1 + rough) * PARSE_SECONDS_PER_VALUE
        out.append(event)

    def _own(self, event: bytes) -> bool:
        """Whether ``event`` is the answer to the request ``_request`` (its id first: `_is_answer`)."""
        head = peek(data[1] or b"") if (data := _DATA.search(event, 0, _HEAD)) is not None else None
        return head is not None and head[0] == "response" and head[1] == coerce_request_id(self._request)

    def _as_asked(self, event: bytes) -> bytes:
        """An answer on the stream of the request ``_request`` as `tool_tree.http_errors.answering` gives a JSON
        reply on: the SDK gives any answer there the request's id, so the result of another request was taken as its
        answer, and its own of id ``7.0`` (the number 7) failed it as JSON that is not a JSON-RPC message."""
        lines = event.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        data = [found.group(1) or b"" for line in lines if (found := _DATA.fullmatch(line)) is not None]
        if (answer := answering([b"\n".join(data)], self._request)) is None:
            return event
        others = [line for line in lines if line and _DATA.fullmatch(line) is None]
        return b"\n".join([*others, b"data: " + answer]) + b"\n\n"

    def _cut(self, event: bytes) -> bytes:
        """``event``, an answer, with the items past what an answer keeps cut from its data (`_cut`), its other lines
        (its ``id``, for a resumption) as they were; else as it was."""
        lines = event.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        data = [found.group(1) or b"" for line in lines if (found := _DATA.fullmatch(line)) is not None]
        cut = _cut(b"\n".join(data), self._cuts)
        if cut is None:
            return event
        others = [line for line in lines if line and _DATA.fullmatch(line) is None]
        return b"\n".join([*others, b"data: " + cut]) + b"\n\n"


def _events_of_batch(event: bytes) -> list[bytes] | None:
    """An event whose data is a JSON-RPC batch (`_batch`) as one event for each of its messages, its other lines on
    each (its ``id``, for a resumption, on the last alone); None for any other event."""
    first = _DATA.search(event, 0, _HEAD)
    if first is None or _BATCH.match(first[1] or b"") is None:
        return None
    lines = event.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    data = [found[1] or b"" for line in lines if (found := _DATA.fullmatch(line)) is not None]
    batch = _batch(b"\n".join(data))
    if batch is None:
        return None
    others = [line for line in lines if line and _DATA.fullmatch(line) is None]
    unnumbered = [line for line in others if line != b"id" and not line.startswith(b"id:")]
    last = len(batch) - 1
    return [b"\n".join([*(others if i == last else unnumbered), b"data: " + m]) + b"\n\n" for i, m in enumerate(batch)]


def _is_answer(event: bytes) -> bool:
    """Whether an event's data opens with its id and a result or an error (`tool_tree.unparsed.peek`)."""
    head = peek(data[1] or b"") if (data := _DATA.search(event, 0, _HEAD)) is not None else None
    return head is not None and head[0] == "response"


class _CountedEvents(httpx2.AsyncByteStream):
    """An event stream passed on an event at a time, as `_Events` lets each through, its cost charged to
    ``budget`` (which may make it wait before it reads on)."""

    def __init__(self, stream: httpx2.AsyncByteStream, events: _Events, budget: ReaderBudget) -> None:
        self._stream, self._events, self._budget = stream, events, budget

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            started = time.thread_time()
            pieces = self._events.feed(chunk)
            spent, self._events.owed = time.thread_time() - started + self._events.owed, 0.0
            for piece in pieces:
                yield piece
            if wait := self._budget.charge(spent):
                await anyio.sleep(wait)
        for piece in self._events.close():
            yield piece

    async def aclose(self) -> None:
        await self._stream.aclose()


def bounding(
    limit: int,
    max_values: int = MAX_MESSAGE_VALUES,
    server: str | None = None,
    notifications: NotificationBudget | None = None,
    streams: GetStreams | None = None,
    strays: Outstanding | None = None,
) -> Callable[[httpx2.Response], Awaitable[None]]:
    """A response hook bounding each reply that is not an event stream to ``limit`` bytes, unpacked, and
    each message (a reply, an event) to ``max_values`` values, counted before the SDK parses it; with
    ``notifications``, the events of every stream that can only be notifications are charged to it. The stream of
    unasked messages (as ``streams`` tells it) has every event charged; its answers (none belongs on it) are dropped
    unparsed as stray answers of ``strays`` (`_Events`).

    A hook, not a transport: a client given a transport of its own no longer honours the proxy the
    environment names (``HTTPS_PROXY``), and the SDK's client does. It runs once the headers are in,
    before the body is read. ``server`` names the server in the errors of the value limit; every event stream
    of the client shares one `tool_tree.budget.ReaderBudget`.
    """
    budget = ReaderBudget(server)

    async def bound(response: httpx2.Response) -> None:
        events = response.headers.get("content-type", "").lower().startswith("text/event-stream")
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        stream: httpx2.AsyncByteStream
        problem = None
        if encoding in _INFLATED:
            # Unpacked here, a step at a time; httpx must not unpack it again.
            del response.headers["content-encoding"]
            # An event stream's events are bounded by the SDK (`max_sse_event_size`) once unpacked.
            stream = _Inflated(response.stream, encoding, None if events else limit)
        elif encoding not in ("", "identity"):
            problem = f"the server compressed its reply ({encoding}) though asked not to; it is not read"
            stream = _Bounded(response.stream, limit, problem)
        elif events:
            stream = response.stream  # the SDK bounds each event (`max_sse_event_size`)
        else:
            length = response.headers.get("content-length", "")
            if length.isascii() and length.isdigit() and int(length) > limit:  # not '²', which int() refuses
                problem = _too_large(limit)
            stream = _Bounded(response.stream, limit, problem)
        if problem is not None:
            response.stream = stream
        elif events:
            response.encoding = "utf-8"  # the bytes counted are the text parsed, whatever charset it names
            unasked = streams is not None and streams.unasked()
            asked = posted_id(response.request) if not unasked and response.request.method == "POST" else None
            cutter = _Events(
                max_values, limit, server, notifications, not unasked, strays if unasked else None, strays, asked
            )
            response.stream = _CountedEvents(stream, cutter, budget)
        else:
            response.stream = _Counted(stream, max_values, server, strays)

    return bound


CONNECT_SHARE = 0.5
"""The share of a server's ``timeout`` (at most the SDK's 30 s) one connection may take to connect, and again to agree
on TLS: a port that takes the connection and never answers the TLS handshake fails saying so before the server's
start-up times out (`tool_tree.unreachable`; before: at that timeout, with a warning that the server had left
``server/discover`` unanswered)."""


def timeouts(server_timeout: float | None = None) -> httpx2.Timeout:
    """The SDK's timeouts of a request; with a server's ``timeout``, a connection's within `CONNECT_SHARE` of it."""
    connect = (
        MCP_DEFAULT_TIMEOUT if server_timeout is None else min(MCP_DEFAULT_TIMEOUT, server_timeout * CONNECT_SHARE)
    )
    return httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT, connect=connect)


def http_client(
    headers: Mapping[str, str] | None = None,
    *,
    limit: int = MAX_MESSAGE_BYTES,
    max_values: int = MAX_MESSAGE_VALUES,
    name: str | None = None,
    notifications: NotificationBudget | None = None,
    outstanding: Outstanding | None = None,
) -> KeepingClient:
    """An HTTP client for server ``name``: the SDK's timeouts, the configured ``headers``, replies bounded and
    charged (`bounding`, to ``notifications`` too), its GETs paced and its stream of unasked messages kept
    (`tool_tree.get_streams.KeepingClient`, a `tool_tree.http_errors.ReachingClient`). ``outstanding`` is the
    connection's ledger of answers (its own without one): answers on the stream of unasked messages are charged to
    its allowance of stray answers, and once it ends (`tool_tree.ledgers.Outstanding.end`) no GET is sent."""
    streams = GetStreams(name)
    outstanding = outstanding if outstanding is not None else Outstanding(name)
    outstanding.on_end(streams.close)
    bound = bounding(limit, max_values, name, notifications, streams, outstanding)
    return KeepingClient(
        streams,
        headers=httpx2.Headers(dict(headers or {})) | {"accept-encoding": "identity"},
        timeout=timeouts(),
        event_hooks={"request": [streams.request_hook], "response": [bound]},
    )
