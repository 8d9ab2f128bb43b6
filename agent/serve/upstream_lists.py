"""The one listing of the servers' prompts and resources of a `tooltree serve` process, and where a get or read goes
(`agent.serve.upstream_extras` says when it runs and what it offers).
"""

from __future__ import annotations

import hashlib
import logging
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError

from agent.serve.upstream_offer import URI_CHARS, Found, NotKept, Offered, PromptRoute, offered
from sandbox.results import clean_text
from tool_tree.text import one_line

if TYPE_CHECKING:
    from tool_tree.config import Config, ServerConfig
    from tool_tree.pool import ServerPool

logger = logging.getLogger(__name__)

LIST_WAIT = 10.0
"""Seconds a list request waits for the listing of every server before it answers with what has been listed."""
MAX_PAGES = 50
"""Pages of one list (prompts, resources, templates) read from one server."""
MAX_ITEMS = 1_000
"""Items of one list kept from one server (more are counted, and said in serve's log)."""
RESOURCE_NOT_FOUND = -32002
"""The error code of a resource no server offers (the MCP specification's)."""


class UpstreamExtras:
    """The prompts and resources of the tree's servers, for one ``tooltree serve`` process.

    Args:
        config: how to start the servers (its enabled servers that are in the tree's manifest are listed).
        tree: the generated tree.
        prompts, resources: offer them (``serve: prompts``, ``serve: resources``).
    """

    def __init__(self, config: Config, tree: Any, *, prompts: bool, resources: bool) -> None:
        self.config = config
        self.tree = tree
        self.prompts_on = prompts and bool(config.enabled_servers)
        self.resources_on = resources and bool(config.enabled_servers)
        self.found: dict[str, Found] = {}
        self.offer = Offered()
        self.failed: dict[str, str] = {}
        """Servers whose listing failed, with why (they offer nothing here; a get or read still starts them)."""
        self.done = anyio.Event()
        self._begun = False

    @property
    def on(self) -> bool:
        return self.prompts_on or self.resources_on

    def begin(self, tasks: anyio.abc.TaskGroup | None) -> None:
        """Start the listing in ``tasks`` unless it has begun (None: the server is not serving; nothing is listed)."""
        if self._begun or not self.on or tasks is None:
            return
        self._begun = True
        tasks.start_soon(self._list_all)

    async def ready(self, tasks: anyio.abc.TaskGroup | None) -> bool:
        """Begin the listing, then wait for its end at most `LIST_WAIT` seconds; whether it has ended."""
        self.begin(tasks)
        with anyio.move_on_after(LIST_WAIT):
            await self.done.wait()
        return self.done.is_set()

    def _servers(self) -> list[ServerConfig]:
        from tool_tree.tree import Manifest, TreeError, tree_lock

        try:
            with tree_lock(self.tree, shared=True):
                wanted = {s.name for s in Manifest.load(self.tree).servers}
        except (TreeError, OSError) as e:
            logger.warning("tooltree serve: no prompts or resources offered: cannot read the tree's manifest: %s", e)
            return []
        return [s for s in self.config.enabled_servers if s.name in wanted]

    async def _list_all(self) -> None:
        from tool_tree.pool import ServerPool
        from tool_tree.starts import start_jobs

        try:
            servers = await anyio.to_thread.run_sync(self._servers)
            if servers:
                # Its servers are stopped once they have answered (a get or read starts them in the client's session).
                async with (
                    ServerPool(servers, start_jobs=start_jobs(self.config), source=self.config.file) as pool,
                    anyio.create_task_group() as tg,
                ):
                    for server in servers:
                        tg.start_soon(self._list_server, pool, server.name)
        except Exception as e:  # a bug here must not end serve: nothing more is offered
            logger.exception("tooltree serve: listing the servers' prompts and resources failed: %s", e)
        finally:
            self.done.set()

    async def _list_server(self, pool: ServerPool, server: str) -> None:
        from tool_tree.pool import PoolError, ServerUnavailable

        found = Found()
        try:
            declared = await pool.capabilities(server)
            if self.prompts_on and isinstance(declared.get("prompts"), dict):
                found.prompts = await _pages(pool, server, "prompts/list", "prompts")
            if self.resources_on and isinstance(declared.get("resources"), dict):
                found.resources = await _pages(pool, server, "resources/list", "resources")
                found.templates = await _pages(pool, server, "resources/templates/list", "resourceTemplates")
        except (PoolError, NotKept) as e:
            said = e.reason if isinstance(e, ServerUnavailable) else str(e)
            self.failed[server] = one_line(said, 500)
            logger.warning(
                "tooltree serve: the prompts and resources of %r are not offered: %s", server, one_line(said)
            )
            return
        self.found[server] = found
        self.offer = offered(self.found, prompts=self.prompts_on, resources=self.resources_on)

    # ---- the handshake ---------------------------------------------------------------------------------------------

    def capabilities(self, declared: types.ServerCapabilities) -> types.ServerCapabilities:
        """``declared`` with prompts and resources only when offered: until the listing has ended, when on."""
        listed = self.done.is_set()
        prompts = self.prompts_on and (not listed or bool(self.offer.prompts))
        resources = self.resources_on and (not listed or bool(self.offer.resources or self.offer.templates))
        return declared.model_copy(
            update={
                "prompts": types.PromptsCapability(list_changed=True) if prompts else None,
                "resources": types.ResourcesCapability(subscribe=False, list_changed=True) if resources else None,
            }
        )

    # ---- routing ---------------------------------------------------------------------------------------------------

    def prompt_route(self, name: str) -> PromptRoute:
        """Raises: MCPError: no prompt of that name is offered."""
        route = self.offer.routes.get(name)
        if route is None:
            known = ", ".join(sorted(self.offer.routes)[:20]) or "none"
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown prompt {quoted(name)}; the prompts are {known}")
        return route

    def owner(self, uri: str) -> str:
        """The server a read of ``uri`` goes to.

        Raises:
            MCPError: no server, or more than one, lists it or has a template that matches it.
        """
        listed = self.offer.owners.get(uri)
        if listed is not None and len(listed) == 1:
            return listed[0]
        if listed:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"the resource {quoted(uri)} is listed by more than one server ({', '.join(listed)}): "
                "tooltree cannot tell which one to read it from",
            )
        matching: list[str] = []
        if len(uri) <= URI_CHARS:
            for server, pattern in self.offer.matchers:
                if server not in matching and pattern.fullmatch(uri):
                    matching.append(server)
        if len(matching) == 1:
            return matching[0]
        if matching:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"the resource {quoted(uri)} matches resource templates of more than one server "
                f"({', '.join(matching)}): tooltree cannot tell which one to read it from",
            )
        raise MCPError(
            code=RESOURCE_NOT_FOUND,
            message=f"no server lists the resource {quoted(uri)} or a resource template that matches it "
            "(resources/list and resources/templates/list say what is offered)",
        )


def quoted(text: str) -> str:
    """A name or URI a client sent, for an error: cleaned, on one line, at most 200 characters."""
    return repr(one_line(clean_text(text[:400]), 200))


async def _pages(pool: ServerPool, server: str, method: str, key: str) -> list[dict[str, Any]]:
    """The items of one list of ``server``, over at most `MAX_PAGES` pages and `MAX_ITEMS` items.

    Raises:
        PoolError: as `ServerPool.request`.
        NotKept: the server answered with an error or not with a list (said, with the server's words).
    """
    from tool_tree.connect import MAX_CURSOR_CHARS
    from tool_tree.pool import CallFailure

    items: list[dict[str, Any]] = []
    seen: set[bytes] = set()
    cursor: str | None = None
    for page in range(MAX_PAGES):
        result = await pool.request(server, method, {"cursor": cursor} if cursor is not None else None)
        if isinstance(result, CallFailure):
            raise NotKept(f"{method}: {result.message}")
        listed = result.get(key)
        if not isinstance(listed, list):
            raise NotKept(f"{method}: the result has no list `{key}`")
        items.extend(item for item in listed[: MAX_ITEMS - len(items)] if isinstance(item, dict))
        if len(items) >= MAX_ITEMS:
            logger.warning("tooltree serve: %s: %s: only the first %d items are offered", server, method, MAX_ITEMS)
            return items
        cursor = result.get("nextCursor")
        if cursor is None or cursor == "":
            return items
        digest = hashlib.sha256(str(cursor).encode("utf-8", "surrogatepass")).digest()
        if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR_CHARS or digest in seen:
            logger.warning(
                "tooltree serve: %s: %s: malformed or repeated cursor after page %d", server, method, page + 1
            )
            return items
        seen.add(digest)
    logger.warning("tooltree serve: %s: %s: only the first %d pages are read", server, method, MAX_PAGES)
    return items
