"""The servers' MCP prompts and resources, offered through `tooltree serve` (``serve: prompts``, ``serve: resources``).

A client that reaches its servers through tooltree keeps their prompts (slash commands in Claude Code) and resources
(@-mentions, attachable context):

- ``prompts/list`` offers each server's prompts as ``<server>__<prompt>`` (the passthrough tools' names,
  `agent.naming`: ASCII, at most 64 characters, ``_2``, ``_3``, ... on a collision); ``prompts/get`` goes to that
  server with the prompt's own name and arguments (an argument whose name had to be cleaned is renamed back); one
  without an argument the prompt says is required is refused before the server is asked.
- ``resources/list`` and ``resources/templates/list`` offer every server's, together (each list, prompts too, in
  pages: `agent.serve.list_pages`); ``resources/read`` goes to the
  one server that listed the URI, else to the one whose template matches it, else to the server whose passthrough
  result in this client session linked to it (``resource_link``: `agent.serve.passthrough.Passthrough.linked`). A URI
  two servers list, or that templates of two servers match, or that none knows, is refused, saying so.
- ``resources/subscribe`` and ``resources/unsubscribe`` (a client of the handshake era) follow one resource on the
  server a read of it goes to (a resource link's too), its ``notifications/resources/updated`` sent to that client
  session only (`agent.serve.upstream_subscriptions`), as do the ``resourceSubscriptions`` of a 2026-07-28 client's
  ``subscriptions/listen`` stream (`agent.serve.upstream_listen`); ``resources.subscribe`` is declared when a server
  offered declares it.

**Where the lists come from.** From the tree: generate-tree lists each server's prompts, resources and resource
templates with its tools and records them in the server's snapshot (`tool_tree.snapshot_lists`); serve offers what
the snapshots record, read at start and again when it reads the refreshed tree (`UpstreamExtras.reload`, after the
background refresh or once a server, in any client session, said its tools changed, or its prompts or resources
while serve offers them: `tooltree_cli.serve_follow`), and then tells each client session of the handshake era that
listed them ``notifications/prompts/list_changed`` or ``.../resources/list_changed`` if they changed. A client of the
2026-07-28 protocol (over stdio: serve refuses it over HTTP, and over stdio when a server may ask the client) is
told on the ``subscriptions/listen`` streams it opened (`agent.serve.upstream_listen`), the only place that protocol
sends them.
A list starts no server (so ``--no-regenerate`` starts none for it). ``prompts/get`` and ``resources/read`` go
through the client session's own server pool, as passthrough calls do (same start on first use, timeouts, restarts
and words of failure), and each is written to the session's audit log as a passthrough call is (`audit_record`:
before, none was). The handshake (and ``server/discover``) declares prompts and resources when the tree records any,
resources also when a passthrough tool is offered (`UpstreamExtras.links`: a client reads the links its results hold).

Reading the tree and routing are in `agent.serve.upstream_lists`, what an item becomes in `agent.serve.upstream_offer`;
this module forwards gets and reads and bounds their answers, and adds the handlers to serve's `Server`.

**Bounds.** Everything a server sends is held as passthrough tools and results are (`agent.serve.passthrough`,
`agent.serve.bounded_result`):
at most `tool_tree.snapshot_lists.MAX_ITEMS` items of each list per server, when listed and again when read
back from a snapshot (which may come from elsewhere); names, titles, descriptions and MIME types cleaned of escapes
and control characters (`tool_tree.text.clean`) and capped, an item whose name or URI is not fit to send back
exactly (too long, not a string, with control characters) left out; a prompt's messages and a resource's contents
bounded like a passthrough result (`capped`'s rules: text within the sandbox's ``output_chars`` with a note saying
what was cut, images and binary data within the image budgets). A client holds at most `MAX_LISTEN_STREAMS`
listen streams open, each at most `MAX_LISTEN_BACKLOG` events behind.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from agent.content import MAX_BLOCKS
from agent.serve.bounded_result import _block, _Budget
from agent.serve.list_pages import page
from agent.serve.upstream_listen import MAX_LISTEN_BACKLOG as MAX_LISTEN_BACKLOG
from agent.serve.upstream_listen import MAX_LISTEN_STREAMS as MAX_LISTEN_STREAMS
from agent.serve.upstream_listen import listen_handler
from agent.serve.upstream_lists import RESOURCE_NOT_FOUND, UpstreamExtras, quoted
from agent.serve.upstream_offer import DESCRIPTION_CHARS, text_field, why
from agent.serve.upstream_subscriptions import install_subscriptions
from sandbox._supervisor.limits import MAX_IMAGES
from sandbox.results import ImageBudget, clean_text
from tool_tree.answer_items import total
from tool_tree.text import clean, counted, one_line

if TYPE_CHECKING:
    from sandbox.bridge import CallCancel
    from sandbox.host import Runtime

logger = logging.getLogger(__name__)

__all__ = ["ExtrasServer", "UpstreamExtras", "bounded_prompt", "bounded_read", "forward", "install", "listen_handler"]

ERROR_CHARS = 4_000
"""The most of a failure's text a client is sent (it quotes the server)."""


# ---- forwarding ----------------------------------------------------------------------------------------------------


def forward(
    runtime: Runtime, server: str, method: str, params: dict[str, Any], cancel: CallCancel, what: str
) -> dict[str, Any]:
    """``method`` sent to ``server`` through the client session's server pool (from a worker thread), as a
    passthrough call is; its raw result. It is audited as a passthrough call is (`audit_record`).

    Raises:
        MCPError: it failed (the server could not start, timed out, answered an error, ...), in a passthrough call's
            words, cleaned and capped.
    """
    from sandbox.bridge import ToolCallRefused, resolve
    from sandbox.errors import SandboxError
    from sandbox.mcp_bridge import with_stderr
    from sandbox.results import ledger_error
    from tool_tree.pool import CallFailure, PoolError, ServerUnavailable

    started, record = time.monotonic(), audit_record(server, method, params)
    bridge = None
    try:
        bridge = runtime.bridge
        record["session"] = bridge.session
        pool = bridge.pool
        result: dict[str, Any] = resolve(pool.request(server, method, params), pool.loop, started=cancel.started)
        if isinstance(result, CallFailure):
            raise ToolCallRefused(result.message, result.code)
    except ToolCallRefused as e:  # first: it is a SandboxError
        code, message = e.code, e.message
    except ServerUnavailable as e:
        code, message = "server_unavailable", with_stderr(str(e), e.stderr_tail)
    except (PoolError, SandboxError) as e:
        code, message = "server_unavailable", str(e)
    except concurrent.futures.CancelledError:
        code, message = "cancelled", "the request was cancelled before the server answered"
    else:
        record.update(outcome="ok", bytes=_size(result))
        _audit(bridge, record, started)
        return result
    if code == "cancelled":
        record.update(outcome="cancelled", error=message)
    else:
        record.update(outcome="refused", code=code, error=ledger_error(message))
    _audit(bridge, record, started)
    raise failure(what, code, message)


def audit_record(server: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The start of the audit line of a get or read (`sandbox.mcp_bridge.AuditLog`): a passthrough call's fields
    (``session``, ``server``, ``outcome``, ``code``, ``error``, ``bytes``, ``ms``, ``ts``) with ``method`` and, in
    place of ``tool`` and ``args_sha256``, ``prompt`` (the server's own name) and the digest of its arguments, or
    ``uri``."""
    record: dict[str, Any] = {"server": server, "method": method}
    if method == "prompts/get":
        arguments = params.get("arguments") or {}
        text = json.dumps(arguments, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass")
        record.update(prompt=params["name"], args_sha256=hashlib.sha256(text).hexdigest()[:16])
    else:
        record["uri"] = params["uri"]
    return record


def _size(result: dict[str, Any]) -> int:
    """A result's size as JSON text, as a passthrough call's ``bytes`` is counted."""
    try:
        return len(json.dumps(result, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError):
        return -1


def _audit(bridge: Any, record: dict[str, Any], started: float) -> None:
    record["ms"] = round((time.monotonic() - started) * 1000, 1)
    record["ts"] = round(time.time(), 3)
    audit = getattr(bridge, "audit", None)
    if audit is not None:
        audit.write(record)


def failure(what: str, code: str, message: str) -> MCPError:
    """A request that failed, as the client's error: cleaned, at most `ERROR_CHARS` characters."""
    text = f"{what} failed ({code}): {message}"
    if len(text) > ERROR_CHARS:
        text = f"{text[:ERROR_CHARS]}… ({len(text) - ERROR_CHARS:,} characters more)"
    return MCPError(code=types.INTERNAL_ERROR, message=clean_text(text))


def _notes(budget: _Budget, images: ImageBudget, count: int, what: tuple[str, str]) -> list[str]:
    """What bounding one answer cut (``count``: its items, ``what``: one of them, several), as `capped`'s note says."""
    notes = []
    if budget.text_total > budget.text_shown:
        notes.append(f"{budget.text_total - budget.text_shown:,} of {budget.text_total:,} characters of text cut")
    if images.past:
        notes.append(f"{counted(images.past, 'image')} past the first {MAX_IMAGES} left out")
    if count > MAX_BLOCKS:
        notes.append(f"{counted(count - MAX_BLOCKS, *what)} past the first {MAX_BLOCKS:,} left out")
    if budget.left_out:
        notes.append(f"{counted(budget.left_out, *what)} left out (malformed, or too long for what was left)")
    if budget.extras_left_out:
        notes.append(f"the annotations or _meta of {counted(budget.extras_left_out, *what)} left out")
    return notes


def bounded_prompt(raw: dict[str, Any], what: str, max_chars: int) -> types.GetPromptResult:
    """A ``prompts/get`` result bounded and cleaned as a passthrough result is, with a last message saying what was
    cut.

    Raises:
        MCPError: it is not a prompt's result.
    """
    messages = raw.get("messages")
    if not isinstance(messages, list):
        raise failure(what, "invalid_result", "the server's result has no list of messages")
    budget, images = _Budget(max_chars), ImageBudget()
    out: list[dict[str, Any]] = []
    for message in messages[:MAX_BLOCKS]:
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant") or not isinstance(message.get("content"), dict):
            budget.leave_out()
            continue
        if (block := _block(message["content"], budget, images)) is not None:
            out.append({"role": role, "content": block})
    if notes := _notes(budget, images, total(raw, "messages"), ("message", "messages")):
        text = (
            f"\n[... {'; '.join(notes)}: a prompt of a server is capped at {max_chars:,} characters and "
            f"{MAX_BLOCKS:,} messages ...]"
        )
        out.append({"role": "user", "content": {"type": "text", "text": text}})
    result = {"messages": out, "description": text_field(raw.get("description"), DESCRIPTION_CHARS)}
    try:
        return types.GetPromptResult.model_validate(result, by_name=False)
    except ValidationError as e:
        raise failure(what, "invalid_result", f"the server's result is not a valid prompt: {why(e)}") from None


def bounded_read(raw: dict[str, Any], uri: str, what: str, max_chars: int) -> types.ReadResourceResult:
    """A ``resources/read`` result bounded and cleaned as a passthrough result's embedded resources are: text cut to
    ``max_chars`` in all, binary data within the image budgets; a note (a text content of ``uri``) says what was cut.

    Raises:
        MCPError: it is not a resource's result.
    """
    contents = raw.get("contents")
    if not isinstance(contents, list):
        raise failure(what, "invalid_result", "the server's result has no list of contents")
    budget, images = _Budget(max_chars), ImageBudget()
    out: list[dict[str, Any]] = []
    for item in contents[:MAX_BLOCKS]:
        block = _block({"type": "resource", "resource": item} if isinstance(item, dict) else None, budget, images)
        if block is None:
            continue
        if block.get("type") == "resource":
            out.append(block["resource"])
        else:  # a note in its place
            out.append({"uri": uri, "mimeType": "text/plain", "text": block.get("text", "")})
    if notes := _notes(budget, images, total(raw, "contents"), ("content", "contents")):
        text = (
            f"[... {'; '.join(notes)}: a resource read through tooltree is capped at {max_chars:,} characters "
            f"and {MAX_BLOCKS:,} contents ...]"
        )
        out.append({"uri": uri, "mimeType": "text/plain", "text": text})
    try:
        return types.ReadResourceResult.model_validate({"contents": out}, by_name=False)
    except ValidationError as e:
        raise failure(what, "invalid_result", f"the server's result is not a valid resource: {why(e)}") from None


# ---- the handlers --------------------------------------------------------------------------------------------------

InSession = Callable[[Any, Callable[["Runtime", "CallCancel"], Any]], Awaitable[Any]]
"""Runs a function of the client session's runtime on one of its worker threads (`ToolServer._in_session`)."""
Linked = Callable[["Runtime", str], "str | None"]
"""`agent.serve.passthrough.Passthrough.linked`: the server a client session's resource link to a URI came from."""


class ExtrasServer(Server[Any]):
    """The low-level `Server` of ``tooltree serve``, declaring prompts and resources as `UpstreamExtras` says, and its
    tools' list as changing when passthrough tools are offered (``tools_change``: `agent.serve.passthrough
    .Passthrough.reload`), to a 2026-07-28 client only where ``subscriptions/listen`` is served (``listening``).
    ``resources.subscribe`` is declared to a client of either protocol when a server offered declares it and the client
    can follow a resource: in the 2026-07-28 protocol (where the SDK, as the specification, says by it that listen
    streams honour resource subscriptions) only where ``subscriptions/listen`` is served. Before, never to a 2026-07-28
    client."""

    extras: UpstreamExtras | None = None
    listening = False
    tools_change = False

    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        declared = super().get_capabilities(*args, **kwargs)
        # ``modern``: a 2026-07-28 client with no listen stream here, not told of a change nor following a resource.
        modern = kwargs.get("protocol_version") in MODERN_PROTOCOL_VERSIONS and not self.listening
        tools = types.ToolsCapability(list_changed=self.tools_change and not modern) if declared.tools else None
        declared = declared.model_copy(update={"tools": tools})
        return self.extras.capabilities(declared, modern=modern) if self.extras is not None else declared


def install(
    server: ExtrasServer,
    extras: UpstreamExtras,
    tasks: Callable[[], anyio.abc.TaskGroup | None],
    in_session: InSession,
    max_chars: Callable[[], int],
    *,
    listen: bool = False,
    linked: Linked | None = None,
    tools_change: bool = False,
) -> Callable[[Any, str], None]:
    """Add the prompt and resource handlers to ``server`` (those ``extras`` has on; with resources, their
    subscriptions: `agent.serve.upstream_subscriptions`); ``tasks``: the task group the ``list_changed`` and
    ``updated`` notifications run in; ``in_session``: runs a get or read in the client's session; ``listen``:
    serve ``subscriptions/listen`` too, when prompts, resources or tools may change (`listen_handler`: over stdio,
    where serve speaks the 2026-07-28 protocol); ``linked``: where a read of a URI no server lists or has a template
    for goes, in the client's session (a resource link's server); ``tools_change``: passthrough tools are offered.
    Returns what a list handler calls with its context and what it lists (``tools``, ``prompts``, ``resources``): a
    client of the handshake era is then told when that list changes."""
    server.extras, extras.links, server.tools_change = extras, linked is not None, tools_change  # `capabilities`

    def spawn(send: Callable[[], Coroutine[Any, Any, None]]) -> None:
        group = tasks()
        if group is not None:
            group.start_soon(send)

    def listed(ctx: Any, what: str) -> None:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:  # told on its listen streams; a request has no other
            return
        # The client's connection: ``ctx.session`` is made for each request, and a notification sent through the
        # connection reaches the client outside any request (the SDK's standalone channel). The SDK's low-level
        # handlers are given no public way to it (its `Context.connection` is `MCPServer`'s only).
        extras.listened(getattr(ctx.session, "_connection", ctx.session), what, spawn)

    on = extras.resources_on  # resource subscriptions (`agent.serve.upstream_subscriptions`), listen streams' too
    subscriptions = install_subscriptions(server, extras, in_session, spawn, forward, linked) if on else None
    if listen and (extras.on or tools_change):
        handler = listen_handler(extras, spawn, subscriptions, in_session, forward, linked)
        server.add_request_handler("subscriptions/listen", types.SubscriptionsListenRequestParams, handler)
        server.listening = True

    if extras.prompts_on:

        async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
            listed(ctx, "prompts")
            prompts, after = page(extras.offer.prompts, params.cursor if params else None, "prompts/list")
            return types.ListPromptsResult(prompts=prompts, next_cursor=after)

        async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
            route = extras.prompt_route(params.name)
            what = f"{route.server}.{one_line(clean(route.name), 200)}"
            given = dict(params.arguments or {})
            unknown = [k for k in given if k not in route.arguments]
            if unknown:
                raise MCPError(
                    code=types.INVALID_PARAMS,
                    message=f"{params.name}: unknown argument {quoted(unknown[0])}; its arguments are "
                    f"{', '.join(route.arguments) or 'none'}",
                )
            missing = [k for k in route.required if k not in given]
            if missing:  # refused here, as a passthrough call's arguments are checked against the tool's schema
                raise MCPError(
                    code=types.INVALID_PARAMS,
                    message=f"{params.name}: missing required argument {quoted(missing[0])}; its arguments are "
                    f"{', '.join(route.arguments)} (required: {', '.join(route.required)})",
                )
            arguments = {route.arguments[k]: v for k, v in given.items()}
            upstream = {"name": route.name, "arguments": arguments} if arguments else {"name": route.name}
            raw = await in_session(
                ctx, lambda rt, cancel: forward(rt, route.server, "prompts/get", upstream, cancel, what)
            )
            return bounded_prompt(raw, what, max_chars())

        server.add_request_handler("prompts/list", types.PaginatedRequestParams, list_prompts)
        server.add_request_handler("prompts/get", types.GetPromptRequestParams, get_prompt)

    if extras.resources_on:

        async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
            listed(ctx, "resources")
            resources, after = page(extras.offer.resources, params.cursor if params else None, "resources/list")
            return types.ListResourcesResult(resources=resources, next_cursor=after)

        async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
            listed(ctx, "resources")
            cursor = params.cursor if params else None
            templates, after = page(extras.offer.templates, cursor, "resources/templates/list")
            return types.ListResourceTemplatesResult(resource_templates=templates, next_cursor=after)

        async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
            uri = str(params.uri)
            try:
                owner: str | None = extras.owner(uri)
            except MCPError as e:
                if e.code != RESOURCE_NOT_FOUND or linked is None:
                    raise
                owner, unknown = None, e

            def read(rt: Runtime, cancel: CallCancel) -> tuple[dict[str, Any], str]:
                if (server := owner or (linked and linked(rt, uri))) is None:  # nor a link of this session
                    raise unknown
                what = f"{server}: reading {quoted(uri)}"
                return forward(rt, server, "resources/read", {"uri": uri}, cancel, what), what

            raw, what = await in_session(ctx, read)
            return bounded_read(raw, uri, what, max_chars())

        server.add_request_handler("resources/list", types.PaginatedRequestParams, list_resources)
        server.add_request_handler("resources/templates/list", types.PaginatedRequestParams, list_templates)
        server.add_request_handler("resources/read", types.ReadResourceRequestParams, read_resource)
    return listed
