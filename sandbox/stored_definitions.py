"""Tools' definitions as a tree's snapshots store them, read once for every bridge of the process.

`sandbox.mcp_bridge.McpBridge` reads a tool's stored definition at its first call, to check its arguments against its
input schema, and keeps it for its session. Two costs grew with the sessions and the tools called:

- **Memory.** Each `tooltree serve` client session has a bridge of its own, so each kept a copy: a tool whose schema
  holds 800,000 values cost about 55 MB in every session that called it. A definition is now shared by every bridge
  that reads the same tool of the same tree at the same schema hash (the hash of its whole definition, from the
  manifest): one copy while any bridge holds it, let go when the last one is.
- **Host CPU.** The first call of each tool parsed its server's whole snapshot to pick out that one tool: a script
  calling many tools of a big server paid a whole snapshot per tool, on the session's event loop and charged to no
  budget (60 ms each for a server of 20,000 tools; 0.24 s for one listing 2.4 million values). A snapshot is now parsed
  once per version of its file, and each tool's definition kept as its JSON text (`SnapshotTexts`, about the file's
  size, shared like the definitions and held while any definition read from it is); a tool's first call parses its
  own text alone.
- **The manifest.** Each session's runtime read the tree's manifest anew (about 17 MB for a tree of 20,000 tools);
  `shared_manifest` gives the sessions of the process one copy per version of the file, and the other readers of
  ``tooltree serve``'s start too (its check of the tree, its toolset, its passthrough tools, its servers' prompts and
  resources: each read the file whole, 0.3 s for 20,000 tools).

Definitions and manifests are shared read-only: nothing changes them once read.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from tool_tree.tree import MANIFEST_FILE, SNAPSHOTS_DIR, Manifest, ServerEntry, ToolEntry, TreeError, load_snapshot

logger = logging.getLogger(__name__)


class SnapshotTexts:
    """One version of a server's snapshot: each tool's definition as JSON text, by name (the first of a name)."""

    __slots__ = ("__weakref__", "texts")

    def __init__(self, tools: list[dict[str, Any]]) -> None:
        texts: dict[str, str] = {}
        for tool in tools:
            name = tool.get("name")
            if isinstance(name, str) and name not in texts:
                texts[name] = json.dumps(tool, ensure_ascii=False)
        self.texts = texts


class StoredDefinition:
    """One tool's definition as its server's snapshot stores it (``value``; None: not readable there), and the
    snapshot it was read from (kept while the definition is, so the server's other tools are not parsed again)."""

    __slots__ = ("__weakref__", "source", "value")

    def __init__(self, value: dict[str, Any] | None, source: SnapshotTexts | None = None) -> None:
        self.value = value
        self.source = source


_definitions: weakref.WeakValueDictionary[tuple[str, str, str, str], StoredDefinition] = weakref.WeakValueDictionary()
_snapshots: weakref.WeakValueDictionary[tuple[Any, ...], SnapshotTexts] = weakref.WeakValueDictionary()
_manifests: weakref.WeakValueDictionary[tuple[Any, ...], Manifest] = weakref.WeakValueDictionary()
_lock = threading.Lock()
_V = TypeVar("_V")


def shared_manifest(tree: str | os.PathLike[str]) -> Manifest:
    """The manifest of the tree folder ``tree`` as its file is now: the copy another runtime of this process holds,
    or read now (`Manifest.load`). Read it under the tree's shared lock, as `Manifest.load`.

    Raises:
        TreeError: no manifest, an unreadable or malformed one, or ``tree`` is not a folder.
    """
    return versioned_manifest(tree)[1]


def versioned_manifest(tree: str | os.PathLike[str]) -> tuple[tuple[int, ...], Manifest]:
    """`shared_manifest`, and the version of the file it was read from (`manifest_version`), taken before it was read:
    a file replaced meanwhile gives the newer manifest under the older version, which a later `manifest_version`
    tells from the file's (so it is read again), never an older one under the newer version.

    Raises:
        TreeError: see `shared_manifest`.
    """
    root = os.path.realpath(tree)
    version = _version(os.path.join(root, MANIFEST_FILE))
    return version, _shared(_manifests, (root, version) if version else None, lambda: Manifest.load(tree))


def manifest_version(tree: str | os.PathLike[str]) -> tuple[int, ...]:
    """Which version of ``tree``'s manifest file is there now (() when there is none): generate-tree replaces the
    file whenever anything but the search index changed."""
    return _version(os.path.join(os.path.realpath(tree), MANIFEST_FILE))


def records_tree(tree: str | os.PathLike[str], manifest: Manifest, version: tuple[int, ...] | None) -> bool:
    """Whether ``tree``'s manifest file, still at ``version`` (`manifest_version`), records the same tree as
    ``manifest`` (`Manifest.same_tree`: one rewritten for the configuration file it names alone does). False when the
    file is at another version now (a later one is looked at when it is seen), when there is none, or when it cannot be
    read. The file is read as `versioned_manifest` reads it (one copy for the process)."""
    if not version or version != manifest_version(tree):
        return False
    try:
        read, now = versioned_manifest(tree)
    except TreeError:
        return False
    return read == version and now.same_tree(manifest)


def stored_definition(
    tree: str | os.PathLike[str], server: ServerEntry | None, entry: ToolEntry, *, warn: bool = True
) -> StoredDefinition:
    """``entry``'s definition in ``server``'s snapshot in ``tree``: the one another bridge of this process holds, or
    read now (an unreadable snapshot gives None, with a warning unless not ``warn``; so does no ``server``)."""
    root = os.path.realpath(tree)

    def read() -> StoredDefinition:
        try:
            if server is not None:
                source = _snapshot_texts(tree, root, server)
                text = source.texts.get(entry.tool)
                return StoredDefinition(json.loads(text) if text is not None else None, source)
        except TreeError as e:
            if not warn:  # the caller says why itself (a session whose tree was regenerated since)
                return StoredDefinition(None)
            # Unchecked here, then; the live definition is still compared to the manifest's hash before a call.
            logger.warning("cannot read the definition of %s.%s from the tree: %s", entry.server, entry.tool, e)
        return StoredDefinition(None)

    return _shared(_definitions, (root, entry.server, entry.tool, entry.schema_hash), read)


def _snapshot_texts(tree: str | os.PathLike[str], root: str, server: ServerEntry) -> SnapshotTexts:
    """The tools' texts of ``server``'s snapshot as its file is now (a file replaced is another version: generate-tree
    writes a new file in its place).

    Raises:
        TreeError: the snapshot is missing or malformed.
    """
    rel = server.snapshot or f"{SNAPSHOTS_DIR}/{server.package}.json"
    version = _version(os.path.join(root, rel))  # none: not shared, read (and refused) below
    key = (root, server.name, rel, version) if version else None
    return _shared(_snapshots, key, lambda: SnapshotTexts(load_snapshot(tree, server)))


def _shared(cache: weakref.WeakValueDictionary[Any, _V], key: Any, make: Callable[[], _V]) -> _V:
    """The value of ``key`` another holder in this process holds, or ``make()`` (outside the lock: a read may take a
    while), kept for the next; a ``key`` of None is not shared. Two threads making it at once keep one copy."""
    if key is not None:
        with _lock:
            found = cache.get(key)
        if found is not None:
            return found
    made = make()
    if key is None:
        return made
    with _lock:
        return cache.setdefault(key, made)


def _version(path: str) -> tuple[int, ...]:
    """Which version of the file ``path`` is there (generate-tree replaces a file it rewrites); () if none is.

    With its change time, which no one sets: a file rewritten in place to the same size, its modification time put
    back (``touch -r``, a restore that keeps times), is another version. Before, the old copy was still handed out.
    """
    try:
        st = os.stat(path, follow_symlinks=False)
    except (OSError, ValueError):
        return ()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
