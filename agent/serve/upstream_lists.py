"""The servers' prompts and resources a `tooltree serve` process offers, as the tree's snapshots record them, and
where a get or read goes (`agent.serve.upstream_extras` says what is offered).
"""

from __future__ import annotations

import functools
import logging
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError

from agent.serve.upstream_offer import URI_CHARS, Found, Offered, PromptRoute, offered
from sandbox.results import clean_text
from tool_tree.text import one_line

if TYPE_CHECKING:
    from tool_tree.config import Config
    from tool_tree.tree import Manifest

logger = logging.getLogger(__name__)

Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], None]
"""Starts a task in serve's task group (nothing when serve is not serving)."""
RESOURCE_NOT_FOUND = -32002
"""The error code of a resource no server offers (the MCP specification's)."""
EVENTS: dict[str, ServerEvent] = {
    "prompts": PromptsListChanged(),
    "resources": ResourcesListChanged(),
    "tools": ToolsListChanged(),
}
"""What a change of each list is on ``subscriptions/listen`` streams (the 2026-07-28 protocol's only way to say it)."""


class UpstreamExtras:
    """The prompts and resources of the tree's servers, for one ``tooltree serve`` process: what the tree's last
    listing recorded in its snapshots (`tool_tree.snapshot_lists`), read at start and at each `reload`. Reading
    them starts no server.

    Args:
        config: the servers (its enabled servers that are in the tree's manifest are offered).
        tree: the generated tree.
        prompts, resources: offer them (``serve: prompts``, ``serve: resources``).
    """

    def __init__(self, config: Config, tree: Any, *, prompts: bool, resources: bool) -> None:
        self.config = config
        self.tree = tree
        self.prompts_on = prompts and bool(config.offered_servers)
        self.resources_on = resources and bool(config.offered_servers)
        self.found: dict[str, Found] = {}
        self.unrecorded: list[str] = []
        """The servers offered whose prompts and resources the tree may not hold: its manifest does not say it recorded
        them (`tool_tree.tree.Manifest.lists_recorded`: a tree of an earlier release) and their snapshots hold none."""
        self.offer = Offered()
        self.links = False
        """A passthrough tool is offered: its results may link to resources a client reads through serve, so
        ``resources`` is declared though no server lists one (`capabilities`)."""
        self._listeners: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
        """The client connections of the handshake era that listed, and what (``prompts``, ``resources``): told when a
        reload changes it (held weakly: a connection that has ended is forgotten)."""
        self.bus = InMemorySubscriptionBus()
        """Where a reload publishes what changed, to the ``subscriptions/listen`` streams of 2026-07-28 clients
        (`agent.serve.upstream_extras.install`), once one was opened (`listening`)."""
        self._streams = False
        self._loop: Any = None
        self._thread = 0
        self._spawn: Spawn | None = None
        self._lock = threading.Lock()
        if self.on:
            self.found, self.unrecorded = self._read()
            self.offer = offered(self.found, prompts=self.prompts_on, resources=self.resources_on)

    @property
    def on(self) -> bool:
        return self.prompts_on or self.resources_on

    def _read(self, manifest: Manifest | None = None) -> tuple[dict[str, Found], list[str]]:
        """What the tree's snapshots record, by server (those of ``manifest``, the tree's when the caller read it):
        untrusted, each list bounded (`recorded_lists`); a snapshot that cannot be read offers nothing (said in
        serve's log). And the servers of `unrecorded`."""
        from sandbox.stored_definitions import shared_manifest
        from tool_tree.held_values import HeldValues
        from tool_tree.snapshot_lists import LIST_KEYS, recorded_lists, subscribes
        from tool_tree.tree import TreeError, snapshot_data, tree_lock

        enabled = {s.name for s in self.config.offered_servers}
        found: dict[str, Found] = {}
        unrecorded: list[str] = []
        held = HeldValues.reading()  # what each snapshot records is kept while serve runs
        try:
            with tree_lock(self.tree, shared=True):
                if manifest is None:
                    manifest = shared_manifest(self.tree)  # the served toolset's copy, while the file is the same
                for entry in manifest.servers:
                    if entry.name not in enabled:
                        continue
                    try:
                        snapshot = snapshot_data(self.tree, entry, held)
                        lists = recorded_lists(snapshot)
                        if not manifest.lists_recorded and not any(key in snapshot for key, _, _ in LIST_KEYS):
                            unrecorded.append(entry.name)
                    except TreeError as e:
                        said = one_line(str(e))
                        logger.warning("tooltree serve: no prompts or resources of %r: %s", entry.name, said)
                        continue
                    found[entry.name] = Found(
                        prompts=lists.get("prompts", []),
                        resources=lists.get("resources", []),
                        templates=lists.get("resourceTemplates", []),
                        subscribe=subscribes(snapshot),
                    )
        except (TreeError, OSError) as e:
            logger.warning("tooltree serve: no prompts or resources offered: cannot read the tree's manifest: %s", e)
        return found, unrecorded

    def reload(self, manifest: Manifest | None = None) -> None:
        """Read the tree's snapshots again (after a refresh; those ``manifest`` names, the served toolset's): what is
        offered from now on; the client sessions that listed what changed are sent
        ``notifications/prompts/list_changed`` or ``.../resources/list_changed``."""
        if not self.on:
            return
        found, self.unrecorded = self._read(manifest)
        offer = offered(found, prompts=self.prompts_on, resources=self.resources_on)
        before = self.offer
        changed = set()
        if _dumped(before.prompts) != _dumped(offer.prompts):
            changed.add("prompts")
        if _dumped(before.resources) != _dumped(offer.resources) or _dumped(before.templates) != _dumped(
            offer.templates
        ):
            changed.add("resources")
        self.found, self.offer = found, offer
        if changed:
            self._tell(changed)

    def tools_changed(self) -> None:
        """The passthrough tools offered changed (`agent.serve.passthrough.Passthrough.reload`): the client sessions
        that listed the tools are sent ``notifications/tools/list_changed``, the listen streams that asked for it told
        (from any thread)."""
        self._tell({"tools"})

    # ---- list_changed ----------------------------------------------------------------------------------------------

    def listened(self, session: Any, what: str, spawn: Spawn) -> None:
        """``session`` (a client's connection of the handshake era, with ``send_prompt_list_changed``,
        ``send_resource_list_changed`` and ``send_tool_list_changed``, on serve's event loop) listed ``what``
        (``prompts``, ``resources``, ``tools``): a reload that changes it tells it.
        ``spawn`` starts a notification in serve's task group."""
        with self._lock:
            self._on_serves_loop(spawn)
            self._listeners.setdefault(session, set()).add(what)

    def listening(self, spawn: Spawn) -> None:
        """A client opened a ``subscriptions/listen`` stream (on serve's event loop): a reload that changes what is
        offered publishes it on `bus` from now on. ``spawn`` starts a publication in serve's task group."""
        with self._lock:
            self._on_serves_loop(spawn)
            self._streams = True

    def _on_serves_loop(self, spawn: Spawn) -> None:
        """Remember serve's event loop (this thread's, where a client listed or listens) and how to start a task in
        it: `_tell` sends there. Under `_lock`."""
        self._loop, self._thread = anyio.lowlevel.current_token(), threading.get_ident()
        self._spawn = spawn

    def _tell(self, changed: set[str]) -> None:
        with self._lock:
            loop, spawn, streams = self._loop, self._spawn, self._streams
            told = [(s, what & changed) for s, what in list(self._listeners.items()) if what & changed]
        if loop is None or spawn is None or not (told or streams):
            return

        def start() -> None:
            for session, what in told:
                for kind in sorted(what):
                    spawn(_quietly(getattr(session, f"send_{_SENDS[kind]}_list_changed")))
            if streams:  # each stream delivers what its client asked for (`ListenHandler`)
                for kind in sorted(changed):
                    spawn(_quietly(functools.partial(self.bus.publish, EVENTS[kind])))

        try:
            if threading.get_ident() == self._thread:
                start()
            else:  # a refresh's thread: on serve's loop (which, while serving, waits on no such thread)
                anyio.from_thread.run_sync(start, token=loop)
        except Exception:  # serve's loop has ended meanwhile
            logger.debug("no list_changed notification sent", exc_info=True)

    # ---- capabilities ----------------------------------------------------------------------------------------------

    def capabilities(self, declared: types.ServerCapabilities, *, modern: bool = False) -> types.ServerCapabilities:
        """``declared`` with prompts and resources when the tree records any (a reload tells the sessions that
        listed them when they change, or, in the 2026-07-28 protocol, the listen streams that asked for it), and
        ``resources.subscribe`` when a server offered declares it (`agent.serve.upstream_subscriptions`), but not to
        a 2026-07-28 client (``modern``) that has no ``subscriptions/listen`` stream here to follow one on
        (`agent.serve.upstream_extras.ExtrasServer` passes ``modern`` only then). Resources are declared too when a
        passthrough tool is offered (`links`), its lists then empty: MCP calls a resource link one the server can read,
        and a client that checks the capability (Claude Code, the TypeScript SDK) reads none without it."""
        prompts = self.prompts_on and bool(self.offer.prompts)
        resources = self.resources_on and bool(self.offer.resources or self.offer.templates or self.links)
        subscribe = resources and not modern and bool(self.offer.subscribing)
        return declared.model_copy(
            update={
                "prompts": types.PromptsCapability(list_changed=True) if prompts else None,
                "resources": types.ResourcesCapability(subscribe=subscribe, list_changed=True) if resources else None,
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
                if server not in matching and _matches(pattern, uri):
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


def _matches(pattern: Any, uri: str) -> bool:
    """``uri`` is one ``pattern`` (`upstream_offer.template_pattern`) expands to; a URI RE2 cannot take (a lone
    surrogate) is none."""
    try:
        return pattern.fullmatch(uri) is not None
    except UnicodeEncodeError:
        return False


_SENDS = {"prompts": "prompt", "resources": "resource", "tools": "tool"}
"""The connection's ``send_<kind>_list_changed`` of each list."""


def _dumped(items: list[Any]) -> list[dict[str, Any]]:
    return [item.model_dump(mode="json", exclude_none=True) for item in items]


def _quietly(send: Callable[[], Awaitable[None]]) -> Callable[[], Coroutine[Any, Any, None]]:
    async def run() -> None:
        try:
            await send()
        except Exception:  # the session has ended meanwhile
            logger.debug("a list_changed notification was not sent", exc_info=True)

    return run
