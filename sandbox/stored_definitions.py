"""Tools' definitions as a tree's snapshots store them, read once for every bridge of the process.

`sandbox.mcp_bridge.McpBridge` reads a tool's stored definition at its first call, to check its arguments against its
input schema, and keeps it for its session. Each `tooltree serve` client session has a bridge of its own, so each
kept a copy: a tool whose schema holds 800,000 values cost about 55 MB in every session that called it, and 16
sessions held 16 copies. A definition is now shared by every bridge that reads the same tool of the same tree at the
same schema hash (the hash of its whole definition, from the manifest): one copy in memory while any bridge holds
it, let go when the last one is.

Definitions are shared read-only: nothing changes them once read.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import Any

from tool_tree.tree import ServerEntry, ToolEntry, TreeError, load_snapshot

logger = logging.getLogger(__name__)


class StoredDefinition:
    """One tool's definition as its server's snapshot stores it (``value``; None: not readable there)."""

    __slots__ = ("__weakref__", "value")

    def __init__(self, value: dict[str, Any] | None) -> None:
        self.value = value


_shared: weakref.WeakValueDictionary[tuple[str, str, str, str], StoredDefinition] = weakref.WeakValueDictionary()
_lock = threading.Lock()


def stored_definition(tree: str | os.PathLike[str], server: ServerEntry | None, entry: ToolEntry) -> StoredDefinition:
    """``entry``'s definition in ``server``'s snapshot in ``tree``: the one another bridge of this process holds, or
    read now (an unreadable snapshot gives None, with a warning; so does no ``server``)."""
    key = (os.path.realpath(tree), entry.server, entry.tool, entry.schema_hash)
    with _lock:
        found = _shared.get(key)
    if found is not None:
        return found
    raw: dict[str, Any] | None = None
    try:
        if server is not None:
            raw = next((t for t in load_snapshot(tree, server) if t.get("name") == entry.tool), None)
    except TreeError as e:
        # Unchecked here, then; the live definition is still compared to the manifest's hash before a call.
        logger.warning("cannot read the definition of %s.%s from the tree: %s", entry.server, entry.tool, e)
    made = StoredDefinition(raw)
    with _lock:  # another bridge may have read it meanwhile: one copy is kept
        return _shared.setdefault(key, made)
