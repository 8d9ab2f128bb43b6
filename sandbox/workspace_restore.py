"""Restoring a session's workspace from a host directory into the container.

Restore (host → container) reads the host directory in batches of ``workspace.put`` requests
(`iter_restore_batches`), under the shared lock a save's merge takes on the folder (`restoring`), and never sends
the top-level names that are tooltree's own (`RESERVED`, which a save never writes either:
`sandbox.workspace`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sandbox._supervisor.fswalk import PathError, show
from sandbox._supervisor.transfer import MAX_ENTRIES, TreeReader
from sandbox.errors import WorkspaceError
from sandbox.host_folders import lock_saves_into
from sandbox.workspace_merge import HOST_ONLY_NAMES
from sandbox.workspace_staging import WORK_FOLDER

LOCK_TIMEOUT = 120.0
"""Seconds a save waits for another save into the same folder to end."""
TMPFS_INODES = MAX_ENTRIES + 16
"""The ``nr_inodes`` of the ``/workspace`` tmpfs: room to restore `MAX_ENTRIES` entries beside the root,
the tree's link, ``skills/`` and an execution's output files. A script that fills them all holds a few
more entries than a save accepts: that save fails, and says so."""

RESERVED = {"servers": "the read-only tree of servers", WORK_FOLDER: "where saves are received"}
"""Top-level names that are never workspace content, and what tooltree holds there."""
_RESERVED = frozenset(name.encode() for name in RESERVED)
_SKILLS = frozenset({b"skills"})
"""Left out of a restore where it is a file (the sandbox's ``skills/`` is made before the restore)."""


@contextlib.contextmanager
def restoring(dest: Path) -> Iterator[None]:
    """Hold, shared, the lock under which saves into ``dest`` are merged (`WorkspaceReceiver.commit`), so that a
    restore reads the folder as one save left it. Before, a session starting while another process (an ``exec``, a
    ``serve`` client) merged its save into the folder was restored with half of that save: some files new, others
    still old, one moved aside for its replacement missing.

    Raises:
        WorkspaceError: a save into the folder held the lock for `LOCK_TIMEOUT` seconds.
    """
    try:
        lock = lock_saves_into(Path(os.path.realpath(dest)), LOCK_TIMEOUT, shared=True)
    except WorkspaceError as e:
        e.busy = True
        raise
    try:
        yield
    finally:
        os.close(lock)


def iter_restore_batches(
    root: Path, *, max_bytes: int, max_entries: int = MAX_ENTRIES, skip_top: bool = False
) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(method, params)`` requests that recreate ``root``'s folders and regular files, each under `BATCH_BYTES`.

    Links and special files are left out (never followed); ``skip_top``: a top-level ``skills``, a file, too.

    Raises:
        WorkspaceError: the folder is over a cap, holds a path that cannot cross, or cannot be read
            (the message says which, relative to ``root``).
    """
    skip = _RESERVED | _SKILLS if skip_top else _RESERVED
    reader = TreeReader(root, skip=skip, skip_any=HOST_ONLY_NAMES, max_bytes=max_bytes, max_entries=max_entries)
    try:
        # Over the caps by the files' sizes: refused before any file is read (before: a 10 GB sparse file was read
        # and sent, 256 MB in about 4 s, until the sandbox's disk refused it).
        reader.check_size()
        for batch in reader.batches():
            yield "workspace.put", {"entries": batch}
    except PathError as e:
        raise WorkspaceError(str(e)) from None
    except OSError as e:
        unreadable = WorkspaceError(f"cannot read {show(reader.where)}: {e.strerror}")
        unreadable.unreadable = True  # what to do is not to make it smaller (`Sandbox` says what)
        raise unreadable from None
