"""`ToolServer`: the MCP server of ``tooltree serve``, on the official SDK's low-level `Server`.

It offers the four tools of code mode (`agent.toolsets.code`: the same definitions, handlers
and, as ``instructions``, the same explanation of the tree as the agent's system prompt) and
the passthrough tools. The four never change (clients cache prompts on the tool list); a passthrough tool's definition
follows a regeneration of the tree (`reload_tree`), each client that listed the tools told
(``notifications/tools/list_changed``), one the tree no longer has withdrawn, its call refused saying why.
Each client session gets its own `Runtime` and worker threads (`agent.serve.sessions`); a call's
outcome becomes MCP content (`agent.serve.content`): images as ``ImageContent``, a failed script as
``isError`` with its traceback. A running ``execute_python`` sends progress notifications when the client
asked for them, and the client's ``notifications/cancelled`` stops the script while the session
lives on.

Over stdio the process serves one client, in either protocol era (in 2026-07-28, a change of the prompts or
resources offered is told on the client's ``subscriptions/listen`` streams: `agent.serve.upstream_extras`). Over
Streamable HTTP a session is the handshake's ``Mcp-Session-Id``; the 2026-07-28 protocol has no sessions, so there
the server's ``server/discover`` names only the handshake versions (SDK clients in ``auto`` mode then use the
handshake) and other 2026-07-28 requests are refused with the versions it serves. Over stdio, when a
server may ask the client during a call (``client_capabilities``, `agent.serve.upstream_asks`), serve speaks the
handshake only too (the SDK's handshake loop: ``server/discover`` is answered "method not found", and clients fall
back to ``initialize``): the 2026-07-28 protocol gives such a question no channel there.

Its following of the tree as a regeneration changes it (`reload_tree`, and the tree on disk checked before a call
or a handshake) is `agent.serve.served_tree`'s, which `ToolServer` takes it from.

(Over 400 lines: one class, `ToolServer`, whose lifecycle and handlers share its sessions, settings and tasks.)
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from agent.serve.content import call_result, error_result
from agent.serve.eras import handshake_for_asks, handshake_only
from agent.serve.passthrough import Passthrough
from agent.serve.served_tree import INSTRUCTIONS_CHARS, _manifest_stamp, _ServedTree
from agent.serve.sessions import STDIO_SESSION, SessionLimitError, SessionRegistry, heartbeat
from agent.serve.settings import ServeSettings
from agent.serve.upstream_asks import SCRIPT_ASKS, ClientAsks
from agent.serve.upstream_extras import ExtrasServer, UpstreamExtras, install
from agent.serve.upstream_progress import UpstreamProgress
from agent.toolsets.code import TOOLS
from agent.toolsets.script_running import running_said
from tool_tree.held_values import HeldValues
from tool_tree.starts import StartGate, start_jobs

if TYPE_CHECKING:
    from agent.toolsets.code import CodeToolset
    from sandbox.bridge import CallCancel
    from sandbox.config import SandboxConfig
    from sandbox.docker_backend import DockerBackend
    from sandbox.host import Runtime
    from sandbox.mcp_bridge import AuditLog
    from sandbox.pool import SandboxPool
    from tool_tree.config import Config
    from tool_tree.server_asks import Asker
    from tool_tree.tree import Manifest

logger = logging.getLogger(__name__)

SERVER_NAME = "tooltree"
SESSION_HEADER = "mcp-session-id"
CODE_TOOLS = tuple(t["name"] for t in TOOLS)


def _version() -> str:
    try:
        return version("mcp-tooltree")
    except PackageNotFoundError:
        return "0"


HANDSHAKES = ("initialize", "server/discover")
"""The requests that give a client the ``instructions``."""
READ_ONLY = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
"""The annotations of ``list_files``, ``read_file`` and ``search_tools``: they change nothing and reach no server
(MCP reads ``destructiveHint`` and ``idempotentHint`` only of tools that are not read-only; ``execute_python`` has
none: a script may call any tool, which is what MCP assumes of a tool without them).
Before, none had any: a client that runs the read-only calls of one turn at once (Claude Code) ran each of them
after the other, and one that asks before a tool that may change something asked for each."""
READ_ONLY_TOOLS = ("list_files", "read_file", "search_tools")
NO_ENGINE = (
    "tooltree serve: %s; serving without a sandbox until one answers: list_files, read_file, search_tools and the "
    "passthrough tools work, and each execute_python says this and tries the engine again (no restart needed)"
)
"""The warning of a serve that found no engine at start (`ToolServer.__aenter__`), the engine's error in it."""


def mcp_tool(definition: dict[str, Any]) -> types.Tool:
    """A code-mode tool definition (Anthropic shape: ``input_schema``) as an MCP tool."""
    name = definition["name"]
    return types.Tool(
        name=name,
        description=definition.get("description"),
        input_schema=definition["input_schema"],
        annotations=READ_ONLY if name in READ_ONLY_TOOLS else None,
    )


def session_key(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """``"stdio"``, or the HTTP request's ``Mcp-Session-Id`` (None when an HTTP request has none)."""
    request = ctx.request
    if request is None:
        return STDIO_SESSION
    headers = getattr(request, "headers", None)
    value = headers.get(SESSION_HEADER) if headers is not None else None
    return str(value) if value else None


class ToolServer(_ServedTree):
    """The tools, sessions and warm sandboxes of one ``tooltree serve`` process.

    Use as ``async with ToolServer(...) as ts:``, then serve `mcp_server` over a transport
    (`agent.serve.stdio.serve_stdio`, `agent.serve.http.serve_http`); leaving the block ends every
    client session and destroys the warm sandboxes.

    Args:
        config: how to start the tree's servers.
        tree: the generated tree.
        settings: the ``serve:`` settings.
        sandbox_config: limits of the sandboxes.
        workspace: a host folder restored into each session's ``/workspace`` and saved back when it ends (a relative
            one is taken from the working folder, and named by its absolute path).
        audit: a file that gets one JSON line per tool call of every session.

    Raises:
        AgentSetupError: no manifest, or a passthrough tool that is not in the tree (a pinned tool it lacks is a
            warning: `_toolset`).
    """

    def __init__(
        self,
        config: Config,
        tree: str | Path,
        *,
        settings: ServeSettings,
        sandbox_config: SandboxConfig,
        workspace: str | Path | None = None,
        audit: str | Path | None = None,
    ) -> None:
        self.config = config
        self.tree = Path(tree)
        self.settings = settings
        self.sandbox_config = sandbox_config
        # Absolute: serve's log and the sessions' notes name it to readers who do not know serve's working folder.
        self.workspace = Path(workspace).absolute() if workspace is not None else None
        self.audit_path = Path(audit) if audit is not None else None
        self._pinned_said: set[str] = set()
        self._reloading = threading.RLock()
        self._tree_seen = _manifest_stamp(self.tree)
        """The manifest's identity when the tree served was read (`_follow_tree_on_disk`)."""
        self.toolset = self._toolset()
        self.passthrough = Passthrough(self.tree, settings.passthrough, config=config.file)
        self.instructions = self.toolset.prompt("serve.md.j2", limit=INSTRUCTIONS_CHARS)
        if len(self.instructions) > INSTRUCTIONS_CHARS:
            agent = config.section("agent")
            logger.warning(
                "%s:%s: agent.pinned: tooltree serve's instructions are %s characters with these signatures, past "
                "the %s Claude Code reads: it cuts the last of them; pin fewer tools",
                agent.source, agent.lines.get("pinned"), f"{len(self.instructions):,}", f"{INSTRUCTIONS_CHARS:,}",
            )  # fmt: skip
        self.extras = UpstreamExtras(config, self.tree, prompts=settings.prompts, resources=settings.resources)
        self._servers: list[Server[Any]] = []
        self._listed: Callable[[Any, str], None] | None = None
        """What ``tools/list`` tells, so that its client is told when the tools change (`agent.serve.upstream_extras
        .install`'s, of any of `mcp_server`'s servers: they share the extras and task group)."""
        self._code_tools = [mcp_tool(t) for t in self.toolset.tools()]
        self.tools = types.ListToolsResult(tools=self._code_tools + self.passthrough.definitions)
        self.listings = HeldValues.shared(settings.max_listing_values)
        """What the servers of all client sessions hold of their listings, bounded together."""
        self.starts = StartGate(start_jobs(config))
        """The upstream servers starting at once, at most ``pool.start_jobs`` for all client sessions together (each
        session's own limit let 12 sessions over HTTP start 24 servers at once on 2 cores)."""
        self.registry = SessionRegistry(
            self._runtime, idle_timeout=settings.idle_timeout, max_sessions=settings.max_sessions
        )
        self.sandbox_pool: SandboxPool | None = None
        self.sandbox_backend: DockerBackend | None = None
        """Without warm sandboxes, the backend of every session's sandbox: it takes the tree again when it is
        regenerated and removes the copy it replaced once no sandbox mounts it (a backend per session never saw the
        regeneration, so those copies stayed until a `tooltree sandbox prune`)."""
        self._audit: AuditLog | None = None
        self._tasks: anyio.abc.TaskGroup | None = None
        self._also_stop: list[Callable[[], None]] = []
        self.on_stop_signal: list[Callable[[], None]] = []
        """Called at the first SIGTERM, SIGINT or SIGHUP, before the upstream servers are signalled (`StopSignals`'
        ``first``): `tooltree serve` cancels its background refresh there, which would otherwise report the servers
        it started, killed by the signal, as failed, and could write a tree from what was left."""
        self.on_tools_changed: list[Callable[[str], None]] = []
        """Called with a server's name when it says, in any client session, that its tools changed, or its prompts or
        resources when serve offers those (``serve: prompts``, ``serve: resources``; a notice of a list serve does
        not offer changes nothing it serves); on that session's server pool thread: it must not block
        (`tool_tree.pool.ServerPool`'s ``on_tools_changed``, told the kind). `tooltree serve` regenerates the server's
        part of the tree there (`tooltree_cli.serve_follow`), after which the sessions that listed prompts or
        resources are told if those changed (`UpstreamExtras.reload`)."""
        self.regenerating: Callable[[str], float | None] | None = None
        """Given a server's name, the seconds until `tooltree serve` regenerates its part of the tree, as the server
        said its tools changed (0: under way; None: none is due; `tooltree_cli.serve_follow.Follow.due`). A call of a
        tool it changed meanwhile says so (`sandbox.tool_changes.regenerating`), not to regenerate the tree."""

    def _toolset(self, manifest: Manifest | None = None) -> CodeToolset:
        """`_ServedTree._toolset`'s, which also says the packages the sandbox image adds (``sandbox.pip_packages``)."""
        toolset = super()._toolset(manifest)
        toolset.packages = self.sandbox_config.pip_packages
        return toolset

    # ---- lifecycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> ToolServer:
        """Open the audit log, warm the sandboxes (``settings.warm``) and start ending idle sessions.

        When no engine answers (Docker not installed or not started, ``DOCKER_HOST`` wrong), it serves all the same,
        with a warning (`NO_ENGINE`): the tree, search and passthrough tools need none, and each ``execute_python``
        says the engine's error and tries it again (the pool starts at the first call that finds it). Before, serve
        exited 4 and a client showed only "Connection closed".

        Raises:
            SandboxError: the engine answers and cannot run the sandboxes (it cannot confine them, no image).
        """
        from sandbox.docker_backend import DockerBackend
        from sandbox.errors import EngineUnavailableError
        from sandbox.mcp_bridge import AuditLog
        from sandbox.pool import SandboxPool

        if self.audit_path is not None:
            self._audit = AuditLog(self.audit_path)
        if self.settings.warm > 0:
            pool = SandboxPool(size=self.settings.warm, config=self.sandbox_config, tree=self.tree)
            try:
                await anyio.to_thread.run_sync(pool.start)
            except EngineUnavailableError as e:  # started by the first session's `acquire` once an engine answers
                logger.warning(NO_ENGINE, e)
            self.sandbox_pool = pool
        else:  # the engine is not asked anything until a session starts a sandbox
            self.sandbox_backend = DockerBackend(self.sandbox_config, tree=self.tree)
        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        self._tasks.start_soon(self.registry.expire_idle)
        return self

    def stop_on_close(self, stop: Callable[[], None]) -> None:
        """Have leaving the ``async with`` block also call ``stop`` (blocking, on a worker thread) while the
        sessions close: `tooltree serve` stops its background refresh there, so that it ends (and the servers it
        started with it) under the same signal handling as the sessions. It should not raise."""
        self._also_stop.append(stop)

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        try:
            if self._tasks is not None:
                self._tasks.cancel_scope.cancel()
                await self._tasks.__aexit__(None, None, None)
        finally:
            self._tasks = None
            with anyio.CancelScope(shield=True):
                try:
                    async with anyio.create_task_group() as closing:
                        for stop in self._also_stop:
                            closing.start_soon(anyio.to_thread.run_sync, stop)
                        await self.registry.aclose()
                finally:
                    pool, self.sandbox_pool = self.sandbox_pool, None
                    if pool is not None:
                        await anyio.to_thread.run_sync(pool.close)
                    if self._audit is not None:
                        self._audit.close()
                        self._audit = None

    def _runtime(self, key: str) -> Runtime:
        from sandbox.host import Runtime

        runtime = Runtime(
            self.config,
            self.tree,
            sandbox_config=self.sandbox_config,
            workspace=self.workspace,
            audit=self._audit,
            sandbox_pool=self.sandbox_pool,
            sandbox_backend=self.sandbox_backend,
            session=key,
            on_tools_changed=self._tools_changed,
            held_within=self.listings,
            start_gate=self.starts,
        )
        runtime.following = self._regenerating
        return runtime

    def _regenerating(self, server: str) -> float | None:
        """Seconds until ``server``'s part of the tree is regenerated, as it said its tools changed (`regenerating`)."""
        return self.regenerating(server) if self.regenerating is not None else None

    def _tools_changed(self, server: str, kind: str = "tools") -> None:
        """``server`` said its list ``kind`` changed (`on_tools_changed`). Before, a notice of prompts or resources
        regenerated the server's part of the tree also when serve offered neither."""
        if (kind == "prompts" and not self.extras.prompts_on) or (kind == "resources" and not self.extras.resources_on):
            return
        for hook in self.on_tools_changed:
            hook(server)

    # ---- the MCP server -------------------------------------------------------------------------

    def mcp_server(self, *, http: bool = False) -> Server[Any]:
        """A low-level `Server` with this tool server's handlers (``http``: handshake era only, see the module)."""
        server = ExtrasServer(
            SERVER_NAME,
            version=_version(),
            instructions=self.instructions,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        # The servers' prompts and resources (`agent.serve.upstream_extras`), each get or read in the client's session.
        # Over stdio in either era (not handshake-only for asks), 2026-07-28 clients are told on listen streams.
        listed = install(server, self.extras, lambda: self._tasks, self._in_session,
                         lambda: self.sandbox_config.output_chars, listen=not http and not self.asks_client,
                         linked=self.passthrough.links, tools_change=bool(self.passthrough.names))  # fmt: skip
        self._listed = listed
        if http:

            async def discover(ctx: ServerRequestContext[Any, Any], params: types.RequestParams) -> HandlerResult:
                return types.DiscoverResult(
                    supported_versions=list(HANDSHAKE_PROTOCOL_VERSIONS),
                    capabilities=server.get_capabilities(),
                    instructions=self.instructions,
                )

            server.add_request_handler("server/discover", types.RequestParams, discover)
            server.middleware.append(handshake_only)
        elif self.asks_client:  # the handshake loop (`agent.serve.stdio`): a 2026-07-28 request is told why
            server.middleware.append(handshake_for_asks)

        async def follow_tree(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
            if ctx.method in HANDSHAKES:  # a new client gets the instructions of the tree as it is now
                await self._follow_tree_on_disk()
            return await call_next(ctx)

        server.middleware.append(follow_tree)
        self._servers.append(server)
        return server

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if self.passthrough.names:  # told when a regeneration changes them, the tree on disk read first
            await self._follow_tree_on_disk()
            if self._listed is not None:
                self._listed(ctx, "tools")
        return self.tools

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name, arguments = params.name, dict(params.arguments or {})
        key = session_key(ctx)
        if key is not None:  # a passthrough tool as the tree is now
            await self._follow_tree_on_disk()
        if name not in CODE_TOOLS and name not in self.passthrough:
            known = ", ".join([*CODE_TOOLS, *self.passthrough.entries])
            return error_result(f"{self.passthrough.refusal(name)}; the tools are {known}")
        if key is None:
            return error_result("this HTTP request carries no Mcp-Session-Id; connect with the initialize handshake")

        arrived, waited = time.monotonic(), False

        async def progress(seconds: float, total: float | None, said: str | None = None, after: float = 0) -> None:
            message = f"running for {seconds:.0f} s" + (f"; {said}" if said else "")
            await ctx.session.report_progress(round(after + seconds, 1), total=total, message=message)

        async def queued(seconds: float) -> None:  # behind this session's running script
            nonlocal waited
            waited = True
            message = f"waiting {seconds:.0f} s for this session's running script to end (one script at a time)"
            await ctx.session.report_progress(round(seconds, 1), total=None, message=message)

        async def script_progress(seconds: float, printed: str | None, waiting: str | None) -> None:
            # The calls it waits on, and the last line it printed. After a wait the progress goes on from it (it must
            # only grow), and so does the total.
            since = time.monotonic() - arrived - seconds if waited else 0
            total, message = round(self.sandbox_config.timeout + since, 1), running_said(seconds, waiting, printed)
            await ctx.session.report_progress(round(since + seconds, 1), total=total, message=message)

        try:
            async with self.registry.use(key) as session:
                # On the session's own worker threads: a client whose calls block waits for itself only.
                threads = session.limiter
                if (entry := self.passthrough.entries.get(name)) is not None:
                    runtime = await anyio.to_thread.run_sync(session.opened, limiter=threads)
                    asked = (params.meta or {}).get("progress_token") is not None  # for progress: then so is the server
                    asker = self._asker(ctx, entry.server)
                    refused = session.stale_refused()
                    result = await self._passthrough(name, arguments, runtime, threads, progress, asked, asker)
                    if (renews := session.renews_after_passthrough(refused, entry.path)) is not None:
                        result.content.append(types.TextContent(text=renews))
                    return result
                if name == "execute_python":
                    interval = self.settings.progress_interval
                    asks = self._script_asks(ctx)
                    outcome = await session.execute(self.toolset, arguments, script_progress, interval, queued, asks)
                else:
                    outcome = await anyio.to_thread.run_sync(
                        session.call, self.toolset, name, arguments, limiter=threads
                    )
        except SessionLimitError as e:
            return error_result(f"{e}; try again when another client has disconnected")
        return call_result(outcome)

    async def _in_session(self, ctx: ServerRequestContext[Any, Any], work: Callable[[Runtime, CallCancel], Any]) -> Any:
        """``work`` of the client session's runtime, on one of the session's worker threads; the client's cancel
        cancels what it sends upstream (given ``CallCancel``), as for a passthrough call."""
        from sandbox.bridge import CallCancel
        from sandbox.errors import SandboxError
        from tool_tree.pool import PoolError

        key = session_key(ctx)
        if key is None:
            raise MCPError(
                types.INVALID_REQUEST, "this HTTP request carries no Mcp-Session-Id; connect with the handshake"
            )
        await self._follow_tree_on_disk()
        cancel = CallCancel()
        try:
            async with self.registry.use(key) as session:
                runtime = await anyio.to_thread.run_sync(session.opened, limiter=session.limiter)
                return await anyio.to_thread.run_sync(
                    work, runtime, cancel, limiter=session.limiter, abandon_on_cancel=True
                )
        except anyio.get_cancelled_exc_class():
            cancel.cancel()
            raise
        except (SessionLimitError, SandboxError, PoolError) as e:
            raise MCPError(types.INTERNAL_ERROR, f"the client's session could not start: {e}") from None

    def _asker(self, ctx: ServerRequestContext[Any, Any], server: str) -> Asker | None:
        """Who puts the questions of ``server`` (a passthrough tool's) to the client, when its configuration declares
        it may ask (``client_capabilities``)."""
        if ctx.request_id is None or not self._asks_client(server):
            return None
        return ClientAsks(ctx.session, ctx.request_id, asyncio.get_running_loop()).of(server)

    def _script_asks(self, ctx: ServerRequestContext[Any, Any]) -> Callable[[str], Asker] | None:
        """Who puts the elicitations of a script's calls to the client, by server: with ``asks_from_scripts``,
        `SCRIPT_ASKS` a script, one at a time, tied to its ``execute_python`` request."""
        if ctx.request_id is None or not self.settings.asks_from_scripts:
            return None
        loop = asyncio.get_running_loop()
        return ClientAsks(ctx.session, ctx.request_id, loop, kinds=("elicitation",), limit=SCRIPT_ASKS, per="script").of

    @property
    def asks_client(self) -> bool:
        """Whether a server may ask the client during a call (``client_capabilities``: one of a passthrough tool, or
        any with ``asks_from_scripts``): then the client must speak the handshake protocol, over stdio too
        (`agent.serve.stdio`)."""
        if self.settings.asks_from_scripts:
            return any(s.client_capabilities for s in self.config.servers if s.enabled)
        return any(self._asks_client(entry.server) for entry in self.passthrough.entries.values())

    def _asks_client(self, server: str) -> bool:
        """Whether ``server``'s configuration declares client capabilities (``client_capabilities``)."""
        config = next((s for s in self.config.servers if s.name == server), None)
        return config is not None and bool(config.client_capabilities)

    async def _passthrough(
        self,
        name: str,
        arguments: dict[str, Any],
        runtime: Runtime,
        threads: anyio.CapacityLimiter,
        progress: Callable[[float, float | None, str | None], Awaitable[None]],
        asked: bool = False,
        asker: Asker | None = None,
    ) -> types.CallToolResult:
        """A passthrough call on a worker thread, with ``progress`` every ``progress_interval`` seconds while it runs
        (as for a script: before, none, and a client's own timeout could end a long call that was still working).
        The client's cancel (``notifications/cancelled``) cancels it upstream (`sandbox.bridge.CallCancel`) and
        answers at once. Before, the request waited for the call's end and the call ran on, holding the thread and
        the server's place. The server's own progress, when the client ``asked`` for progress, is said in the beats
        (`agent.serve.upstream_progress`); what it asks during the call goes to ``asker``
        (`agent.serve.upstream_asks`)."""
        from sandbox.bridge import CallCancel

        cancel, upstream = CallCancel(), UpstreamProgress()

        async def beat(seconds: float) -> None:
            await progress(seconds, None, upstream.said())

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(heartbeat, self.settings.progress_interval, beat, "a passthrough call")
                try:
                    call, listener = self.passthrough.call, upstream.update if asked else None
                    result = await anyio.to_thread.run_sync(
                        call, name, arguments, runtime, cancel, listener, asker, limiter=threads, abandon_on_cancel=True
                    )
                finally:
                    tg.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            cancel.cancel()
            raise
        return result
