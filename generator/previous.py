"""The manifest of the tree a run regenerates (`load_previous`), read too when its file has more than one name."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tool_tree.tree import MANIFEST_FILE, MAX_MANIFEST_VALUES, MAX_TREE_FILE_BYTES, Manifest, TreeError, check_values


def load_previous(out: Path) -> Manifest | None:
    """The manifest of an existing tree, or None when there is none (or it is unreadable).

    One of more than one name (a tree copied with ``cp -al``), which every reader of a tree refuses, is read here:
    the run writes it afresh (its other name keeps its bytes), and needs its record to tell the user's files and
    edits from its own and to keep a failed server's stubs. Before, the run took every file under ``servers/`` for
    its own: an edited stub was overwritten and a file copied from a stub deleted, neither copied aside, and a
    failed server's stubs were deleted."""
    try:
        return Manifest.load(out)
    except TreeError:
        return _linked_manifest(out / MANIFEST_FILE)
    except OSError:  # ``out`` is a file, or unreadable (`check_out` says which)
        return None


def _linked_manifest(path: Path) -> Manifest | None:
    """The manifest at ``path`` when it is a regular file of more than one name that parses; else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink < 2 or st.st_size > MAX_TREE_FILE_BYTES:
            return None
        raw = f.read(MAX_TREE_FILE_BYTES + 1)
    try:
        check_values(raw, MAX_MANIFEST_VALUES)
        return Manifest.from_json(raw.decode("utf-8"), source=str(path))
    except (TreeError, ValueError):
        return None
