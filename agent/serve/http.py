"""``tooltree serve --http``: Streamable HTTP on the SDK's session manager, behind a bearer token.

Every request to ``/mcp`` must carry ``Authorization: Bearer <token>``; anything else is answered ``401``
before the MCP layer sees it, so nothing runs. Every other path is ``404`` without a challenge: a client
that looks for OAuth metadata (``/.well-known/oauth-protected-resource``, as the MCP Inspector does on a
``401`` there) finds none and uses the header it was given instead of starting an interactive login. A client
without the header goes on to register for OAuth (``/register``) and shows why that failed: those paths' ``404``
says that serve takes no OAuth and names the header (Claude Code said only "Dynamic Client Registration rejected
(HTTP 404): … the MCP endpoint is [redacted]").
Behind the token, `agent.serve.http_gate.SessionGate` admits client sessions (ending the longest idle one
when a new client needs its place), bounds what each request may cost, ends a sandbox session when the SDK
ended its MCP session, and cancels a request whose client's connection closed. Uvicorn serves it, with the
connection limits of `agent.serve.http_limits`; SIGTERM or SIGINT stop it after every session was closed, the
requests in flight given `STOP_GRACE` to be answered before their upstream servers are signalled.

A ``tools/call`` result (a ``resources/read`` or ``prompts/get`` one too: `agent.serve.content.fit_read`) goes back
as one server-sent event, and the official Python SDK client reads none over 1 MiB (``max_sse_event_size``): a bigger
result would be lost, the script having run. So every result (passthrough ones too) is cut to `RESULT_LIMIT` first
(`agent.serve.content.fit_result`: the largest images become a note of their type and size, then
long text loses its middle). Answering with a plain JSON body instead (the SDK's ``json_response``,
which its client reads with no limit) would keep images whole, but in that mode the SDK drops
every notification tied to a request, so a long ``execute_python`` would send no progress.
Re-encoding images smaller would need an image library the host does not have. Over stdio,
where no client limits a message, results are sent whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hmac
import ipaddress
import json
import logging
import secrets
import socket
from collections.abc import Callable, Sequence
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from agent.serve.content import fit_read, fit_result
from agent.serve.http_gate import SessionGate
from agent.serve.http_limits import (
    BACKLOG,
    KEEP_ALIVE,
    connection_cap,
    limited_protocol,
    quiet_accept_errors,
    raise_open_files_limit,
)
from agent.serve.loopback import is_loopback
from agent.serve.server import ToolServer
from agent.serve.stdio import StopSignals, say

logger = logging.getLogger(__name__)


class _AnsweredAtStop(logging.Filter):
    """Drops the SDK's warning that it could not answer a request cancelled as serve stops ("shutdown error response
    for request 3 gave up: transport write blocked"): `SessionGate.stop` ended that request's HTTP exchange already
    (its stream, or ``503`` "tooltree serve is stopping"), so nothing reads the answer. Before, each call still
    running at the end of `STOP_GRACE` left that line on stderr, naming neither its client nor its call."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        stop = bool(args) and str(args[0]).startswith("shutdown error response for request ")
        return not (stop and record.msg == "%s gave up: transport write blocked")


logging.getLogger("mcp.shared.jsonrpc_dispatcher").addFilter(_AnsweredAtStop())

MCP_PATH = "/mcp"
TOKEN_ENV = "TOOLTREE_SERVE_TOKEN"
LOCAL_NAMES = ("127.0.0.1", "localhost", "[::1]")
"""How a client on this machine may name it in its ``Host`` header (with any port), whatever loopback address serve
binds: the SDK's own list for a server on loopback."""
OAUTH_PATHS = ("/.well-known/oauth-", "/.well-known/openid-configuration", "/register", "/authorize", "/token")
"""Where a client looks for OAuth metadata or registers for it (path prefixes)."""
NO_OAUTH = (
    f"tooltree serve takes no OAuth: send the header Authorization: Bearer <token>, the token serve printed when it "
    f"started or ${TOKEN_ENV} (Claude Code: claude mcp add --transport http NAME URL --header "
    f"'Authorization: Bearer <token>')"
)
"""The ``404`` of `OAUTH_PATHS`: what a client that tried OAuth shows its user."""
SSE_EVENT_LIMIT = 1024 * 1024
"""The most bytes of one server-sent event the official Python SDK client reads (its default)."""
RESULT_LIMIT = SSE_EVENT_LIMIT - 16 * 1024
"""The most bytes of JSON a ``tools/call`` result is sent with: one event, less room for the
event's own lines and the JSON-RPC envelope around the result (its id is the client's)."""
STOP_GRACE = 3.0
"""Seconds requests in flight are given to be answered once serve is told to stop; then they are cancelled (their
scripts stopped, as on a client's cancel), and open ``GET`` streams are ended at once (`SessionGate.stop`). Before,
uvicorn waited for every connection to close: the ``GET`` stream every SDK client and Claude Code hold kept a
stopped serve running for as long as its client stayed."""
_WHY = "over HTTP one result must fit in 1 MiB, the most the MCP SDK client reads at once"


def rebinding_guard(host: str) -> TransportSecuritySettings | None:
    """The SDK's DNS-rebinding protection for serving on ``host``: on loopback, a request's ``Host`` must name this
    machine (`LOCAL_NAMES`, or ``host`` as a client writes it in its URL; with a port, or without one as a client
    sends it for port 80), and its ``Origin``, when it has one, be of such a host; None elsewhere (the token is the
    protection). Before, the SDK's list alone was allowed, so on 127.0.0.2 every request was ``421 Invalid Host``."""
    if not is_loopback(host):
        return None
    names = {*LOCAL_NAMES, host.lower() if ":" not in host else f"[{host}]"}
    with contextlib.suppress(ValueError):
        address = ipaddress.ip_address(host)
        names.add(f"[{address.compressed}]" if address.version == 6 else address.compressed)
    hosts = sorted(names)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*hosts, *(f"{name}:*" for name in hosts)],
        allowed_origins=[*(f"http://{name}" for name in hosts), *(f"http://{name}:*" for name in hosts)],
    )


def new_token() -> str:
    """A random bearer token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


MIN_TOKEN_CHARS = 16
"""The shortest ``$TOOLTREE_SERVE_TOKEN`` taken: 16 characters of `openssl rand -hex 16` hold 64 bits. Whoever holds
the token runs code and calls every tool; before, a token of one character was served."""
MAKE_TOKEN = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"


def token_problem(token: str) -> str | None:
    """What keeps ``token`` (``$TOOLTREE_SERVE_TOKEN``) from guarding serve: shorter than `MIN_TOKEN_CHARS`, or a
    character a client cannot send in its ``Authorization`` header; None: nothing. A header's value loses the spaces
    around it on the way (a token read from a file with its line break, or written with a trailing space), and holds
    no control or non-ASCII character, so such a token was refused to every client as a wrong one. The character
    itself is not named: the token is a secret."""
    for place, char in enumerate(token, 1):
        if not "!" <= char <= "~":
            what = "a space" if char.isspace() else "a control character" if char.isascii() else "a non-ASCII character"
            return (
                f"${TOKEN_ENV} has {what} at character {place} of {len(token)}, which a client cannot send in its "
                "Authorization header: use visible ASCII characters only (such as `openssl rand -hex 16` prints)"
            )
    if len(token) < MIN_TOKEN_CHARS:
        return (
            f"${TOKEN_ENV} has {len(token)} character{'s' if len(token) != 1 else ''}, too few to keep others from "
            f"guessing it: give at least {MIN_TOKEN_CHARS}, such as `{MAKE_TOKEN}` prints (or unset it: serve then "
            "makes one and prints it once)"
        )
    return None


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


class BearerGuard:
    """ASGI middleware: ``404`` off `MCP_PATH`; ``401`` there without the right bearer token.

    Args:
        app: the MCP app behind the guard.
        token: the token every request must carry.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError("the bearer token is empty")
        self.app = app
        self._expected = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        if (path := scope.get("path")) != MCP_PATH:
            oauth = isinstance(path, str) and path.startswith(OAUTH_PATHS)
            description = NO_OAUTH if oauth else f"the MCP endpoint is {MCP_PATH}"
            await _answer(send, 404, {"error": "not_found", "error_description": description})
            return
        given = _header(scope, b"authorization") or ""
        # The scheme's case is the client's (RFC 9110: `bearer` is `Bearer`; the SDK's own guard reads it so), and
        # spaces may follow it. Before, `Authorization: bearer <the token>` was refused as a wrong token.
        scheme, _, credentials = given.partition(" ")
        token = credentials.strip(" ").encode("latin-1", errors="replace")
        if not (hmac.compare_digest(token, self._expected) and scheme.lower() == "bearer"):
            reason = "missing bearer token" if not given else "wrong bearer token"
            description = f"{reason}: send Authorization: Bearer <token>"
            await _answer(send, 401, {"error": "unauthorized", "error_description": description},
                          [(b"www-authenticate", b'Bearer realm="tooltree"')])  # fmt: skip
            return
        await self.app(_names_lowered(scope), receive, send)


def _names_lowered(scope: Scope) -> Scope:
    """``scope`` with its ``Host`` and ``Origin`` headers in lower case, as host names compare (RFC 9110 §4.2.3): the
    SDK's DNS-rebinding check compares them as written, so before, ``Host: LOCALHOST:8765`` (curl and urllib send the
    URL's case) was refused ``421 Invalid Host header``."""
    headers = scope.get("headers", [])
    if not any(bytes(key).lower() in (b"host", b"origin") for key, _ in headers):
        return scope
    lowered = [(key, bytes(value).lower() if bytes(key).lower() in (b"host", b"origin") else value)
               for key, value in headers]  # fmt: skip
    return {**scope, "headers": lowered}


async def _answer(
    send: Send, status: int, content: dict[str, str], headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    body = json.dumps(content).encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body})


def http_app(app: ToolServer, *, token: str, host: str = "127.0.0.1") -> ASGIApp:
    """The ASGI app: the SDK's Streamable HTTP app at ``/mcp`` behind `SessionGate`, behind `BearerGuard`.

    On loopback the SDK's DNS-rebinding protection stays on (Host and Origin must be local); on
    another address the token is the protection.
    """
    return BearerGuard(http_gate(app, host=host), token)


def http_gate(app: ToolServer, *, host: str = "127.0.0.1") -> SessionGate:
    """The SDK's Streamable HTTP app at ``/mcp`` behind `SessionGate` (`http_app` without the token)."""
    server = app.mcp_server(http=True)
    server.middleware.append(_fit_results)
    security = rebinding_guard(host) or TransportSecuritySettings(enable_dns_rebinding_protection=False)
    inner = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host,
        transport_security=security,
        session_idle_timeout=app.settings.idle_timeout,
        max_sessions=app.settings.max_sessions,
    )
    return SessionGate(
        inner,
        max_sessions=app.settings.max_sessions,
        idle_timeout=app.settings.idle_timeout,
        on_end=app.registry.end,
        on_stream=lambda key, opened: app.registry.stream(key, opened=opened),
    )


async def _fit_results(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """``tools/call``, ``resources/read`` and ``prompts/get`` results cut to `RESULT_LIMIT` (see the module); other
    answers untouched (the lists come in pages: `agent.serve.list_pages`)."""
    result = await call_next(ctx)
    fit = {"tools/call": fit_result, "resources/read": fit_read, "prompts/get": fit_read}.get(ctx.method)
    if fit is None or not isinstance(result, dict):
        return result
    fitted = fit(result, RESULT_LIMIT, _WHY)
    if fitted is not result:
        logger.warning("a %s result over %s bytes was cut to fit in one server-sent event", ctx.method,
                       f"{RESULT_LIMIT:,}")  # fmt: skip
    return fitted


async def serve_http(
    app: ToolServer,
    *,
    token: str,
    host: str = "127.0.0.1",
    port: int = 8765,
    on_ready: Callable[[str], None] | None = None,
    sockets: list[socket.socket] | None = None,
) -> None:
    """Serve Streamable HTTP at ``http://host:port/mcp`` until SIGTERM or SIGINT; then end every session.

    ``on_ready`` gets the URL once the socket listens (with ``port=0``, the port chosen).
    ``sockets`` (from `bind`, so a caller can report a busy port before doing anything else) are
    served instead of binding ``host`` and ``port``; they are closed when serving ends.

    Raises:
        SandboxError: the warm sandboxes cannot start (raised before anything is served).
        OSError: the address cannot be bound (raised before anything is started).
    """
    import uvicorn

    class Server(uvicorn.Server):
        def capture_signals(self) -> Any:  # signals are ours: sessions close before the process ends
            return contextlib.nullcontext()

    cap = connection_cap(raise_open_files_limit())
    gate = http_gate(app, host=host)
    config = uvicorn.Config(
        BearerGuard(gate, token),
        host=host,
        port=port,
        log_level="warning",
        http=limited_protocol(cap),
        # Uvicorn answers requests 503 past this many tasks; a task outlives its connection while its handler runs.
        limit_concurrency=cap + 1,
        timeout_keep_alive=KEEP_ALIVE,
        timeout_graceful_shutdown=round(2 * STOP_GRACE),  # a backstop: the gate has ended every request by then
        backlog=BACKLOG,
    )
    server = Server(config)
    # Bound here, not by uvicorn: uvicorn reports a busy port by logging it and calling sys.exit.
    sockets = bind(host, port) if sockets is None else sockets

    def stop() -> None:
        server.should_exit = True
        gate.stop(STOP_GRACE)

    async def announce() -> None:
        while not server.started:
            if server.should_exit:
                return
            await anyio.sleep(0.02)
        if on_ready is not None:
            bound = server.servers[0].sockets[0].getsockname() if server.servers else (host, port)
            shown = f"[{host}]" if ":" in host else host
            on_ready(f"http://{shown}:{bound[1]}{MCP_PATH}")

    quiet_accept_errors(asyncio.get_running_loop())
    try:
        # Signals are handled until the sessions have closed (a signal during the close still ends every
        # upstream server and lets the containers be removed), as over stdio.
        # The upstream servers are signalled once the requests in flight had their grace (a second signal: at once).
        # A second signal cuts the grace short (before, it ended the upstream servers, but requests waited on).
        signals = StopSignals(stop, first=app.on_stop_signal, children_after=STOP_GRACE, again=lambda: gate.stop(0))
        async with signals, app, anyio.create_task_group() as tg:
            tg.start_soon(announce)
            await server.serve(sockets=sockets)
            tg.cancel_scope.cancel()
        if signals.received is not None:  # as over stdio (before: nothing on stderr said why serving ended)
            say(f"{signals.received}: stopped (every session ended, its script, sandbox and servers with it)")
    finally:
        for sock in sockets:
            sock.close()


def bind(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to every address ``host`` resolves to, as asyncio's ``create_server`` binds them.

    Serving makes them listen. With ``port=0`` the port the system chose for the first is used for the others.

    Raises:
        OSError: the address cannot be bound (in use, not local, unknown host); no socket is left open.
    """
    if not 0 <= port <= 65535:
        raise OSError(errno.EINVAL, f"port {port} is out of range (0-65535)")
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(sockets) > 1:
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sock.bind(address)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets
