"""`tooltree serve`'s following of the tree it serves: read again after a regeneration (serve's own refresh, or a
``tooltree generate-tree`` run while serving, seen before a call or a handshake), its instructions, code tools and
passthrough definitions then the tree's, the servers' prompts and resources too, the sandboxes started from then on
mounting it, and the client sessions told (`_ServedTree`, which `agent.serve.server.ToolServer` takes them from).

The manifest is read once for each reading of the tree; its identity (`_manifest_stamp`) tells whether the tree on
disk is still the one served. A pinned tool the tree lacks is said once, in a warning at its file, line and key.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

from agent.toolsets.code import CodeToolset

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

    from agent.errors import AgentSetupError
    from agent.serve.passthrough import Passthrough
    from agent.serve.sessions import SessionRegistry
    from agent.serve.settings import ServeSettings
    from agent.serve.upstream_extras import UpstreamExtras
    from sandbox.config import SandboxConfig
    from sandbox.docker_backend import DockerBackend
    from sandbox.pool import SandboxPool
    from tool_tree.config import Config
    from tool_tree.tree import Manifest

logger = logging.getLogger("agent.serve.server")

INSTRUCTIONS_CHARS = 4_096
"""The most of a server's ``instructions`` Claude Code (2.1) puts in the model's context: it cuts the rest to
"… [truncated]". Serve's are made to fit by a shorter index (`CodeToolset.prompt`). Before, a tree whose
``INDEX.md`` was near its inlining limit lost its last servers and every pinned signature that way."""


class _ServedTree:
    """`ToolServer`'s following of the tree; the state it uses is `ToolServer`'s (set in its ``__init__``)."""

    config: Config
    tree: Path
    settings: ServeSettings
    sandbox_config: SandboxConfig
    toolset: CodeToolset
    instructions: str
    passthrough: Passthrough
    extras: UpstreamExtras
    tools: types.ListToolsResult
    registry: SessionRegistry
    sandbox_pool: SandboxPool | None
    sandbox_backend: DockerBackend | None
    _servers: list[Server[Any]]
    _code_tools: list[types.Tool]
    _reloading: threading.RLock
    _tree_seen: tuple[int, ...]
    _pinned_said: set[str]

    def reload_tree(self, read: tuple[tuple[int, ...], Manifest] | None = None) -> None:
        """Read the tree again after it was regenerated: client sessions that start from now on get its instructions
        and a sandbox that mounts it (warm ones started before are replaced). A session opened before, at its next
        call: without a sandbox yet, it is replaced by a new one; with one, it keeps its tree and is told so (one opened
        on the regenerated tree already is told its client's instructions are of the tree before). The
        four tools of code mode never change; the servers' prompts and resources offered are the tree's now (sessions
        that listed them are told when they changed), and so are the passthrough tools' definitions
        (`Passthrough.reload`: when what they offer changed, each client that listed the tools is sent
        ``notifications/tools/list_changed``, a 2026-07-28 client's listen streams that asked for it told). ``read``:
        the manifest's version and the manifest, when the caller read it
        (`sandbox.stored_definitions.versioned_manifest`), taken unless the file was replaced since.

        The manifest is read once for all of it (before: the refresh's check, the toolset and the prompts and
        resources each read it, so a manifest replaced in between had them serve two trees).

        Raises:
            AgentSetupError: the tree has no manifest now (nothing changes).
        """
        from agent.errors import AgentSetupError
        from sandbox.stored_definitions import versioned_manifest
        from tool_tree.tree import TreeError

        with self._reloading:
            if read is None or read[0] != _manifest_stamp(self.tree):
                try:
                    read = versioned_manifest(self.tree)
                except TreeError as e:
                    raise AgentSetupError(str(e)) from None
            self._reload_tree(read[1])
            self._tree_seen = read[0]

    def _reload_tree(self, manifest: Manifest) -> None:
        toolset = self._toolset(manifest)
        instructions = toolset.prompt("serve.md.j2", limit=INSTRUCTIONS_CHARS)
        self.toolset, self.instructions = toolset, instructions
        for server in self._servers:
            server.instructions = instructions
        self.extras.reload(manifest)  # the servers' prompts and resources as the tree now records them
        self._reload_passthrough(manifest)
        self._refresh_sandboxes()
        self.registry.tree_refreshed()

    def _refresh_sandboxes(self) -> None:
        """Have the sandboxes started from now on mount the tree as it is now."""
        from sandbox.errors import SandboxError

        pool, backend = self.sandbox_pool, self.sandbox_backend
        try:
            if pool is not None:  # warm sandboxes mount the tree they were started with: new ones mount this one
                pool.refresh_tree()
            elif backend is not None:  # sandboxes started from now on mount this one (none started yet: nothing)
                backend.refresh_tree()
        except SandboxError as e:
            kept = "the warm sandboxes keep the tree as it was at start" if pool else "new sandboxes keep the old tree"
            logger.warning("%s: %s", kept, e)

    def _reload_passthrough(self, manifest: Manifest) -> None:
        from agent.errors import AgentSetupError

        try:
            changed = self.passthrough.reload(manifest)
        except AgentSetupError as e:
            logger.warning("tooltree serve: the passthrough tools keep their definitions: %s", e)
            return
        if changed:
            self.tools = types.ListToolsResult(tools=self._code_tools + self.passthrough.definitions)
            self.extras.tools_changed()

    async def _follow_tree_on_disk(self) -> None:
        """Before a call or a handshake: when the tree's manifest is not the one last read (a ``tooltree
        generate-tree`` run while serving regenerated the tree), serve the tree as it is now, as after serve's own
        refresh (`reload_tree`). Before, serve went on with the tree of its start: search_tools and read_file showed
        the regenerated tree, while the scripts of every session, new ones too, kept the old one (a tool added could
        not be imported, one removed was refused as not in the manifest), new clients got its instructions, and
        nothing said why."""
        if _manifest_stamp(self.tree) != self._tree_seen:
            await anyio.to_thread.run_sync(self._reload_changed)

    def _reload_changed(self) -> None:
        from agent.errors import AgentSetupError
        from sandbox.stored_definitions import versioned_manifest
        from tool_tree.tree import TreeError

        with self._reloading:
            stamp = _manifest_stamp(self.tree)
            if stamp == self._tree_seen:  # another call's reload, or serve's own refresh, read it meanwhile
                return
            try:
                read = versioned_manifest(self.tree)
            except TreeError:
                read = None  # `reload_tree` says why
            # A manifest rewritten for the configuration file it names alone (a run from another file naming the
            # same servers, the one it named gone) is the same tree: the sandboxes started from now on mount it, and
            # the sessions' bridges take it as theirs (`sandbox.tool_changes.StaleTools.same_tree`). Before, each
            # session was told the tree was regenerated, and one whose sandbox ran was told to reconnect its client.
            if read is not None and read[1].same_tree(self.toolset.manifest):
                self._refresh_sandboxes()
                self._tree_seen = read[0]
                return
            try:
                self.reload_tree(read)
            except AgentSetupError as e:
                self._tree_seen = stamp  # said once, not at every call
                logger.warning("tooltree serve: %s changed while serving and cannot be read: %s", self.tree, e)
                return
        logger.warning(
            "tooltree serve: %s was regenerated while serving: sessions from now on get it (its instructions and "
            "stubs; a session whose sandbox started before is told it keeps the tree it started with)",
            self.tree,
        )

    def _toolset(self, manifest: Manifest | None = None) -> CodeToolset:
        """The code tools over the tree as it is now, with the pinned tools it has: one it lacks is said once, in a
        warning at its file, line and key, and left out until the tree has it (a server that failed when the tree was
        generated, or one added to the config since; a background refresh brings it). Before, it stopped serve (exit
        2: Claude Code said only "Failed to connect"), or kept a regenerated tree from being served.

        Raises:
            AgentSetupError: the tree has no manifest, or its ``servers/`` is a link.
        """

        def missing(e: AgentSetupError) -> None:
            text = str(e)
            if text not in self._pinned_said:
                self._pinned_said.add(text)
                agent = self.config.section("agent")
                line = agent.lines.get("pinned")
                where = f"{agent.source}:{line}: " if line is not None else ""
                logger.warning("%s%s: %s; serving without it until the tree has it", where, e.setting, text)

        pinned = self.settings.pinned
        return CodeToolset(self.tree, pinned=pinned, standalone=True, timeout=self.sandbox_config.timeout,
                           pinned_missing=missing, manifest=manifest, config=self.config.file)  # fmt: skip


def _manifest_stamp(tree: Path) -> tuple[int, ...]:
    """What tells one ``manifest.json`` of ``tree`` from the next (`sandbox.stored_definitions.manifest_version`):
    `generate-tree` replaces it after writing every other file, whenever anything but the search index changed."""
    from sandbox.stored_definitions import manifest_version

    return manifest_version(tree)
