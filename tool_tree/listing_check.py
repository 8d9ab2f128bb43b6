"""What a session's requests got: tools of a ``tools/list`` answer that the protocol's schema refuses, left out one
by one; and whether the server answered the protocol probe.

The SDK validates a ``tools/list`` result whole, so one tool with ``annotations.readOnlyHint: "maybe"``, or
without an ``inputSchema``, failed the listing of every tool of its server. `ListingCheck` sits on a
connection's streams (`tool_tree.connect`): it notes the ids of the client's ``tools/list`` requests, and in the
answer to one whose result the session's protocol version refuses, it validates each tool alone (with the
result's other fields) and leaves out those refused, recording each in `ListingCheck.left_out` for the caller to
report. A result refused for something other than its tools (a cursor that is not a string, no ``tools`` list)
is handed on as it is: the SDK's error says what is wrong.

The SDK checks each result it reads against the protocol's schema again (and dumps a copy of it to do so): for a listing
`ListingCheck` has just checked, the same work a second time, about half of the first call's host CPU for a server of
20,000 tools. A listing asked for inside `taking_tools` (`tool_tree.connect.list_tools_raw`) therefore has its checked
tools handed to the asker directly, and the SDK reads the answer without them (``"tools": []``, the rest as sent).

The SDK opens a session (``servers.NAME.protocol: auto``) by asking ``server/discover``; a server that leaves
requests it does not know unanswered costs the SDK's wait for that answer (10 s) at every start. `ListingCheck`
notes whether the probe went unanswered (`ListingCheck.probe_unanswered`), so `tool_tree.connect` can say so and
name the setting that skips it (``protocol: legacy``).

A ``notifications/progress`` whose ``progress`` or ``total`` is a whole number no float holds (400 digits) is
dropped (`unreadable_progress`): for a call given a progress listener (`tool_tree.pool.ServerPool.call`), the SDK
converts them to floats as it reads them, and the error ended the connection, failing the call.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple

import mcp_types as types
from mcp.client._transport import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from mcp_types import methods
from mcp_types.version import KNOWN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError

from tool_tree.config import PROBE_SECONDS, ServerConfig, setting_named
from tool_tree.guard import ReadWrapper, WriteWrapper
from tool_tree.text import one_line, quoted_name

logger = logging.getLogger(__name__)

PROBE = "server/discover"
"""The request the SDK opens a session with (``mode="auto"``), answered by servers of the 2026 protocol."""

FALLBACK_VERSION = "2025-11-25"
"""The protocol version a result is validated against before the session knows its own (as the SDK does)."""

MAX_LEFT_OUT = 1_000
"""Tools left out of one listing that are recorded one by one; the others are counted (`ListingCheck.more_left_out`)."""
MAX_REASON_CHARS = 200
"""Characters of the reason recorded for one tool left out (the schema's first complaint, without the value)."""


_TAKER: ContextVar[list[list[Any]] | None] = ContextVar("tooltree_listing_taker", default=None)
"""Where the tools of a ``tools/list`` answer the current task asks for go (`taking_tools`)."""


@contextmanager
def taking_tools(taken: list[list[Any]]) -> Iterator[None]:
    """Have the answer to a ``tools/list`` request sent by this task meanwhile hand its tools, once checked, to
    ``taken`` (appended: one list of tools), and the SDK read it without them. A session without a `ListingCheck`
    appends nothing: the SDK's result then holds them."""
    token = _TAKER.set(taken)
    try:
        yield
    finally:
        _TAKER.reset(token)


class LeftOut(NamedTuple):
    """A tool left out of a listing: its name (None: it has none that is a string), its place in the answer
    (from 1), and the schema's first complaint about it."""

    name: str | None
    number: int
    reason: str

    def __str__(self) -> str:
        what = f"tool {quoted_name(self.name)}" if self.name else f"tool #{self.number} (no name)"
        return f"{what}, malformed: {self.reason}"


class ListingCheck:
    """The ``tools/list`` requests of one session in flight, and the tools left out of their answers."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.version: Callable[[], str | None] = lambda: None
        """The session's negotiated protocol version (set by `tool_tree.connect` once the session exists)."""
        self.left_out: list[LeftOut] = []
        """The tools left out of the latest listing (from its first page, a request without a cursor), in the order
        read, at most `MAX_LEFT_OUT`; the callers report them (``str()``: ``"tool 'x', malformed: …"``)."""
        self.more_left_out = 0
        """How many more the latest listing left out, past `MAX_LEFT_OUT`."""
        self._listing: set[types.RequestId] = set()
        self._takers: dict[types.RequestId, list[list[Any]]] = {}
        self._probes: set[types.RequestId] = set()

    @property
    def probe_unanswered(self) -> bool:
        """Whether a ``server/discover`` request of the client's has had no answer (yet)."""
        return bool(self._probes)

    def sent(self, message: object) -> None:
        if isinstance(message, types.JSONRPCRequest):
            if message.method == "tools/list":
                self._listing.add(message.id)
                if (taker := _TAKER.get()) is not None:
                    self._takers[message.id] = taker
                if not (message.params or {}).get("cursor"):  # a new listing: its first page
                    self.left_out, self.more_left_out = [], 0
            elif message.method == PROBE:
                self._probes.add(message.id)

    def received(self, item: SessionMessage | Exception) -> SessionMessage | Exception:
        """``item``, or, for an answer to ``tools/list`` with malformed tools, the answer without them."""
        if not isinstance(item, SessionMessage) or not (self._listing or self._probes):
            return item
        message = item.message
        if not isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            return item
        self._probes.discard(message.id)
        if message.id not in self._listing:
            return item
        self._listing.discard(message.id)
        taker = self._takers.pop(message.id, None)
        if isinstance(message, types.JSONRPCError):
            return item
        result = message.result
        tools = result.get("tools") if isinstance(result, dict) else None
        if not isinstance(tools, list):
            return item
        version = self.version() or FALLBACK_VERSION
        try:
            _surface(version).validate_python(result, by_name=False)
            return _handed(item, message, tools, taker)
        except ValidationError as e:  # its errors name each tool refused: one validation, whatever their count
            refused = _refused_tools(e)
        except (KeyError, ValueError):  # a version the SDK does not know: nothing to tell
            return item
        if refused is None or not refused:  # refused for more than its tools: the SDK says what
            return item
        kept: list[Any] = []
        for number, tool in enumerate(tools, 1):
            reason = refused.get(number - 1)
            if reason is None:
                kept.append(tool)
                continue
            name = tool.get("name") if isinstance(tool, dict) else None
            if len(self.left_out) >= MAX_LEFT_OUT:
                self.more_left_out += 1
                continue
            left = LeftOut(name if isinstance(name, str) and name else None, number, reason)
            self.left_out.append(left)
            logger.debug("%s: left out %s", self.server, left)
        if taker is not None:
            return _handed(item, message, kept, taker)
        answer = types.JSONRPCResponse(jsonrpc="2.0", id=message.id, result={**result, "tools": kept})
        return SessionMessage(answer, metadata=item.metadata)


def _handed(
    item: SessionMessage, message: types.JSONRPCResponse, tools: list[Any], taker: list[list[Any]] | None
) -> SessionMessage:
    """``item``, or, with a ``taker`` (`taking_tools`), ``message`` without its ``tools``, which go to ``taker``: the
    SDK's check of the answer then has none to check again."""
    if taker is None:
        return item
    taker.append(tools)
    answer = types.JSONRPCResponse(jsonrpc="2.0", id=message.id, result={**message.result, "tools": []})
    return SessionMessage(answer, metadata=item.metadata)


@functools.cache
def _surface(version: str) -> TypeAdapter[Any]:
    """The protocol's check of a ``tools/list`` result at ``version``: `mcp_types.methods.validate_server_result`'s,
    without the copy of the whole result that function dumps and drops (for 20,000 tools, as long as the check).

    Raises:
        ValueError: a version the SDK does not know.
        KeyError: ``tools/list`` is not a method of ``version``.
    """
    if version not in KNOWN_PROTOCOL_VERSIONS:
        raise ValueError(f"unknown protocol version {version!r}")
    surface: Any = methods.SERVER_RESULTS[("tools/list", version)]  # a model, or a union of models
    return TypeAdapter(surface)


def unreadable_progress(item: SessionMessage | Exception) -> bool:
    """Whether ``item`` is a progress notification whose ``progress`` or ``total`` no float holds."""
    message = item.message if isinstance(item, SessionMessage) else None
    if not isinstance(message, types.JSONRPCNotification) or message.method != "notifications/progress":
        return False
    params = message.params if isinstance(message.params, dict) else {}
    for value in (params.get("progress"), params.get("total")):
        if isinstance(value, int):
            try:
                float(value)
            except OverflowError:
                return True
    return False


def _refused_tools(error: ValidationError) -> dict[int, str] | None:
    """The index of each tool a listing's validation refused, with its first complaint in one line; None when it
    refused something besides its tools (a cursor, a field of the result), which leaving tools out cannot mend."""
    refused: dict[int, str] = {}
    for detail in error.errors(include_url=False, include_input=False):
        loc = detail["loc"]
        if len(loc) < 2 or loc[0] != "tools" or not isinstance(loc[1], int):
            return None
        if loc[1] in refused:
            continue
        if len(refused) >= MAX_LEFT_OUT:  # counted, not recorded: no reason needed
            refused[loc[1]] = ""
            continue
        where, text = ".".join(str(part) for part in loc[2:]), str(detail["msg"])
        refused[loc[1]] = one_line(f"{where}: {text}" if where else text, MAX_REASON_CHARS)  # keys: the server's
    return refused


class _CheckedRead(ReadWrapper):
    def __init__(self, inner: ReadStream[SessionMessage | Exception], check: ListingCheck) -> None:
        super().__init__(inner)
        self._check = check

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            if not unreadable_progress(item):
                return self._check.received(item)
            logger.debug("%s: dropped a progress notification whose numbers no float holds", self._check.server)


class _CheckedWrite(WriteWrapper):
    def __init__(self, inner: WriteStream[SessionMessage], check: ListingCheck) -> None:
        super().__init__(inner)
        self._check = check

    async def send(self, item: SessionMessage, /) -> None:
        self._check.sent(item.message)  # before sending: the answer may come at once
        await self._inner.send(item)


def checked(
    read: ReadStream[SessionMessage | Exception], write: WriteStream[SessionMessage], check: ListingCheck
) -> tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]:
    """A transport's streams with ``check`` applied to its ``tools/list`` requests and their answers."""
    return _CheckedRead(read, check), _CheckedWrite(write, check)


def probe_unanswered(server: ServerConfig, *, waited: bool, noise: bool = False) -> str:
    """What to say of a server that left the protocol probe unanswered (`PROBE`): ``waited``
    out (the session then opened the older way: it answers what it knows, not this), or not (its start was stopped
    meanwhile: an older server, or one slow to start, which only a longer ``timeout`` helps). ``noise``: it wrote to
    stdout lines that are not JSON-RPC (a program that is no MCP server, or one logging there), said first (before:
    the advice pointed at its timeout and `protocol: legacy` alone, of a command that printed a banner and waited)."""
    name, entry, timeout = quoted_name(server.name), setting_named(server, ""), setting_named(server, "timeout")
    if noise and not waited:
        return (
            f"server {name} had not answered `{PROBE}` (the protocol's first question) when its start was stopped, "
            "and wrote to stdout lines that are not JSON-RPC: check that the command starts an MCP server over stdio "
            f"that logs to stderr; if it does, raise its timeout ({timeout}) or try `protocol: legacy` ({entry})"
        )
    if waited:
        return (
            f"server {name} did not answer `{PROBE}` (the protocol's first question) and was asked the older way "
            f"after {PROBE_SECONDS:g} s; `protocol: legacy` in its entry ({entry}) skips that question"
        )
    return (
        f"server {name} had not answered `{PROBE}` (the protocol's first question) when its start was stopped: "
        f"if it is slow to start, raise its timeout ({timeout}); if it is an older server that never "
        f"answers a request it does not know, `protocol: legacy` skips that question (tooltree waits up to "
        f"{PROBE_SECONDS:g} s for the answer)"
    )
