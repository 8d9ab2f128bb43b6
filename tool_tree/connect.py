"""Opening an MCP client session to one configured server, stdio or Streamable HTTP.

The official SDK owns the protocol; this module maps a `ServerConfig` onto it and adds what a long-running host needs
around it: the end of the server's stderr kept (so a failure can show its last lines), a raw ``tools/list`` that keeps
every field the server sent, and, for stdio, our own transport (`tool_tree.stdio`: the SDK's, but linear in what it
reads and with caps on one message); for HTTP, a client that holds one message to the same caps
(`tool_tree.http_client`) and the session to the same budgets of requests from the server and notifications
(`tool_tree.guard.guard`). What the server says changed is counted and told (`tool_tree.changes.Changes`: over HTTP,
also its stream of unasked messages opened again after it was lost, or answered 404).

What goes wrong while a session opens is said in words a user can act on: a stdio server's stdout
lines that are not JSON-RPC (a start-up banner, a stray ``print``) are kept with its stderr instead of
being logged as a traceback (a thousand and no JSON-RPC message fail its start at once: `tool_tree.stdio_lines`); a
stdio server writing its JSON across several lines fails at its first message (`tool_tree.stdio_framing`); an HTTP
server's refusal keeps its status (``HTTP 401 Unauthorized``, with what to set), a web page answering instead of MCP is
named, and a connection that fails says why.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import mcp
import mcp.types as mt
from mcp.client._transport import TransportStreams
from pydantic import BaseModel, ConfigDict, ValidationError

from tool_tree.budget import NotificationBudget
from tool_tree.changes import Changes, Watching
from tool_tree.config import ServerConfig, setting_named
from tool_tree.guard import guarded
from tool_tree.held_values import Share
from tool_tree.http_client import http_client, timeouts
from tool_tree.http_errors import Answers, marked, not_mcp, redirected, status_problem
from tool_tree.in_flight import InFlight
from tool_tree.ledgers import Outstanding, closed_before, closed_here
from tool_tree.listing_check import LeftOut, ListingCheck, checked, probe_unanswered, taking_tools
from tool_tree.server_asks import answering, capabilities_of
from tool_tree.snapshot_lists import declared_subscribe
from tool_tree.start_errors import not_started
from tool_tree.stderr_log import NOISE_CHARS, StderrLog
from tool_tree.stdio import LINEAR, MAX_MESSAGE_BYTES, NotJSONRPC, stdio_client
from tool_tree.text import shown
from tool_tree.unparsed import count_values
from tool_tree.unreachable import Unreachable

MAX_LIST_PAGES = 1000
MAX_LIST_TOOLS = 100_000
"""Tools one server may list, over all pages: five times what the generator renders for one server, so a
big server narrowed by ``include`` still lists (`MAX_LIST_BYTES` bounds the memory either way)."""
MAX_LIST_BYTES = 64 * 1024 * 1024
"""Bytes of tool definitions (as UTF-8 JSON) one server may list, over all pages: the stdio cap on one
message bounds a page, this the whole list (a server can page its way past the memory of the host)."""
MAX_LIST_VALUES = 2_500_000
"""JSON values of tool definitions one server may list, over all pages. Parsed, a value costs the host 70–150
bytes, so `MAX_LIST_BYTES` alone let 64 MiB of ``[{},{},…]`` hold it at 2.3 GB a server (every server of a run is
held until all are listed). This is about what `MAX_LIST_BYTES` holds at the density of real servers' listings
(chosen on the 527 tools of 70 servers: 30 bytes a value, 28 values a tool; the six third-party servers of the tests,
not looked at then: 25 bytes a value, git's 22), so an honest listing meets it at 52–64 MiB if ever (the largest
real one is 42 KB)."""
UPSTREAM_ENV = "TOOLTREE_UPSTREAM"
"""Set in the environment of every stdio server tooltree starts: a ``tooltree serve`` that finds it was started as
a server of a tooltree (a config listing tooltree itself through a wrapper such as ``sh -c`` or ``uv run``) refuses
to run, instead of starting another copy of itself for each level, without end."""
MAX_CURSOR_CHARS = 64 * 1024
"""Characters of one ``nextCursor``: an opaque token, each sent back once (a 30 MB cursor per page grew the host
by that much a page, uncounted)."""


_REPORTED = (
    "Failed to parse JSONRPC message",
    "Unexpected content type",
    "Error parsing JSON response",
    "Session termination failed: 404",  # closing a session the server ended already (`tool_tree.http_errors`)
    "Redirect to ",  # a redirect off the URL: its request fails saying so (at the start, naming the setting)
)


class _Reported(logging.Filter):
    """Drops the SDK's log records of what `connect` reports itself (with the server's name, in its error or
    with its stderr): a stdout line that is not JSON-RPC (logged with a traceback) and an HTTP reply that is
    not MCP, or not JSON (logged with a traceback; its request fails saying why)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        return not message.startswith(_REPORTED)


logging.getLogger("mcp.client.stdio").addFilter(_Reported())
logging.getLogger("mcp.client.streamable_http").addFilter(_Reported())
logger = logging.getLogger(__name__)


class _RawResult(BaseModel):
    """A result model that keeps every field the server sent (the SDK's typed models drop unknown ones)."""

    model_config = ConfigDict(extra="allow")


@dataclass
class Connection:
    """A live client session and what we learned while opening it."""

    client: mcp.Client
    server: ServerConfig
    stderr: StderrLog | None
    changes: Changes = field(default_factory=Changes)
    listing: ListingCheck | None = None
    """The tools left out of this session's listings as malformed (`tool_tree.listing_check`)."""

    @property
    def left_out(self) -> list[LeftOut]:
        """The tools left out of this session's latest listing, as malformed (`ListingCheck.left_out`)."""
        return [] if self.listing is None else self.listing.left_out

    @property
    def more_left_out(self) -> int:
        """How many more tools than `left_out` holds the latest listing left out."""
        return 0 if self.listing is None else self.listing.more_left_out


Hurry = Callable[[], bool] | None  # true at the close: a stdio server still at a call gets SIGTERM at once


@asynccontextmanager
async def connect(
    server: ServerConfig, *, stderr: StderrLog | None = None, asks: InFlight | None = None, hurry: Hurry = None,
    source: str | None = None,
) -> AsyncIterator[Connection]:  # fmt: skip
    """Open a session to ``server``; the process (stdio) is stopped and reaped on exit.

    It declares the server's ``client_capabilities``; a question of one goes to the asker ``asks`` gives, others are
    refused (`tool_tree.server_asks.answering`); ``asks`` is told when a URL elicitation was completed.

    The caller bounds the time (``anyio.fail_after(server.timeout)``). For stdio servers the
    process runs in its own process group and the whole group is killed on exit; a message longer
    than `tool_tree.stdio.MAX_MESSAGE_BYTES` or of more than `tool_tree.budget.MAX_MESSAGE_VALUES`
    values, or more than `tool_tree.budget.MAX_SERVER_REQUESTS` requests from the server not answered
    yet, end the server and fail the requests in flight. Over HTTP, a reply (or one event) past the same
    caps fails the request it answers, and too many requests from the server close the session.
    Notifications past the server's budget are dropped unread (`tool_tree.budget.NotificationBudget`).

    Raises:
        OSError: the command cannot be started (``str()`` says why in the terms of ``source``, the config file), or the
            HTTP server cannot be reached (``ConnectionError``: "cannot connect to host:port: why").
        mcp.MCPError: the server refused the session (over HTTP, with the status it answered).
    """
    if stderr is not None and stderr.server is None:
        stderr.server = server  # its tail is redacted with this server's secrets
    async with AsyncExitStack() as stack:
        target: Any
        replies: _Replies | None = None
        answers: Answers | None = None
        changes = Changes()
        if server.command is not None:
            params = mcp.StdioServerParameters(
                command=server.command,
                args=list(server.args),
                env={**server.env, UPSTREAM_ENV: "1"},  # on top of the SDK's default environment
                cwd=server.cwd,
                encoding_error_handler="replace",
            )
            if stderr is None:
                target = stdio_client(params, errlog=sys.stderr, name=server.name, hurry=hurry)
            elif LINEAR:
                target = stdio_client(
                    params, name=server.name, stderr_sink=stderr.feed, on_exit=stderr.exited,
                    on_unaddressed=stderr.unaddressed, hurry=hurry,
                )  # fmt: skip
            else:  # the SDK's transport writes stderr to a file
                target = stdio_client(params, errlog=stderr.file, name=server.name)
        else:
            assert server.url is not None
            from mcp.client.streamable_http import streamable_http_client

            notifications = NotificationBudget(server.name)  # charged unparsed, then (a twin) parsed
            # One allowance of stray answers, those parsed (the guard) and those dropped unparsed (the stream of
            # unasked messages); its end (a limit broken, or the session closed) stops the client's GETs.
            outstanding = Outstanding(server.name)
            http = await stack.enter_async_context(
                http_client(server.headers, name=server.name, notifications=notifications, outstanding=outstanding)
            )
            http.url, http.timeout = server.url, timeouts(server.timeout)
            http.streams.reopened, http.streams.forgotten = changes.reopened, changes.not_found
            http.streams.setting = functools.partial(setting_named, server)
            replies, answers = _Replies(), Answers(http.ended)
            http.event_hooks["response"] += [replies.hook, answers.hook]
            transport = streamable_http_client(server.url, http_client=http, max_sse_event_size=MAX_MESSAGE_BYTES)
            target = guarded(transport, server.name, notifications.twin(), outstanding)
        listing = ListingCheck(server.name)
        target = _watched(target, changes, listing)

        opened: list[mcp.Client] = []

        async def on_message(message: object) -> None:
            if stderr is not None and isinstance(message, ValueError):  # a stdout line the transport could not parse
                stderr.stdout_noise(_unparsed(message))
            if isinstance(message, mt.ElicitCompleteNotification) and asks is not None and opened:
                asks.completed(opened[0], message.params.elicitation_id)

        opening = anyio.current_time()
        try:
            client = await stack.enter_async_context(
                mcp.Client(
                    target,
                    read_timeout_seconds=server.timeout,
                    client_info=_CLIENT_INFO,
                    message_handler=on_message,
                    mode=server.protocol,
                    **capabilities_of(server.client_capabilities),  # type: ignore[arg-type]
                )
            )
        except (mcp.MCPError, httpx2.TransportError, ExceptionGroup, OSError) as e:
            if (explained := _explained(e, replies, server, source)) is None:
                raise
            raise explained from e
        except anyio.get_cancelled_exc_class():  # the start-up timeout (`timeout` under the SDK's wait) or a stop
            # Only a stop at the server's timeout is one: a stop before it (a client leaving serve, Ctrl-C, a refresh
            # given up) is no reason to advise a longer timeout or another protocol (before: said at every stop).
            timed_out = anyio.current_time() - opening >= server.timeout * 0.9
            if listing.probe_unanswered and timed_out:
                noise = stderr is not None and stderr.noise_count > 0
                logger.warning("%s", probe_unanswered(server, waited=False, noise=noise))
            raise
        opened.append(client)
        # A question of the server (sampling, …) goes to the asker of its call, or is refused in tooltree's words.
        find = None if asks is None else functools.partial(asks.asker, client)
        answering(client.session, server.client_capabilities, find)
        if listing.probe_unanswered:
            logger.warning("%s", probe_unanswered(server, waited=True))
        if answers is not None:
            answers.open = http.open = True  # from now on an HTTP error is said in the error of the request it answers
        listing.version = lambda: client.session.protocol_version
        yield Connection(client=client, server=server, stderr=stderr, changes=changes, listing=listing)


@asynccontextmanager
async def _watched(transport: Any, changes: Changes, listing: ListingCheck) -> AsyncIterator[TransportStreams]:
    """``transport`` with its server's notices that a list changed (`tool_tree.changes.LISTS_CHANGED`) counted in
    ``changes`` as they are read (`tool_tree.changes.Watching`), and the malformed tools of its listings left out
    (``listing``)."""
    async with transport as (read, write):
        yield checked(Watching(read, changes), write, listing)


def _unparsed(error: ValueError) -> str:
    """The stdout line behind a parse error of the transport (as the server wrote it, or its JSON)."""
    if isinstance(error, NotJSONRPC):
        return error.line
    if isinstance(error, ValidationError):  # the SDK's transport (`tool_tree.stdio.LINEAR` false)
        for detail in error.errors():
            value = detail.get("input")
            if isinstance(value, str):
                return value
            if value is not None:
                return json.dumps(value, ensure_ascii=False, default=str)[: NOISE_CHARS + 1]
    return str(error).split("\n", 1)[0]


_STAND_INS = ("Server returned an error response", "Not Found", "Unexpected content type")
"""How the SDK words an HTTP reply that carries no JSON-RPC error, without its status."""


class _Replies:
    """The first reply of an HTTP server that the SDK reports without its status: an error, or not MCP."""

    def __init__(self) -> None:
        self.problem: str | None = None
        self.status = 0

    async def hook(self, response: httpx2.Response) -> None:
        if self.problem is not None or response.request.method != "POST":
            return
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if response.status_code >= 400:
            self.problem, self.status = status_problem(response), response.status_code
        elif response.status_code not in (202, 204) and kind not in ("application/json", "text/event-stream"):
            self.problem, self.status = not_mcp(kind), response.status_code


def _explained(e: BaseException, replies: _Replies | None, server: ServerConfig, file: str | None) -> Exception | None:
    """A clearer exception for a failure to open a session (a process that cannot start, an HTTP status or vague
    connection error), or None to keep ``e``; ``file``, the config file, is named beside a setting."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    if isinstance(e, mcp.MCPError) and not closed_here(e.data) and (ended := closed_before(e)) is not None:
        return ended
    if isinstance(e, OSError) and not isinstance(e, TimeoutError) and server.command is not None:
        return not_started(e, server, file)
    if isinstance(e, mcp.MCPError) and e.message.startswith(_STAND_INS) and replies and replies.problem is not None:
        return mcp.MCPError(e.code, replies.problem, marked(replies.status))
    if isinstance(e, httpx2.ConnectError | httpx2.ConnectTimeout) and server.url is not None:
        return Unreachable(server.url, e)
    if isinstance(e, mcp.MCPError) and (moved := redirected(e.message, server)) is not None:
        return mcp.MCPError(e.code, moved)
    return None


async def list_tools_raw(client: mcp.Client, share: Share | None = None) -> list[dict[str, Any]]:
    """Every tool the server lists, as raw wire JSON (unknown fields kept), following pagination.

    With a ``share``, its values are counted against its run's (`tool_tree.held_values`), replacing the listing the
    share kept once whole.

    Raises:
        mcp.MCPError: the server answered with an error.
        ValueError: the server's pagination does not end, its result is malformed, or it lists more than
            `MAX_LIST_TOOLS` tools, `MAX_LIST_BYTES` of them or `MAX_LIST_VALUES` JSON values, or more than the
            run's servers may hold together.
    """
    share = share if share is not None else Share()
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[bytes] = set()  # the cursors' digests: a server's cursors are not kept (30 MB each grew it to 3.6 GB)
    size = values = 0
    page: dict[str, Any] = {}
    page_tools: Any = None
    encoded = b""
    try:
        for _ in range(MAX_LIST_PAGES):
            params = mt.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            taken: list[list[Any]] = []  # the page's tools, checked once (`taking_tools`), not again by the SDK
            with taking_tools(taken):
                request = mt.ListToolsRequest(params=params)
                page = (await client.session.send_request(request, _RawResult)).model_extra or {}
            page_tools = taken[0] if taken else page.get("tools")
            if not isinstance(page_tools, list):
                raise ValueError("tools/list result has no `tools` list")
            tools.extend(t for t in page_tools if isinstance(t, dict))
            if len(tools) > MAX_LIST_TOOLS:
                raise ValueError(f"tools/list holds more than {MAX_LIST_TOOLS:,} tools, the limit for one server")
            encoded = json.dumps(page_tools, ensure_ascii=False).encode("utf-8", "surrogatepass")
            size += len(encoded)
            if size > MAX_LIST_BYTES:
                raise ValueError(
                    f"tools/list holds more than {MAX_LIST_BYTES // 2**20} MiB of tool definitions, the limit for "
                    f"one server (reached on page {len(seen) + 1})"
                )
            counted = count_values(encoded, MAX_LIST_VALUES - values, exact=True) - 1  # the page's list is not kept
            values += counted
            if values > MAX_LIST_VALUES:
                raise ValueError(
                    f"tools/list holds more than {MAX_LIST_VALUES:,} JSON values of tool definitions, the limit for "
                    f"one server (reached on page {len(seen) + 1})"
                )
            if not share.add(counted) and share.held is not None:
                raise ValueError(share.held.over(f"tools/list ({values:,} JSON values by page {len(seen) + 1})"))
            del encoded
            next_cursor = page.get("nextCursor")
            if next_cursor is None or next_cursor == "":  # "" ends it too, as other clients read it (`while (cursor)`)
                share.keep()
                return tools
            if not isinstance(next_cursor, str) or len(next_cursor) > MAX_CURSOR_CHARS:
                raise ValueError(
                    f"tools/list pagination is malformed (a cursor must be a string of at most {MAX_CURSOR_CHARS:,} "
                    f"characters; got {shown(next_cursor)})"
                )
            digest = hashlib.sha256(next_cursor.encode("utf-8", "surrogatepass")).digest()
            if digest in seen:
                raise ValueError(f"tools/list pagination repeats (cursor {shown(next_cursor)})")
            seen.add(digest)
            cursor = next_cursor
        raise ValueError(f"tools/list did not finish after {MAX_LIST_PAGES} pages")
    except BaseException:
        share.drop()
        # Let go of it at once: its traceback holds it in a cycle the collector finds late (`{}` does not hasten it).
        tools.clear()
        if isinstance(listed := page.get("tools"), list):
            listed.clear()
        if isinstance(page_tools, list):
            page_tools.clear()
        page.clear()
        encoded = b""  # noqa: F841 (the traceback holds the frame)
        raise


def server_info(client: mcp.Client) -> dict[str, Any]:
    """What the server said about itself: name, version, title, description, instructions, and whether it declares
    resource subscriptions (`tool_tree.snapshot_lists.declared_subscribe`)."""
    info: dict[str, Any] = {}
    impl = client.server_info
    if impl is not None:
        info = impl.model_dump(mode="json", exclude_none=True, by_alias=True)
        info.pop("icons", None)
    if client.instructions:
        info["instructions"] = client.instructions
    return info | declared_subscribe(client)


_CLIENT_INFO = mt.Implementation(name="tooltree", version="0.1.0")
