"""An MCP server built with the official SDK's low-level ``Server`` whose resources can be subscribed to, and which
says one changed when a tool asks it to.

    python subscribing_server.py                   (stdio)
    python subscribing_server.py FD GET_MODE       (Streamable HTTP with sessions, on the listening socket FD)

It serves the 2025 handshake era only (the SDK's ``serve_loop``; over HTTP, sessions), where ``resources/subscribe`` is
a request and the server sends ``notifications/resources/updated`` unasked; it declares ``resources.subscribe`` (the
SDK derives it from the subscribe handler). The URIs subscribed are kept by session.

Over HTTP it serves on the listening socket ``FD`` (inherited), and ``GET_MODE`` says how the GETs that open its
client's stream of unasked messages are answered: ``sdk`` by the SDK; ``forget`` the first, once ``/go`` is asked
(outside MCP), with 404 and its session forgotten (each later request of it answered 404, as by a server that
restarted), the later ones by the SDK; ``503`` the first, and each until ``/go`` is asked, with 503 (the stream is
lost, as in a redeploy), the later ones by the SDK.

Resources: ``live://log`` and ``live://status``; template ``live://items/{id}``.

Tools:
    touch(uri, times=1, any=false, after=0)
                                     sends ``notifications/resources/updated`` for ``uri`` ``times`` times on the
                                     session (only when ``uri`` is subscribed, unless ``any``); answers "touched N";
                                     with ``after`` seconds, answers "touching N" at once and sends them that much
                                     later, tied to no call (as a server whose resource changes on its own)
    subscribed()                     answers the URIs subscribed on this session, as a JSON list, sorted
    link(uri)                        answers a resource link to ``uri`` (as a tool that made a resource, listed
                                     nowhere, does); its read answers as any other's
    crash(after=0, again=false)      the server exits (status 3) at once; with ``after`` seconds, answers "crashing"
                                     at once and exits that much later, tied to no call (as a server that dies
                                     between calls); with ``again``, every process of it started from now on exits
                                     (status 3) as it starts (kept in ``SUBSCRIBING_SERVER_STATE``)
    relist(hide="", tool="", subscriptions=true)
                                     changes what the server offers from now on, in every process of it (kept in
                                     ``SUBSCRIBING_SERVER_STATE``): ``hide`` a URI from its resources/list, add a
                                     ``tool`` of that name (its call answers "NAME ran"), and with ``subscriptions``
                                     false a process started from now on declares no ``resources.subscribe``; then
                                     says ``notifications/resources/list_changed``

Test controls, from the environment: ``SUBSCRIBING_SERVER_MARK`` a file a line is added to at each start;
``SUBSCRIBING_SERVER_STATE`` the JSON file ``relist`` and ``crash`` write (``{"hidden": [...], "tools": [...],
"subscriptions": false, "crash": true}``), read at each listing and at start.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections import defaultdict
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
import uvicorn
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server

subscribed: defaultdict[str, set[str]] = defaultdict(set)
"""The URIs subscribed, by session (its ``Mcp-Session-Id`` over HTTP; ``stdio``)."""
MODE = sys.argv[2] if len(sys.argv) > 2 else "sdk"
EVENTS: dict[str, anyio.Event] = {}
"""``go``: set once ``/go`` is asked (over HTTP)."""
TASKS: list[anyio.abc.TaskGroup] = []
"""Where a ``touch`` with ``after`` sends its notices (`main`'s)."""
FORGOTTEN: set[bytes] = set()
"""The session ids ``forget`` no longer knows."""
GETS: list[bytes | None] = []
"""The session id of each GET, in order."""

TOOLS = [
    types.Tool(
        name="touch",
        description="Say a resource changed.",
        input_schema={
            "type": "object",
            "properties": {
                "uri": {"type": "string"},
                "times": {"type": "integer"},
                "any": {"type": "boolean"},
                "after": {"type": "number"},
            },
            "required": ["uri"],
        },
    ),
    types.Tool(name="subscribed", description="The URIs subscribed.", input_schema={"type": "object"}),
    types.Tool(
        name="link",
        description="Link to a resource.",
        input_schema={"type": "object", "properties": {"uri": {"type": "string"}}, "required": ["uri"]},
    ),
    types.Tool(
        name="crash",
        description="Exit.",
        input_schema={"type": "object", "properties": {"after": {"type": "number"}, "again": {"type": "boolean"}}},
    ),
    types.Tool(
        name="relist",
        description="Change what is offered.",
        input_schema={
            "type": "object",
            "properties": {
                "hide": {"type": "string"},
                "tool": {"type": "string"},
                "subscriptions": {"type": "boolean"},
            },
        },
    ),
]


def state() -> dict[str, Any]:
    """What ``relist`` changed (``SUBSCRIBING_SERVER_STATE``), else nothing."""
    path = os.environ.get("SUBSCRIBING_SERVER_STATE")
    if not path or not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        loaded: dict[str, Any] = json.load(f)
        return loaded


def relist(hide: str, tool: str, subscriptions: bool) -> None:
    changed = state()
    changed["hidden"] = [*changed.get("hidden", []), *([hide] if hide else [])]
    changed["tools"] = [*changed.get("tools", []), *([tool] if tool else [])]
    changed["subscriptions"] = subscriptions
    with open(os.environ["SUBSCRIBING_SERVER_STATE"], "w", encoding="utf-8") as f:
        json.dump(changed, f)


def crash(after: float, again: bool) -> types.CallToolResult:
    if again:
        changed = state()
        changed["crash"] = True
        with open(os.environ["SUBSCRIBING_SERVER_STATE"], "w", encoding="utf-8") as f:
            json.dump(changed, f)
    if after <= 0:
        os._exit(3)
    TASKS[0].start_soon(_exit_after, after)
    return types.CallToolResult(content=[types.TextContent(text="crashing")])


async def _exit_after(after: float) -> None:
    await anyio.sleep(after)
    os._exit(3)


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    added = [types.Tool(name=n, description=f"The {n} tool.", input_schema={"type": "object"}) for n in added_tools()]
    return types.ListToolsResult(tools=[*TOOLS, *added])


def added_tools() -> list[str]:
    return list(state().get("tools", []))


def _session(ctx: Any) -> str:
    """The session of a request: its ``Mcp-Session-Id`` over HTTP, else ``stdio``."""
    request = ctx.request
    return str(request.headers.get("mcp-session-id")) if request is not None else "stdio"


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = dict(params.arguments or {})
    if params.name == "crash":
        return crash(float(arguments.get("after", 0)), bool(arguments.get("again", False)))
    if params.name == "subscribed":
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(sorted(subscribed[_session(ctx)])))])
    if params.name == "link":
        return types.CallToolResult(content=[types.ResourceLink(name="made", uri=str(arguments["uri"]))])
    if params.name in added_tools():
        return types.CallToolResult(content=[types.TextContent(text=f"{params.name} ran")])
    if params.name == "relist":
        relist(
            str(arguments.get("hide", "")), str(arguments.get("tool", "")), bool(arguments.get("subscriptions", True))
        )
        await ctx.session.send_resource_list_changed()
        return types.CallToolResult(content=[types.TextContent(text="relisted")])
    uri, times, after = str(arguments["uri"]), int(arguments.get("times", 1)), float(arguments.get("after", 0))
    if not (uri in subscribed[_session(ctx)] or arguments.get("any")):
        times = 0
    if after > 0:
        TASKS[0].start_soon(_touch, ctx.session, uri, times, after)
        return types.CallToolResult(content=[types.TextContent(text=f"touching {times}")])
    await _touch(ctx.session, uri, times)
    return types.CallToolResult(content=[types.TextContent(text=f"touched {times}")])


async def _touch(session: Any, uri: str, times: int, after: float = 0) -> None:
    if after > 0:
        await anyio.sleep(after)
    for _ in range(times):
        await session.send_resource_updated(uri)


async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
    hidden = state().get("hidden", [])
    listed = [
        types.Resource(name="log", uri="live://log", mime_type="text/plain"),
        types.Resource(name="status", uri="live://status", mime_type="text/plain"),
    ]
    return types.ListResourcesResult(resources=[r for r in listed if str(r.uri) not in hidden])


async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(
        resource_templates=[types.ResourceTemplate(name="item", uri_template="live://items/{id}")]
    )


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    uri = str(params.uri)
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=f"now: {uri}")])


async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
    subscribed[_session(ctx)].add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    subscribed[_session(ctx)].discard(str(params.uri))
    return types.EmptyResult()


SUBSCRIPTIONS: dict[str, Any] = (
    {"on_subscribe_resource": subscribe, "on_unsubscribe_resource": unsubscribe}
    if state().get("subscriptions", True)
    else {}
)
server: Server[Any] = Server(
    "subscribing",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_resources=list_resources,
    on_list_resource_templates=list_templates,
    on_read_resource=read_resource,
    **SUBSCRIPTIONS,
)


async def _status(send: Any, status: int) -> None:
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def answering(app: Any) -> Any:
    """``app`` with ``/go`` served and the GETs answered as ``GET_MODE`` says."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        if scope["path"] == "/go":
            EVENTS["go"].set()
            await _status(send, 204)
            return
        session = dict(scope.get("headers", [])).get(b"mcp-session-id")
        if session in FORGOTTEN:
            await _status(send, 404)
            return
        if scope["method"] == "GET":
            GETS.append(session)
            if MODE == "forget" and len(GETS) == 1 and session is not None:
                with anyio.move_on_after(30):
                    await EVENTS["go"].wait()
                FORGOTTEN.add(session)
                await _status(send, 404)
                return
            if MODE == "503" and (len(GETS) == 1 or not EVENTS["go"].is_set()):
                await _status(send, 503)
                return
        await app(scope, receive, send)

    return wrapped


async def main() -> None:
    if mark := os.environ.get("SUBSCRIBING_SERVER_MARK"):
        with open(mark, "a", encoding="utf-8") as f:
            f.write("started\n")
    if state().get("crash"):
        print("subscribing_server: told to crash at every start", file=sys.stderr, flush=True)
        os._exit(3)
    async with anyio.create_task_group() as tasks:
        TASKS.append(tasks)
        if len(sys.argv) > 1:  # over Streamable HTTP, on the socket inherited
            EVENTS["go"] = anyio.Event()
            sock = socket.socket(fileno=int(sys.argv[1]))
            app = answering(server.streamable_http_app())
            await uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).serve([sock])
        else:
            async with server.lifespan(server) as lifespan, stdio_server() as (read, write):
                options = server.create_initialization_options(NotificationOptions(resources_changed=True))
                await serve_loop(server, read, write, lifespan_state=lifespan, init_options=options)
        tasks.cancel_scope.cancel()  # a touch still waiting is not sent: its client has left


if __name__ == "__main__":
    anyio.run(main)
