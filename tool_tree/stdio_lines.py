"""A stdio server's stdout, a line at a time: cut into lines in linear time, and each judged (`Lines`) on its
bytes where they tell (`tool_tree.unparsed`), else once parsed, against the budgets of `tool_tree.budget`.

`tool_tree.stdio` reads the pipe and acts on each verdict: hands the item to the session, drops the line,
ends the server (`End`: one over a limit, one that writes a message across several lines,
`tool_tree.stdio_framing`, `MAX_NOISE_FIRST` lines that are not JSON-RPC before any message, or a first message that
is tooltree's own initialize request echoed back) or answers a request
unread (`Refuse`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import NamedTuple

import mcp_types as types
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import SessionMessage
from mcp_types import RequestId
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError, from_json, to_json

from tool_tree.answer_items import trim
from tool_tree.budget import (
    MAX_REQUEST_VALUES,
    NotificationBudget,
    notification_cost,
    request_too_deep,
    too_deep,
    too_many_values,
)
from tool_tree.ledgers import Answer, Outstanding, ServerRequests
from tool_tree.stdio_framing import across_lines, in_utf16
from tool_tree.unparsed import count_values, peek, tail_id, unaddressed

logger = logging.getLogger(__name__)

_BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte order mark a server may write before its first message (a .NET server whose output encoding is
UTF-8 with its preamble) or before each: JSON allows a parser to ignore it (RFC 8259, 8.1), so it is dropped."""
_NOISE_KEPT = 1000
"""Characters kept of a stdout line that is not JSON-RPC, for the server's `tool_tree.stderr_log.StderrLog`."""
_ARRAY = re.compile(rb"\s*\[")
"""How a JSON-RPC batch (an array of messages) opens."""
MAX_NOISE_FIRST = 1000
"""Lines that are not JSON-RPC a stdio server may write before its first JSON-RPC message: a server that prints a
banner, or logs its start to stdout (a Spring Boot server's console logging: tens of lines), then speaks JSON-RPC, is
read as it was; a program that writes this many lines and no message (``yes``, a log it streams) is no MCP server over
stdio, and is ended (`End`) rather than its start waiting out its whole timeout."""


class NotJSONRPC(ValueError):
    """A stdout line that is not a JSON-RPC message; ``line`` is its start, as the server wrote it; ``too_deep``:
    the parser refused it for its nesting (JSON-RPC or not); ``why``: what was wrong, in a few words; ``answered``:
    the id of the JSON object it is, when it has one (an answer that is not a valid one may still name its request)."""

    def __init__(
        self, line: str, *, deep: bool = False, why: str = "not a JSON-RPC message", answered: RequestId | None = None
    ) -> None:
        super().__init__("a stdout line is not a JSON-RPC message")
        self.line = line[:_NOISE_KEPT]
        self.too_deep = deep
        self.why = why
        self.answered = answered


_WHY_CHARS = 200
"""The most characters of the parser's reason an answer that could not be read quotes."""


def _parse(line: str) -> SessionMessage | NotJSONRPC:
    """One stdout line as a message, or what to report of it (not the parser's error: it holds what was parsed).

    Parsed first (`pydantic_core.from_json`: the parser, limits and errors of ``validate_json``), then validated as a
    message. Validating the text whole (``validate_json``) parses it again for each kind of message it tries: a
    message of a million values cost 325 MiB and 0.34 s of CPU that way, 75 MiB and 0.08 s this way (the validated
    message holds the parsed values, not copies; ``bench/stdio_parse.py``)."""
    try:
        data = from_json(line)
    except ValueError as e:
        deep = "recursion limit exceeded" in str(e)
        return NotJSONRPC(line, deep=deep, why=f"Invalid JSON: {e}"[:_WHY_CHARS])
    if isinstance(data, dict) and isinstance(data.get("id"), float) and data["id"].is_integer():
        # ``1.0`` is the number 1 in JSON (as a server whose numbers are doubles writes it)
        data["id"] = int(data["id"])
    answered = _id_of(data)
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(data, by_name=False))
    except ValidationError:
        return NotJSONRPC(line, why="valid JSON, not a JSON-RPC message", answered=answered)
    except ValueError:
        return NotJSONRPC(line, answered=answered)


def _id_of(data: object) -> RequestId | None:
    """The id of a JSON object with one that is no request (``"7"`` and ``7`` one id, as the SDK correlates them), else
    None."""
    if not isinstance(data, dict) or "method" in data:
        return None
    if isinstance(found := data.get("id"), bool) or not isinstance(found, int | str):
        return None
    return coerce_request_id(found)


def unreadable_answer(server: str, why: str) -> str:
    """Why an answer that could not be parsed fails its request at once (rather than at its timeout)."""
    return f"server {server!r} sent an answer that could not be read ({why}); it was not used"


def no_json_rpc(server: str, lines: int) -> str:
    """Why a server that wrote ``lines`` lines to stdout that are not JSON-RPC, and no JSON-RPC message, is ended."""
    return (
        f"server {server!r} wrote {lines:,} lines to stdout that are not JSON-RPC and not one JSON-RPC message: an MCP "
        "server over stdio writes only JSON-RPC messages there, one a line (logs belong on stderr); is the command an "
        "MCP server?"
    )


_OPENINGS = frozenset({"server/discover", "initialize"})
"""The requests a client opens a session with (the 2026-07-28 protocol's, then the 2025-11-25 one's): a server never
sends one."""


def echoes_input(server: str, method: str) -> str:
    """Why a server whose first JSON-RPC message is a request of `_OPENINGS` is ended: it is tooltree's own coming back
    (``cat``, ``tee``); before, the MCP SDK answered it "Method not found", which came back too and failed the start as
    that."""
    return (
        f"server {server!r} sent back tooltree's own {method} request: the command echoes its input (as `cat` does) "
        "and is no MCP server; is the command an MCP server?"
    )


class End(NamedTuple):
    """The server broke a limit: end it, failing the requests in flight with ``reason``."""

    reason: str


class Refuse(NamedTuple):
    """A request of the server's (counted as received) to answer with `tool_tree.budget.refusal`, unread."""

    request_id: types.RequestId
    why: str | None = None


class Lines:
    """What to do with each line a server wrote, decided on its bytes where they tell, else once parsed.

    `judge` returns the item to hand to the session, None to drop the line, `End` or `Refuse`; ``asked`` says
    whether the line was the answer to a request in flight (the one thing the reader does not charge).
    """

    def __init__(
        self, server: str, max_values: int, errors: str, outstanding: Outstanding,
        unaddressed: Callable[[types.ErrorData], None] | None = None,
    ) -> None:  # fmt: skip
        self.server, self.max_values, self.errors = server, max_values, errors
        self.unaddressed = unaddressed  # told each error of id null, for the timeout of the call it may be about
        self.outstanding = outstanding
        self.notifications = NotificationBudget(server)
        self.requests = ServerRequests(server)  # from the server, their answers not written yet
        self.asked = False
        self._unread_said = False  # an error of id null was logged
        self._spoke = False  # a line was a JSON-RPC message
        self._noise_first = 0  # lines that are not JSON-RPC before it

    def messages(self, line: bytes) -> list[bytes]:
        """The messages of a line: itself, or each item of a JSON-RPC batch (an array holding a message, an object
        with its ``jsonrpc`` member), written again one by one to be judged as lines of their own (an item that is no
        message as a line that is not JSON-RPC).

        JSON-RPC 2.0 lets a server answer with a batch (and MCP's 2025-03-26 protocol); before, a batch was dropped
        as a line that is not JSON-RPC, the answers in it waiting out their call's timeout, as they did in one with an
        item that is no message beside them (``[answer, 1]``: a JSON reply's is read over HTTP). A line over the limit
        of values, one of notifications alone past their budget, or any other array (``[{}]``, ``[]``), is judged
        whole, as it was (refused, dropped unread)."""
        if (
            not _ARRAY.match(line.removeprefix(_BOM))
            or b'"jsonrpc"' not in line
            or (values := count_values(line, self.max_values)) > self.max_values
        ):
            return [line]
        if unaddressed(line) and not self.notifications.could(notification_cost(values)):
            return [line]  # notifications alone, past the budget: dropped unread, as one line
        try:
            batch = from_json(line.removeprefix(_BOM).decode("utf-8", self.errors))
        except ValueError:
            return [line]
        if not isinstance(batch, list) or not any(isinstance(item, dict) and "jsonrpc" in item for item in batch):
            return [line]
        try:
            return [to_json(message) for message in batch]
        except PydanticSerializationError:
            return [line]

    def judge(self, line: bytes) -> SessionMessage | NotJSONRPC | End | Refuse | None:
        item = self._judged(line)
        if isinstance(item, SessionMessage):
            self._spoke = True
        elif isinstance(item, NotJSONRPC) and not self._spoke:
            self._noise_first += 1
            if self._noise_first >= MAX_NOISE_FIRST:
                return End(no_json_rpc(self.server, self._noise_first))
        return item

    def _judged(self, line: bytes) -> SessionMessage | NotJSONRPC | End | Refuse | None:
        self.asked = False
        line = line.removeprefix(_BOM)  # before: the message was dropped as noise, its request waiting its timeout
        if (split := across_lines(self.server, line) or in_utf16(self.server, line)) is not None:
            return End(split)  # before: each of its lines was dropped as noise, the start or call waiting its timeout
        values = count_values(line, self.max_values)
        if values > self.max_values:
            return End(too_many_values(self.server, self.max_values))
        if unaddressed(line):  # a notification or noise
            return self._parse(line) if self.notifications.take(notification_cost(values)) else None
        head = peek(line)
        if head is not None:
            kind, request_id = head
            if kind == "response" and not self.outstanding.awaits(request_id):
                return self._stray(self.outstanding.answer(request_id))
            if kind == "request" and self._large(line, values):
                return self._refuse(request_id)
        item = self._parse(line)
        if isinstance(item, NotJSONRPC):
            if head is not None and head[0] == "request" and item.too_deep:
                # A request nested deeper than the parser takes (a question's form): answered at once, unread,
                # rather than dropped, its server waiting (and its call with it) until the call's timeout.
                return self._refuse(head[1], request_too_deep(self.server))
            answered = head[1] if head is not None else tail_id(line)
            answered = item.answered if answered is None else answered
            if answered is not None and self.outstanding.awaits(answered):
                # The answer to a request in flight that cannot be read (nested too deep, a lone surrogate, not
                # JSON-RPC): its request fails at once, saying why, rather than waiting out its timeout.
                self.outstanding.answer(answered)
                self.asked = True
                why = too_deep(self.server) if item.too_deep else unreadable_answer(self.server, item.why)
                error = types.ErrorData(code=types.PARSE_ERROR, message=why)
                return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=answered, error=error))
            return item if self.notifications.take(notification_cost(values)) else None
        message = item.message
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            answer = self.outstanding.answer(message.id)
            self.asked = answer == "awaited"
            if self.asked and isinstance(message, types.JSONRPCResponse):
                trim(message.result)  # before the SDK validates it (`tool_tree.answer_items`)
            if message.id is None and isinstance(message, types.JSONRPCError) and self.unaddressed is not None:
                self.unaddressed(message.error)  # quoted, redacted, by the timeout of a call in flight
            if message.id is None and not self._unread_said:
                # JSON-RPC's answer to a request whose id the server could not read: which one is not told, so its
                # call waits for its timeout (the error may answer a notification or an answer tooltree wrote, so it
                # fails no call); logged once, its code alone (the server's words may hold a secret).
                self._unread_said = True
                logger.warning(
                    "server %r answered a message it could not read with an error of id null (code %s): which request "
                    "it was is not said, and that call waits for its timeout", self.server, message.error.code,
                )  # fmt: skip
            return item if self.asked else self._stray(answer)
        if isinstance(message, types.JSONRPCRequest):
            if message.method in _OPENINGS and not self._spoke:
                return End(echoes_input(self.server, message.method))
            if self._large(line, values):
                return self._refuse(message.id)
            if (reason := self.requests.received(message.id)) is not None:
                return End(reason)
            return SessionMessage(message, metadata=self.requests.metadata(message.id))
        return item if self.notifications.take(notification_cost(values)) else None

    def _parse(self, line: bytes) -> SessionMessage | NotJSONRPC:
        return _parse(line.decode("utf-8", self.errors))

    @staticmethod
    def _large(line: bytes, values: int) -> bool:
        return values > MAX_REQUEST_VALUES and count_values(line, MAX_REQUEST_VALUES) > MAX_REQUEST_VALUES

    def _refuse(self, request_id: types.RequestId, why: str | None = None) -> Refuse | End:
        reason = self.requests.received(request_id)
        return Refuse(request_id, why) if reason is None else End(reason)

    def _stray(self, answer: Answer) -> End | None:
        reason = self.outstanding.stray() if answer == "stray" else None
        return None if reason is None else End(reason)


class LineSplitter:
    """Cuts a byte stream into lines in time linear in its length; a line over ``limit`` bytes raises.

    Only the new chunk is scanned for a newline; the partial line waits in a bytearray that never
    grows past ``limit``, and a line is copied out once, when complete, for the reader to check and
    decode. A newline byte is always a newline in UTF-8 (no multi-byte sequence contains 0x0A), so
    cutting before decoding is exact.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._partial = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes, without their newline.

        Raises:
            OverflowError: a line is longer than the limit (no more may be fed).
        """
        view = memoryview(chunk)
        lines: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            self._add(view[start:end])
            lines.append(bytes(self._partial))
            self._partial.clear()
            start = end + 1
        self._add(view[start:])
        return lines

    def _add(self, piece: memoryview) -> None:
        if len(self._partial) + len(piece) > self._limit:
            raise OverflowError(f"a message is longer than {self._limit:,} bytes")
        self._partial += piece
