"""The manifest of the tree a run regenerates (`load_previous`), read too when its file has more than one name, and
the configuration file it records, which a run from another configuration naming the same servers keeps
(`keep_recorded_config`)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from tool_tree.regenerate import recorded_config
from tool_tree.tree import MANIFEST_FILE, MAX_MANIFEST_VALUES, MAX_TREE_FILE_BYTES, Manifest, TreeError, check_values

if TYPE_CHECKING:
    from generator.layout import Plan


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


def keep_recorded_config(out: Path, plan: Plan, previous: Manifest | None) -> None:
    """Have ``plan`` keep the configuration file ``previous`` records when it differs from it in nothing else and
    that file is still there: another configuration naming the same servers (``serve --config serve.yaml`` over a
    tree generated from ``tooltree.yaml``) gives the same tree, and the command naming the recorded file regenerates
    it. Before, the run rewrote the manifest and the search index for the path alone, and ``tooltree serve``'s refresh
    told its sessions the tree was regenerated, though no tool changed (``--check`` called it up to date)."""
    manifest = plan.manifest
    if previous is None or not previous.config or manifest.config == previous.config:
        return
    if not manifest.same_tree(previous):
        return
    recorded = recorded_config(out, previous)
    if recorded is None or not os.path.isfile(recorded):  # moved or gone: the file in use is recorded instead
        return
    manifest.config = previous.config
    plan.files[MANIFEST_FILE] = manifest.to_json().encode("utf-8")
